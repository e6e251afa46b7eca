# Helpers that give every module the same shape: one static library per folder, warnings as
# errors for project code, and tests beside the code registered with ctest.

set(TESSERA_WARNINGS -Wall -Wextra -Werror -Wno-missing-field-initializers)

# tessera_library(NAME SRCS a.cc b.cc DEPS other_lib ...)
function(tessera_library name)
  cmake_parse_arguments(ARG "" "" "SRCS;DEPS" ${ARGN})
  add_library(${name} STATIC ${ARG_SRCS})
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR}/include)
  target_link_libraries(${name} PUBLIC ${ARG_DEPS})
  target_compile_options(${name} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:${TESSERA_WARNINGS}>)
endfunction()

# tessera_test(NAME SRCS a_test.cc DEPS lib ...): a GoogleTest binary, each test case a ctest entry.
# PROPERTIES name value ...: more ctest properties of each test case (TIMEOUT, LABELS, ...).
function(tessera_test name)
  cmake_parse_arguments(ARG "" "" "SRCS;DEPS;ENV;PROPERTIES" ${ARGN})
  add_executable(${name} ${ARG_SRCS})
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
  target_link_libraries(${name} PRIVATE ${ARG_DEPS})
  target_compile_options(${name} PRIVATE ${TESSERA_WARNINGS})
  target_link_options(${name} PRIVATE -fsanitize=fuzzer)
endfunction()
