# tools/compare.py, the side-by-side comparison with Open MPI and Gloo, in a
# tiny quick mode, so that the tool, the peer drivers it launches and the
# plot it draws through gyre-bench cannot rot unnoticed: 2 ranks over TCP
# (where every peer runs: Open MPI, Gloo's three AllReduce algorithms and
# Gloo's AllToAll), AllReduce and AllToAll, 8 B .. 4 KiB, one launch each.
# It checks the shape of the output only (a row per collective and size, the
# ratio columns, the SVG), never a speed. Only where the peer drivers were
# built (bench/compare builds them when Open MPI and Gloo are found).
#
# This file is both included by tests/CMakeLists.txt (defining the test) and
# run by ctest as a script (cmake -P), which runs the tool and checks it.

include(${CMAKE_CURRENT_LIST_DIR}/tool_test.cmake)

if(CMAKE_SCRIPT_MODE_FILE)
  file(REMOVE_RECURSE "${OUT}")
  file(MAKE_DIRECTORY "${OUT}")
  set(cmd "${PYTHON}" "${TOOL}" --no-build --no-install
      --peer-dir "${PEER_DIR}" --gyrerun "${GYRERUN}" --gyre-bench "${GYRE_BENCH}"
      --gyre-allreduce-perf "${GYRE_ALLREDUCE_PERF}"
      --scenario tcp-2 --collectives allreduce,alltoall --repeats 1 --min 8 --max 4K
      --iters-scale 0.05 --memcpy-size 1M --timeout 60
      --markdown "${OUT}/compare.md" --json "${OUT}/compare.json" --plot "${OUT}/compare.svg")
  gyre_run_tool(tools/compare.py out ${cmd})

  # One table: its header has the per-peer and best-peer ratio columns.
  string(REGEX MATCH "busbw \\(GB/s\\) and ratios\n([^\n]*)\n" _ "${out}")
  set(header "${CMAKE_MATCH_1}")
  foreach(col collective size gyre gloo-ring gyre/gloo-ring gloo-hd gloo-best gyre/gloo-best ompi-tcp
              gyre/ompi-tcp gyre/best-peer gyre/memcpy)
    if(NOT " ${header} " MATCHES " ${col} ")
      message(FATAL_ERROR "the table's header lacks column '${col}': '${header}'")
    endif()
  endforeach()
  # A row per collective and size (the sweep is factor 4 from 8 B), each with
  # a gyre/best-peer ratio naming the peer.
  foreach(coll allreduce alltoall)
    foreach(size "8 B" "32 B" "128 B" "512 B" "2 KiB")
      if(NOT out MATCHES "\n *${coll} +${size} +([^\n]*)")
        message(FATAL_ERROR "no table row for ${coll} ${size}")
      endif()
      set(row "${CMAKE_MATCH_1}")
      if(NOT row MATCHES "[0-9]+\\.[0-9][0-9]x \\((gloo-[a-z0-9]+|ompi-tcp)\\)")
        message(FATAL_ERROR "row ${coll} ${size} has no gyre/best-peer ratio: '${row}'")
      endif()
    endforeach()
  endforeach()
  if(out MATCHES "\n *(allreduce|alltoall) +(8 KiB|4 KiB|16 B)")
    message(FATAL_ERROR "a row outside the asked sizes: '${CMAKE_MATCH_0}'")
  endif()

  # The plot: one SVG with every series, gyre's and each peer's.
  if(NOT EXISTS "${OUT}/compare.svg")
    message(FATAL_ERROR "no plot written at ${OUT}/compare.svg")
  endif()
  file(READ "${OUT}/compare.svg" svg)
  foreach(series "tcp-2 allreduce gyre" "tcp-2 allreduce gloo-ring" "tcp-2 allreduce gloo-chunk"
                 "tcp-2 allreduce gloo-hd" "tcp-2 allreduce ompi-tcp" "tcp-2 alltoall gyre"
                 "tcp-2 alltoall gloo-a2a" "tcp-2 alltoall ompi-tcp")
    if(NOT svg MATCHES ">${series}<")
      message(FATAL_ERROR "the plot has no series '${series}'")
    endif()
  endforeach()
  if(NOT svg MATCHES "<polyline")
    message(FATAL_ERROR "the plot has no lines")
  endif()
  # The markdown states the machine, the versions and the command.
  file(READ "${OUT}/compare.md" md)
  foreach(key "| CPU |" "| memory |" "| kernel |" "| Open MPI |" "| Gloo |" "| gyre |" "| command |")
    string(FIND "${md}" "${key}" at)
    if(at EQUAL -1)
      message(FATAL_ERROR "the markdown report lacks '${key}'")
    endif()
  endforeach()
  return()
endif()

if(TARGET gloo-allreduce-perf AND TARGET mpi-allreduce-perf AND TARGET mpi-collective-perf AND
   TARGET gyre-bench AND TARGET gyre-allreduce-perf AND TARGET gyrerun)
  gyre_find_tool_python()
  if(GYRE_TOOL_PYTHON)
    add_test(NAME compare_quick
             COMMAND ${CMAKE_COMMAND}
                     -DPYTHON=${GYRE_TOOL_PYTHON}
                     -DTOOL=${PROJECT_SOURCE_DIR}/tools/compare.py
                     -DPEER_DIR=$<TARGET_FILE_DIR:gloo-allreduce-perf>
                     -DGYRERUN=$<TARGET_FILE:gyrerun>
                     -DGYRE_BENCH=$<TARGET_FILE:gyre-bench>
                     -DGYRE_ALLREDUCE_PERF=$<TARGET_FILE:gyre-allreduce-perf>
                     -DOUT=${CMAKE_CURRENT_BINARY_DIR}/compare_quick
                     -P ${CMAKE_CURRENT_LIST_FILE})
    # The tool bounds each launch (--timeout 60) and the script the whole run
    # (240 s); this is the outer bound.
    set_tests_properties(compare_quick PROPERTIES TIMEOUT 300)
  endif()
endif()
