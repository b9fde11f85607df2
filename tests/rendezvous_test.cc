// Startup under hostile or failing peers, inside one process: the ranks'
// listeners and the rendezvous root with real sockets, fed connections that
// say nothing, half hellos, forged and contradictory claims, and ranks that
// leave. (startup_test runs the same situations with real rank processes.)
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "base/clock.h"
#include "bootstrap/bootstrap.h"
#include "bootstrap/interfaces.h"
#include "bootstrap/root_server.h"
#include "tests/support/hostile.h"

namespace gyre::bootstrap {
namespace {

using test::Claim;
using test::readAnswer;
using test::RootAnswer;
using test::sendClaim;

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// n ranks of one host, prepared (listening) but not yet connected: the
// table every one of them would get from the root.
struct PreparedRanks {
  std::vector<std::unique_ptr<Bootstrap>> b;
  std::vector<PeerInfo> table;
};

PreparedRanks prepare(int n) {
  PreparedRanks r;
  for (int k = 0; k < n; ++k) {
    Bootstrap::Params p;
    p.rank = k;
    p.nranks = n;
    p.hostHash = 1;
    p.id.secret = randomSecret();
    r.b.push_back(Bootstrap::prepare(p, SockAddr::loopback(AF_INET, 0)));
    r.table.push_back(r.b.back()->self());
  }
  return r;
}

// Runs f(rank) on a thread per rank; returns each one's error ("" if none).
std::vector<std::string> onEveryRank(int n, const std::function<void(int)>& f) {
  std::vector<std::string> errors(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int k = 0; k < n; ++k)
    threads.emplace_back([&, k] {
      try {
        f(k);
      } catch (const std::exception& e) {
        errors[static_cast<size_t>(k)] = e.what();
      }
    });
  for (std::thread& t : threads) t.join();
  return errors;
}

TEST(RankListeners, SilentAndHalfHelloConnectionsDelayNobody) {
  // 20 silent and 2 half-hello connections at every rank's listener before
  // the ranks connect. Read one after another with a 5 s wait each, they
  // held a start for 110 s; side by side, the ranks connect at once and
  // well inside a 20 s deadline.
  const int n = 3;
  PreparedRanks r = prepare(n);
  std::vector<Socket> noise;
  for (int k = 0; k < n; ++k)
    for (Socket& s : test::openNoise(SockAddr::unpack(r.table[k].listenAddr), 20, 2))
      noise.push_back(std::move(s));
  const Deadline deadline = Deadline::afterMs(20000);
  std::vector<std::string> errors = onEveryRank(n, [&](int k) {
    r.b[k]->complete(r.table, deadline);
    std::vector<int32_t> ranks(n);
    ranks[k] = k;
    r.b[k]->allGather(ranks.data(), sizeof(int32_t), deadline);
    for (int j = 0; j < n; ++j)
      if (ranks[j] != j)
        throw std::runtime_error("allgather gave " + std::to_string(ranks[j]) + " at " +
                                 std::to_string(j));
  });
  for (int k = 0; k < n; ++k) EXPECT_EQ(errors[k], "") << "rank " << k;
}

TEST(RankListeners, ATimeoutSaysWhatWasRefused) {
  // Rank 1 never connects; rank 0's listener meanwhile got a connection
  // with a wrong secret and three that said nothing.
  PreparedRanks r = prepare(2);
  const SockAddr at0 = SockAddr::unpack(r.table[0].listenAddr);
  std::vector<Socket> noise = test::openNoise(at0, 3, 0);
  Socket wrong = Socket::connectTo(at0, Deadline::afterMs(5000), "rank 0");
  ConnHello h{kConnMagic, static_cast<uint32_t>(ConnKind::Ring), 1, 0, {}};
  wrong.sendAll(&h, sizeof(h), Deadline::afterMs(5000), "rank 0");
  std::string msg;
  gyreResult_t code = gyreSuccess;
  try {
    r.b[0]->complete(r.table, Deadline::afterMs(1500));
  } catch (const Error& e) {
    msg = e.what();
    code = e.code();
  }
  EXPECT_EQ(code, gyreTimeout) << msg;
  EXPECT_TRUE(contains(msg, "rank 1")) << msg;
  EXPECT_TRUE(contains(msg, "refused 1 connection without this communicator's secret")) << msg;
  EXPECT_TRUE(contains(msg, "3 connections to this rank had sent no complete hello")) << msg;
}

TEST(RankListeners, TheRendezvousSecretAloneOpensNoConnection) {
  // After the rendezvous the ranks' connections present the session secret
  // (every rank's random key combined): a stranger who guessed the
  // rendezvous secret can neither join the ring nor post an abort notice.
  const int n = 2;
  PreparedRanks r = prepare(n);
  Secret rendezvousSecret = randomSecret();
  const Deadline deadline = Deadline::afterMs(10000);
  std::vector<std::string> errors =
      onEveryRank(n, [&](int k) { r.b[k]->complete(r.table, deadline); });
  ASSERT_EQ(errors[0] + errors[1], "");
  EXPECT_FALSE(secretsEqual(r.b[0]->secret(), rendezvousSecret));
  EXPECT_TRUE(secretsEqual(r.b[0]->secret(), r.b[1]->secret()));
  for (const Secret& guess : {rendezvousSecret, Secret{}}) {
    Socket s = Socket::connectTo(SockAddr::unpack(r.table[1].listenAddr), deadline, "rank 1");
    ConnHello h{kConnMagic, static_cast<uint32_t>(ConnKind::AbortNotice), 0, 0, {}};
    std::memcpy(h.secret, guess.data(), sizeof(h.secret));
    const std::string text = "forged: rank 0 failed";
    AbortNoticeHeader notice{0, static_cast<uint32_t>(text.size()), -1, 0};
    s.sendAll(&h, sizeof(h), deadline, "rank 1");
    s.sendAll(&notice, sizeof(notice), deadline, "rank 1");
    s.sendAll(text.data(), text.size(), deadline, "rank 1");
  }
  // Still one communicator: the ring works and no notice was taken.
  errors = onEveryRank(n, [&](int k) { r.b[k]->barrier(deadline); });
  EXPECT_EQ(errors[0] + errors[1], "");
  EXPECT_TRUE(r.b[1]->notices().empty());
  EXPECT_EQ(r.b[1]->refusals().badSecret, 2);
}

TEST(RankListeners, ALocalPeerThatExitsIsNamedWhereverTheOthersWait) {
  // Rank 2's pid in the table is a process that has exited: ranks 0 and 1
  // learn it in their first wait that involves it, not at their deadline.
  const int n = 3;
  PreparedRanks r = prepare(n);
  pid_t child = fork();
  if (child == 0) _exit(0);
  int status = 0;
  waitpid(child, &status, 0);
  r.table[2].pid = child;
  r.table[2].pidNamespace = r.table[0].pidNamespace;
  r.b[2].reset();  // its listener closes with it
  std::vector<std::string> errors = onEveryRank(2, [&](int k) {
    r.b[k]->complete(r.table, Deadline::afterMs(30000));
    std::vector<int32_t> v(n);
    r.b[k]->allGather(v.data(), sizeof(int32_t), Deadline::afterMs(30000));
  });
  for (int k = 0; k < 2; ++k)
    EXPECT_TRUE(contains(errors[k], "rank 2 (pid " + std::to_string(child))) << errors[k];
}

// ---- the root ----

RootServer::Options rootOptions(bool trusted, int expectNranks = 0) {
  RootServer::Options o;
  o.bind = o.advertise = SockAddr::loopback(AF_INET, 0);
  o.secret = randomSecret();
  o.expectRound = 0;
  o.trustClaims = trusted;
  o.expectNranks = expectNranks;
  return o;
}

Claim claim(const RootServer::Options& o, int rank, int nranks) {
  Claim c;
  c.secret = o.secret;
  c.rank = rank;
  c.nranks = nranks;
  c.info.rank = rank;
  c.info.pid = 4000 + rank;
  std::strcpy(c.info.hostName, "node7");
  return c;
}

TEST(Root, ARankThatLeavesFailsTheRoundForEveryRankAndLatecomers) {
  const RootServer::Options o = rootOptions(true);
  auto root = RootServer::start(o);
  Socket r0 = sendClaim(root->address(), claim(o, 0, 3));
  Socket r1 = sendClaim(root->address(), claim(o, 1, 3));
  r1.reset();  // killed while it waited
  RootAnswer a0 = readAnswer(r0, 10000);
  EXPECT_EQ(a0.reply.status, ReplyStatus::PeerLeft);
  EXPECT_EQ(a0.reply.culprit, 1);
  EXPECT_TRUE(contains(a0.message, "rank 1 (pid 4001 on node7) left the rendezvous")) << a0.message;
  EXPECT_TRUE(contains(a0.message, "rank 2 had not arrived yet")) << a0.message;
  // A rank that arrives afterwards hears the same, at once.
  Socket late = sendClaim(root->address(), claim(o, 2, 3));
  RootAnswer a2 = readAnswer(late, 10000);
  EXPECT_EQ(a2.reply.status, ReplyStatus::PeerLeft);
  EXPECT_EQ(a2.message, a0.message);
}

TEST(Root, AnIncompleteRoundIsAnsweredBeforeTheRanksTimeOutNamingTheMissing) {
  const RootServer::Options o = rootOptions(true);
  auto root = RootServer::start(o);
  std::vector<Socket> noise = test::openNoise(root->address(), 2, 1);
  Claim c0 = claim(o, 0, 5), c2 = claim(o, 2, 5);
  c0.timeoutMs = c2.timeoutMs = 400;
  Socket r0 = sendClaim(root->address(), c0);
  Socket r2 = sendClaim(root->address(), c2);
  for (Socket* s : {&r0, &r2}) {
    RootAnswer a = readAnswer(*s, 10000);
    EXPECT_EQ(a.reply.status, ReplyStatus::TimedOut);
    EXPECT_TRUE(contains(a.message, "ranks 1, 3-4 never arrived (2 of 5 did)")) << a.message;
  }
}

TEST(Root, MalformedHellosAreRefusedAloneAndTheRoundGoesOn) {
  const RootServer::Options o = rootOptions(true);
  auto root = RootServer::start(o);
  Claim huge = claim(o, 1, 2147483647), oldVersion = claim(o, 0, 2), outside = claim(o, 5, 2);
  oldVersion.version = 1;
  Claim wrongSecret = claim(o, 1, 2);
  wrongSecret.secret[0] ^= 1;
  Socket bad[4] = {sendClaim(root->address(), huge), sendClaim(root->address(), oldVersion),
                   sendClaim(root->address(), outside), sendClaim(root->address(), wrongSecret)};
  const char* expect[3] = {"GYRE_MAX_RANKS", "protocol 1", "rank 5 is outside"};
  for (int k = 0; k < 3; ++k) {
    RootAnswer a = readAnswer(bad[k], 10000);
    EXPECT_EQ(a.reply.status, ReplyStatus::Refused);
    EXPECT_TRUE(contains(a.message, expect[k])) << a.message;
  }
  EXPECT_TRUE(readAnswer(bad[3], 10000).closed) << "a wrong secret gets no answer at all";
  Socket r0 = sendClaim(root->address(), claim(o, 0, 2)),
         r1 = sendClaim(root->address(), claim(o, 1, 2));
  for (Socket* s : {&r0, &r1}) {
    RootAnswer a = readAnswer(*s, 10000);
    EXPECT_EQ(a.reply.status, ReplyStatus::Ok) << a.message;
    ASSERT_EQ(a.table.size(), 2u);
    EXPECT_EQ(a.table[1].pid, 4001);
  }
}

TEST(Root, AGuessableSecretLetsNoSingleHelloChangeOrEndTheRound) {
  // The secret of a torchrun or Slurm job without GYRE_SECRET can be
  // computed by anyone: claims that contradict the job (rank 0 knows its
  // size), a second claim on a rank, and a claim that leaves, are refused or
  // forgotten one by one, and the real ranks still meet.
  const RootServer::Options o = rootOptions(false, 3);
  auto root = RootServer::start(o);
  Socket r0 = sendClaim(root->address(), claim(o, 0, 3));
  Claim wrongSize = claim(o, 1, 200000000), otherBuild = claim(o, 2, 3);
  otherBuild.infoBytes = sizeof(PeerInfo) + 8;
  Socket f1 = sendClaim(root->address(), wrongSize), f2 = sendClaim(root->address(), otherBuild);
  Socket f3 = sendClaim(root->address(), claim(o, 0, 3));  // rank 0 is taken
  EXPECT_EQ(readAnswer(f1, 10000).reply.status, ReplyStatus::Refused);
  EXPECT_EQ(readAnswer(f2, 10000).reply.status, ReplyStatus::Refused);
  RootAnswer dup = readAnswer(f3, 10000);
  EXPECT_EQ(dup.reply.status, ReplyStatus::Refused);
  EXPECT_TRUE(contains(dup.message, "two processes claim rank 0")) << dup.message;
  sendClaim(root->address(), claim(o, 2, 3)).reset();  // arrives and goes: the place is free again
  Socket r1 = sendClaim(root->address(), claim(o, 1, 3));
  Socket r2 = sendClaim(root->address(), claim(o, 2, 3));
  for (Socket* s : {&r0, &r1, &r2}) {
    RootAnswer a = readAnswer(*s, 10000);
    EXPECT_EQ(a.reply.status, ReplyStatus::Ok) << a.message;
  }
}

TEST(Root, ATrustedSecretFailsTheRoundOnAnyConflict) {
  // With a secret only the job knows, a contradicting claim is a real
  // rank's mistake: every rank hears it at once instead of timing out.
  const RootServer::Options o = rootOptions(true);
  auto root = RootServer::start(o);
  Socket r0 = sendClaim(root->address(), claim(o, 0, 2));
  Socket r1 = sendClaim(root->address(), claim(o, 1, 3));
  for (Socket* s : {&r0, &r1}) {
    RootAnswer a = readAnswer(*s, 10000);
    EXPECT_EQ(a.reply.status, ReplyStatus::Failed);
    EXPECT_TRUE(contains(a.message, "nranks=3")) << a.message;
  }
}

}  // namespace
}  // namespace gyre::bootstrap
