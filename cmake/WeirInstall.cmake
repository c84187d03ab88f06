# Installs the libraries and exports weirTargets (base, runtime, operators, collections) +
# weirConfig.cmake for find_package(weir CONFIG). async, persist and protocol install export sets
# of their own.
include(CMakePackageConfigHelpers)

install(EXPORT weirTargets
  NAMESPACE weir::
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/weir)

# The optional parts that are built, each with an export set of its own (see weirConfig.cmake.in).
set(WEIR_INSTALLED_PARTS async)
if(WEIR_BUILD_TOOLS)
  list(APPEND WEIR_INSTALLED_PARTS persist protocol)
endif()
list(JOIN WEIR_INSTALLED_PARTS " " WEIR_INSTALLED_PARTS)

configure_package_config_file(
  ${CMAKE_CURRENT_SOURCE_DIR}/cmake/weirConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/weirConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/weir)
write_basic_package_version_file(
  ${CMAKE_CURRENT_BINARY_DIR}/weirConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES
  ${CMAKE_CURRENT_BINARY_DIR}/weirConfig.cmake
  ${CMAKE_CURRENT_BINARY_DIR}/weirConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/weir)
