// NCCL net plugins under gyre: the loader through each ABI version (v8 to
// v12, one test build of gyre's socket plugin per version), plugins that
// cannot be used (not found, too old, init fails, no devices, too few comms,
// too small a transfer, no host memory, a device that is not there) named on
// every rank with the built-in transports taking over, a plugin failing mid
// call, and ranks of two hosts using shared memory within a host and the
// plugin across.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/error.h"
#include "tests/support/multiprocess.h"
#include "transport/net/net_plugin.h"

namespace gyre::test {
namespace {

using transport::NetPlugin;

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

std::string versionBuild(int v) {
  return std::string(GYRE_TEST_NET_PLUGIN_DIR) + "/libgyre-net-socket-test-v" + std::to_string(v) + ".so";
}

class PluginVersion : public testing::TestWithParam<int> {};

// One process, both ends: listen, connect and accept without blocking,
// then messages of several sizes (empty, odd, larger than a socket's
// buffer) arrive whole and in order with their sizes.
TEST_P(PluginVersion, LoadsConnectsAndCarriesMessages) {
  unsetenv("GYRE_TEST_NET_FAULT");
  std::unique_ptr<NetPlugin> p = NetPlugin::load(versionBuild(GetParam()));
  EXPECT_EQ(p->version(), GetParam());
  EXPECT_EQ(p->name(), "gyre-socket");
  ASSERT_GE(p->devices(), 1);
  const transport::NetDeviceProperties props = p->properties(0);
  EXPECT_FALSE(props.name.empty());
  EXPECT_TRUE(props.ptrSupport & netabi::kPtrHost);
  EXPECT_GT(props.maxTransferBytes, size_t(1) << 20);

  std::vector<uint8_t> handle(netabi::kHandleMaxBytes);
  void* listen = p->listen(0, handle.data());
  void *send = nullptr, *recv = nullptr;
  const Deadline d = Deadline::afterMs(20000);
  while ((!send || !recv) && !d.expired()) {
    if (!send) send = p->connect(0, handle.data());
    if (!recv) recv = p->accept(listen);
  }
  ASSERT_TRUE(send && recv) << "no connection";

  const std::vector<size_t> sizes = {0, 1, 4093, 3 << 20};
  std::vector<std::vector<uint8_t>> out, in;
  std::vector<void*> sends, recvs, outMr, inMr;
  for (size_t i = 0; i < sizes.size(); ++i) {
    out.emplace_back(sizes[i] + 1);
    in.emplace_back(sizes[i] + 64, 0xee);  // room beyond the message
    for (size_t j = 0; j < out[i].size(); ++j) out[i][j] = static_cast<uint8_t>(i * 31 + j * 7);
    outMr.push_back(p->registerMemory(send, out[i].data(), out[i].size()));
    inMr.push_back(p->registerMemory(recv, in[i].data(), in[i].size()));
  }
  // Receives first for half, sends first for the other half: either order works.
  for (size_t i = 0; i < sizes.size(); ++i) {
    void* r = nullptr;
    void* s = nullptr;
    while (!(r = p->irecv(recv, in[i].data(), in[i].size(), 0, inMr[i]))) {
    }
    while (!(s = p->isend(send, out[i].data(), sizes[i], 0, outMr[i]))) {
    }
    recvs.push_back(r);
    sends.push_back(s);
  }
  for (size_t i = 0; i < sizes.size(); ++i) {
    size_t got = 0;
    // A large message needs the receive side driven while the send waits.
    const Deadline dd = Deadline::afterMs(20000);
    bool sent = false, received = false;
    while ((!sent || !received) && !dd.expired()) {
      if (!sent) sent = p->test(sends[i], nullptr);
      if (!received) received = p->test(recvs[i], &got);
    }
    ASSERT_TRUE(sent && received) << "message " << i << " did not complete";
    EXPECT_EQ(got, sizes[i]) << "message " << i;
    EXPECT_EQ(std::memcmp(in[i].data(), out[i].data(), sizes[i]), 0) << "message " << i;
    EXPECT_EQ(in[i][sizes[i]], 0xee) << "message " << i << " wrote past its end";
  }
  for (size_t i = 0; i < sizes.size(); ++i) {
    p->deregisterMemory(send, outMr[i]);
    p->deregisterMemory(recv, inMr[i]);
  }
  p->closeSend(send);
  p->closeRecv(recv);
  p->closeListen(listen);
}

INSTANTIATE_TEST_SUITE_P(Abi, PluginVersion, testing::Values(8, 9, 10, 11, 12),
                         [](const testing::TestParamInfo<int>& i) { return "v" + std::to_string(i.param); });

std::string loadError(const std::string& spec) {
  try {
    NetPlugin::load(spec);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(PluginLoader, RefusesWhatItCannotUseByName) {
  unsetenv("GYRE_TEST_NET_FAULT");
  std::string e = loadError("/nonexistent/libnccl-net-x.so");
  EXPECT_TRUE(contains(e, "GYRE_NET_PLUGIN=/nonexistent/libnccl-net-x.so") && contains(e, "cannot load")) << e;
  e = loadError("nosuch");
  EXPECT_TRUE(contains(e, "libgyre-net-nosuch.so") && contains(e, "libnccl-net-nosuch.so")) << e;
  e = loadError(GYRE_TEST_NET_OLD_PLUGIN);
  EXPECT_TRUE(contains(e, "has v7 only") && contains(e, "ncclNetPlugin_v8 to _v12")) << e;
  setenv("GYRE_TEST_NET_FAULT", "init", 1);
  e = loadError(GYRE_TEST_NET_PLUGIN);
  EXPECT_TRUE(contains(e, "init failed (system error)") && contains(e, "gyre-socket")) << e;
  unsetenv("GYRE_TEST_NET_FAULT");
}

// ---- through communicators: real ranks ----

struct PluginSetup {
  const char* transport = "auto";
  const char* plugin = GYRE_TEST_NET_PLUGIN;
  const char* fault = nullptr;  // GYRE_TEST_NET_FAULT, on every rank
  const char* device = nullptr;
  bool twoHosts = true;  // ranks 0..n/2-1 on one host, the rest on another
};

gyreResult_t initWith(const PluginSetup& s, int rank, int n, const gyreUniqueId& id, gyreComm_t* comm) {
  if (s.plugin) setenv("GYRE_NET_PLUGIN", s.plugin, 1);
  if (s.fault) setenv("GYRE_TEST_NET_FAULT", s.fault, 1);
  if (s.device) setenv("GYRE_NET_DEVICE", s.device, 1);
  if (s.twoHosts) setenv("GYRE_HOSTID", rank < n / 2 ? "host-a" : "host-b", 1);
  gyreConfig_t cfg = GYRE_CONFIG_INITIALIZER;
  cfg.transport = s.transport;
  cfg.timeoutMs = 20000;
  return gyreCommInitRankConfig(comm, n, id, rank, &cfg);
}

// An AllReduce whose result is checked exactly.
bool allReduceIsExact(gyreComm_t comm, int rank, int n, Checker& check) {
  std::vector<int32_t> v(100000);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int32_t>(i % 1000) * (rank + 1);
  if (!check.expectOk(gyreAllReduce(v.data(), v.data(), v.size(), gyreInt32, gyreSum, comm, nullptr), "allreduce"))
    return false;
  const int32_t factor = n * (n + 1) / 2;
  for (size_t i = 0; i < v.size(); ++i)
    if (v[i] != static_cast<int32_t>(i % 1000) * factor) return check.expect(false, "allreduce result at " + std::to_string(i));
  return true;
}

// A plugin that cannot be used: with GYRE_TRANSPORT=auto every rank warns,
// naming why, and runs over the built-in transports; with GYRE_TRANSPORT=net
// every rank's init fails naming it.
void expectUnusable(int n, PluginSetup s, const std::string& why) {
  for (const char* transport : {"auto", "net"}) {
    s.transport = transport;
    RunOutcome out = runRanks(n, [&](int rank, int nranks, const gyreUniqueId& id) {
      Checker check(rank);
      gyreComm_t comm = nullptr;
      const gyreResult_t r = initWith(s, rank, nranks, id, &comm);
      const std::string msg = gyreGetLastError(nullptr);
      if (std::string(transport) == "auto") {
        if (!check.expectOk(r, "init falls back to the built-in transports")) return 1;
        allReduceIsExact(comm, rank, nranks, check);
        check.expectOk(gyreCommDestroy(comm), "destroy");
      } else {
        check.expect(r == gyreInvalidArgument || r == gyreRemoteError,
                     std::string("init must fail: ") + gyreGetErrorString(r) + ": " + msg);
        check.expect(contains(msg, why) && contains(msg, "GYRE_TRANSPORT=net"), "the message names it: " + msg);
      }
      return check.failures();
    });
    EXPECT_FALSE(out.timedOut) << out.describe();
    EXPECT_TRUE(out.allSucceeded()) << transport << ": " << out.describe();
    if (std::string(transport) != "auto") continue;
    for (const RankOutcome& r : out.ranks)
      EXPECT_TRUE(contains(r.output, "the net plugin is not used") && contains(r.output, why))
          << "rank " << r.rank << " did not say why the plugin is not used:\n" << r.output;
  }
}

TEST(PluginFallback, NoDevices) { expectUnusable(2, PluginSetup{.fault = "nodevices"}, "reports no network devices"); }
TEST(PluginFallback, TooFewComms) {
  expectUnusable(3, PluginSetup{.fault = "onecomm"}, "allows 1 comms; this communicator of 3 ranks needs 4");
}
TEST(PluginFallback, TransfersTooSmall) {
  expectUnusable(2, PluginSetup{.fault = "smalltransfers"}, "carries at most 1000 bytes per message");
}
TEST(PluginFallback, NoHostMemory) { expectUnusable(2, PluginSetup{.fault = "cudaonly"}, "cannot send from host memory"); }
TEST(PluginFallback, DeviceNotThere) {
  expectUnusable(2, PluginSetup{.device = "7"}, "GYRE_NET_DEVICE=7, but");
}
TEST(PluginFallback, InitFails) { expectUnusable(2, PluginSetup{.fault = "init"}, "init failed (system error)"); }
TEST(PluginFallback, NotFound) {
  expectUnusable(2, PluginSetup{.plugin = "/nonexistent/libnccl-net-gone.so"}, "cannot load the plugin");
}
TEST(PluginFallback, TooOld) { expectUnusable(2, PluginSetup{.plugin = GYRE_TEST_NET_OLD_PLUGIN}, "has v7 only"); }

// Four ranks on two hosts, auto: shared memory to the host mate, the
// plugin to the other host (as NCCL's NET), checked in the log and exactly.
TEST(PluginAcrossHosts, SharedMemoryWithinAHostAndThePluginAcross) {
  RunOutcome out = runRanks(4, [&](int rank, int n, const gyreUniqueId& id) {
    setenv("GYRE_DEBUG", "INFO", 1);
    Checker check(rank);
    gyreComm_t comm = nullptr;
    if (!check.expectOk(initWith(PluginSetup{}, rank, n, id, &comm), "init")) return 1;
    for (int i = 0; i < 3; ++i) allReduceIsExact(comm, rank, n, check);
    std::vector<float> b(4096, rank == 2 ? 2.5f : 0.0f);
    check.expectOk(gyreBroadcast(b.data(), b.data(), b.size(), gyreFloat32, 2, comm, nullptr), "broadcast");
    check.expect(b[0] == 2.5f && b[4095] == 2.5f, "broadcast from the other host");
    check.expectOk(gyreCommDestroy(comm), "destroy");
    return check.failures();
  });
  EXPECT_TRUE(out.allSucceeded()) << out.describe();
  for (const RankOutcome& r : out.ranks)
    EXPECT_TRUE(contains(r.output, "shm to 1 peer") && contains(r.output, "net to 2 peers"))
        << "rank " << r.rank << ":\n" << r.output;
}

// The plugin fails mid-call on rank 1 (its isend after 50): rank 1 fails
// naming the plugin's call, rank 0 fails naming rank 1; nobody hangs.
TEST(PluginErrors, AFailingSendFailsTheCallOnEveryRank) {
  RunOutcome out = runRanks(2, [&](int rank, int n, const gyreUniqueId& id) {
    Checker check(rank);
    PluginSetup s;
    s.transport = "net";
    s.fault = rank == 1 ? "sendfail:50" : nullptr;
    gyreComm_t comm = nullptr;
    if (!check.expectOk(initWith(s, rank, n, id, &comm), "init")) return 1;
    std::vector<float> v(1 << 20, 1.0f);
    gyreResult_t r = gyreSuccess;
    for (int i = 0; i < 200 && r == gyreSuccess; ++i)
      r = gyreAllReduce(v.data(), v.data(), v.size(), gyreFloat32, gyreSum, comm, nullptr);
    const std::string msg = gyreGetLastError(comm);
    check.expect(r != gyreSuccess, "the plugin's failure must fail the call");
    if (rank == 1)
      check.expect(contains(msg, "isend failed (system error)") && contains(msg, "gyre-socket"),
                   "rank 1 names the plugin's call: " + msg);
    else
      check.expect(r == gyreRemoteError && contains(msg, "rank 1"), "rank 0 names rank 1: " + msg);
    gyreCommDestroy(comm);
    return check.failures();
  });
  EXPECT_FALSE(out.timedOut) << out.describe();
  EXPECT_TRUE(out.allSucceeded()) << out.describe();
}

// Rank 1's plugin reports each receive over 4 KiB as 64 bytes larger than
// the slot it was given (GYRE_TEST_NET_FAULT=oversize): rank 1 fails
// naming the plugin's report, not a mismatch of the ranks' calls (which a
// header agreeing with that size used to pass for); rank 0 names rank 1.
TEST(PluginErrors, AReceiveLargerThanItsSlotFailsTheCallNamingThePlugin) {
  RunOutcome out = runRanks(2, [&](int rank, int n, const gyreUniqueId& id) {
    Checker check(rank);
    PluginSetup s;
    s.transport = "net";
    s.fault = rank == 1 ? "oversize" : nullptr;
    gyreComm_t comm = nullptr;
    if (!check.expectOk(initWith(s, rank, n, id, &comm), "init")) return 1;
    std::vector<float> v(1 << 20, 1.0f);
    const gyreResult_t r = gyreAllReduce(v.data(), v.data(), v.size(), gyreFloat32, gyreSum, comm, nullptr);
    const std::string msg = gyreGetLastError(comm);
    check.expect(r != gyreSuccess, "the plugin's report must fail the call");
    if (rank == 1)
      check.expect(r == gyreSystemError && contains(msg, "gyre-socket") && contains(msg, "into a slot of") &&
                       !contains(msg, "mismatch") && !contains(msg, "called"),
                   "rank 1 names its plugin's report: " + msg);
    else
      check.expect(r == gyreRemoteError && contains(msg, "rank 1"), "rank 0 names rank 1: " + msg);
    gyreCommDestroy(comm);
    return check.failures();
  });
  EXPECT_FALSE(out.timedOut) << out.describe();
  EXPECT_TRUE(out.allSucceeded()) << out.describe();
}

TEST(PluginErrors, SettingsThatCannotWork) {
  RunOutcome out = runRanks(2, [&](int rank, int n, const gyreUniqueId& id) {
    Checker check(rank);
    PluginSetup s;
    s.plugin = rank == 0 ? GYRE_TEST_NET_PLUGIN : nullptr;  // one rank only
    gyreComm_t comm = nullptr;
    gyreResult_t r = initWith(s, rank, n, id, &comm);
    std::string msg = gyreGetLastError(nullptr);
    check.expect(r == gyreInvalidUsage && contains(msg, "GYRE_NET_PLUGIN"), "a plugin on one rank only: " + msg);
    return check.failures();
  });
  EXPECT_TRUE(out.allSucceeded()) << out.describe();
  out = runRanks(2, [&](int rank, int n, const gyreUniqueId& id) {
    Checker check(rank);
    unsetenv("GYRE_NET_PLUGIN");
    PluginSetup s;
    s.transport = "net";
    s.plugin = nullptr;
    gyreComm_t comm = nullptr;
    gyreResult_t r = initWith(s, rank, n, id, &comm);
    std::string msg = gyreGetLastError(nullptr);
    check.expect(r == gyreInvalidArgument || r == gyreRemoteError, "net without a plugin must fail");
    check.expect(contains(msg, "GYRE_TRANSPORT=net needs GYRE_NET_PLUGIN"), "names what is missing: " + msg);
    return check.failures();
  });
  EXPECT_TRUE(out.allSucceeded()) << out.describe();
}

}  // namespace
}  // namespace gyre::test
