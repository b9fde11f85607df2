# What the tests of a tool in tools/ share (compare.cmake,
# call_instructions.cmake): each is a cmake -P script that runs the tool
# once and then checks what it wrote.

# Script mode: runs the command in ARGN (at most 240 s), shows it with its
# stdout and stderr in the test's log, fails naming `tool` unless it exits
# 0, and leaves its stdout in out_var.
function(gyre_run_tool tool out_var)
  string(JOIN " " shown ${ARGN})
  message(STATUS "running: ${shown}")
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 240)
  message(STATUS "stdout:\n${out}")
  message(STATUS "stderr:\n${err}")
  if(NOT rc STREQUAL "0")
    message(FATAL_ERROR "${tool} exited with '${rc}'")
  endif()
  set(${out_var} "${out}" PARENT_SCOPE)
endfunction()

# Configure mode: GYRE_TOOL_PYTHON, the python3 the tools run under. They
# use the standard library only; Debian's python3 is what their users run
# them with (the pyenv one first on PATH here lacks Debian's packages).
macro(gyre_find_tool_python)
  find_program(GYRE_TOOL_PYTHON NAMES python3 PATHS /usr/bin NO_DEFAULT_PATH)
  if(NOT GYRE_TOOL_PYTHON)
    find_package(Python3 COMPONENTS Interpreter QUIET)
    set(GYRE_TOOL_PYTHON ${Python3_EXECUTABLE})
  endif()
endmacro()
