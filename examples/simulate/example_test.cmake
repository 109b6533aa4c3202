# kvc_example_test(NAME name RC 0|nonzero REGEX regex [ABSENT file] COMMAND prog args...): a ctest
# entry passing only when the program exits with that status AND prints something matching the regex
# (and, with ABSENT, leaves no such file). See run_and_expect.cmake. Shared by examples/serve and
# examples/simulate.
include_guard(GLOBAL)
function(kvc_example_test)
  cmake_parse_arguments(T "" "NAME;RC;REGEX;ABSENT" "COMMAND" ${ARGN})
  string(REPLACE ";" "|" cmd "${T_COMMAND}")
  add_test(NAME ${T_NAME} COMMAND ${CMAKE_COMMAND} "-DCMD=${cmd}" "-DEXPECT_RC=${T_RC}" "-DREGEX=${T_REGEX}" "-DABSENT=${T_ABSENT}"
    -P ${PROJECT_SOURCE_DIR}/examples/simulate/run_and_expect.cmake)
endfunction()
