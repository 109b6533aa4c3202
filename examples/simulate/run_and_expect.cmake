# Runs a program and checks both its exit status and its output, which ctest's
# PASS_REGULAR_EXPRESSION alone cannot do (it ignores the exit status).
#   cmake -DCMD="prog|arg1|arg2" -DEXPECT_RC=0|nonzero -DREGEX="..." -P run_and_expect.cmake
string(REPLACE "|" ";" argv "${CMD}")
execute_process(COMMAND ${argv} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
set(all "${out}${err}")
message("${all}")
if(EXPECT_RC STREQUAL "nonzero")
  if(rc EQUAL 0)
    message(FATAL_ERROR "expected a non-zero exit status, got 0")
  endif()
elseif(NOT rc STREQUAL EXPECT_RC)
  message(FATAL_ERROR "expected exit status ${EXPECT_RC}, got '${rc}'")
endif()
if(DEFINED REGEX AND NOT all MATCHES "${REGEX}")
  message(FATAL_ERROR "output does not match: ${REGEX}")
endif()
