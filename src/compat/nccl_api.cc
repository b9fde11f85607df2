// The NCCL-named entry points: each converts NCCL's types to gyre's (same
// values, distinct C types) and calls the gyre function of the same meaning.
// The only translations are the ones the two ABIs force: ncclConfig_t into
// gyreConfig_t, and the one result code NCCL lacks (gyreTimeout).
#include <cstddef>

#include "gyre/gyre.h"
#include "nccl.h"
#include "nccl_env.h"

namespace {

static_assert(sizeof(ncclUniqueId) == sizeof(gyreUniqueId), "ids are passed through as bytes");
static_assert(sizeof(ncclResult_t) == sizeof(gyreResult_t) &&
                  sizeof(ncclDataType_t) == sizeof(gyreDataType_t) &&
                  sizeof(ncclRedOp_t) == sizeof(gyreRedOp_t),
              "enums are passed through by value");
static_assert(ncclInProgress == static_cast<int>(gyreInProgress) &&
                  ncclRemoteError == static_cast<int>(gyreRemoteError) &&
                  ncclBfloat16 == static_cast<int>(gyreBfloat16) &&
                  ncclAvg == static_cast<int>(gyreAvg) &&
                  ncclNumOps == static_cast<int>(gyreNumOps) &&
                  ncclScalarHostImmediate == static_cast<int>(gyreScalarHostImmediate),
              "NCCL's and gyre's enum values agree");

// NCCL has no timeout code; a peer that made no progress is a remote failure
// to an NCCL caller, and gyreGetLastError's sentence still says "timeout".
ncclResult_t toNccl(gyreResult_t r) {
  return r == gyreTimeout ? ncclRemoteError : static_cast<ncclResult_t>(r);
}

gyreComm_t g(ncclComm_t c) { return reinterpret_cast<gyreComm_t>(c); }
gyreDataType_t g(ncclDataType_t t) { return static_cast<gyreDataType_t>(t); }
gyreRedOp_t g(ncclRedOp_t op) { return static_cast<gyreRedOp_t>(op); }

// NCCL's NULL stream is CUDA's legacy default stream, which gyre spells
// GYRE_STREAM_LEGACY (a host call for host memory, as before); any other
// handle is the caller's CUDA stream.
gyreStream_t g(cudaStream_t s) { return s ? reinterpret_cast<gyreStream_t>(s) : GYRE_STREAM_LEGACY; }

gyreUniqueId g(const ncclUniqueId& id) {
  gyreUniqueId out;
  static_assert(sizeof(out.internal) == sizeof(id.internal));
  __builtin_memcpy(out.internal, id.internal, sizeof(out.internal));
  return out;
}

// ncclConfig_t's fields exist up to the size the caller was compiled with.
// Only blocking and commName mean something on host memory. A struct without
// NCCL's magic becomes a gyre config without gyre's, which gyre refuses.
struct ConfigMapping {
  gyreConfig_t config = GYRE_CONFIG_INITIALIZER;
  gyreConfig_t* ptr = nullptr;

  explicit ConfigMapping(const ncclConfig_t* nc) {
    if (!nc) return;
    ptr = &config;
    auto has = [&](size_t offset, size_t bytes) { return offset + bytes <= nc->size; };
    if (nc->magic != NCCL_CONFIG_MAGIC || !has(offsetof(ncclConfig_t, version), sizeof(unsigned))) {
      config.magic = 0;
      return;
    }
    if (has(offsetof(ncclConfig_t, blocking), sizeof(int))) config.blocking = nc->blocking;
    if (has(offsetof(ncclConfig_t, commName), sizeof(const char*)) && nc->commName)
      config.commName = nc->commName;
  }
};

}  // namespace

// NCCL's own pattern: pnccl<X> is a second symbol for the same code.
#define GYRE_NCCL_ALIAS(name) \
  extern "C" __attribute__((visibility("default"), alias(#name))) decltype(name) p##name;

extern "C" {

ncclResult_t ncclMemAlloc(void** ptr, size_t size) { return toNccl(gyreMemAlloc(ptr, size)); }
ncclResult_t ncclMemFree(void* ptr) { return toNccl(gyreMemFree(ptr)); }

// gyre reports the NCCL API level it implements, not its own version: NCCL
// callers compare this code with NCCL release numbers to pick features.
ncclResult_t ncclGetVersion(int* version) {
  if (!version) return toNccl(gyreGetVersion(version));  // gyre explains the NULL
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId* uniqueId) {
  return toNccl(gyreGetUniqueId(reinterpret_cast<gyreUniqueId*>(uniqueId)));
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
                                    ncclConfig_t* config) {
  ConfigMapping m(config);
  return toNccl(
      gyreCommInitRankConfig(reinterpret_cast<gyreComm_t*>(comm), nranks, g(commId), rank, m.ptr));
}

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank) {
  return toNccl(gyreCommInitRank(reinterpret_cast<gyreComm_t*>(comm), nranks, g(commId), rank));
}

// NCCL spreads a large job's rendezvous over nId roots. gyre's root serves
// a job of any size alone, so every rank meets at the first id's root (all
// ranks are given the same array); the other ids' roots, unused, give up
// after their lifetime as any unused id's does.
ncclResult_t ncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank, int nId,
                                      ncclUniqueId* commIds, ncclConfig_t* config) {
  if (nId < 1 || !commIds) {
    // gyre explains an unusable id; an absent array has none to give it.
    gyreUniqueId none{};
    return toNccl(gyreCommInitRankConfig(reinterpret_cast<gyreComm_t*>(newcomm), nranks, none,
                                         myrank, nullptr));
  }
  return ncclCommInitRankConfig(newcomm, nranks, commIds[0], myrank, config);
}

ncclResult_t ncclCommInitAll(ncclComm_t* comm, int ndev, const int* devlist) {
  return toNccl(gyreCommInitAll(reinterpret_cast<gyreComm_t*>(comm), ndev, devlist));
}

ncclResult_t ncclCommFinalize(ncclComm_t comm) { return toNccl(gyreCommFinalize(g(comm))); }
ncclResult_t ncclCommDestroy(ncclComm_t comm) { return toNccl(gyreCommDestroy(g(comm))); }
ncclResult_t ncclCommAbort(ncclComm_t comm) { return toNccl(gyreCommAbort(g(comm))); }
ncclResult_t ncclCommRevoke(ncclComm_t comm, int revokeFlags) {
  return toNccl(gyreCommRevoke(g(comm), revokeFlags));
}

ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
                           ncclConfig_t* config) {
  ConfigMapping m(config);
  return toNccl(gyreCommSplit(g(comm), color, key, reinterpret_cast<gyreComm_t*>(newcomm), m.ptr));
}

ncclResult_t ncclCommShrink(ncclComm_t comm, int* excludeRanksList, int excludeRanksCount,
                            ncclComm_t* newcomm, ncclConfig_t* config, int shrinkFlags) {
  ConfigMapping m(config);
  return toNccl(gyreCommShrink(g(comm), excludeRanksList, excludeRanksCount,
                               reinterpret_cast<gyreComm_t*>(newcomm), m.ptr, shrinkFlags));
}

// A window is a registration of host memory here (there is no symmetric
// device memory to map); both NCCL_WIN_ flags are accepted.
ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win,
                                    int winFlags) {
  if (!win || (winFlags & ~NCCL_WIN_COLL_SYMMETRIC)) return ncclInvalidArgument;
  void* handle = nullptr;
  const ncclResult_t r = toNccl(gyreCommRegister(g(comm), buff, size, &handle));
  *win = r == ncclSuccess ? reinterpret_cast<ncclWindow_t>(handle) : nullptr;
  return r;
}

ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win) {
  return toNccl(gyreCommDeregister(g(comm), reinterpret_cast<void*>(win)));
}

// estimatedTime in microseconds, as NCCL's; the group's calls do not run.
ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t* simInfo) {
  double us = 0;
  const ncclResult_t r = toNccl(gyreGroupSimulateEnd(&us));
  const bool valid = simInfo && simInfo->magic == NCCL_SIM_INFO_MAGIC &&
                     simInfo->size >= offsetof(ncclSimInfo_t, estimatedTime) + sizeof(float);
  if (r != ncclSuccess) return r;
  if (!valid) return ncclInvalidArgument;  // the group is ended all the same
  simInfo->estimatedTime = static_cast<float>(us);
  return ncclSuccess;
}

void ncclResetDebugInit() {
  remapNcclEnvironment();
  gyreResetDebugInit();
}

const char* ncclGetErrorString(ncclResult_t result) {
  return gyreGetErrorString(static_cast<gyreResult_t>(result));
}
const char* ncclGetLastError(ncclComm_t comm) { return gyreGetLastError(g(comm)); }

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError) {
  gyreResult_t e = gyreSuccess;
  gyreResult_t r = gyreCommGetAsyncError(g(comm), asyncError ? &e : nullptr);
  if (asyncError && r == gyreSuccess) *asyncError = toNccl(e);
  return toNccl(r);
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) {
  return toNccl(gyreCommCount(g(comm), count));
}
ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device) {
  return toNccl(gyreCommDevice(g(comm), device));
}
ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) {
  return toNccl(gyreCommUserRank(g(comm), rank));
}

ncclResult_t ncclCommRegister(const ncclComm_t comm, void* buff, size_t size, void** handle) {
  return toNccl(gyreCommRegister(g(comm), buff, size, handle));
}
ncclResult_t ncclCommDeregister(const ncclComm_t comm, void* handle) {
  return toNccl(gyreCommDeregister(g(comm), handle));
}

ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
                                      ncclScalarResidence_t residence, ncclComm_t comm) {
  return toNccl(gyreRedOpCreatePreMulSum(reinterpret_cast<gyreRedOp_t*>(op), scalar, g(datatype),
                                         static_cast<gyreScalarResidence_t>(residence), g(comm)));
}
ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm) {
  return toNccl(gyreRedOpDestroy(g(op), g(comm)));
}

ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                        ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream) {
  return toNccl(
      gyreReduce(sendbuff, recvbuff, count, g(datatype), g(op), root, g(comm), g(stream)));
}

ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                       cudaStream_t stream) {
  return toNccl(gyreBroadcast(buff, buff, count, g(datatype), root, g(comm), g(stream)));
}

ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, int root, ncclComm_t comm,
                           cudaStream_t stream) {
  return toNccl(gyreBroadcast(sendbuff, recvbuff, count, g(datatype), root, g(comm), g(stream)));
}

ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream) {
  return toNccl(gyreAllReduce(sendbuff, recvbuff, count, g(datatype), g(op), g(comm), g(stream)));
}

ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t stream) {
  return toNccl(
      gyreReduceScatter(sendbuff, recvbuff, recvcount, g(datatype), g(op), g(comm), g(stream)));
}

ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  return toNccl(gyreAllGather(sendbuff, recvbuff, sendcount, g(datatype), g(comm), g(stream)));
}

ncclResult_t ncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count,
                          ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  return toNccl(gyreAllToAll(sendbuff, recvbuff, count, g(datatype), g(comm), g(stream)));
}

ncclResult_t ncclGather(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                        int root, ncclComm_t comm, cudaStream_t stream) {
  return toNccl(gyreGather(sendbuff, recvbuff, count, g(datatype), root, g(comm), g(stream)));
}

ncclResult_t ncclScatter(const void* sendbuff, void* recvbuff, size_t count,
                         ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream) {
  return toNccl(gyreScatter(sendbuff, recvbuff, count, g(datatype), root, g(comm), g(stream)));
}

ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream) {
  return toNccl(gyreSend(sendbuff, count, g(datatype), peer, g(comm), g(stream)));
}

ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream) {
  return toNccl(gyreRecv(recvbuff, count, g(datatype), peer, g(comm), g(stream)));
}

ncclResult_t ncclGroupStart(void) { return toNccl(gyreGroupStart()); }
ncclResult_t ncclGroupEnd(void) { return toNccl(gyreGroupEnd()); }

}  // extern "C"

GYRE_NCCL_ALIAS(ncclMemAlloc)
GYRE_NCCL_ALIAS(ncclMemFree)
GYRE_NCCL_ALIAS(ncclGetVersion)
GYRE_NCCL_ALIAS(ncclGetUniqueId)
GYRE_NCCL_ALIAS(ncclCommInitRankConfig)
GYRE_NCCL_ALIAS(ncclCommInitRank)
GYRE_NCCL_ALIAS(ncclCommInitAll)
GYRE_NCCL_ALIAS(ncclCommFinalize)
GYRE_NCCL_ALIAS(ncclCommDestroy)
GYRE_NCCL_ALIAS(ncclCommAbort)
GYRE_NCCL_ALIAS(ncclCommRevoke)
GYRE_NCCL_ALIAS(ncclCommShrink)
GYRE_NCCL_ALIAS(ncclCommInitRankScalable)
GYRE_NCCL_ALIAS(ncclCommWindowRegister)
GYRE_NCCL_ALIAS(ncclCommWindowDeregister)
GYRE_NCCL_ALIAS(ncclGroupSimulateEnd)
GYRE_NCCL_ALIAS(ncclResetDebugInit)
GYRE_NCCL_ALIAS(ncclCommSplit)
GYRE_NCCL_ALIAS(ncclGetErrorString)
GYRE_NCCL_ALIAS(ncclGetLastError)
GYRE_NCCL_ALIAS(ncclCommGetAsyncError)
GYRE_NCCL_ALIAS(ncclCommCount)
GYRE_NCCL_ALIAS(ncclCommCuDevice)
GYRE_NCCL_ALIAS(ncclCommUserRank)
GYRE_NCCL_ALIAS(ncclCommRegister)
GYRE_NCCL_ALIAS(ncclCommDeregister)
GYRE_NCCL_ALIAS(ncclRedOpCreatePreMulSum)
GYRE_NCCL_ALIAS(ncclRedOpDestroy)
GYRE_NCCL_ALIAS(ncclReduce)
GYRE_NCCL_ALIAS(ncclBcast)
GYRE_NCCL_ALIAS(ncclBroadcast)
GYRE_NCCL_ALIAS(ncclAllReduce)
GYRE_NCCL_ALIAS(ncclReduceScatter)
GYRE_NCCL_ALIAS(ncclAllGather)
GYRE_NCCL_ALIAS(ncclAlltoAll)
GYRE_NCCL_ALIAS(ncclGather)
GYRE_NCCL_ALIAS(ncclScatter)
GYRE_NCCL_ALIAS(ncclSend)
GYRE_NCCL_ALIAS(ncclRecv)
GYRE_NCCL_ALIAS(ncclGroupStart)
GYRE_NCCL_ALIAS(ncclGroupEnd)
