/*
 * gyre's NCCL-compatible interface: the names, types, enum values and
 * signatures of NCCL 2.28, served by libnccl.so.2 built from src/compat/
 * (each entry point maps onto gyre's own C ABI, include/gyre/gyre.h).
 *
 * Written for gyre; see docs/nccl-compat.md for what is supported. The header
 * needs no CUDA toolkit: without one, cudaStream_t is an opaque pointer of the
 * same type CUDA declares, buffers are host memory and streams are ignored.
 * C99 and C++ both.
 */
#ifndef NCCL_H_
#define NCCL_H_

#include <limits.h>
#include <stddef.h>

/* The API level gyre implements. The patch number is 0 because gyre follows
 * the 2.28 interface, not any one NVIDIA release of it; ncclGetVersion
 * reports the same code. */
#define NCCL_MAJOR 2
#define NCCL_MINOR 28
#define NCCL_PATCH 0
#define NCCL_SUFFIX "+gyre"
#define NCCL_VERSION_CODE 22800
/* NCCL's encoding: X*1000+Y*100+Z up to 2.8, X*10000+Y*100+Z after it. */
#define NCCL_VERSION(X, Y, Z) \
  (((X) <= 2 && (Y) <= 8) ? (X)*1000 + (Y)*100 + (Z) : (X)*10000 + (Y)*100 + (Z))

/* CUDA's own declaration is used when its headers came first (driver_types.h
 * guards itself with __DRIVER_TYPES_H__). Otherwise the same incomplete struct
 * pointer is declared here, so a TU that includes cuda_runtime.h afterwards
 * repeats an identical typedef: valid C11 and C++ (C99 wants CUDA first). */
#if !defined(__DRIVER_TYPES_H__) && !defined(CUDART_VERSION)
struct CUstream_st;
typedef struct CUstream_st* cudaStream_t;
#endif

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define GYRE_NCCL_API __attribute__((visibility("default")))
#else
#define GYRE_NCCL_API
#endif

typedef struct ncclComm* ncclComm_t;
typedef struct ncclWindow_vidmem* ncclWindow_t;

/* ncclGroupSimulateEnd's answer: initialize with NCCL_SIM_INFO_INITIALIZER. */
typedef struct ncclSimInfo_v22200 {
  size_t size;
  unsigned int magic;
  unsigned int version;
  float estimatedTime; /* microseconds */
} ncclSimInfo_t;
#define NCCL_SIM_INFO_MAGIC 0x74685283
#define NCCL_SIM_INFO_INITIALIZER \
  { sizeof(ncclSimInfo_t), NCCL_SIM_INFO_MAGIC, NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH), -1.0f }
#define NCCL_COMM_NULL NULL

#define NCCL_UNIQUE_ID_BYTES 128
typedef struct {
  char internal[NCCL_UNIQUE_ID_BYTES];
} ncclUniqueId;

typedef enum {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6, /* also gyre's timeouts: NCCL has no code of its own for them */
  ncclInProgress = 7,
  ncclNumResults = 8
} ncclResult_t;

#define NCCL_CONFIG_UNDEF_INT INT_MIN
#define NCCL_CONFIG_UNDEF_PTR NULL
#define NCCL_SPLIT_NOCOLOR -1
#define NCCL_UNDEF_FLOAT -1.0f

#define NCCL_WIN_DEFAULT 0x00
#define NCCL_WIN_COLL_SYMMETRIC 0x01
#define NCCL_WIN_REQUIRED_ALIGNMENT 4096

#define NCCL_CTA_POLICY_DEFAULT 0x00
#define NCCL_CTA_POLICY_EFFICIENCY 0x01
#define NCCL_CTA_POLICY_ZERO 0x02

#define NCCL_SHRINK_DEFAULT 0x00
#define NCCL_SHRINK_ABORT 0x01
#define NCCL_REVOKE_DEFAULT 0x00

/* Laid out field for field as NCCL 2.28's, so a program built against either
 * header passes the same bytes. gyre reads blocking and commName; the GPU
 * tuning fields have no meaning on host memory and are accepted unread. */
typedef struct ncclConfig_v22800 {
  size_t size;
  unsigned int magic;
  unsigned int version;
  int blocking;
  int cgaClusterSize;
  int minCTAs;
  int maxCTAs;
  const char* netName;
  int splitShare;
  int trafficClass;
  const char* commName;
  int collnetEnable;
  int CTAPolicy;
  int shrinkShare;
  int nvlsCTAs;
  int nChannelsPerNetPeer;
  int nvlinkCentricSched;
} ncclConfig_t;

#define NCCL_CONFIG_MAGIC 0xcafebeef
#define NCCL_CONFIG_INITIALIZER                                                                \
  {                                                                                            \
    sizeof(ncclConfig_t), NCCL_CONFIG_MAGIC, NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH), \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT,                   \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_PTR, NCCL_CONFIG_UNDEF_INT,                   \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_PTR, NCCL_CONFIG_UNDEF_INT,                   \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT,                   \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT                                           \
  }

/* A dummy enum whose size ncclMaxRedOp is derived from, as in NCCL: the
 * largest signed value that fits an enum of that size. */
typedef enum { ncclNumOps_dummy = 5 } ncclRedOp_dummy_t;
typedef enum {
  ncclSum = 0,
  ncclProd = 1,
  ncclMax = 2,
  ncclMin = 3,
  ncclAvg = 4,
  ncclNumOps = 5, /* values from here up are made by ncclRedOpCreatePreMulSum */
  ncclMaxRedOp = 0x7fffffff >> (32 - 8 * sizeof(ncclRedOp_dummy_t))
} ncclRedOp_t;

/* The fp8 types keep their NCCL values so that the enum matches; gyre's
 * kernels have no fp8 and refuse them with ncclInvalidArgument. */
typedef enum {
  ncclInt8 = 0,
  ncclChar = 0,
  ncclUint8 = 1,
  ncclInt32 = 2,
  ncclInt = 2,
  ncclUint32 = 3,
  ncclInt64 = 4,
  ncclUint64 = 5,
  ncclFloat16 = 6,
  ncclHalf = 6,
  ncclFloat32 = 7,
  ncclFloat = 7,
  ncclFloat64 = 8,
  ncclDouble = 8,
  ncclBfloat16 = 9,
  ncclFloat8e4m3 = 10,
  ncclFloat8e5m2 = 11,
  ncclNumTypes = 12
} ncclDataType_t;

typedef enum {
  ncclScalarDevice = 0,       /* read through the pointer at each call */
  ncclScalarHostImmediate = 1 /* the value is copied when the op is created */
} ncclScalarResidence_t;

/* Every function below also exists as pnccl..., the same code under a second
 * name, for profiling layers that interpose on the nccl... names. */
#define GYRE_NCCL_DECLARE(ret, name, params) \
  GYRE_NCCL_API ret name params;             \
  GYRE_NCCL_API ret p##name params

/* Host memory in a build without CUDA (page aligned). */
GYRE_NCCL_DECLARE(ncclResult_t, ncclMemAlloc, (void** ptr, size_t size));
GYRE_NCCL_DECLARE(ncclResult_t, ncclMemFree, (void* ptr));

/* Writes NCCL_VERSION_CODE's value for the API level above: 22800. */
GYRE_NCCL_DECLARE(ncclResult_t, ncclGetVersion, (int* version));

GYRE_NCCL_DECLARE(ncclResult_t, ncclGetUniqueId, (ncclUniqueId * uniqueId));
GYRE_NCCL_DECLARE(ncclResult_t, ncclCommInitRankConfig,
                  (ncclComm_t * comm, int nranks, ncclUniqueId commId, int rank,
                   ncclConfig_t* config));
GYRE_NCCL_DECLARE(ncclResult_t, ncclCommInitRank,
                  (ncclComm_t * comm, int nranks, ncclUniqueId commId, int rank));
/* ndev communicators in this process; devlist must be NULL without CUDA. */
GYRE_NCCL_DECLARE(ncclResult_t, ncclCommInitAll, (ncclComm_t * comm, int ndev, const int* devlist));
/* nId ids (the same array on every rank): gyre's root serves any size, so
 * every rank meets at commIds[0]'s. */
GYRE_NCCL_DECLARE(ncclResult_t, ncclCommInitRankScalable,
                  (ncclComm_t * newcomm, int nranks, int myrank, int nId, ncclUniqueId* commIds,
                   ncclConfig_t* config));
GYRE_NCCL_DECLARE(ncclResult_t, ncclCommFinalize, (ncclComm_t comm));
GYRE_NCCL_DECLARE(ncclResult_t, ncclCommDestroy, (ncclComm_t comm));
GYRE_NCCL_DECLARE(ncclResult_t, ncclCommAbort, (ncclComm_t comm));
/* Stops every operation of comm on this rank without waiting for peers; the
 * communicator is then quiescent (ncclCommGetAsyncError: ncclSuccess) and
 * can be destroyed. revokeFlags: NCCL_REVOKE_DEFAULT. */
GYRE_NCCL_DECLARE(ncclResult_t, ncclCommRevoke, (ncclComm_t comm, int revokeFlags));
GYRE_NCCL_DECLARE(ncclResult_t, ncclCommSplit,
                  (ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t* config));
/* The ranks not in excludeRanksList, renumbered in order, without a new
 * rendezvous; every one of them calls it. NCCL_SHRINK_ABORT: after a
 * failure, revoking comm first; ranks found dead are excluded too. */
GYRE_NCCL_DECLARE(ncclResult_t, ncclCommShrink,
                  (ncclComm_t comm, int* excludeRanksList, int excludeRanksCount,
                   ncclComm_t* newcomm, ncclConfig_t* config, int shrinkFlags));

GYRE_NCCL_DECLARE(const char*, ncclGetErrorString, (ncclResult_t result));
GYRE_NCCL_DECLARE(const char*, ncclGetLastError, (ncclComm_t comm));
GYRE_NCCL_DECLARE(ncclResult_t, ncclCommGetAsyncError, (ncclComm_t comm, ncclResult_t* asyncError));

GYRE_NCCL_DECLARE(ncclResult_t, ncclCommCount, (const ncclComm_t comm, int* count));
/* -1: the communicator works on host memory (every one, without CUDA). */
GYRE_NCCL_DECLARE(ncclResult_t, ncclCommCuDevice, (const ncclComm_t comm, int* device));
GYRE_NCCL_DECLARE(ncclResult_t, ncclCommUserRank, (const ncclComm_t comm, int* rank));

GYRE_NCCL_DECLARE(ncclResult_t, ncclCommRegister,
                  (const ncclComm_t comm, void* buff, size_t size, void** handle));
GYRE_NCCL_DECLARE(ncclResult_t, ncclCommDeregister, (const ncclComm_t comm, void* handle));
/* A window is a registration of host memory (NCCL_WIN_DEFAULT or
 * NCCL_WIN_COLL_SYMMETRIC). */
GYRE_NCCL_DECLARE(ncclResult_t, ncclCommWindowRegister,
                  (ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win, int winFlags));
GYRE_NCCL_DECLARE(ncclResult_t, ncclCommWindowDeregister, (ncclComm_t comm, ncclWindow_t win));
/* Reads NCCL_DEBUG (as GYRE_DEBUG) and NCCL_DEBUG_FILE again. */
GYRE_NCCL_DECLARE(void, ncclResetDebugInit, (void));

GYRE_NCCL_DECLARE(ncclResult_t, ncclRedOpCreatePreMulSum,
                  (ncclRedOp_t * op, void* scalar, ncclDataType_t datatype,
                   ncclScalarResidence_t residence, ncclComm_t comm));
GYRE_NCCL_DECLARE(ncclResult_t, ncclRedOpDestroy, (ncclRedOp_t op, ncclComm_t comm));

GYRE_NCCL_DECLARE(ncclResult_t, ncclReduce,
                  (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                   ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream));
/* Broadcast in place: buff on root is the source, elsewhere the target. */
GYRE_NCCL_DECLARE(ncclResult_t, ncclBcast,
                  (void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                   cudaStream_t stream));
GYRE_NCCL_DECLARE(ncclResult_t, ncclBroadcast,
                  (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                   int root, ncclComm_t comm, cudaStream_t stream));
GYRE_NCCL_DECLARE(ncclResult_t, ncclAllReduce,
                  (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                   ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream));
GYRE_NCCL_DECLARE(ncclResult_t, ncclReduceScatter,
                  (const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype,
                   ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream));
GYRE_NCCL_DECLARE(ncclResult_t, ncclAllGather,
                  (const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
                   ncclComm_t comm, cudaStream_t stream));
GYRE_NCCL_DECLARE(ncclResult_t, ncclAlltoAll,
                  (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                   ncclComm_t comm, cudaStream_t stream));
GYRE_NCCL_DECLARE(ncclResult_t, ncclGather,
                  (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                   int root, ncclComm_t comm, cudaStream_t stream));
GYRE_NCCL_DECLARE(ncclResult_t, ncclScatter,
                  (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                   int root, ncclComm_t comm, cudaStream_t stream));
GYRE_NCCL_DECLARE(ncclResult_t, ncclSend,
                  (const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
                   ncclComm_t comm, cudaStream_t stream));
GYRE_NCCL_DECLARE(ncclResult_t, ncclRecv,
                  (void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                   cudaStream_t stream));

GYRE_NCCL_DECLARE(ncclResult_t, ncclGroupStart, (void));
GYRE_NCCL_DECLARE(ncclResult_t, ncclGroupEnd, (void));
/* Ends the group without running its calls; estimatedTime: gyre's cost
 * model's microseconds for them. */
GYRE_NCCL_DECLARE(ncclResult_t, ncclGroupSimulateEnd, (ncclSimInfo_t * simInfo));

#undef GYRE_NCCL_DECLARE

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* NCCL_H_ */
