# gyre-bench from the outside (bench_cli_test): flags, the table against
# golden copies, result files, plots, -T and the exactness check, each run a
# real process group under a deadline inside the test; the TIMEOUT here is
# the outer bound. Only where the benchmarks are built (GYRE_BUILD_BENCH).
if(TARGET gyre-bench)
  add_executable(bench_cli_test bench_cli_test.cc)
  target_link_libraries(bench_cli_test PRIVATE gyre_bench_core gyre_test_support GTest::gtest_main gyre_flags)
  target_compile_definitions(bench_cli_test PRIVATE
    GYRE_BENCH_PATH="$<TARGET_FILE:gyre-bench>"
    BENCH_GOLDEN_DIR="${CMAKE_CURRENT_SOURCE_DIR}")
  add_dependencies(bench_cli_test gyre-bench)
  gtest_discover_tests(bench_cli_test TEST_PREFIX "bench_cli." DISCOVERY_TIMEOUT 60 PROPERTIES TIMEOUT 180)
endif()

# gyre-algo-sweep (the tuner against every fixed algorithm, interleaved).
if(TARGET gyre-algo-sweep)
  add_executable(algo_sweep_test algo_sweep_test.cc)
  target_link_libraries(algo_sweep_test PRIVATE gyre_test_support GTest::gtest_main gyre_flags)
  target_compile_definitions(algo_sweep_test PRIVATE GYRE_ALGO_SWEEP_PATH="$<TARGET_FILE:gyre-algo-sweep>"
                                                     GYRE_TUNER_SWEEPS="${PROJECT_SOURCE_DIR}/docs/tuner-sweeps")
  add_dependencies(algo_sweep_test gyre-algo-sweep)
  gtest_discover_tests(algo_sweep_test TEST_PREFIX "bench_cli." DISCOVERY_TIMEOUT 60 PROPERTIES TIMEOUT 300)
endif()

# gyre-ulysses-ab at a tiny size on 2 forked ranks, so it cannot rot: the
# program checks one layer of each method exactly before timing and exits 1
# on a wrong element. Query heads that do not divide, and key/value heads
# fewer than the ranks (each rank gets a copy), over TCP and shared memory.
if(TARGET gyre-ulysses-ab)
  add_test(NAME bench_cli.ulysses_ab_smoke_tcp
           COMMAND gyre-ulysses-ab --ranks 2 --transport tcp --seq 64,256 --heads 6 --kv-heads 2
                   --head-dim 16 --dtype bf16 --rounds 2 --alltoall 1)
  add_test(NAME bench_cli.ulysses_ab_smoke_shm
           COMMAND gyre-ulysses-ab --ranks 2 --transport shm --seq 128 --heads 3 --kv-heads 1
                   --head-dim 8 --dtype fp16 --rounds 2)
  set_tests_properties(bench_cli.ulysses_ab_smoke_tcp bench_cli.ulysses_ab_smoke_shm
                       PROPERTIES TIMEOUT 60)
endif()
