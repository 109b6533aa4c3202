# kvc_example_test(NAME name RC 0|nonzero REGEX regex [ABSENT file] [SKIP_REGEX regex] COMMAND prog args...):
# a ctest entry passing only when the program exits with that status AND prints something matching the
# regex (and, with ABSENT, leaves no such file). Output matching SKIP_REGEX (e.g. "no GPU here") makes
# the entry *skipped*, never passed. See run_and_expect.cmake. Shared by examples/serve and
# examples/simulate.
include_guard(GLOBAL)
function(kvc_example_test)
  cmake_parse_arguments(T "" "NAME;RC;REGEX;ABSENT;SKIP_REGEX" "COMMAND" ${ARGN})
  string(REPLACE ";" "|" cmd "${T_COMMAND}")
  add_test(NAME ${T_NAME} COMMAND ${CMAKE_COMMAND} "-DCMD=${cmd}" "-DEXPECT_RC=${T_RC}" "-DREGEX=${T_REGEX}" "-DABSENT=${T_ABSENT}" "-DSKIP_REGEX=${T_SKIP_REGEX}"
    -P ${PROJECT_SOURCE_DIR}/examples/simulate/run_and_expect.cmake)
  if(T_SKIP_REGEX)
    set_tests_properties(${T_NAME} PROPERTIES SKIP_REGULAR_EXPRESSION "${T_SKIP_REGEX}")
  endif()
endfunction()
