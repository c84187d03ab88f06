# weir_warnings: the warning flags every weir target builds with.
add_library(weir_warnings INTERFACE)
add_library(weir::warnings ALIAS weir_warnings)
target_compile_options(weir_warnings INTERFACE
  $<BUILD_INTERFACE:-Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor>
  $<BUILD_INTERFACE:$<$<BOOL:${WEIR_WERROR}>:-Werror>>)
# clang checks the lock annotations (ABSL_GUARDED_BY, ABSL_EXCLUSIVE_LOCKS_REQUIRED on weir::Mutex,
# see weir/mutex.h); the tsan preset builds with clang and -Werror, so CI enforces them.
if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  target_compile_options(weir_warnings INTERFACE $<BUILD_INTERFACE:-Wthread-safety>)
endif()
install(TARGETS weir_warnings EXPORT weirTargets)

# WEIR_SANITIZER=address|thread: set by the asan and tsan presets.
set(WEIR_SANITIZER "" CACHE STRING "Sanitizer to build with: address (with undefined) or thread")
if(WEIR_SANITIZER STREQUAL "address")
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all)
  add_link_options(-fsanitize=address,undefined)
elseif(WEIR_SANITIZER STREQUAL "thread")
  add_compile_options(-fsanitize=thread -fno-omit-frame-pointer)
  add_link_options(-fsanitize=thread)
elseif(NOT WEIR_SANITIZER STREQUAL "")
  message(FATAL_ERROR "WEIR_SANITIZER must be empty, 'address' or 'thread', not '${WEIR_SANITIZER}'")
endif()
set_target_properties(weir_warnings PROPERTIES EXPORT_NAME warnings)
