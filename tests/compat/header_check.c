/* gyre's nccl.h compiled as C, alone (strict C99) or after the CUDA
 * toolkit's cuda_runtime.h (GYRE_WITH_CUDA): cudaStream_t must then be
 * CUDA's own, and the header the one from gyre. */
#ifdef GYRE_WITH_CUDA
#include <cuda_runtime.h>
#endif
#include <nccl.h>

typedef char unique_id_is_128_bytes[sizeof(ncclUniqueId) == 128 ? 1 : -1];
typedef char is_gyres_header[NCCL_VERSION_CODE == 22800 ? 1 : -1];
typedef char results_match[ncclInProgress == 7 && ncclNumResults == 8 ? 1 : -1];
typedef char types_match[ncclBfloat16 == 9 && ncclFloat8e5m2 == 11 && ncclNumTypes == 12 ? 1 : -1];
typedef char ops_match[ncclAvg == 4 && ncclNumOps == 5 && ncclMaxRedOp == 0x7fffffff ? 1 : -1];

int gyre_nccl_header_check_c(void);
int gyre_nccl_header_check_c(void) {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  cudaStream_t stream = NULL;
  ncclResult_t (*allReduce)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t,
                            cudaStream_t) = ncclAllReduce;
  (void)stream;
  (void)allReduce;
  return config.blocking == NCCL_CONFIG_UNDEF_INT && config.magic == 0xcafebeefu;
}
