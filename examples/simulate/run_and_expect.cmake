# Runs a program and checks both its exit status and its output, which ctest's
# PASS_REGULAR_EXPRESSION alone cannot do (it ignores the exit status).
#   cmake -DCMD="prog|arg1|arg2" -DEXPECT_RC=0|nonzero -DREGEX="..." [-DABSENT=file] -P run_and_expect.cmake
# ABSENT: a file the program must not leave behind (deleted first), e.g. a plot after a failed run.
# SKIP_REGEX: output meaning "cannot run here" (no GPU); the caller also sets it as the test's
# SKIP_REGULAR_EXPRESSION so ctest reports the entry as skipped.
string(REPLACE "|" ";" argv "${CMD}")
if(ABSENT)
  file(REMOVE "${ABSENT}" "${ABSENT}.tmp")
endif()
execute_process(COMMAND ${argv} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
set(all "${out}${err}")
message("${all}")
if(SKIP_REGEX AND all MATCHES "${SKIP_REGEX}")
  return()  # ctest's SKIP_REGULAR_EXPRESSION (same regex) reports the entry as skipped
endif()
if(EXPECT_RC STREQUAL "nonzero")
  # A clean refusal: an exit status 1..255, not 0 and not a crash (rc is then a signal description).
  if(NOT rc MATCHES "^[0-9]+$" OR rc EQUAL 0)
    message(FATAL_ERROR "expected a non-zero exit status, got '${rc}'")
  endif()
elseif(NOT rc STREQUAL EXPECT_RC)
  message(FATAL_ERROR "expected exit status ${EXPECT_RC}, got '${rc}'")
endif()
if(DEFINED REGEX AND NOT all MATCHES "${REGEX}")
  message(FATAL_ERROR "output does not match: ${REGEX}")
endif()
foreach(f "${ABSENT}" "${ABSENT}.tmp")
  if(ABSENT AND EXISTS "${f}")
    message(FATAL_ERROR "${f} exists but the run must not write it")
  endif()
endforeach()
