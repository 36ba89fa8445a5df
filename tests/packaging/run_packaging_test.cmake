# cmake -P script behind the packaging_install_and_consume test (see CMakeLists.txt).
# -D inputs: BUILD_DIR (a fully built Manta tree), SOURCE_DIR (its sources),
# CONSUMER_DIR, WORK_DIR (scratch, under the build tree), TEMP_DIR (MANTA_TEMP_DIR
# for the clusters; short, see cmake/MantaTestTempDir.cmake), GENERATOR, CXX_COMPILER,
# LAUNCHER (ccache; empty or *-NOTFOUND for none).
#
# Checks that the installed package alone is enough: the consumer finds Manta with
# CMAKE_PREFIX_PATH only and is told Manta_BIN_DIR = <prefix>/bin, runs without
# LD_LIBRARY_PATH and with no build-tree folder in PATH, ray::Init() starts its
# private cluster from <prefix>/bin (the raylet that started the workers is
# <prefix>/bin/manta_raylet), and both ways of starting workers work: the driver's
# own binary, and the installed manta_worker (code_search_path).
cmake_minimum_required(VERSION 3.20)

foreach(var BUILD_DIR SOURCE_DIR CONSUMER_DIR WORK_DIR TEMP_DIR GENERATOR CXX_COMPILER)
  if(NOT DEFINED ${var} OR "${${var}}" STREQUAL "")
    message(FATAL_ERROR "run_packaging_test.cmake: -D${var}=... is required")
  endif()
endforeach()

set(prefix ${WORK_DIR}/prefix)
set(consumer_build ${WORK_DIR}/consumer-build)
file(REMOVE_RECURSE ${prefix} ${consumer_build} ${TEMP_DIR})
file(MAKE_DIRECTORY ${TEMP_DIR})

# step(<description> <execute_process arguments>...): runs it, fails with its output.
macro(step description)
  message(STATUS "packaging test: ${description}")
  execute_process(${ARGN} RESULT_VARIABLE step_rc OUTPUT_VARIABLE step_out ERROR_VARIABLE step_out)
  if(NOT step_rc STREQUAL "0")
    message(FATAL_ERROR "packaging test: ${description} failed (${step_rc}):\n${step_out}")
  endif()
endmacro()

# 1. Install. A prefix chosen only now, unlike the CMAKE_INSTALL_PREFIX compiled in.
step("cmake --install ${BUILD_DIR} --prefix ${prefix}"
  COMMAND ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})
foreach(file bin/manta bin/manta_gcs bin/manta_raylet bin/manta_worker bin/manta_dashboard bin/manta_job_supervisor
             include/ray/api.h)
  if(NOT EXISTS ${prefix}/${file})
    message(FATAL_ERROR "packaging test: the install lacks ${prefix}/${file}")
  endif()
endforeach()
file(GLOB_RECURSE config_files ${prefix}/*/MantaConfig.cmake)
file(GLOB_RECURSE libraries ${prefix}/*/libmanta.so)
if(NOT config_files OR NOT libraries)
  message(FATAL_ERROR "packaging test: the install lacks lib*/cmake/Manta/MantaConfig.cmake or libmanta.so")
endif()

# 2. Configure and build the consumer against the prefix only.
set(launcher "")
if(LAUNCHER)
  set(launcher -DCMAKE_CXX_COMPILER_LAUNCHER=${LAUNCHER})
endif()
step("configure the consumer"
  COMMAND ${CMAKE_COMMAND} -S ${CONSUMER_DIR} -B ${consumer_build} -G ${GENERATOR}
    -DCMAKE_CXX_COMPILER=${CXX_COMPILER} ${launcher} -DCMAKE_PREFIX_PATH=${prefix}
    -DCMAKE_FIND_PACKAGE_NO_PACKAGE_REGISTRY=ON)
step("build the consumer" COMMAND ${CMAKE_COMMAND} --build ${consumer_build})

# find_package(Manta) names the folder of the installed programs as Manta_BIN_DIR.
file(READ ${consumer_build}/manta_bin_dir.txt reported_bin_dir)
file(REAL_PATH "${reported_bin_dir}" reported_bin_dir)
file(REAL_PATH ${prefix}/bin expected_bin_dir)
if(NOT reported_bin_dir STREQUAL expected_bin_dir)
  message(FATAL_ERROR "packaging test: find_package(Manta) set Manta_BIN_DIR to ${reported_bin_dir}, "
                      "not ${expected_bin_dir}")
endif()

# 3. Run it: no build-tree folder in PATH, no library or binary overrides.
set(clean_path "")
string(REPLACE ":" ";" path_entries "$ENV{PATH}")
foreach(entry IN LISTS path_entries)
  string(FIND "${entry}/" "${BUILD_DIR}/" in_build)
  string(FIND "${entry}/" "${SOURCE_DIR}/" in_source)
  if(NOT entry STREQUAL "" AND NOT in_build EQUAL 0 AND NOT in_source EQUAL 0)
    list(APPEND clean_path "${entry}")
  endif()
endforeach()
string(REPLACE ";" ":" clean_path "${clean_path}")

file(REAL_PATH ${prefix}/bin real_bin)
file(REAL_PATH ${consumer_build}/consumer real_consumer)
file(GLOB tasks_library ${consumer_build}/libconsumer_tasks.so)

# run_consumer(<description> <expected worker executable> <consumer arguments>...)
function(run_consumer description expected_worker)
  step("run the consumer (${description})"
    COMMAND ${CMAKE_COMMAND} -E env --unset=LD_LIBRARY_PATH --unset=MANTA_BIN_DIR --unset=MANTA_BUILD_DIR
      --unset=RAY_ADDRESS "PATH=${clean_path}" MANTA_TEMP_DIR=${TEMP_DIR}
      ${consumer_build}/consumer ${ARGN}
    TIMEOUT 180)
  message(STATUS "packaging test: consumer output:\n${step_out}")
  foreach(expected "Square(7) = 49" "worker: ${expected_worker}\n" "raylet: ${real_bin}/manta_raylet\n"
                   "actor total: 22\n" "env var: from-env\n")
    string(FIND "${step_out}" "${expected}" found)
    if(found EQUAL -1)
      message(FATAL_ERROR "packaging test (${description}): expected \"${expected}\" in the output:\n${step_out}")
    endif()
  endforeach()
endfunction()

run_consumer("workers from the driver's binary" ${real_consumer})
run_consumer("code_search_path, workers are manta_worker" ${real_bin}/manta_worker
  --ray_code_search_path=${tasks_library})
message(STATUS "packaging test: passed")
