# gyrerun's tests: launcher_test starts gyrerun (and, for the torchrun, Open
# MPI and mpirun cases, the ranks directly) on the small programs below, which
# it finds through the compile definitions.
add_executable(launcher_probe programs/launcher_probe.c)
target_link_libraries(launcher_probe PRIVATE gyre_flags)

# Linked against the shared library, as a user's program would be.
add_executable(env_allreduce programs/env_allreduce.c)
target_link_libraries(env_allreduce PRIVATE gyre gyre_flags)

gyre_test(launcher_test launcher_test.cc)
target_compile_definitions(launcher_test PRIVATE
  GYRERUN_PATH="$<TARGET_FILE:gyrerun>"
  LAUNCHER_PROBE_PATH="$<TARGET_FILE:launcher_probe>"
  ENV_ALLREDUCE_PATH="$<TARGET_FILE:env_allreduce>")
add_dependencies(launcher_test gyrerun launcher_probe env_allreduce)
