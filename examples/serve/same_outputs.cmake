# A change that must not change what is generated: runs kvc_serve twice with the same arguments
# (CMD), once with FLAG BASE appended and once with FLAG VALUE, and passes only when both exit 0,
# both report the same output digest (a hash of every sample's generated tokens) and the second
# run's output matches REGEX (the change really did something).
#   cmake -DCMD="prog|arg1|arg2" -DSPECULATE=K -DREGEX="..." -P same_outputs.cmake
#       --speculate 0 against --speculate K (speculative decoding)
#   cmake -DCMD="prog|arg1|arg2" -DFLAG=--tp -DBASE=1 -DVALUE=2 -DREGEX="..." -P same_outputs.cmake
#       --tp 1 against --tp 2 (tensor-parallel ranks)
#   cmake -DCMD="prog|args" -DCMD2="prog|other args" -DREGEX="..." -P same_outputs.cmake
#       two command lines (one hybrid pool against two pools)
# A run that exits 77 (--backend cuda without a usable GPU) ends the script without failing after
# printing its SKIPPED line: give the test SKIP_REGULAR_EXPRESSION "kvc_serve: SKIPPED" so that it is
# reported skipped, never passed.
string(REPLACE "|" ";" argv "${CMD}")
if(DEFINED SPECULATE)
  set(FLAG --speculate)
  set(BASE 0)
  set(VALUE ${SPECULATE})
endif()
set(digests "")
if(DEFINED CMD2)
  # Two command lines, CMD ("command 1") then CMD2 ("command 2").
  set(FLAG command)
  string(REPLACE "|" ";" argv2 "${CMD2}")
  set(BASE 1)
  set(VALUE 2)
endif()
foreach(k ${BASE} ${VALUE})
  if(DEFINED CMD2)
    if(k STREQUAL "1")
      execute_process(COMMAND ${argv} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
    else()
      execute_process(COMMAND ${argv2} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
    endif()
  else()
    execute_process(COMMAND ${argv} ${FLAG} ${k} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  endif()
  message("--- ${FLAG} ${k}:\n${out}${err}")
  if(rc STREQUAL "77")
    return()
  endif()
  if(NOT rc STREQUAL "0")
    message(FATAL_ERROR "${FLAG} ${k}: expected exit status 0, got '${rc}'")
  endif()
  if(NOT out MATCHES "outputs +digest ([0-9a-f]+)")
    message(FATAL_ERROR "${FLAG} ${k}: no output digest in the report")
  endif()
  list(APPEND digests ${CMAKE_MATCH_1})
endforeach()
if(NOT out MATCHES "${REGEX}")
  message(FATAL_ERROR "${FLAG} ${VALUE}: output does not match: ${REGEX}")
endif()
list(GET digests 0 base)
list(GET digests 1 changed)
if(NOT base STREQUAL changed)
  message(FATAL_ERROR "generated tokens differ: digest ${base} with ${FLAG} ${BASE}, ${changed} with ${FLAG} ${VALUE}")
endif()
message("same generated tokens with ${FLAG} ${BASE} and ${FLAG} ${VALUE} (digest ${base})")
