// gyre's nccl.h compiled as C++, alone or after cuda_runtime.h
// (GYRE_WITH_CUDA), where cudaStream_t must be CUDA's own type.
#ifdef GYRE_WITH_CUDA
#include <cuda_runtime.h>
#endif
#include <nccl.h>

#include <cstddef>
#include <type_traits>

static_assert(sizeof(ncclUniqueId) == 128);
static_assert(NCCL_VERSION_CODE == 22800, "gyre's nccl.h, not the toolkit's");
static_assert(std::is_same_v<cudaStream_t, CUstream_st*>);
static_assert(sizeof(ncclRedOp_t) == sizeof(int) && ncclMaxRedOp == 0x7fffffff);
// NCCL 2.28's layout: a program built with either header passes the same bytes.
static_assert(offsetof(ncclConfig_t, blocking) == 16 && offsetof(ncclConfig_t, netName) == 32 &&
              offsetof(ncclConfig_t, commName) == 48 && sizeof(ncclConfig_t) == 80);

int gyreNcclHeaderCheckCxx() {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  return config.size == sizeof(ncclConfig_t) ? ncclSuccess : ncclInternalError;
}
