# Runs one example program and checks both its exit code (a crash, even after the
# right output, fails the test) and its output against EXPECT (a regex).
# Usage: cmake -DEXAMPLE=<path> -DEXPECT=<regex> [-DARGS=a|b|c] -P run_example.cmake
string(REPLACE "|" ";" ARGS "${ARGS}")
execute_process(COMMAND ${EXAMPLE} ${ARGS} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("${out}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${EXAMPLE} exited with ${rc}\n${err}")
endif()
if(NOT out MATCHES "${EXPECT}")
  message(FATAL_ERROR "${EXAMPLE}: output does not match '${EXPECT}'\n${err}")
endif()
