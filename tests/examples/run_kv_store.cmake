# Runs python_free_examples/kv_store as its header says: a cluster started with the
# manta CLI, a first driver that writes a detached named actor, a second driver
# that reads it back; then stops the cluster (also when a step failed).
# Usage: cmake -DMANTA=<manta> -DEXAMPLE=<kv_store> -P run_kv_store.cmake
execute_process(COMMAND ${MANTA} start --head --port 0 --num-cpus 2 --object-store-memory 100000000
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "manta start failed (${rc}):\n${out}\n${err}")
endif()
string(REGEX MATCH "GCS address:[ \t]+([^ \t\r\n]+)" _ "${out}")
set(address "${CMAKE_MATCH_1}")
set(failure "")
foreach(step write read)
  execute_process(COMMAND ${EXAMPLE} --ray_address=${address} ${step}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE step_out ERROR_VARIABLE step_err TIMEOUT 120)
  message("${step_out}")
  string(APPEND all_out "${step_out}")
  if(NOT rc EQUAL 0)
    set(failure "kv_store ${step} exited with ${rc}\n${step_err}")
    break()
  endif()
endforeach()
execute_process(COMMAND ${MANTA} stop)
if(failure)
  message(FATAL_ERROR "${failure}")
endif()
set(expect "first driver: the store holds 2 keys.*counter after 1\\+2\\+3\\+4: 10.*added 5 twice: 20.*second driver read: apple=red, banana=yellow.*now holds 3 keys.*found again: no")
if(NOT all_out MATCHES "${expect}")
  message(FATAL_ERROR "kv_store: output does not match '${expect}'")
endif()
