# Parsers of input gyre does not control (docs/reliability.md, "Fuzzing").
# Every build links each target with replay_main.cc and replays its checked-in
# corpus (ctest fuzz_replay_<name>, label fuzz); with GYRE_FUZZ=ON (clang,
# tools/fuzz.sh) each is also a libFuzzer binary, <name>_fuzz.
set(GYRE_FUZZ_DIR ${CMAKE_CURRENT_LIST_DIR})

# gyre_fuzz_target(<name> <libraries>...): tests/fuzz/<name>_fuzz.cc.
function(gyre_fuzz_target name)
  add_executable(${name}_fuzz_replay ${GYRE_FUZZ_DIR}/${name}_fuzz.cc ${GYRE_FUZZ_DIR}/replay_main.cc)
  target_link_libraries(${name}_fuzz_replay PRIVATE ${ARGN} gyre_flags)
  target_include_directories(${name}_fuzz_replay PRIVATE ${PROJECT_SOURCE_DIR})  # tests/fuzz/loopback.h
  add_test(NAME fuzz_replay_${name} COMMAND ${name}_fuzz_replay ${GYRE_FUZZ_DIR}/corpus/${name})
  set_tests_properties(fuzz_replay_${name} PROPERTIES LABELS fuzz TIMEOUT 60)
  if(GYRE_FUZZ)
    add_executable(${name}_fuzz ${GYRE_FUZZ_DIR}/${name}_fuzz.cc)
    target_link_libraries(${name}_fuzz PRIVATE ${ARGN} gyre_flags)
    target_include_directories(${name}_fuzz PRIVATE ${PROJECT_SOURCE_DIR})
    target_link_options(${name}_fuzz PRIVATE -fsanitize=fuzzer)
  endif()
endfunction()

gyre_fuzz_target(unique_id gyre_internal_core)
gyre_fuzz_target(rendezvous gyre_internal_core)
gyre_fuzz_target(conn_hello gyre_internal_core)
gyre_fuzz_target(topology gyre_internal_core)
gyre_fuzz_target(tuner_model gyre_internal_core)
gyre_fuzz_target(algo gyre_internal_core)
gyre_fuzz_target(settings gyre_internal_core)
# What each transport reads from a peer, through its own checks (the verbs
# ones are plain headers: this target builds without rdma-core too).
gyre_fuzz_target(tcp_part_header gyre_internal_transport)
gyre_fuzz_target(shm_headers gyre_internal_transport)
gyre_fuzz_target(verbs_wire gyre_internal_transport)
gyre_fuzz_target(net_message gyre_internal_transport)
if(TARGET gyre_harness)
  gyre_fuzz_target(checkpoint_index gyre_harness)
endif()
