/*
 * gyre: collective communication for distributed training.
 *
 * The stable C ABI. C99, no C++ types. Every function returns a gyreResult_t
 * (never aborts the process); gyreGetLastError() explains the last failure of
 * the calling thread in a sentence.
 *
 * Enum values follow NCCL's where both have the same concept, so a mapping
 * layer stays trivial.
 */
#ifndef GYRE_GYRE_H
#define GYRE_GYRE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define GYRE_API __attribute__((visibility("default")))
#else
#define GYRE_API
#endif

/* In C++ the enums get int as their fixed underlying type, so that any int a
 * caller passes (a bad dtype or op included) is a value gyre can check and
 * refuse, never undefined behaviour. Same size and ABI as the C enums. */
#ifdef __cplusplus
#define GYRE_ENUM_INT : int
#else
#define GYRE_ENUM_INT
#endif

#define GYRE_MAJOR 0
#define GYRE_MINOR 1
#define GYRE_PATCH 0
/* Encoded as MAJOR*10000 + MINOR*100 + PATCH, as NCCL does. */
#define GYRE_VERSION_CODE (GYRE_MAJOR * 10000 + GYRE_MINOR * 100 + GYRE_PATCH)

typedef enum GYRE_ENUM_INT {
  gyreSuccess = 0,
  gyreUnhandledCudaError = 1,
  gyreSystemError = 2,      /* a system call or resource failed (socket, shm, memory) */
  gyreInternalError = 3,    /* a bug in gyre */
  gyreInvalidArgument = 4,  /* a bad argument; the communicator stays usable */
  gyreInvalidUsage = 5,     /* a call out of order, or on a failed communicator */
  gyreRemoteError = 6,      /* a peer failed, died or aborted */
  gyreInProgress = 7,       /* a nonblocking operation has not finished yet */
  gyreTimeout = 8,          /* no progress within GYRE_TIMEOUT_MS */
  gyreNumResults = 9
} gyreResult_t;

typedef enum GYRE_ENUM_INT {
  gyreInt8 = 0,
  gyreChar = 0,
  gyreUint8 = 1,
  gyreInt32 = 2,
  gyreInt = 2,
  gyreUint32 = 3,
  gyreInt64 = 4,
  gyreUint64 = 5,
  gyreFloat16 = 6,
  gyreHalf = 6,
  gyreFloat32 = 7,
  gyreFloat = 7,
  gyreFloat64 = 8,
  gyreDouble = 8,
  gyreBfloat16 = 9,
  gyreNumTypes = 10
} gyreDataType_t;

typedef enum GYRE_ENUM_INT {
  gyreSum = 0,
  gyreProd = 1,
  gyreMax = 2,
  gyreMin = 3,
  gyreAvg = 4, /* sum, then divided by the rank count (integers: truncated) */
  gyreNumOps = 5,
  /* Values from gyreNumOps up name ops made by gyreRedOpCreatePreMulSum. */
  gyreMaxRedOp = 0x7fffffff
} gyreRedOp_t;

/* Opaque communicator. */
typedef struct gyreComm* gyreComm_t;

/* An opaque stream handle: a cudaStream_t in a CUDA build, NULL for host
 * memory. Host calls with a NULL stream complete before they return; a call
 * on a stream (device or pinned host memory of the stream's GPU) is
 * enqueued on it and returns at once: its results are visible to work
 * enqueued after it on that stream, and to the host after a stream
 * synchronize. Its failure (a dead peer, an abort, the timeout) releases
 * the stream and is reported by gyreCommGetAsyncError and the next call. */
typedef void* gyreStream_t;
/* CUDA's legacy default stream (cudaStreamLegacy): a call on device memory
 * is enqueued on it; with host memory (or on a host without a GPU) it is a
 * host call, as with NULL. What NCCL's NULL stream means; the NCCL library
 * passes it for NULL. */
#define GYRE_STREAM_LEGACY ((gyreStream_t)0x1)

#define GYRE_UNIQUE_ID_BYTES 128
/* Identifies one rendezvous: the root's address and a random secret. Create
 * it once (gyreGetUniqueId), pass the bytes to every rank out of band. */
typedef struct {
  char internal[GYRE_UNIQUE_ID_BYTES];
} gyreUniqueId;

/* Per-communicator settings. Initialise with GYRE_CONFIG_INITIALIZER; a field
 * left at its undefined value takes the environment's (GYRE_*) or the default.
 */
#define GYRE_CONFIG_UNDEF_INT INT32_MIN
#define GYRE_CONFIG_UNDEF_PTR NULL
typedef struct {
  size_t size;            /* sizeof(gyreConfig_t), set by the initializer */
  unsigned int magic;     /* GYRE_CONFIG_MAGIC */
  unsigned int version;   /* GYRE_VERSION_CODE at compile time */
  int timeoutMs;          /* GYRE_TIMEOUT_MS: max time without progress (0 = never) */
  const char* transport;  /* GYRE_TRANSPORT: "auto", "shm", "tcp", "ucx" or "verbs" */
  const char* algo;       /* GYRE_ALGO: algorithm override */
  const char* commName;   /* a name used in log and error messages */
  int blocking;           /* 0: gyreCommInitRankConfig returns gyreInProgress at once and
                             connects in the background (see gyreCommGetAsyncError);
                             1 or undefined: it returns when the communicator is ready */
  int tunerOnline;        /* GYRE_TUNER_ONLINE: 1 = time the cost model's best candidates on
                             the first calls of each (operation, size class) and keep the
                             fastest (docs/collectives.md); 0: the model alone chooses */
} gyreConfig_t;

#define GYRE_CONFIG_MAGIC 0x67797265u /* 'gyre' */
#define GYRE_CONFIG_INITIALIZER                                              \
  {                                                                          \
    sizeof(gyreConfig_t), GYRE_CONFIG_MAGIC, GYRE_VERSION_CODE,              \
        GYRE_CONFIG_UNDEF_INT, GYRE_CONFIG_UNDEF_PTR, GYRE_CONFIG_UNDEF_PTR, \
        GYRE_CONFIG_UNDEF_PTR, GYRE_CONFIG_UNDEF_INT, GYRE_CONFIG_UNDEF_INT  \
  }

/* Version of the library actually loaded (GYRE_VERSION_CODE encoding). */
GYRE_API gyreResult_t gyreGetVersion(int* version);

/* Opens a rendezvous listener in the calling process (a thread serves it until
 * every rank has arrived) and writes its address and a fresh secret into id.
 * The caller need not be a rank: a parent may create the id and fork ranks.
 * With GYRE_COMM_ID=host:port set, it opens nothing: every caller gets the
 * same id naming that address (secret: GYRE_SECRET, else one derived from
 * the address), and rank 0's gyreCommInitRank opens the root there, unless
 * GYRE_ROOT_EXTERNAL=1 says a launcher (gyrerun) already serves it. */
GYRE_API gyreResult_t gyreGetUniqueId(gyreUniqueId* uniqueId);

/* The most ranks a communicator can have (2^20). Every rank is handed a table
 * of all ranks at creation (a few hundred bytes each), so a larger nranks is
 * refused as an invalid argument before anything is allocated for it. */
#define GYRE_MAX_RANKS (1 << 20)

/* Collective over nranks processes: each calls it with the same id and its own
 * rank in [0, nranks), 1 <= nranks <= GYRE_MAX_RANKS. Blocks until all have
 * arrived or the timeout expires. */
GYRE_API gyreResult_t gyreCommInitRank(gyreComm_t* comm, int nranks, gyreUniqueId commId,
                                       int rank);
GYRE_API gyreResult_t gyreCommInitRankConfig(gyreComm_t* comm, int nranks,
                                             gyreUniqueId commId, int rank,
                                             gyreConfig_t* config);

/* Creates ncomms communicators of one process, ranks 0 to ncomms-1 (comms[i]
 * has rank i), connected to each other. Calls on several of them from one
 * thread go inside a group. devlist names a CUDA device per rank; a host-
 * memory build has none, so it must be NULL. */
GYRE_API gyreResult_t gyreCommInitAll(gyreComm_t* comms, int ncomms, const int* devlist);

/* Rank, size and rendezvous address from the launcher's environment: gyre's
 * own (GYRE_RANK, GYRE_WORLD_SIZE, GYRE_COMM_ID), torchrun (RANK, WORLD_SIZE,
 * MASTER_ADDR, MASTER_PORT), Open MPI (OMPI_COMM_WORLD_*) or Slurm
 * (SLURM_PROCID, SLURM_NTASKS, ...). config may be NULL. */
GYRE_API gyreResult_t gyreCommInitFromEnv(gyreComm_t* comm, gyreConfig_t* config);

/* Waits until every call queued on comm (nonblocking ones included) has
 * completed; returns the communicator's error if it has failed. Destroy
 * follows. */
GYRE_API gyreResult_t gyreCommFinalize(gyreComm_t comm);

/* Frees the communicator's resources. Local: does not wait for peers. */
GYRE_API gyreResult_t gyreCommDestroy(gyreComm_t comm);

/* Ends any call blocked on comm (from any thread) with an error, tells the
 * peers this rank aborted, and frees the communicator. */
GYRE_API gyreResult_t gyreCommAbort(gyreComm_t comm);

/* Revokes comm on this rank (NCCL 2.28's ncclCommRevoke): every operation
 * of it stops now, without waiting for the peers. A call blocked in it (in
 * another thread) returns gyreInvalidUsage saying the communicator was
 * revoked, and so does every later call with it; the peers' calls with it
 * fail naming this rank. On return the communicator is quiescent:
 * gyreCommGetAsyncError says gyreSuccess, and what is left to do with it is
 * gyreCommDestroy (or a shrink). flags: GYRE_REVOKE_DEFAULT (0). */
#define GYRE_REVOKE_DEFAULT 0
GYRE_API gyreResult_t gyreCommRevoke(gyreComm_t comm, int flags);

/* A communicator of the ranks that remain (NCCL 2.28's ncclCommShrink),
 * without a new rendezvous. Every rank of comm not in excludeRanks calls it
 * (the excluded ones do not, and may be gone). The new ranks are the
 * survivors in comm's rank order. flags GYRE_SHRINK_DEFAULT: comm is
 * healthy and idle, and every survivor passes the same list (else every
 * one fails with gyreInvalidUsage naming both lists). GYRE_SHRINK_ABORT:
 * after a failure; comm is revoked first, and the ranks found dead
 * (refusing connections, exited, or silent past GYRE_TIMEOUT_MS) are
 * excluded too, the survivors agreeing on who they are
 * (docs/reliability.md). A rank that fails during the shrink makes it fail
 * on the survivors with gyreRemoteError (shrink again). config NULL:
 * comm's settings. Excluding oneself, a rank outside comm or a negative
 * count is gyreInvalidArgument. comm stays for gyreCommDestroy. */
#define GYRE_SHRINK_DEFAULT 0
#define GYRE_SHRINK_ABORT 1
GYRE_API gyreResult_t gyreCommShrink(gyreComm_t comm, const int* excludeRanks, int excludeCount,
                                     gyreComm_t* newcomm, const gyreConfig_t* config, int flags);

/* Growing a job: new processes join a running communicator's ranks in a
 * larger communicator, at a point the job chooses (docs/reliability.md).
 * 1. One rank of comm makes a join handle (gyreCommGetJoinHandle; local,
 *    not collective) and the job passes its bytes to the new processes out
 *    of band. The handle is good for one grow, within GYRE_TIMEOUT_MS of
 *    its making (its rendezvous waits that long).
 * 2. Every rank of comm calls gyreCommGrow(comm, newNranks, handle, -1, ...)
 *    with the handle where it has it and NULL elsewhere (the handle travels
 *    over comm), and every new process calls gyreCommGrow(NULL, newNranks,
 *    handle, newRank, ...). comm's ranks keep their numbers; the new ones
 *    take newRank, from comm's size to newNranks - 1, each once.
 * Errors, on every rank of comm: different newNranks, no rank or two
 * different handles, a handle of another communicator (another job's, or
 * this job's before it grew or shrank), or one used already (stale):
 * gyreInvalidUsage naming it. A new process's newRank outside that range:
 * gyreInvalidArgument; its stale handle: gyreRemoteError at once (the
 * handle's rendezvous is over). config NULL: comm's settings (new
 * processes: the environment's). comm stays for gyreCommDestroy. */
#define GYRE_JOIN_HANDLE_BYTES 256
typedef struct {
  char internal[GYRE_JOIN_HANDLE_BYTES];
} gyreJoinHandle;
GYRE_API gyreResult_t gyreCommGetJoinHandle(gyreComm_t comm, gyreJoinHandle* handle);
GYRE_API gyreResult_t gyreCommGrow(gyreComm_t comm, int newNranks, const gyreJoinHandle* handle,
                                   int newRank, gyreComm_t* newcomm, const gyreConfig_t* config);

/* gyreSuccess while healthy; gyreInProgress while a nonblocking init
 * (config.blocking = 0) is still connecting; otherwise the error that broke
 * the communicator or ended its init (a dead peer, a timeout, an abort), and
 * gyreGetLastError then says why. Any other call on a communicator still
 * connecting waits for its init to end. */
GYRE_API gyreResult_t gyreCommGetAsyncError(gyreComm_t comm, gyreResult_t* asyncError);

GYRE_API gyreResult_t gyreCommCount(const gyreComm_t comm, int* count);
GYRE_API gyreResult_t gyreCommUserRank(const gyreComm_t comm, int* rank);
/* The CUDA device comm's buffers live on; -1 for host memory (every
 * communicator of a build without CUDA). */
GYRE_API gyreResult_t gyreCommDevice(const gyreComm_t comm, int* device);

/* Memory for communication buffers, as ncclMemAlloc: device memory of the
 * calling thread's current GPU where there is one (a CUDA build on a host
 * with a GPU), else what gyreMemAllocHost gives. Free with gyreMemFree. */
GYRE_API gyreResult_t gyreMemAlloc(void** ptr, size_t size);
/* Page-aligned host memory that local peers can map, so single-copy
 * algorithms read it at memory speed (GYRE_MAPPED_BUFFERS), on any host.
 * Free with gyreMemFree. */
GYRE_API gyreResult_t gyreMemAllocHost(void** ptr, size_t size);
GYRE_API gyreResult_t gyreMemFree(void* ptr);

/* Declares that [buff, buff + size) will be used in comm's calls, so that a
 * transport that needs registered memory can prepare it once. Host-memory
 * transports need none, so this only records it; calls work on
 * unregistered memory too. Deregister each handle before destroying comm. */
GYRE_API gyreResult_t gyreCommRegister(const gyreComm_t comm, void* buff, size_t size,
                                       void** handle);
GYRE_API gyreResult_t gyreCommDeregister(const gyreComm_t comm, void* handle);

/* recvbuff[i] = op over all ranks of sendbuff[i]. sendbuff == recvbuff is
 * in-place. Every rank gets bitwise-identical results. */
GYRE_API gyreResult_t gyreAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                                    gyreDataType_t datatype, gyreRedOp_t op,
                                    gyreComm_t comm, gyreStream_t stream);

/* ---- Collectives. Signatures follow NCCL's; counts are elements. A NULL
 * stream means host memory and a call that completes before it returns; a
 * stream, device memory and a call enqueued on it (see gyreStream_t).
 * "In place" is spelled as in NCCL: the send and receive buffers are the
 * same memory (for AllGather: sendbuff == recvbuff + rank * sendcount; for
 * ReduceScatter: recvbuff == sendbuff + rank * recvcount). ---- */

/* recvbuff = root's sendbuff on every rank (sendbuff is read on root only). */
GYRE_API gyreResult_t gyreBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                                    gyreDataType_t datatype, int root, gyreComm_t comm,
                                    gyreStream_t stream);
/* root's recvbuff = op over all ranks' sendbuff (recvbuff used on root only). */
GYRE_API gyreResult_t gyreReduce(const void* sendbuff, void* recvbuff, size_t count,
                                 gyreDataType_t datatype, gyreRedOp_t op, int root, gyreComm_t comm,
                                 gyreStream_t stream);
/* recvbuff (nranks * sendcount) = every rank's sendbuff, in rank order. */
GYRE_API gyreResult_t gyreAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                                    gyreDataType_t datatype, gyreComm_t comm, gyreStream_t stream);
/* recvbuff (recvcount) = op over all ranks of their sendbuff's block number rank. */
GYRE_API gyreResult_t gyreReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                        gyreDataType_t datatype, gyreRedOp_t op, gyreComm_t comm,
                                        gyreStream_t stream);
/* Block j of recvbuff = block rank of rank j's sendbuff; blocks of count
 * elements. sendbuff == recvbuff is allowed (in place). */
GYRE_API gyreResult_t gyreAllToAll(const void* sendbuff, void* recvbuff, size_t count,
                                   gyreDataType_t datatype, gyreComm_t comm, gyreStream_t stream);
/* AllToAll with per-peer counts and displacements (elements, nranks each;
 * zero counts allowed): sendcounts[j] elements at sdispls[j] go to rank j,
 * which receives them at its rdispls[rank] (recvcounts[rank] elements). */
GYRE_API gyreResult_t gyreAllToAllv(const void* sendbuff, const size_t sendcounts[],
                                    const size_t sdispls[], void* recvbuff, const size_t recvcounts[],
                                    const size_t rdispls[], gyreDataType_t datatype, gyreComm_t comm,
                                    gyreStream_t stream);
/* root's recvbuff (nranks * sendcount) = every rank's sendbuff, in rank order. */
GYRE_API gyreResult_t gyreGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                                 gyreDataType_t datatype, int root, gyreComm_t comm,
                                 gyreStream_t stream);
/* recvbuff (recvcount) = block number rank of root's sendbuff. */
GYRE_API gyreResult_t gyreScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                  gyreDataType_t datatype, int root, gyreComm_t comm,
                                  gyreStream_t stream);
/* Point to point: a Send to peer matches that peer's Recv from this rank, in
 * call order per pair. Outside a group they block until the data has been
 * handed over; inside one, any order of sends and receives is safe. */
GYRE_API gyreResult_t gyreSend(const void* sendbuff, size_t count, gyreDataType_t datatype,
                               int peer, gyreComm_t comm, gyreStream_t stream);
GYRE_API gyreResult_t gyreRecv(void* recvbuff, size_t count, gyreDataType_t datatype, int peer,
                               gyreComm_t comm, gyreStream_t stream);
/* Returns once every rank has entered it. */
GYRE_API gyreResult_t gyreBarrier(gyreComm_t comm, gyreStream_t stream);

/* Calls between GroupStart and GroupEnd (this thread; they nest) are
 * collected and launched together at the outermost GroupEnd, which returns
 * when all of them have completed. */
GYRE_API gyreResult_t gyreGroupStart(void);
GYRE_API gyreResult_t gyreGroupEnd(void);
/* Ends the group like gyreGroupEnd, but runs none of its calls: sets
 * *microseconds to gyreEstimate's times of them (each communicator's
 * calls in turn, communicators side by side), as NCCL's
 * ncclGroupSimulateEnd. Nonblocking calls in it complete with
 * gyreInvalidUsage ("did not run"). An inner end (nested groups) gives 0.
 * microseconds NULL is gyreInvalidArgument, the group ended all the same. */
GYRE_API gyreResult_t gyreGroupSimulateEnd(double* microseconds);

/* ---- Nonblocking variants: the call returns at once with a request; the
 * operation runs in the background, in call order with the communicator's
 * other operations. Buffers must stay untouched until it completes. ---- */
typedef struct gyreRequest* gyreRequest_t;

GYRE_API gyreResult_t gyreIallReduce(const void* sendbuff, void* recvbuff, size_t count,
                                     gyreDataType_t datatype, gyreRedOp_t op, gyreComm_t comm,
                                     gyreRequest_t* request);
GYRE_API gyreResult_t gyreIbroadcast(const void* sendbuff, void* recvbuff, size_t count,
                                     gyreDataType_t datatype, int root, gyreComm_t comm,
                                     gyreRequest_t* request);
GYRE_API gyreResult_t gyreIreduce(const void* sendbuff, void* recvbuff, size_t count,
                                  gyreDataType_t datatype, gyreRedOp_t op, int root, gyreComm_t comm,
                                  gyreRequest_t* request);
GYRE_API gyreResult_t gyreIallGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                                     gyreDataType_t datatype, gyreComm_t comm,
                                     gyreRequest_t* request);
GYRE_API gyreResult_t gyreIreduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                         gyreDataType_t datatype, gyreRedOp_t op, gyreComm_t comm,
                                         gyreRequest_t* request);
GYRE_API gyreResult_t gyreIallToAll(const void* sendbuff, void* recvbuff, size_t count,
                                    gyreDataType_t datatype, gyreComm_t comm,
                                    gyreRequest_t* request);
GYRE_API gyreResult_t gyreIallToAllv(const void* sendbuff, const size_t sendcounts[],
                                     const size_t sdispls[], void* recvbuff,
                                     const size_t recvcounts[], const size_t rdispls[],
                                     gyreDataType_t datatype, gyreComm_t comm,
                                     gyreRequest_t* request);
GYRE_API gyreResult_t gyreIsend(const void* sendbuff, size_t count, gyreDataType_t datatype,
                                int peer, gyreComm_t comm, gyreRequest_t* request);
GYRE_API gyreResult_t gyreIrecv(void* recvbuff, size_t count, gyreDataType_t datatype, int peer,
                                gyreComm_t comm, gyreRequest_t* request);
GYRE_API gyreResult_t gyreIbarrier(gyreComm_t comm, gyreRequest_t* request);

/* Waits for the operation and frees the request; returns its result. */
GYRE_API gyreResult_t gyreWait(gyreRequest_t request);
/* *done = 1 when the operation has completed (the request is then freed and
 * its result returned), 0 otherwise (gyreSuccess returned). */
GYRE_API gyreResult_t gyreTest(gyreRequest_t request, int* done);

/* ---- Reductions with a per-call scalar: sum over ranks of (scalar * x),
 * so that averaging or loss scaling costs no extra pass. The new op is
 * valid on comm until destroyed. ---- */
typedef enum GYRE_ENUM_INT {
  gyreScalarDevice = 0,        /* the scalar is read through the pointer at each call */
  gyreScalarHostImmediate = 1  /* the scalar's value is copied now */
} gyreScalarResidence_t;

GYRE_API gyreResult_t gyreRedOpCreatePreMulSum(gyreRedOp_t* op, void* scalar,
                                               gyreDataType_t datatype,
                                               gyreScalarResidence_t residence, gyreComm_t comm);
GYRE_API gyreResult_t gyreRedOpDestroy(gyreRedOp_t op, gyreComm_t comm);

/* ---- Compressed collectives (docs/compression.md): the messages carry
 * float32, float16 or bfloat16 values encoded by a codec, and reductions
 * add in float32 at the block's owner. Sum and avg only. Every rank gets
 * the same bits; every rank must use the same codec. ---- */
typedef enum GYRE_ENUM_INT {
  gyreCodecNone = 0,   /* the plain call */
  gyreCodecFp16 = 1,   /* float16 on the wire (round to nearest even) */
  gyreCodecBf16 = 2,   /* bfloat16 on the wire */
  gyreCodecInt8 = 3,   /* 8-bit min-max per chunk of 4096 values */
  gyreCodecOneBit = 4, /* one sign bit per value, a mean-magnitude scale per chunk */
  gyreNumCodecs = 5
} gyreCodec_t;

/* Stateless: each call encodes its input afresh (no error feedback). */
GYRE_API gyreResult_t gyreAllReduceCodec(const void* sendbuff, void* recvbuff, size_t count,
                                         gyreDataType_t datatype, gyreRedOp_t op, gyreCodec_t codec,
                                         gyreComm_t comm, gyreStream_t stream);
GYRE_API gyreResult_t gyreReduceScatterCodec(const void* sendbuff, void* recvbuff, size_t recvcount,
                                             gyreDataType_t datatype, gyreRedOp_t op,
                                             gyreCodec_t codec, gyreComm_t comm,
                                             gyreStream_t stream);
GYRE_API gyreResult_t gyreAllGatherCodec(const void* sendbuff, void* recvbuff, size_t sendcount,
                                         gyreDataType_t datatype, gyreCodec_t codec, gyreComm_t comm,
                                         gyreStream_t stream);

/* A compressor: one tensor's codec and its error feedback (what encoding
 * lost, added to the next call's input: nothing is lost, only delayed),
 * for a tensor of `count` values of `datatype` on comm. Use it in place of
 * the plain call, with that comm, count and type, every call on that one
 * tensor: AllReduce of count values, ReduceScatter of the tensor
 * (recvcount = count / nranks), AllGather into the tensor (sendcount =
 * count / nranks). Destroy it once its calls have completed. */
typedef struct gyreCompressor* gyreCompressor_t;
#define GYRE_COMPRESSOR_ERROR_FEEDBACK 0x1 /* keep the residuals (1-bit needs them) */
GYRE_API gyreResult_t gyreCompressorCreate(gyreCompressor_t* compressor, gyreComm_t comm,
                                           gyreCodec_t codec, size_t count,
                                           gyreDataType_t datatype, int flags);
/* Forgets what error feedback kept (a restarted model, say). */
GYRE_API gyreResult_t gyreCompressorReset(gyreCompressor_t compressor);
GYRE_API gyreResult_t gyreCompressorDestroy(gyreCompressor_t compressor);
GYRE_API gyreResult_t gyreCompressedAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                                              gyreDataType_t datatype, gyreRedOp_t op,
                                              gyreCompressor_t compressor, gyreComm_t comm,
                                              gyreStream_t stream);
GYRE_API gyreResult_t gyreCompressedReduceScatter(const void* sendbuff, void* recvbuff,
                                                  size_t recvcount, gyreDataType_t datatype,
                                                  gyreRedOp_t op, gyreCompressor_t compressor,
                                                  gyreComm_t comm, gyreStream_t stream);
GYRE_API gyreResult_t gyreCompressedAllGather(const void* sendbuff, void* recvbuff,
                                              size_t sendcount, gyreDataType_t datatype,
                                              gyreCompressor_t compressor, gyreComm_t comm,
                                              gyreStream_t stream);

/* ---- Decentralized averaging (docs/compression.md): each rank's buffer
 * becomes the average of its own and a few peers' copies, instead of every
 * rank's: each rank talks to one or two peers per step, and the ranks'
 * copies drift together over steps (decentralized SGD). Which peers is a
 * function of `peers`, `step` and the rank count, the same on every rank;
 * every rank must pass the same selection and step. ---- */
typedef enum GYRE_ENUM_INT {
  gyrePeersShiftOne = 0, /* lower half pairs with upper half, shifting each step (even rank count) */
  gyrePeersRing = 1,     /* the ranks before and after this one */
  gyrePeersRandom = 2,   /* a random pairing drawn from step (odd counts: one rank rests) */
  gyreNumPeerSelections = 3
} gyrePeers_t;
GYRE_API gyreResult_t gyrePeerAverage(const void* sendbuff, void* recvbuff, size_t count,
                                      gyreDataType_t datatype, gyrePeers_t peers, uint64_t step,
                                      gyreComm_t comm, gyreStream_t stream);

/* Low-precision decentralized SGD (Bagua's; docs/compression.md): each
 * rank keeps replicas of its ring neighbours' models, and each step sends
 * them only the encoded change of its own. Float32 models, host memory.
 * Create with every rank's initial model (a collective: neighbours swap
 * them once, in full precision). Each step: pass the model after this
 * rank's local update (the previous step's model minus its gradient step);
 * it becomes the mixed, encoded model: model_mixed = model + (left + right
 * - 2 prev) / 3 (one neighbour on two ranks: + (peer - prev) / 2), of which
 * the change from prev is encoded with codec, sent to both neighbours, and
 * the model returned is prev + that decoded change (exactly what the
 * neighbours' replicas now hold). */
typedef struct gyreDecentralized* gyreDecentralized_t;
GYRE_API gyreResult_t gyreDecentralizedCreate(gyreDecentralized_t* decentralized, gyreComm_t comm,
                                              const void* model, size_t count,
                                              gyreDataType_t datatype, gyreCodec_t codec);
GYRE_API gyreResult_t gyreDecentralizedStep(gyreDecentralized_t decentralized, void* model);
/* Destroy it before its communicator. */
GYRE_API gyreResult_t gyreDecentralizedDestroy(gyreDecentralized_t decentralized);

/* Asynchronous model averaging (docs/compression.md): a background thread
 * keeps averaging a float32 model with every rank's, round after round,
 * while the caller computes. Collective: every rank starts it (it splits a
 * private communicator from comm, so the caller's own calls on comm go on
 * beside it) and every rank stops it.
 * Consistency rule: the caller reads or writes the model only between
 * gyreAveragerLock and gyreAveragerUnlock. Each round takes a copy under
 * the lock, averages the copies over the ranks, and under the lock adds
 * (average - copy) to the model: what the caller changed meanwhile is kept,
 * and where it changed nothing the model becomes the average exactly.
 * gyreAveragerStop: the ranks finish together, on the first round that
 * sees any rank's stop, which still averages (so ranks that stop updating
 * before they stop leave with the same model); rounds (may be NULL) is how
 * many rounds ran. A failure in the background (a dead peer, the timeout)
 * is returned by the next Lock and by Stop. */
typedef struct gyreAverager* gyreAverager_t;
/* intervalMs: at least this long from one round's start to the next's (0:
 * back to back, a core and the network kept busy). Lock and Unlock pair on
 * one thread; locking twice, unlocking without the lock, or stopping while
 * holding it is gyreInvalidUsage. One averager per model; stop it before
 * destroying comm. */
GYRE_API gyreResult_t gyreAveragerStart(gyreAverager_t* averager, gyreComm_t comm, void* model,
                                        size_t count, gyreDataType_t datatype,
                                        unsigned intervalMs);
GYRE_API gyreResult_t gyreAveragerLock(gyreAverager_t averager);
GYRE_API gyreResult_t gyreAveragerUnlock(gyreAverager_t averager);
GYRE_API gyreResult_t gyreAveragerStop(gyreAverager_t averager, uint64_t* rounds);

/* ---- Sequence parallelism: DeepSpeed-Ulysses' exchanges
 * (docs/sequence-parallel.md). The ranks of comm split a sequence (or a
 * packed batch of sequences) of seqLen tokens: rank r holds tokens[r]
 * consecutive tokens, in rank order, of every head: [tokens[r]][width]
 * [headDim], where width counts the heads of the parts held (heads for
 * queries, kvHeads each for keys and values), a token's parts in the order
 * Q, K, V. Attention wants every token of a share of the heads:
 * [seqLen][share][headDim], the tokens in rank order, the share's heads of
 * each part in the order Q, K, V. gyreSeqToHeads goes there, gyreHeadsToSeq
 * back.
 * Query heads are dealt out in rank order as evenly as possible (the first
 * heads % nranks ranks take one more; with fewer heads than ranks the rest
 * take none). A rank holds the key/value heads its query heads use (grouped-
 * query attention: heads / kvHeads consecutive query heads share one), so a
 * key/value head that several ranks' query heads use is sent to each of
 * them, and gyreHeadsToSeq adds those copies up into it, in rank order (what
 * the keys' and values' gradients need; a head one rank holds is copied).
 * gyreSeqHeads says which heads a rank holds. sendbuff and recvbuff must not
 * overlap. Every rank must pass the same layout; ranks that do not fail by
 * name, every one of them. ---- */
typedef enum GYRE_ENUM_INT {
  gyreSeqQ = 1,  /* queries, or anything with one head per query head (attention's output) */
  gyreSeqK = 2,  /* keys */
  gyreSeqV = 4,  /* values */
  gyreSeqQKV = 7 /* all three, packed per token in that order */
} gyreSeqPart_t;

typedef struct {
  int heads;            /* query heads, 1 to 4095 */
  int kvHeads;          /* key/value heads, dividing heads; 0: as many as heads */
  size_t headDim;       /* elements per head, 1 to 2^20 - 1 */
  int parts;            /* the gyreSeqPart_t bits of what a token holds (OR'd) */
  size_t seqLen;        /* tokens of the whole sequence */
  const size_t* tokens; /* nranks counts (summing to seqLen; zeros allowed, each below 2^31),
                           or NULL: seqLen / nranks each (then a multiple of nranks) */
} gyreSeqLayout_t;

/* The heads `rank` of nranks holds after gyreSeqToHeads: query heads
 * [*qFirst, *qFirst + *qCount) and key/value heads [*kvFirst, *kvFirst +
 * *kvCount). Its share's width is qCount, kvCount and kvCount for the parts
 * held. Any pointer may be NULL; layout->tokens and seqLen are not read. */
GYRE_API gyreResult_t gyreSeqHeads(const gyreSeqLayout_t* layout, int nranks, int rank, int* qFirst,
                                   int* qCount, int* kvFirst, int* kvCount);
/* sendbuff [tokens[rank]][width][headDim] -> recvbuff [seqLen][share][headDim]. */
GYRE_API gyreResult_t gyreSeqToHeads(const void* sendbuff, void* recvbuff, const gyreSeqLayout_t* layout,
                                     gyreDataType_t datatype, gyreComm_t comm, gyreStream_t stream);
/* sendbuff [seqLen][share][headDim] -> recvbuff [tokens[rank]][width][headDim]; key/value
 * heads held by several ranks are summed (in rank order, as gyreAllReduce's sum adds). */
GYRE_API gyreResult_t gyreHeadsToSeq(const void* sendbuff, void* recvbuff, const gyreSeqLayout_t* layout,
                                     gyreDataType_t datatype, gyreComm_t comm, gyreStream_t stream);
GYRE_API gyreResult_t gyreIseqToHeads(const void* sendbuff, void* recvbuff, const gyreSeqLayout_t* layout,
                                      gyreDataType_t datatype, gyreComm_t comm, gyreRequest_t* request);
GYRE_API gyreResult_t gyreIheadsToSeq(const void* sendbuff, void* recvbuff, const gyreSeqLayout_t* layout,
                                      gyreDataType_t datatype, gyreComm_t comm, gyreRequest_t* request);

/* ---- Mixture of experts: expert dispatch and combine (docs/moe.md).
 * Each rank has `tokens` tokens of `hidden` elements ([tokens][hidden]) and,
 * per token, k expert ids in slot order (int32 [tokens][k]; -1: no expert
 * for that slot) among `experts` experts. Expert e lives on rank
 * expertRank[e] (NULL: experts / nranks consecutive experts per rank, in
 * rank order); a rank's local experts are those mapped to it, by id.
 * capacity: the most slots one expert takes from one source rank per call
 * (0: no limit). Over it, slot-0 choices go first in token order, then
 * slot 1, ...; the rest are dropped, counted per expert on the sender
 * (gyreMoeSendCounts) and in total per local expert on the receiver
 * (gyreMoeRecvCounts), and a dropped slot's combine output is zero.
 * A routing is made from the choices (locally: nothing is sent) and then
 * serves the dispatch, the combine and both of their backward passes.
 * Dispatch output, on the experts' rank: for each local expert, its rows
 * contiguous, grouped by source rank in rank order, each source's in its
 * priority order. Its size is known once the counts are: call
 * gyreMoeExchangeCounts first (then gyreMoeRecvCounts says the rows), or
 * size recvbuff for the most that can come (with a capacity: local experts
 * x nranks x capacity rows) and dispatch at once: the counts then travel
 * just ahead of the rows. Every rank must pass the same experts, k,
 * expert map, capacity, hidden and datatype; ranks that do not fail by
 * name, every one of them. Host memory; stream must be NULL (or
 * GYRE_STREAM_LEGACY). A routing is used by one call at a time: wait for a
 * nonblocking call before the next call with its routing. ---- */
typedef struct gyreMoeRouting* gyreMoeRouting_t;
#define GYRE_MOE_PER_SLOT 0x1 /* dispatch: sendbuff is [tokens][k][hidden], a row per slot */

GYRE_API gyreResult_t gyreMoeRoutingCreate(gyreMoeRouting_t* routing, const int32_t* choices, size_t tokens,
                                           int k, int experts, const int* expertRank, size_t capacity,
                                           gyreComm_t comm);
GYRE_API gyreResult_t gyreMoeRoutingDestroy(gyreMoeRouting_t routing);
/* Collective: every rank learns how many rows each of its experts gets
 * from each rank (what a dispatch would send first). */
GYRE_API gyreResult_t gyreMoeExchangeCounts(gyreMoeRouting_t routing, gyreComm_t comm);
/* This rank's slots, by expert (experts entries each; either may be NULL):
 * kept (sent to the expert's rank) and dropped for capacity. */
GYRE_API gyreResult_t gyreMoeSendCounts(gyreMoeRouting_t routing, size_t* sent, size_t* dropped);
/* This rank's experts (*localExperts of them; ids, if not NULL, by id). */
GYRE_API gyreResult_t gyreMoeLocalExperts(gyreMoeRouting_t routing, int* localExperts, int* ids);
/* Once the counts are known (gyreMoeExchangeCounts, or a dispatch):
 * rows[l * nranks + q], the rows local expert l gets from rank q; dropped[l],
 * the slots the ranks dropped for it; *totalRows, the dispatch's output
 * rows. Any pointer may be NULL. gyreInvalidUsage before. */
GYRE_API gyreResult_t gyreMoeRecvCounts(gyreMoeRouting_t routing, size_t* rows, size_t* dropped,
                                        size_t* totalRows);
/* sendbuff [tokens][hidden] (flags GYRE_MOE_PER_SLOT: [tokens][k][hidden])
 * -> recvbuff [recvRows][hidden], the rows in dispatch order; recvRows is
 * what recvbuff holds. With the counts known it must hold them all; with
 * the counts unknown they travel ahead, and a recvbuff found too small is
 * gyreInvalidArgument on this rank only, after the exchange (its counts are
 * then known: dispatch again). */
GYRE_API gyreResult_t gyreMoeDispatch(const void* sendbuff, void* recvbuff, size_t recvRows, size_t hidden,
                                      gyreDataType_t datatype, int flags, gyreMoeRouting_t routing,
                                      gyreComm_t comm, gyreStream_t stream);
/* The reverse: sendbuff [sendRows][hidden], the experts' rows in dispatch
 * order (sendRows: the dispatch's total), back to their tokens. weights
 * (float [tokens][k]) NULL: recvbuff [tokens][k][hidden], each slot's row
 * (zero where dropped or without an expert). Otherwise recvbuff
 * [tokens][hidden] = the sum over kept slots, in slot order, of weight x
 * row, as fused multiply-adds in float (double for gyreFloat64), rounded
 * once; floating types only. The backward of dispatch is this combine
 * (weights of 1 sum a token's slots' gradients); the backward of a
 * weighted combine is a GYRE_MOE_PER_SLOT dispatch of weight x gradient. */
GYRE_API gyreResult_t gyreMoeCombine(const void* sendbuff, size_t sendRows, void* recvbuff, const float* weights,
                                     size_t hidden, gyreDataType_t datatype, gyreMoeRouting_t routing,
                                     gyreComm_t comm, gyreStream_t stream);
GYRE_API gyreResult_t gyreImoeDispatch(const void* sendbuff, void* recvbuff, size_t recvRows, size_t hidden,
                                       gyreDataType_t datatype, int flags, gyreMoeRouting_t routing,
                                       gyreComm_t comm, gyreRequest_t* request);
GYRE_API gyreResult_t gyreImoeCombine(const void* sendbuff, size_t sendRows, void* recvbuff,
                                      const float* weights, size_t hidden, gyreDataType_t datatype,
                                      gyreMoeRouting_t routing, gyreComm_t comm, gyreRequest_t* request);

/* ---- Communicator split: ranks giving the same color form a child
 * communicator, ordered by key (then by parent rank), with no new
 * rendezvous. GYRE_SPLIT_NOCOLOR: this rank joins none (*newcomm = NULL).
 * Collective over comm. config may be NULL (the parent's settings). ---- */
#define GYRE_SPLIT_NOCOLOR (-1)
GYRE_API gyreResult_t gyreCommSplit(gyreComm_t comm, int color, int key, gyreComm_t* newcomm,
                                    gyreConfig_t* config);

/* ---- Estimates (as NCCL's ncclGroupSimulateEnd): how long a call would
 * take, by the cost model the tuner chooses algorithms with
 * (docs/collectives.md, "Tuner"), without making it. Local: nothing is
 * sent, any thread may ask. ---- */
typedef enum GYRE_ENUM_INT {
  gyreCallAllReduce = 0,
  gyreCallBroadcast = 1,
  gyreCallReduce = 2,
  gyreCallAllGather = 3,     /* count: sendcount */
  gyreCallReduceScatter = 4, /* count: recvcount */
  gyreCallAllToAll = 5,      /* count: one block */
  gyreNumCalls = 6
} gyreCall_t;

/* *microseconds = the time of one host-memory call of `call` on count
 * elements of datatype (count as that call takes it), with the algorithm
 * the tuner would choose: the cheapest by the model (GYRE_ALGO and the
 * online tuner are not consulted). The time is that call's own plans run
 * on a simulation of hosts like comm's, with the links and rates of comm's
 * model (built in, loaded or measured at its creation): what gyre-sim
 * says of the same call (docs/simulator.md); the model's own estimate
 * where a plan cannot be simulated.
 * nranks 0: over comm's own ranks. nranks >= 1: over a group of that many
 * ranks that need not exist yet (a split's child to be, or a larger job),
 * placed as comm's are: consecutive, as many to a host as comm's busiest
 * host has, on hosts like comm's. A group of one rank sends nothing: 0. */
GYRE_API gyreResult_t gyreEstimate(gyreCall_t call, size_t count, gyreDataType_t datatype,
                                   int nranks, gyreComm_t comm, double* microseconds);

/* A fixed string for a result code. */
/* What a communicator has done on this rank since it was made. */
typedef struct {
  uint64_t calls;       /* calls run (each collective, send, receive, exchange) */
  uint64_t failedCalls; /* of which ended in an error */
  uint64_t bytes;       /* the calls' bytes (each call's larger of input and output) */
  double seconds;       /* time inside those calls */
} gyreCommStats_t;
/* The communicator's statistics; sentToPeer, if not NULL, gets nranks
 * counts: the bytes this rank sent each peer (the collectives' and
 * exchanges' messages and the sends). */
GYRE_API gyreResult_t gyreCommGetStats(const gyreComm_t comm, gyreCommStats_t* stats, uint64_t* sentToPeer);
/* The transport this rank reaches peer with ("shm", "tcp", "ucx", "verbs",
 * a net plugin's name), or "" while not connected (connections are made at
 * first use) and for this rank itself; name holds size bytes. */
GYRE_API gyreResult_t gyreCommPeerTransport(const gyreComm_t comm, int peer, char* name, size_t size);

/* Reads GYRE_DEBUG and GYRE_DEBUG_FILE again, for a program that changes
 * them while it runs (NCCL's ncclResetDebugInit). */
GYRE_API void gyreResetDebugInit(void);

GYRE_API const char* gyreGetErrorString(gyreResult_t result);

/* A sentence naming what went wrong in the calling thread's last failed call
 * (which rank, which operation, which argument). comm may be NULL. */
GYRE_API const char* gyreGetLastError(gyreComm_t comm);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* GYRE_GYRE_H */
