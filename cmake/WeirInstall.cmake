# Installs the libraries and exports weirTargets + weirConfig.cmake for find_package(weir CONFIG).
include(CMakePackageConfigHelpers)

install(EXPORT weirTargets
  NAMESPACE weir::
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/weir)

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
