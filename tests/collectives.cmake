# Every collective x algorithm x transport x rank count, the tuner, and the semantics
# of groups, requests, split and PreMulSum.
gyre_test(collectives_test collectives_test.cc)
gyre_test(api_semantics_test api_semantics_test.cc)
gyre_test(tuner_test tuner_test.cc)
gyre_test(estimate_test estimate_test.cc)
# gyreMemAlloc's shared allocations and peers' mappings of them.
gyre_test(shared_memory_test shared_memory_test.cc)
# AllToAllv with rank-dependent totals, the blockwise algorithm, mismatched counts.
gyre_test(alltoallv_blockwise_test alltoallv_blockwise_test.cc)
# The executor's lanes: the order messages move in (stand-in connections).
gyre_test(executor_test executor_test.cc)
# DeepSpeed-Ulysses' exchanges: every shape and type both ways against a
# one-rank reference, attention with sequence parallelism bit for bit, and
# their errors (bad arguments, ranks that disagree on the layout).
gyre_test(seq_exchange_test seq_exchange_test.cc)
gyre_test(seq_attention_test seq_attention_test.cc)
gyre_test(seq_exchange_errors_test seq_exchange_errors_test.cc)
# Mixture-of-experts dispatch and combine: every case and type against a
# one-rank reference, and their errors (bad arguments, ranks that disagree).
gyre_test(moe_exchange_test moe_exchange_test.cc)
gyre_test(moe_exchange_errors_test moe_exchange_errors_test.cc)
