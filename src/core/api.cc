// The C ABI: argument checks, and the translation of gyre::Error into result
// codes and the thread's last-error sentence. No exception leaves this file.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <thread>
#include <vector>

#include "base/error.h"
#include "base/log.h"
#include "bootstrap/interfaces.h"
#include "bootstrap/launch_env.h"
#include "bootstrap/root_server.h"
#include "bootstrap/unique_id.h"
#include "core/api_support.h"
#include "core/communicator.h"
#include "core/config.h"
#include "device/backend.h"
#include "gyre/gyre.h"
#include "kernels/cpu/reduce.h"
#include "transport/shm/shared_allocation.h"

namespace {

using gyre::Error;
using gyre::throwError;
using gyre::api::guarded;
using gyre::api::impl;

// Successive inits that rendezvous at a fixed address (from the launcher's
// environment, or an id made from GYRE_COMM_ID) are told apart by round; every
// rank makes the same sequence of them.
std::atomic<uint64_t> envRounds{0};

// Where an init whose rank 0 hosts the rendezvous opens it. The returned root
// lives as long as the caller keeps it (or for good, once keepAlive'd).
std::shared_ptr<gyre::bootstrap::RootServer> startRankZeroRoot(const gyre::core::InitArgs& args) {
  gyre::bootstrap::RootServer::Options o;
  o.advertise = args.id.root;
  o.secret = args.id.secret;
  o.expectRound = args.round;
  o.lifetimeMs = args.config.timeoutMs;
  // A derived secret can be guessed: then no single hello may change the
  // round (root_server.h), and rank 0 knows the job's size for it.
  o.trustClaims = !args.id.secretDerived;
  o.expectNranks = args.nranks;
  // An earlier init's failed round may still linger on this address.
  gyre::bootstrap::RootServer::releaseAddress(args.id.root);
  // Only on the address the ranks were told (MASTER_ADDR=127.0.0.1 keeps it
  // off the network); every interface only when that address is not one of
  // this host's own (a name behind NAT, a service address).
  std::shared_ptr<gyre::bootstrap::RootServer> root;
  try {
    o.bind = args.id.root;
    root = gyre::bootstrap::RootServer::start(o);
  } catch (const Error& e) {
    o.bind = gyre::bootstrap::SockAddr::any(args.id.root.family(), args.id.root.port());
    GYRE_INFO("rendezvous root: %s; listening on every interface at port %u instead", e.what(),
              args.id.root.port());
    root = gyre::bootstrap::RootServer::start(o);
  }
  // A nonblocking init outlives the call that started it; the root must too.
  if (!args.config.blocking) gyre::bootstrap::RootServer::keepAlive(root);
  return root;
}

// An init whose round failed leaves its rank-0 root to tell the ranks that
// arrive later why, until its lifetime ends (or a new init takes the address).
void lingerIfFailed(std::shared_ptr<gyre::bootstrap::RootServer>& root) {
  if (root && !root->finished()) gyre::bootstrap::RootServer::keepAlive(std::move(root));
}

// An id around a one-round root that this process serves (on a thread)
// until every rank has arrived.
void hostedUniqueId(const gyre::core::Config& cfg, gyreUniqueId* uniqueId) {
  gyre::bootstrap::RootServer::Options o;
  // On the interface the ranks will use, not every interface.
  o.advertise = gyre::bootstrap::chooseInterface(cfg.socketIfname, cfg.socketFamily).addr;
  o.bind = o.advertise;
  o.secret = gyre::bootstrap::randomSecret();
  o.persistent = false;
  o.expectRound = 0;
  o.lifetimeMs = cfg.timeoutMs;
  auto root = gyre::bootstrap::RootServer::start(o);
  gyre::bootstrap::encodeUniqueId({root->address(), root->secret()}, uniqueId);
  gyre::bootstrap::RootServer::keepAlive(std::move(root));
}

void initComm(gyreComm_t* comm, gyre::core::InitArgs& args) {
  auto c = std::make_unique<gyreComm>();
  if (args.config.blocking) {
    c->impl = gyre::core::Communicator::create(args);
    *comm = c.release();
    return;
  }
  // Nonblocking: arguments were checked above, on the caller's thread; the
  // rendezvous and connections happen on a thread of the handle's own.
  c->pending = std::make_unique<gyreComm::PendingInit>();
  gyreComm::PendingInit* p = c->pending.get();
  c->initPending.store(true, std::memory_order_release);
  p->thread = std::thread([p, args] {
    p->code = gyre::api::guarded("gyreCommInitRank",
                                 [&] { p->result = gyre::core::Communicator::create(args); });
    if (p->code != gyreSuccess) p->message = gyre::lastError();
    p->done.store(true, std::memory_order_release);
  });
  *comm = c.release();
  throwError(gyreInProgress, "the communicator is connecting in the background (blocking = 0)");
}

}  // namespace

void gyreComm::finishInit() {
  std::lock_guard<std::mutex> lock(initMu);
  if (!initPending.load(std::memory_order_acquire)) return;  // another thread did it
  pending->thread.join();
  impl = std::move(pending->result);
  initCode = pending->code;
  initMessage = std::move(pending->message);
  pending.reset();
  initPending.store(false, std::memory_order_release);
}

gyreComm::~gyreComm() {
  if (initPending.load(std::memory_order_acquire)) finishInit();
  for (Registration* r : registrations) delete r;
}

extern "C" {

gyreResult_t gyreGetVersion(int* version) {
  return guarded("gyreGetVersion", [&] {
    if (!version) throwError(gyreInvalidArgument, "version is NULL");
    *version = GYRE_VERSION_CODE;
  });
}

gyreResult_t gyreGetUniqueId(gyreUniqueId* uniqueId) {
  return guarded("gyreGetUniqueId", [&] {
    if (!uniqueId) throwError(gyreInvalidArgument, "uniqueId is NULL");
    gyre::core::Config cfg = gyre::core::Config::resolve(nullptr);
    if (const char* addr = std::getenv("GYRE_COMM_ID"); addr && *addr) {
      // A fixed rendezvous address: every process that asks gets the same id
      // (so ranks need not pass it around, as with NCCL_COMM_ID), and the
      // root opens during init: in rank 0, or already in the launcher.
      gyre::bootstrap::UniqueIdContents c;
      c.root = gyre::bootstrap::SockAddr::parse(addr, cfg.socketFamily);
      const char* secret = std::getenv("GYRE_SECRET");
      c.secret = secret && *secret
                     ? gyre::bootstrap::parseSecretHex(secret)
                     : gyre::bootstrap::deriveSecret(std::string("GYRE_COMM_ID|") + addr);
      c.secretDerived = !(secret && *secret);
      c.fromEnvironment = true;
      const char* external = std::getenv("GYRE_ROOT_EXTERNAL");
      c.rankZeroHostsRoot = !(external && std::string(external) == "1");
      gyre::bootstrap::encodeUniqueId(c, uniqueId);
      return;
    }
    hostedUniqueId(cfg, uniqueId);
  });
}

gyreResult_t gyreCommInitRankConfig(gyreComm_t* comm, int nranks, gyreUniqueId commId, int rank,
                                    gyreConfig_t* config) {
  return guarded("gyreCommInitRank", [&] {
    if (!comm) throwError(gyreInvalidArgument, "comm is NULL");
    *comm = nullptr;
    if (nranks < 1 || nranks > GYRE_MAX_RANKS)
      throwError(gyreInvalidArgument, "nranks is " + std::to_string(nranks) +
                                          "; it must be from 1 to GYRE_MAX_RANKS (" +
                                          std::to_string(GYRE_MAX_RANKS) + ")");
    if (rank < 0 || rank >= nranks)
      throwError(gyreInvalidArgument, "rank " + std::to_string(rank) + " is outside [0, " +
                                          std::to_string(nranks) + ")");
    gyre::core::InitArgs args;
    args.id = gyre::bootstrap::decodeUniqueId(commId);
    args.rank = rank;
    args.nranks = nranks;
    args.config = gyre::core::Config::resolve(config);
    std::shared_ptr<gyre::bootstrap::RootServer> root;
    if (args.id.fromEnvironment) {
      args.round = envRounds.fetch_add(1);
      if (rank == 0 && args.id.rankZeroHostsRoot) root = startRankZeroRoot(args);
    }
    try {
      initComm(comm, args);
    } catch (const Error& e) {
      if (e.code() != gyreInProgress) lingerIfFailed(root);
      throw;
    }
  });
}

gyreResult_t gyreCommInitRank(gyreComm_t* comm, int nranks, gyreUniqueId commId, int rank) {
  return gyreCommInitRankConfig(comm, nranks, commId, rank, nullptr);
}

gyreResult_t gyreCommGetJoinHandle(gyreComm_t comm, gyreJoinHandle* handle) {
  return guarded("gyreCommGetJoinHandle", [&] {
    gyre::core::Communicator& c = impl(comm);
    if (!handle) throwError(gyreInvalidArgument, "handle is NULL");
    // The larger communicator's rendezvous: a root of this process's, as
    // gyreGetUniqueId's, on the interface this communicator uses.
    gyreUniqueId rendezvous;
    hostedUniqueId(c.config(), &rendezvous);
    gyre::core::encodeJoinHandle(c.makeJoinHandle(rendezvous), handle);
  });
}

gyreResult_t gyreCommGrow(gyreComm_t comm, int newNranks, const gyreJoinHandle* handle, int newRank,
                          gyreComm_t* newcomm, const gyreConfig_t* config) {
  return guarded("gyreCommGrow", [&] {
    if (!newcomm) throwError(gyreInvalidArgument, "newcomm is NULL");
    *newcomm = nullptr;
    gyre::core::InitArgs args;
    args.nranks = newNranks;
    gyre::core::JoinHandle h;
    if (comm) {
      // A running rank: it keeps its number.
      gyre::core::Communicator& c = impl(comm);
      if (newRank != -1)
        throwError(gyreInvalidArgument, "newRank is " + std::to_string(newRank) +
                                            "; a rank of comm passes -1 (it keeps its number, " +
                                            std::to_string(c.rank()) + ")");
      // newNranks and the handle are checked after the ranks have compared
      // them, so that every rank fails alike, at once.
      h = c.agreeOnGrow(newNranks, handle);
      args.rank = c.rank();
      args.config = config ? gyre::core::Config::resolve(config) : c.config();
    } else {
      // A new process: the handle says where the running ranks' numbers end.
      if (!handle) throwError(gyreInvalidArgument, "comm and handle are both NULL: a new process passes the join handle");
      if (newNranks > GYRE_MAX_RANKS)
        throwError(gyreInvalidArgument, "newNranks is " + std::to_string(newNranks) + ", over GYRE_MAX_RANKS (" +
                                            std::to_string(GYRE_MAX_RANKS) + ")");
      h = gyre::core::decodeJoinHandle(*handle);
      if (newNranks <= h.oldNranks)
        throwError(gyreInvalidArgument, "newNranks " + std::to_string(newNranks) + " does not grow the " +
                                            std::to_string(h.oldNranks) + " ranks the join handle was made for");
      if (newRank < h.oldNranks || newRank >= newNranks)
        throwError(gyreInvalidArgument,
                   "newRank is " + std::to_string(newRank) + "; a joining process takes one of " +
                       std::to_string(h.oldNranks) + ".." + std::to_string(newNranks - 1) + " (0.." +
                       std::to_string(h.oldNranks - 1) + " are the running ranks')");
      args.rank = newRank;
      args.config = gyre::core::Config::resolve(config);
    }
    args.id = gyre::bootstrap::decodeUniqueId(h.rendezvous);
    initComm(newcomm, args);
  });
}

gyreResult_t gyreCommInitAll(gyreComm_t* comms, int ncomms, const int* devlist) {
  return guarded("gyreCommInitAll", [&] {
    if (!comms) throwError(gyreInvalidArgument, "comms is NULL");
    if (ncomms < 1 || ncomms > GYRE_MAX_RANKS)
      throwError(gyreInvalidArgument, "ncomms is " + std::to_string(ncomms) +
                                          "; it must be from 1 to GYRE_MAX_RANKS (" +
                                          std::to_string(GYRE_MAX_RANKS) + ")");
    if (devlist)
      throwError(gyreInvalidArgument, "devlist must be NULL: this gyre was built without CUDA");
    // Always a root of this process: GYRE_COMM_ID's address is for ranks in
    // several processes.
    gyreUniqueId id;
    hostedUniqueId(gyre::core::Config::resolve(nullptr), &id);
    // Every rank's init waits for the others, so each needs a thread.
    std::vector<gyreResult_t> results(static_cast<size_t>(ncomms), gyreSuccess);
    std::vector<std::string> messages(static_cast<size_t>(ncomms));
    std::vector<std::thread> threads;
    for (int r = 0; r < ncomms; ++r)
      threads.emplace_back([&, r] {
        results[static_cast<size_t>(r)] = gyreCommInitRank(&comms[r], ncomms, id, r);
        if (results[static_cast<size_t>(r)] != gyreSuccess)
          messages[static_cast<size_t>(r)] = gyre::lastError();
      });
    for (std::thread& t : threads) t.join();
    for (int r = 0; r < ncomms; ++r) {
      if (results[static_cast<size_t>(r)] == gyreSuccess) continue;
      for (int k = 0; k < ncomms; ++k) {
        if (comms[k]) gyreCommDestroy(comms[k]);
        comms[k] = nullptr;
      }
      throwError(results[static_cast<size_t>(r)],
                 "rank " + std::to_string(r) + ": " + messages[static_cast<size_t>(r)]);
    }
  });
}

gyreResult_t gyreCommInitFromEnv(gyreComm_t* comm, gyreConfig_t* config) {
  return guarded("gyreCommInitFromEnv", [&] {
    if (!comm) throwError(gyreInvalidArgument, "comm is NULL");
    *comm = nullptr;
    gyre::bootstrap::LaunchEnv env = gyre::bootstrap::detectLaunchEnv();
    gyre::core::InitArgs args;
    args.config = gyre::core::Config::resolve(config);
    args.rank = env.rank;
    args.nranks = env.nranks;
    args.round = envRounds.fetch_add(1);
    args.id.root = gyre::bootstrap::SockAddr::parse(env.rootAddress, args.config.socketFamily);
    args.id.secret = env.secret;
    args.id.secretDerived = env.secretDerived;
    args.id.rankZeroHostsRoot = !env.rootExternal;
    args.id.fromEnvironment = true;  // its root opens at init: it may not be up yet
    std::shared_ptr<gyre::bootstrap::RootServer> root;
    if (env.rank == 0 && !env.rootExternal) root = startRankZeroRoot(args);
    GYRE_INFO("init from %s environment: rank %d of %d, root %s, secret %s", env.source.c_str(), env.rank,
              env.nranks, env.rootAddress.c_str(), env.secretSource.c_str());
    try {
      initComm(comm, args);
    } catch (const Error& e) {
      if (e.code() != gyreInProgress) lingerIfFailed(root);
      throw;
    }
  });
}

gyreResult_t gyreCommFinalize(gyreComm_t comm) {
  return guarded("gyreCommFinalize", [&] { impl(comm).finalize(); });
}

gyreResult_t gyreCommDestroy(gyreComm_t comm) {
  return guarded("gyreCommDestroy", [&] {
    if (!comm) throwError(gyreInvalidArgument, "comm is NULL");
    delete comm;
  });
}

gyreResult_t gyreCommAbort(gyreComm_t comm) {
  return guarded("gyreCommAbort", [&] {
    if (!comm) throwError(gyreInvalidArgument, "comm is NULL");
    if (comm->impl) comm->impl->abort();
    delete comm;
  });
}

gyreResult_t gyreCommGetStats(const gyreComm_t comm, gyreCommStats_t* stats, uint64_t* sentToPeer) {
  return guarded("gyreCommGetStats", [&] {
    if (!stats) throwError(gyreInvalidArgument, "stats is NULL");
    const gyre::core::Communicator::Stats s = impl(comm).stats();
    stats->calls = s.calls;
    stats->failedCalls = s.failed;
    stats->bytes = s.bytes;
    stats->seconds = s.seconds;
    if (sentToPeer) std::copy(s.sentToPeer.begin(), s.sentToPeer.end(), sentToPeer);
  });
}

gyreResult_t gyreCommPeerTransport(const gyreComm_t comm, int peer, char* name, size_t size) {
  return guarded("gyreCommPeerTransport", [&] {
    gyre::core::Communicator& c = impl(comm);
    if (!name || size == 0) throwError(gyreInvalidArgument, "name is NULL or size is 0");
    if (peer < 0 || peer >= c.nranks())
      throwError(gyreInvalidArgument, "peer " + std::to_string(peer) + " is not a rank of the communicator (0.." +
                                          std::to_string(c.nranks() - 1) + ")");
    const std::string t = c.peerTransport(peer);
    if (t.size() + 1 > size)
      throwError(gyreInvalidArgument, "size " + std::to_string(size) + " is too small for \"" + t + "\"");
    std::memcpy(name, t.c_str(), t.size() + 1);
  });
}

gyreResult_t gyreCommRevoke(gyreComm_t comm, int flags) {
  return guarded("gyreCommRevoke", [&] {
    if (flags != GYRE_REVOKE_DEFAULT)
      throwError(gyreInvalidArgument, "flags " + std::to_string(flags) +
                                          " (gyreCommRevoke takes GYRE_REVOKE_DEFAULT, 0)");
    impl(comm).revoke();
  });
}

gyreResult_t gyreCommGetAsyncError(gyreComm_t comm, gyreResult_t* asyncError) {
  return guarded("gyreCommGetAsyncError", [&] {
    if (!asyncError) throwError(gyreInvalidArgument, "asyncError is NULL");
    if (!comm) throwError(gyreInvalidArgument, "comm is NULL");
    if (comm->initPending.load(std::memory_order_acquire)) {
      {
        std::lock_guard<std::mutex> lock(comm->initMu);
        if (comm->pending && !comm->pending->done.load(std::memory_order_acquire)) {
          *asyncError = gyreInProgress;
          return;
        }
      }
      comm->finishInit();
    }
    if (!comm->impl && comm->initCode != gyreSuccess) {
      // The init's own failure, explained to this thread.
      *asyncError = comm->initCode;
      gyre::setLastError(comm->initMessage);
      return;
    }
    *asyncError = impl(comm).asyncError();
  });
}

gyreResult_t gyreCommCount(const gyreComm_t comm, int* count) {
  return guarded("gyreCommCount", [&] {
    if (!count) throwError(gyreInvalidArgument, "count is NULL");
    *count = impl(comm).nranks();
  });
}

gyreResult_t gyreCommUserRank(const gyreComm_t comm, int* rank) {
  return guarded("gyreCommUserRank", [&] {
    if (!rank) throwError(gyreInvalidArgument, "rank is NULL");
    *rank = impl(comm).rank();
  });
}

gyreResult_t gyreCommDevice(const gyreComm_t comm, int* device) {
  return guarded("gyreCommDevice", [&] {
    if (!device) throwError(gyreInvalidArgument, "device is NULL");
    *device = impl(comm).device();  // -1 without a GPU
  });
}

namespace {

// Memory local peers can map, so single-copy algorithms copy from it at
// memory speed instead of through the kernel; ordinary page-aligned memory
// where memfds are unavailable. A zero size still gives a pointer that can
// be freed.
void* allocateHostBuffer(size_t size) {
  void* p = gyre::transport::shm::allocateShared(size);
  if (!p)
    if (int err = posix_memalign(&p, 4096, size ? size : 1))
      gyre::throwSystemError("posix_memalign(" + std::to_string(size) + " bytes)", err);
  return p;
}

}  // namespace

gyreResult_t gyreMemAlloc(void** ptr, size_t size) {
  return guarded("gyreMemAlloc", [&] {
    if (!ptr) throwError(gyreInvalidArgument, "ptr is NULL");
    *ptr = nullptr;
    // Device memory where the calling thread has a GPU, as ncclMemAlloc.
    gyre::device::Backend* b = gyre::device::backend();
    if (b && b->currentDevice() >= 0) {
      *ptr = b->allocateShareable(size, b->currentDevice());
      return;
    }
    *ptr = allocateHostBuffer(size);
  });
}

gyreResult_t gyreMemAllocHost(void** ptr, size_t size) {
  return guarded("gyreMemAllocHost", [&] {
    if (!ptr) throwError(gyreInvalidArgument, "ptr is NULL");
    *ptr = nullptr;
    *ptr = allocateHostBuffer(size);
  });
}

gyreResult_t gyreMemFree(void* ptr) {
  return guarded("gyreMemFree", [&] {
    if (!ptr) return;
    gyre::device::Backend* b = gyre::device::backend();
    if (b && b->classify(ptr).kind == gyre::device::MemoryKind::Device) return b->free(ptr);
    if (!gyre::transport::shm::freeShared(ptr)) std::free(ptr);
  });
}

gyreResult_t gyreCommRegister(const gyreComm_t comm, void* buff, size_t size, void** handle) {
  return guarded("gyreCommRegister", [&] {
    impl(comm);
    if (!handle) throwError(gyreInvalidArgument, "handle is NULL");
    *handle = nullptr;
    if (!buff && size) throwError(gyreInvalidArgument, "buff is NULL");
    auto r = std::make_unique<gyreComm::Registration>(gyreComm::Registration{buff, size});
    std::lock_guard<std::mutex> lock(comm->regMu);
    comm->registrations.insert(r.get());
    *handle = r.release();
  });
}

gyreResult_t gyreCommDeregister(const gyreComm_t comm, void* handle) {
  return guarded("gyreCommDeregister", [&] {
    impl(comm);
    auto* r = static_cast<gyreComm::Registration*>(handle);
    std::lock_guard<std::mutex> lock(comm->regMu);
    if (!comm->registrations.erase(r))
      throwError(gyreInvalidArgument,
                 "handle was not made by gyreCommRegister on this communicator");
    delete r;
  });
}

void gyreResetDebugInit(void) { gyre::log::reload(); }

const char* gyreGetErrorString(gyreResult_t result) { return gyre::resultString(result); }

const char* gyreGetLastError(gyreComm_t) { return gyre::lastError(); }

}  // extern "C"
