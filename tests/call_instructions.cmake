# tools/call_instructions.py, the instruction count of a call by layer
# (rank 0 under callgrind, its peers native), in a tiny run so that the
# tool, its parsing of callgrind_annotate and the Open MPI launch cannot rot
# unnoticed: 2 ranks over shm, AllToAll of 64 B, 100 calls (gyre-bench makes
# them out of place and in place), Open MPI beside it where its driver was
# built. It checks the shape of the counts only: the calls counted, the
# layers adding up to the whole; never a number of instructions (what rank 0
# waits depends on timing). Only where valgrind is, and not in a sanitizer
# build.
#
# This file is both included by tests/CMakeLists.txt (defining the test) and
# run by ctest as a script (cmake -P), which runs the tool and checks it.

include(${CMAKE_CURRENT_LIST_DIR}/tool_test.cmake)

if(CMAKE_SCRIPT_MODE_FILE)
  set(json "${OUT}/counts.json")
  file(REMOVE "${json}")
  set(cmd "${PYTHON}" "${TOOL}" --build "${BUILD}" --transport shm --collective alltoall --bytes 64
      --iters 100 --warmup 10 --timeout 120 --json "${json}")
  if(MPI)
    list(APPEND cmd --mpi)
  endif()
  gyre_run_tool(tools/call_instructions.py out ${cmd})
  file(READ "${json}" counts)
  string(JSON calls GET "${counts}" gyre calls)
  if(NOT calls EQUAL 220)
    message(FATAL_ERROR "counted ${calls} calls of gyreAllToAll, not 220 (2 x (100 + 10))")
  endif()
  string(JSON whole GET "${counts}" gyre "whole call")
  set(sum 0)
  foreach(layer "API and communicator" "plan bookkeeping (runCall or repeat, outside the executor)"
                "executor, the transport's calls left out" "transport: send and receive")
    string(JSON n GET "${counts}" gyre "${layer}")
    if(n LESS_EQUAL 0)
      message(FATAL_ERROR "layer '${layer}': ${n} instructions a call")
    endif()
    math(EXPR sum "${sum} + ${n}")
  endforeach()
  math(EXPR diff "${whole} - ${sum}")
  if(diff GREATER 4 OR diff LESS -4)
    message(FATAL_ERROR "the layers add up to ${sum}, the whole call is ${whole}")
  endif()
  if(MPI)
    string(JSON mcalls GET "${counts}" "Open MPI" calls)
    string(JSON mwhole GET "${counts}" "Open MPI" "whole call")
    if(NOT mcalls EQUAL 220 OR mwhole LESS_EQUAL 0)
      message(FATAL_ERROR "Open MPI: ${mcalls} calls, ${mwhole} instructions a call")
    endif()
  endif()
  # Bad input: a clear refusal, before anything is launched.
  execute_process(COMMAND "${PYTHON}" "${TOOL}" --build "${BUILD}" --ranks 1
                  RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_QUIET TIMEOUT 30)
  if(NOT rc EQUAL 2 OR NOT err MATCHES "--ranks: at least 2")
    message(FATAL_ERROR "--ranks 1: exit '${rc}', '${err}'")
  endif()
  return()
endif()

find_program(GYRE_VALGRIND valgrind)
find_program(GYRE_CALLGRIND_ANNOTATE callgrind_annotate)
# (Not in a sanitizer build: valgrind cannot run a sanitized binary.)
if(GYRE_VALGRIND AND GYRE_CALLGRIND_ANNOTATE AND TARGET gyre-bench AND NOT GYRE_SANITIZE)
  gyre_find_tool_python()
  set(with_mpi OFF)
  if(TARGET mpi-collective-perf)
    set(with_mpi ON)
  endif()
  if(GYRE_TOOL_PYTHON)
    add_test(NAME call_instructions_quick
             COMMAND ${CMAKE_COMMAND}
                     -DPYTHON=${GYRE_TOOL_PYTHON}
                     -DTOOL=${PROJECT_SOURCE_DIR}/tools/call_instructions.py
                     -DBUILD=${PROJECT_BINARY_DIR}
                     -DMPI=${with_mpi}
                     -DOUT=${CMAKE_CURRENT_BINARY_DIR}
                     -P ${CMAKE_CURRENT_LIST_FILE})
    # Each launch is bounded by the tool (--timeout 120), the run by the
    # script (240 s); this is the outer bound.
    set_tests_properties(call_instructions_quick PROPERTIES TIMEOUT 300)
  endif()
endif()
