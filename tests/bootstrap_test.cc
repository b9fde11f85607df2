// Unit tests of the bootstrap layer: addresses, interface choice, ids and
// secrets, launcher environments, configuration parsing, and the root's
// refusal of connections without the secret.
#include "bootstrap/bootstrap.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <thread>

#include "base/error.h"
#include "base/parse.h"
#include "bootstrap/interfaces.h"
#include "bootstrap/launch_env.h"
#include "bootstrap/peer_liveness.h"
#include "bootstrap/rendezvous_protocol.h"
#include "bootstrap/root_server.h"
#include "bootstrap/unique_id.h"
#include "core/config.h"
#include "tests/support/error_of.h"

namespace gyre::bootstrap {
namespace {

using test::errorOf;

// Sets variables for one test and restores the previous environment.
class ScopedEnv {
 public:
  ScopedEnv(std::initializer_list<std::pair<const char*, const char*>> vars) {
    for (const char* name : kLauncherVars) save(name);
    for (const char* name : kLauncherVars) unsetenv(name);
    for (auto& [k, v] : vars) {
      save(k);
      setenv(k, v, 1);
    }
  }
  ~ScopedEnv() {
    for (auto& [k, v] : saved_) {
      if (v.first)
        setenv(k.c_str(), v.second.c_str(), 1);
      else
        unsetenv(k.c_str());
    }
  }

 private:
  void save(const char* k) {
    if (saved_.count(k)) return;
    const char* v = getenv(k);
    saved_[k] = {v != nullptr, v ? v : ""};
  }
  static constexpr const char* kLauncherVars[] = {"GYRE_RANK",
                                                  "GYRE_WORLD_SIZE",
                                                  "GYRE_COMM_ID",
                                                  "GYRE_SECRET",
                                                  "GYRE_LOCAL_RANK",
                                                  "GYRE_ROOT_EXTERNAL",
                                                  "RANK",
                                                  "WORLD_SIZE",
                                                  "MASTER_ADDR",
                                                  "MASTER_PORT",
                                                  "LOCAL_RANK",
                                                  "LOCAL_WORLD_SIZE",
                                                  "OMPI_COMM_WORLD_RANK",
                                                  "OMPI_COMM_WORLD_SIZE",
                                                  "OMPI_COMM_WORLD_LOCAL_RANK",
                                                  "OMPI_COMM_WORLD_LOCAL_SIZE",
                                                  "OMPI_MCA_ess_base_jobid",
                                                  "PMIX_NAMESPACE",
                                                  "SLURM_PROCID",
                                                  "SLURM_NTASKS",
                                                  "SLURM_LOCALID",
                                                  "SLURM_JOB_NODELIST",
                                                  "SLURM_NODELIST",
                                                  "SLURM_JOB_ID",
                                                  "SLURM_STEP_ID",
                                                  "TORCHELASTIC_RUN_ID"};
  std::map<std::string, std::pair<bool, std::string>> saved_;
};

TEST(Interfaces, NcclStyleSpecs) {
  EXPECT_TRUE(interfaceMatches("eth", "eth0"));
  EXPECT_TRUE(interfaceMatches("eth,ib", "ib1"));
  EXPECT_FALSE(interfaceMatches("eth,ib", "lo"));
  EXPECT_FALSE(interfaceMatches("^eth", "eth3"));
  EXPECT_TRUE(interfaceMatches("^eth", "lo"));
  EXPECT_TRUE(interfaceMatches("=eth0", "eth0"));
  EXPECT_FALSE(interfaceMatches("=eth0", "eth01"));
  EXPECT_FALSE(interfaceMatches("^=eth0", "eth0"));
  EXPECT_TRUE(interfaceMatches("^=eth0", "eth01"));
}

TEST(Interfaces, ChoiceAndErrors) {
  NetInterface lo = chooseInterface("lo", 0);
  EXPECT_TRUE(lo.loopback);
  std::string msg = errorOf([] { chooseInterface("=nosuchif9", 0); });
  EXPECT_NE(msg.find("GYRE_SOCKET_IFNAME="), std::string::npos) << msg;
  EXPECT_NE(msg.find("lo"), std::string::npos) << "lists what exists: " << msg;
  NetInterface any = chooseInterface("", 0);
  EXPECT_NE(any.addr.family(), 0);
}

TEST(SockAddr, ParsesHostPortForms) {
  EXPECT_EQ(SockAddr::parse("127.0.0.1:80").str(), "127.0.0.1:80");
  EXPECT_EQ(SockAddr::parse("[::1]:90").str(), "[::1]:90");
  EXPECT_EQ(SockAddr::parse("localhost:7", AF_INET).port(), 7);
  EXPECT_TRUE(SockAddr::parse("127.0.0.1").isLoopback());
  EXPECT_NE(errorOf([] { SockAddr::parse("127.0.0.1:99999"); }).find("port"), std::string::npos);
  EXPECT_NE(errorOf([] { SockAddr::parse("[::1"); }), "");
  EXPECT_NE(errorOf([] { SockAddr::parse("no.such.host.invalid:1"); }).find("resolve"),
            std::string::npos);
  uint8_t packed[SockAddr::kPackedBytes];
  SockAddr a = SockAddr::parse("[::1]:5000");
  a.pack(packed);
  EXPECT_EQ(SockAddr::unpack(packed).str(), "[::1]:5000");
}

TEST(UniqueId, RoundTripsAndRejectsGarbage) {
  UniqueIdContents c{SockAddr::parse("10.1.2.3:4567"), randomSecret()};
  gyreUniqueId id;
  encodeUniqueId(c, &id);
  UniqueIdContents d = decodeUniqueId(id);
  EXPECT_EQ(d.root.str(), "10.1.2.3:4567");
  EXPECT_TRUE(secretsEqual(c.secret, d.secret));
  std::memset(&id, 0, sizeof(id));
  EXPECT_NE(errorOf([&] { decodeUniqueId(id); }).find("unique id"), std::string::npos);
}

TEST(Secrets, HexRoundTripAndValidation) {
  Secret s = randomSecret();
  EXPECT_TRUE(secretsEqual(parseSecretHex(secretHex(s)), s));
  EXPECT_FALSE(secretsEqual(randomSecret(), s));
  EXPECT_NE(errorOf([] { parseSecretHex("abc"); }).find("GYRE_SECRET"), std::string::npos);
  EXPECT_NE(errorOf([] { parseSecretHex(std::string(64, 'z')); }), "");
  EXPECT_TRUE(secretsEqual(deriveSecret("job-1"), deriveSecret("job-1")));
  EXPECT_FALSE(secretsEqual(deriveSecret("job-1"), deriveSecret("job-2")));
}

TEST(Config, ParsesSizesAndRejectsNonsense) {
  EXPECT_EQ(parseSize("4K", "x"), 4096u);
  EXPECT_EQ(parseSize("1M", "x"), 1u << 20);
  EXPECT_EQ(parseSize("2GB", "x"), 2ull << 30);
  EXPECT_EQ(parseSize("17", "x"), 17u);
  EXPECT_NE(errorOf([] { parseSize("lots", "GYRE_X"); }).find("GYRE_X=lots"),
            std::string::npos);
  EXPECT_NE(errorOf([] { parseSize("5T", "x"); }), "");
  EXPECT_NE(errorOf([] { parseInt("9", "GYRE_Y", 0, 5); }).find("0 to 5"), std::string::npos);
  ScopedEnv env({{"GYRE_SHM_SLOTS", "1"}});
  EXPECT_NE(errorOf([] { core::Config::resolve(nullptr); }).find("GYRE_SHM_SLOTS"),
            std::string::npos);
}

TEST(Config, StructOverridesEnvironment) {
  ScopedEnv env({{"GYRE_TIMEOUT_MS", "1234"}, {"GYRE_TRANSPORT", "shm"}});
  gyreConfig_t c = GYRE_CONFIG_INITIALIZER;
  EXPECT_EQ(core::Config::resolve(&c).timeoutMs, 1234);
  c.timeoutMs = 99;
  c.transport = "tcp";
  core::Config r = core::Config::resolve(&c);
  EXPECT_EQ(r.timeoutMs, 99);
  EXPECT_EQ(r.transport, core::TransportChoice::Tcp);
  EXPECT_FALSE(core::parameterTable().empty());
}

TEST(LaunchEnv, GyreVariables) {
  ScopedEnv env({{"GYRE_RANK", "2"},
                 {"GYRE_WORLD_SIZE", "4"},
                 {"GYRE_COMM_ID", "127.0.0.1:1234"},
                 {"GYRE_SECRET", std::string(64, 'a').c_str()},
                 {"GYRE_ROOT_EXTERNAL", "1"}});
  LaunchEnv e = detectLaunchEnv();
  EXPECT_EQ(e.source, "gyre");
  EXPECT_EQ(e.rank, 2);
  EXPECT_EQ(e.nranks, 4);
  EXPECT_EQ(e.rootAddress, "127.0.0.1:1234");
  EXPECT_TRUE(e.rootExternal);
  EXPECT_EQ(e.secret[0], 0xaa);
}

TEST(LaunchEnv, RankOutOfRangeIsNamed) {
  ScopedEnv env({{"GYRE_RANK", "4"}, {"GYRE_WORLD_SIZE", "4"}, {"GYRE_COMM_ID", "127.0.0.1:1"}});
  EXPECT_NE(errorOf([] { detectLaunchEnv(); }).find("GYRE_RANK=4"), std::string::npos);
}

TEST(LaunchEnv, Torchrun) {
  ScopedEnv env({{"RANK", "1"},
                 {"WORLD_SIZE", "8"},
                 {"MASTER_ADDR", "node7"},
                 {"MASTER_PORT", "29500"},
                 {"LOCAL_RANK", "1"},
                 {"LOCAL_WORLD_SIZE", "4"}});
  LaunchEnv e = detectLaunchEnv();
  EXPECT_EQ(e.source, "torchrun");
  EXPECT_EQ(e.rank, 1);
  EXPECT_EQ(e.nranks, 8);
  EXPECT_EQ(e.localRank, 1);
  EXPECT_EQ(e.localSize, 4);
  EXPECT_EQ(e.rootAddress, "node7:29500");
  EXPECT_FALSE(e.rootExternal);
}

TEST(LaunchEnv, OpenMpiOnOneHostAndAcrossHosts) {
  {
    ScopedEnv env({{"OMPI_COMM_WORLD_RANK", "0"},
                   {"OMPI_COMM_WORLD_SIZE", "2"},
                   {"OMPI_COMM_WORLD_LOCAL_RANK", "0"},
                   {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
                   {"OMPI_MCA_ess_base_jobid", "123456"}});
    LaunchEnv e = detectLaunchEnv();
    EXPECT_EQ(e.source, "openmpi");
    EXPECT_EQ(e.rootAddress.rfind("127.0.0.1:", 0), 0u) << e.rootAddress;
  }
  {
    ScopedEnv env({{"OMPI_COMM_WORLD_RANK", "0"},
                   {"OMPI_COMM_WORLD_SIZE", "4"},
                   {"OMPI_COMM_WORLD_LOCAL_RANK", "0"},
                   {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
                   {"OMPI_MCA_ess_base_jobid", "123456"}});
    EXPECT_NE(errorOf([] { detectLaunchEnv(); }).find("GYRE_COMM_ID"), std::string::npos);
  }
}

TEST(LaunchEnv, Slurm) {
  EXPECT_EQ(firstSlurmHost("node[01-03,7],gpu5"), "node01");
  EXPECT_EQ(firstSlurmHost("a,b"), "a");
  EXPECT_EQ(firstSlurmHost("host"), "host");
  EXPECT_EQ(firstSlurmHost("rack1-[3-4]"), "rack1-3");
  ScopedEnv env({{"SLURM_PROCID", "3"},
                 {"SLURM_NTASKS", "4"},
                 {"SLURM_LOCALID", "1"},
                 {"SLURM_JOB_NODELIST", "cn[10-11]"},
                 {"SLURM_JOB_ID", "77"}});
  LaunchEnv e = detectLaunchEnv();
  EXPECT_EQ(e.source, "slurm");
  EXPECT_EQ(e.rank, 3);
  EXPECT_EQ(e.rootAddress.rfind("cn10:", 0), 0u) << e.rootAddress;
}

TEST(LaunchEnv, NothingFoundSaysWhatToSet) {
  ScopedEnv env({});
  std::string msg = errorOf([] { detectLaunchEnv(); });
  EXPECT_NE(msg.find("GYRE_RANK"), std::string::npos) << msg;
  EXPECT_NE(msg.find("gyrerun"), std::string::npos) << msg;
}

// A one-round root on loopback with a fresh secret.
RootServer::Options loopbackRoot() {
  RootServer::Options o;
  o.bind = SockAddr::loopback(AF_INET, 0);
  o.advertise = SockAddr::loopback(AF_INET, 0);
  o.secret = randomSecret();
  o.expectRound = 0;
  return o;
}

// The same on the interface a job would choose: ranks whose root is on
// loopback stay on loopback, so the data listener tests need this one.
RootServer::Options nicRoot() {
  RootServer::Options o = loopbackRoot();
  o.bind = o.advertise = chooseInterface("", AF_INET).addr;
  return o;
}

TEST(RootServer, RefusesAConnectionWithoutTheSecret) {
  const RootServer::Options o = loopbackRoot();
  auto root = RootServer::start(o);
  // An intruder with the wrong secret is dropped without an answer.
  Socket s = Socket::connectTo(root->address(), Deadline::afterMs(5000), "root");
  Hello h{};
  h.magic = kHelloMagic;
  h.version = kProtocolVersion;
  h.nranks = 1;
  h.rank = 0;
  h.infoBytes = sizeof(PeerInfo);
  PeerInfo info{};
  s.sendAll(&h, sizeof(h), Deadline::afterMs(5000), "root");
  s.sendAll(&info, sizeof(info), Deadline::afterMs(5000), "root");
  Reply r{};
  std::string msg = errorOf([&] { s.recvAll(&r, sizeof(r), Deadline::afterMs(5000), "the root"); });
  EXPECT_TRUE(msg.find("closed") != std::string::npos || msg.find("reset") != std::string::npos)
      << msg;
  // The real rank still gets in.
  Bootstrap::Params p;
  p.id = UniqueIdContents{root->address(), o.secret};
  p.nranks = 1;
  p.deadline = Deadline::afterMs(5000);
  auto b = Bootstrap::create(p);
  EXPECT_EQ(b->peers().size(), 1u);
}

// Two ranks in this process, on "different hosts" (host hashes 1 and 2), after
// the rendezvous; `dataIf` names each one's openDataListener argument.
std::vector<std::unique_ptr<Bootstrap>> twoRanks(const std::string (&dataIf)[2]) {
  const RootServer::Options o = nicRoot();
  auto root = RootServer::start(o);
  std::vector<std::unique_ptr<Bootstrap>> b(2);
  std::string errors[2];
  std::thread t[2];
  for (int r = 0; r < 2; ++r)
    t[r] = std::thread([&, r] {
      try {
        Bootstrap::Params p;
        p.id = UniqueIdContents{root->address(), o.secret};
        p.rank = r;
        p.nranks = 2;
        p.family = AF_INET;
        p.hostHash = uint64_t(r) + 1;
        p.deadline = Deadline::afterMs(10000);
        b[r] = Bootstrap::create(p);
        b[r]->openDataListener(dataIf[r], Deadline::afterMs(10000));
      } catch (const Error& e) {
        errors[r] = e.what();
      }
    });
  for (auto& th : t) th.join();
  EXPECT_EQ(errors[0] + errors[1], "");
  return b;
}

// A connection's first bytes, as bootstrap.cc sends them.
struct TestHello {
  uint32_t magic;
  uint32_t kind;
  int32_t fromRank;
  uint32_t tag;
  uint8_t secret[32];
};

Socket introduce(const SockAddr& at, ConnKind kind, int fromRank, uint32_t tag,
                 const Secret& secret) {
  Socket s = Socket::connectTo(at, Deadline::afterMs(5000), "a rank");
  TestHello h{};
  h.magic = 0x4759434e;
  h.kind = static_cast<uint32_t>(kind);
  h.fromRank = fromRank;
  h.tag = tag;
  std::memcpy(h.secret, secret.data(), sizeof(h.secret));
  s.sendAll(&h, sizeof(h), Deadline::afterMs(5000), "a rank");
  return s;
}

bool closedByPeer(Socket& s) {
  char c;
  std::string msg = errorOf([&] { s.recvAll(&c, 1, Deadline::afterMs(5000), "the acceptor"); });
  return msg.find("closed") != std::string::npos || msg.find("reset") != std::string::npos;
}

TEST(DataListener, DataBetweenHostsGoesToThePeersNicAndIsVerified) {
  if (chooseInterface("", AF_INET).loopback)
    GTEST_SKIP() << "the bootstrap needs an interface other than loopback here";
  // Rank 1's data listener on loopback (standing in for a second NIC); rank 0 has none.
  auto b = twoRanks({"", "lo"});
  ASSERT_TRUE(b[0] && b[1]);
  const SockAddr boot1 = SockAddr::unpack(b[1]->self().listenAddr);
  const SockAddr data1 = b[0]->dataAddress(1);
  EXPECT_TRUE(data1.isLoopback()) << data1.str();
  EXPECT_NE(data1.port(), boot1.port());
  EXPECT_EQ(b[1]->dataInterface(), "lo 127.0.0.1");
  EXPECT_EQ(b[1]->dataAddress(0).str(), SockAddr::unpack(b[0]->self().listenAddr).str())
      << "rank 0 has no data listener: its bootstrap listener";

  // Refused: a wrong secret and a ring connection on the data listener, and
  // a data connection on the bootstrap listener that belongs on the data one.
  Secret wrong = b[0]->secret();
  wrong[0] ^= 1;
  Socket badSecret = introduce(data1, ConnKind::Data, 0, 0, wrong);
  Socket badKind = introduce(data1, ConnKind::Ring, 0, 0, b[0]->secret());
  Socket badPlace = introduce(boot1, ConnKind::Data, 0, 0, b[0]->secret());
  // The real one, then a message through it.
  Socket s0 = b[0]->connectTo(1, ConnKind::Data, 0, Deadline::afterMs(5000));
  Socket s1 = b[1]->acceptFrom(0, ConnKind::Data, 0, Deadline::afterMs(5000));
  EXPECT_EQ(s1.localAddr().str(), data1.str());
  EXPECT_EQ(s0.peerAddr().str(), data1.str());
  const uint32_t word = 0x12345678;
  uint32_t got = 0;
  s0.sendAll(&word, sizeof(word), Deadline::afterMs(5000), "rank 1");
  s1.recvAll(&got, sizeof(got), Deadline::afterMs(5000), "rank 0");
  EXPECT_EQ(got, word);
  EXPECT_TRUE(closedByPeer(badSecret));
  EXPECT_TRUE(closedByPeer(badKind));
  EXPECT_TRUE(closedByPeer(badPlace));

  // The other way round (rank 1 connects to rank 0, which has no data
  // listener): the bootstrap listener, as before.
  Socket t1 = b[1]->connectTo(0, ConnKind::Data, 7, Deadline::afterMs(5000));
  Socket t0 = b[0]->acceptFrom(1, ConnKind::Data, 7, Deadline::afterMs(5000));
  EXPECT_EQ(t1.peerAddr().port(), SockAddr::unpack(b[0]->self().listenAddr).port());
}

TEST(DataListener, StaysOnTheBootstrapListenerWhenItShould) {
  // GYRE_SOCKET_IFNAME set: the user's interface for everything.
  const RootServer::Options o = loopbackRoot();
  auto root = RootServer::start(o);
  Bootstrap::Params p;
  p.id = UniqueIdContents{root->address(), o.secret};
  p.ifname = "=lo";
  p.family = AF_INET;
  p.deadline = Deadline::afterMs(5000);
  auto b = Bootstrap::create(p);
  const std::string other = chooseInterface("", AF_INET).name;
  b->openDataListener(other, Deadline::afterMs(5000));
  EXPECT_EQ(b->dataInterface(), "lo 127.0.0.1");
  // Without it: an interface that does not exist, or the bootstrap's own.
  if (chooseInterface("", AF_INET).loopback) GTEST_SKIP() << "no interface but loopback";
  const RootServer::Options onNic = nicRoot();
  for (const std::string& nic : {std::string("nosuchif9"), std::string(), other}) {
    auto root2 = RootServer::start(onNic);
    Bootstrap::Params q = p;
    q.id = UniqueIdContents{root2->address(), onNic.secret};
    q.ifname = "";
    auto c = Bootstrap::create(q);
    c->openDataListener(nic, Deadline::afterMs(5000));
    EXPECT_EQ(c->dataInterface(), other + " " + chooseInterface("", AF_INET).addr.host()) << nic;
  }
}

// watchPeer: a peer on another host has no pidfd here; the connection made
// to its listener (which it files and holds) says when it has gone, once
// closed for PeerLiveness::kClosedGraceNs. Its end of the connection ends
// with its bootstrap (a process's, with the process).
TEST(PeerWatch, APeerOnAnotherHostIsSeenGoneOnceItsEndCloses) {
  if (chooseInterface("", AF_INET).loopback)
    GTEST_SKIP() << "the bootstrap needs an interface other than loopback here";
  auto b = twoRanks({"", ""});
  ASSERT_TRUE(b[0] && b[1]);
  EXPECT_FALSE(b[0]->liveness().watches(1)) << "another host: no pidfd";
  b[0]->watchPeer(1, Deadline::afterMs(5000));
  b[0]->watchPeer(1, Deadline::afterMs(5000));  // once is enough: a no-op
  EXPECT_TRUE(b[0]->liveness().watches(1));
  EXPECT_TRUE(b[0]->liveness().deathHasGrace(1)) << "a closed connection is believed after a grace";
  b[1]->checkPeers();  // rank 1 takes the connection in and files it
  EXPECT_FALSE(b[0]->liveness().isDead(1));
  EXPECT_FALSE(b[0]->liveness().isStopped(1));
  b[1].reset();
  const Deadline d = Deadline::afterMs(10000);
  while (!b[0]->liveness().isDead(1) && !d.expired()) ::poll(nullptr, 0, 1);
  EXPECT_TRUE(b[0]->liveness().isDead(1)) << "not seen gone within 10 s";
  EXPECT_EQ(b[0]->liveness().dead(), std::vector<int>{1});
}

// A peer on this host is watched through its pidfd: its exit is believed at
// once (a transport adds its own grace for what is still on its way).
TEST(PeerWatch, AnExitSeenThroughAPidfdHasNoGrace) {
  PeerLiveness l;
  l.watch(3, static_cast<int>(::getpid()));
  EXPECT_TRUE(l.watches(3));
  EXPECT_FALSE(l.isDead(3));
  EXPECT_FALSE(l.deathHasGrace(3));
  EXPECT_FALSE(l.deathHasGrace(4)) << "not watched";
}

}  // namespace
}  // namespace gyre::bootstrap
