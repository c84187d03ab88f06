# Checks the COMPONENTS handling of the generated weirConfig.cmake (cmake -P this file).
#
#   -DCONFIG=<build>/weirConfig.cmake  -DWORK=<scratch folder>
#
# The config is copied into a scratch prefix whose weir*Targets.cmake are empty: what is checked
# is which components find_package accepts and what it says about the others, not the targets.

file(REMOVE_RECURSE "${WORK}")
set(package_dir "${WORK}/prefix/lib/cmake/weir")
file(COPY "${CONFIG}" DESTINATION "${package_dir}")
foreach(targets IN ITEMS weirTargets weirAsyncTargets weirPersistTargets weirProtocolTargets)
  file(WRITE "${package_dir}/${targets}.cmake" "")
endforeach()
file(WRITE "${WORK}/app/CMakeLists.txt" [[
cmake_minimum_required(VERSION 3.25)
project(app LANGUAGES CXX)
find_package(weir CONFIG REQUIRED COMPONENTS ${COMPONENTS})
]])

set(case 0)
# Configures the app asking for `components`; `expect_ok`: whether that must succeed; `expect`:
# text the output must contain.
function(check components expect_ok expect)
  math(EXPR case "${case} + 1")
  set(case ${case} PARENT_SCOPE)
  execute_process(
    COMMAND "${CMAKE_COMMAND}" -S "${WORK}/app" -B "${WORK}/build${case}"
            "-DCMAKE_PREFIX_PATH=${WORK}/prefix" "-DCOMPONENTS=${components}"
    RESULT_VARIABLE result OUTPUT_VARIABLE out ERROR_VARIABLE out)
  string(REGEX REPLACE "[ \n]+" " " flat "${out}")
  if(expect_ok AND NOT result EQUAL 0)
    message(SEND_ERROR "COMPONENTS ${components}: failed, expected to succeed:\n${out}")
  elseif(NOT expect_ok AND result EQUAL 0)
    message(SEND_ERROR "COMPONENTS ${components}: succeeded, expected to fail:\n${out}")
  elseif(NOT flat MATCHES "${expect}")
    message(SEND_ERROR "COMPONENTS ${components}: the output lacks '${expect}':\n${out}")
  endif()
endfunction()

check("runtime;operators" TRUE "")
check("base;runtime;async" TRUE "")
check("bogus" FALSE "weir has no component 'bogus' \\(its components are async, persist and")
check("async;frobnicate" FALSE "no component 'frobnicate'")

# An installation built without WEIR_BUILD_TOOLS has async only.
file(READ "${package_dir}/weirConfig.cmake" config)
string(REGEX REPLACE "set\\(_weir_installed_parts [^)]*\\)" "set(_weir_installed_parts async)"
       config "${config}")
file(WRITE "${package_dir}/weirConfig.cmake" "${config}")
check("protocol" FALSE "weir's component 'protocol' is not in this installation \\(it has async")
check("runtime;async" TRUE "")
