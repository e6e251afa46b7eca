# Helpers that give every module the same shape: one static library per folder, warnings as
# errors for project code, and tests beside the code registered with ctest.

set(TESSERA_WARNINGS -Wall -Wextra -Werror -Wno-missing-field-initializers)
# clang checks the locking annotations (ABSL_GUARDED_BY, ABSL_EXCLUSIVE_LOCKS_REQUIRED, ...) and
# fails the build on a violation; the fuzz build (scripts/fuzz, run by CI) is clang's, and builds
# every library with annotations.
if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  list(APPEND TESSERA_WARNINGS -Wthread-safety)
endif()

# Each library sees the headers of its own folder and of the libraries it links, nothing more
# (docs/architecture.md's order, checked by the compiler): a folder's include root, in the build
# tree, holds one link <folder> -> src/<folder>, so "scheduling/x.h" resolves only in targets
# that link a library of src/scheduling. tessera_include_root(VAR) sets VAR to the root of the
# folder of src/ being configured ("" outside src/).
function(tessera_include_root out_var)
  file(RELATIVE_PATH relative ${PROJECT_SOURCE_DIR}/src ${CMAKE_CURRENT_SOURCE_DIR})
  if(relative MATCHES "^[.][.]")
    set(${out_var} "" PARENT_SCOPE)
    return()
  endif()
  string(REGEX REPLACE "/.*" "" folder "${relative}")
  set(root ${PROJECT_BINARY_DIR}/include_roots/${folder})
  if(NOT EXISTS ${root}/${folder})
    file(MAKE_DIRECTORY ${root})
    file(CREATE_LINK ${PROJECT_SOURCE_DIR}/src/${folder} ${root}/${folder} SYMBOLIC)
  endif()
  set(${out_var} ${root} PARENT_SCOPE)
endfunction()

# tessera_library(NAME SRCS a.cc b.cc DEPS other_lib ...): its folder's headers to itself and to
# whatever links it; DEPS are linked PUBLIC (their headers are part of its interface).
function(tessera_library name)
  cmake_parse_arguments(ARG "" "" "SRCS;DEPS" ${ARGN})
  add_library(${name} STATIC ${ARG_SRCS})
  tessera_include_root(root)
  if(root)
    target_include_directories(${name} PUBLIC ${root})
  endif()
  target_link_libraries(${name} PUBLIC ${ARG_DEPS})
  target_compile_options(${name} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:${TESSERA_WARNINGS}>)
endfunction()

# tessera_test(NAME SRCS a_test.cc DEPS lib ...): a GoogleTest binary, each test case a ctest entry.
# PROPERTIES name value ...: more ctest properties of each test case (TIMEOUT, LABELS, ...).
function(tessera_test name)
  cmake_parse_arguments(ARG "" "" "SRCS;DEPS;ENV;PROPERTIES" ${ARGN})
  add_executable(${name} ${ARG_SRCS})
  tessera_include_root(root)
  if(root)
    target_include_directories(${name} PRIVATE ${root})
  endif()
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} GTest::gmock GTest::gtest_main)
  target_compile_options(${name} PRIVATE ${TESSERA_WARNINGS})
  target_compile_definitions(${name} PRIVATE
    TESSERA_SOURCE_DIR="${PROJECT_SOURCE_DIR}" TESSERA_BINARY_DIR="${PROJECT_BINARY_DIR}")
  # ENVIRONMENT only when given: an empty value would pair every later property name with the
  # wrong value.
  set(properties ${ARG_PROPERTIES})
  if(ARG_ENV)
    list(PREPEND properties ENVIRONMENT "${ARG_ENV}")
  endif()
  gtest_discover_tests(${name} DISCOVERY_MODE PRE_TEST PROPERTIES ${properties})
endfunction()

# tessera_fuzzer(NAME SRCS f.cc DEPS lib ...): a libFuzzer target, built only with TESSERA_FUZZERS.
function(tessera_fuzzer name)
  cmake_parse_arguments(ARG "" "" "SRCS;DEPS" ${ARGN})
  if(NOT TESSERA_FUZZERS)
    return()
  endif()
  add_executable(${name} ${ARG_SRCS})
  tessera_include_root(root)
  if(root)
    target_include_directories(${name} PRIVATE ${root})
  endif()
  target_link_libraries(${name} PRIVATE ${ARG_DEPS})
  target_compile_options(${name} PRIVATE ${TESSERA_WARNINGS})
  target_link_options(${name} PRIVATE -fsanitize=fuzzer)
endfunction()
