// The C ABI: argument checks, and the translation of gyre::Error into result
// codes and the thread's last-error sentence. No exception leaves this file.
#include <cstdint>
#include <cstring>
#include <new>

#include "bootstrap/interfaces.h"
#include "bootstrap/launch_env.h"
#include "bootstrap/root_server.h"
#include "bootstrap/unique_id.h"
#include "core/api_support.h"
#include "core/communicator.h"
#include "core/config.h"
#include "core/error.h"
#include "core/log.h"
#include "gyre/gyre.h"
#include "kernels/cpu/reduce.h"

namespace {

using gyre::Error;
using gyre::throwError;
using gyre::api::guarded;
using gyre::api::impl;

gyre::bootstrap::SockAddr rootListenAddress(const gyre::core::Config& cfg,
                                            gyre::bootstrap::SockAddr& advertise) {
  if (const char* id = std::getenv("GYRE_COMM_ID"); id && *id) {
    advertise = gyre::bootstrap::SockAddr::parse(id, cfg.socketFamily);
    return gyre::bootstrap::SockAddr::any(advertise.family(), advertise.port());
  }
  gyre::bootstrap::NetInterface nic =
      gyre::bootstrap::chooseInterface(cfg.socketIfname, cfg.socketFamily);
  advertise = nic.addr;
  return gyre::bootstrap::SockAddr::any(nic.addr.family(), 0);
}

void initComm(gyreComm_t* comm, gyre::core::InitArgs& args) {
  auto c = std::make_unique<gyreComm>();
  c->impl = gyre::core::Communicator::create(args);
  *comm = c.release();
}

}  // namespace

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
    gyre::bootstrap::RootServer::Options o;
    o.bind = rootListenAddress(cfg, o.advertise);
    o.secret = gyre::bootstrap::randomSecret();
    o.persistent = false;
    o.expectRound = 0;
    o.lifetimeMs = cfg.timeoutMs;
    auto root = gyre::bootstrap::RootServer::start(o);
    gyre::bootstrap::encodeUniqueId({root->address(), root->secret()}, uniqueId);
    gyre::bootstrap::RootServer::keepAlive(std::move(root));
  });
}

gyreResult_t gyreCommInitRankConfig(gyreComm_t* comm, int nranks, gyreUniqueId commId, int rank,
                                    gyreConfig_t* config) {
  return guarded("gyreCommInitRank", [&] {
    if (!comm) throwError(gyreInvalidArgument, "comm is NULL");
    *comm = nullptr;
    if (nranks < 1)
      throwError(gyreInvalidArgument,
                 "nranks is " + std::to_string(nranks) + "; it must be at least 1");
    if (rank < 0 || rank >= nranks)
      throwError(gyreInvalidArgument, "rank " + std::to_string(rank) + " is outside [0, " +
                                          std::to_string(nranks) + ")");
    gyre::core::InitArgs args;
    args.id = gyre::bootstrap::decodeUniqueId(commId);
    args.rank = rank;
    args.nranks = nranks;
    args.config = gyre::core::Config::resolve(config);
    initComm(comm, args);
  });
}

gyreResult_t gyreCommInitRank(gyreComm_t* comm, int nranks, gyreUniqueId commId, int rank) {
  return gyreCommInitRankConfig(comm, nranks, commId, rank, nullptr);
}

gyreResult_t gyreCommInitFromEnv(gyreComm_t* comm, gyreConfig_t* config) {
  static std::atomic<uint64_t> envRounds{0};  // successive env inits rendezvous separately
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
    std::shared_ptr<gyre::bootstrap::RootServer> root;
    if (env.rank == 0 && !env.rootExternal) {
      gyre::bootstrap::RootServer::Options o;
      o.bind = gyre::bootstrap::SockAddr::any(args.id.root.family(), args.id.root.port());
      o.advertise = args.id.root;
      o.secret = env.secret;
      o.expectRound = args.round;
      o.lifetimeMs = args.config.timeoutMs;
      root = gyre::bootstrap::RootServer::start(o);
    }
    GYRE_INFO("init from %s environment: rank %d of %d, root %s", env.source.c_str(), env.rank,
              env.nranks, env.rootAddress.c_str());
    initComm(comm, args);
  });
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

gyreResult_t gyreCommGetAsyncError(gyreComm_t comm, gyreResult_t* asyncError) {
  return guarded("gyreCommGetAsyncError", [&] {
    if (!asyncError) throwError(gyreInvalidArgument, "asyncError is NULL");
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

const char* gyreGetErrorString(gyreResult_t result) { return gyre::resultString(result); }

const char* gyreGetLastError(gyreComm_t) { return gyre::lastError(); }

}  // extern "C"
