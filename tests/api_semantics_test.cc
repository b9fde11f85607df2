// The semantics of the API beyond single collectives, over real processes:
// groups (any order of sends and receives, self messages, several
// collectives at once), nonblocking requests (waited on in any order,
// polled, overlapped with work), PreMulSum (immediate and pointer scalars,
// every type), communicator split (colors, keys, NOCOLOR, splits of
// splits), mismatched calls (an error on every rank, naming both sides) and
// the argument checks of the newer operations.
//
// Every multi-process run has a hard deadline (RunOptions.timeoutSec); no
// test sleeps to wait for a peer or asserts a timing. Results are checked
// element by element.
//
// Where a failure would be a hang, the communicator's GYRE_TIMEOUT_MS is
// short (kHangTimeoutMs), so that such a test fails in seconds.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <numeric>
#include <string>
#include <tuple>
#include <vector>

#include "bench/exact_values.h"
#include "kernels/cpu/half.h"
#include "device/backend.h"
#include "tests/support/multiprocess.h"

namespace gyre::test {
namespace {

constexpr unsigned char kFill = 0xA5;
constexpr size_t kGuard = 64;
constexpr size_t kLarge = size_t(1) << 20;  // float32 elements: 4 MiB, more than any transport buffer
constexpr int kRunTimeoutSec = 120;
constexpr int kCommTimeoutMs = 30000;
// For the tests where a library bug shows as a hang: the communicator gives
// up after this long without progress (a correct library needs
// milliseconds), so the known failures cost seconds, not the run deadline.
constexpr int kHangTimeoutMs = 5000;

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

bool untouched(const unsigned char* p, size_t bytes) {
  for (size_t i = 0; i < bytes; ++i)
    if (p[i] != kFill) return false;
  return true;
}

struct Param {
  const char* transport;
  int nranks;
};

void PrintTo(const Param& p, std::ostream* os) { *os << p.transport << ", " << p.nranks << " ranks"; }

std::string paramName(const testing::TestParamInfo<Param>& info) {
  return std::string(info.param.transport) + "_" + std::to_string(info.param.nranks) + "ranks";
}

using Body = std::function<int(int rank, int nranks, const gyreUniqueId& id)>;

RunOutcome runWithDeadline(int nranks, const Body& body) {
  RunOptions options;
  options.timeoutSec = kRunTimeoutSec;
  return runRanks(nranks, body, options);
}

// Writes v (an exact small number) as element i of a buffer of type t.
void setElem(void* buf, size_t i, gyreDataType_t t, double v) {
  switch (t) {
    case gyreInt8: static_cast<int8_t*>(buf)[i] = static_cast<int8_t>(v); break;
    case gyreUint8: static_cast<uint8_t*>(buf)[i] = static_cast<uint8_t>(v); break;
    case gyreInt32: static_cast<int32_t*>(buf)[i] = static_cast<int32_t>(v); break;
    case gyreUint32: static_cast<uint32_t*>(buf)[i] = static_cast<uint32_t>(v); break;
    case gyreInt64: static_cast<int64_t*>(buf)[i] = static_cast<int64_t>(v); break;
    case gyreUint64: static_cast<uint64_t*>(buf)[i] = static_cast<uint64_t>(v); break;
    case gyreFloat16: static_cast<uint16_t*>(buf)[i] = kernels::floatToHalf(static_cast<float>(v)); break;
    case gyreBfloat16: static_cast<uint16_t*>(buf)[i] = kernels::floatToBfloat16(static_cast<float>(v)); break;
    case gyreFloat32: static_cast<float*>(buf)[i] = static_cast<float>(v); break;
    case gyreFloat64: static_cast<double*>(buf)[i] = v; break;
    default: break;
  }
}

// Counts elements of buf that differ from want(i); describes the first.
template <typename F>
size_t countMismatches(const void* buf, size_t count, gyreDataType_t t, F want, std::string* firstBad) {
  size_t wrong = 0;
  for (size_t i = 0; i < count; ++i) {
    const double got = elementAsDouble(buf, i, t), exp = want(i);
    if (got != exp) {
      if (wrong == 0)
        *firstBad = "element " + std::to_string(i) + " is " + std::to_string(got) + ", expected " +
                    std::to_string(exp);
      ++wrong;
    }
  }
  return wrong;
}

// A valid AllReduce whose result is checked: the communicator still works.
void expectAllReduceWorks(gyreComm_t comm, int nranks, Checker& check, const std::string& after) {
  std::vector<int32_t> v(1000);
  int me = -1;
  gyreCommUserRank(comm, &me);
  fillInput(v.data(), v.size(), gyreInt32, gyreSum, me);
  if (!check.expectOk(gyreAllReduce(v.data(), v.data(), v.size(), gyreInt32, gyreSum, comm, nullptr),
                      "allreduce after " + after))
    return;
  std::string bad;
  const size_t wrong = countWrong(v.data(), v.size(), gyreInt32, gyreSum, nranks, &bad);
  check.expect(wrong == 0, "allreduce after " + after + ": " + std::to_string(wrong) + " wrong; " + bad);
  gyreResult_t async = gyreInternalError;
  check.expectOk(gyreCommGetAsyncError(comm, &async), "async error query after " + after);
  check.expect(async == gyreSuccess, "the communicator is healthy after " + after);
}

// =====================================================================
// 1. Groups
// =====================================================================

enum class Order { RecvFirst, SendFirst, ByParity, Interleaved };

const char* orderName(Order o) {
  switch (o) {
    case Order::RecvFirst: return "recv-first";
    case Order::SendFirst: return "send-first";
    case Order::ByParity: return "by-parity";
    case Order::Interleaved: return "interleaved";
  }
  return "?";
}

// The payload of the k-th message from rank s to rank d (per pair, in call
// order, which is how sends and receives match).
uint64_t messageSeed(int s, int d, int k) { return 1000 + (uint64_t(s) * 64 + uint64_t(d)) * 8 + uint64_t(k); }

struct Message {
  bool send;
  int peer;
  uint64_t seed;
  std::vector<unsigned char> buf;
};

// This rank's part of a ring in both directions inside one group: it sends
// to both neighbours and receives from both (with two ranks, both messages
// go to the same peer), plus `self` messages to itself, issued in `order`.
void groupRing(gyreComm_t comm, int me, int n, Order order, size_t count, gyreDataType_t t, int self,
               Checker& check) {
  const std::string what = std::string("group ring ") + orderName(order) + ", " + std::to_string(count) + " x " +
                           dtypeLabel(t) + (self ? ", " + std::to_string(self) + " self message(s)" : "");
  const size_t bytes = count * dtypeBytes(t);
  const int right = (me + 1) % n, left = (me + n - 1) % n;
  std::vector<int> sendPeers = {right, left}, recvPeers = {left, right};
  if (me % 2) std::swap(sendPeers[0], sendPeers[1]);  // the order of sends differs between ranks too
  for (int i = 0; i < self; ++i) {
    sendPeers.push_back(me);
    recvPeers.push_back(me);
  }
  std::vector<Message> sends, recvs;
  std::vector<int> perPeer(static_cast<size_t>(n), 0);
  for (int p : sendPeers) {
    Message m{true, p, messageSeed(me, p, perPeer[p]++), std::vector<unsigned char>(bytes + kGuard, kFill)};
    fillPattern(m.buf.data(), count, t, m.seed);
    sends.push_back(std::move(m));
  }
  std::fill(perPeer.begin(), perPeer.end(), 0);
  for (int p : recvPeers)
    recvs.push_back(Message{false, p, messageSeed(p, me, perPeer[p]++), std::vector<unsigned char>(bytes + kGuard, kFill)});

  // The order this rank issues them in.
  std::vector<Message*> issue;
  auto all = [&](std::vector<Message>& v) {
    for (Message& m : v) issue.push_back(&m);
  };
  const bool sendFirst = order == Order::SendFirst || (order == Order::ByParity && me % 2 == 0) ||
                         (order == Order::Interleaved && me % 2 == 0);
  if (order == Order::Interleaved) {
    std::vector<Message>& a = sendFirst ? sends : recvs;
    std::vector<Message>& b = sendFirst ? recvs : sends;
    for (size_t i = 0; i < std::max(a.size(), b.size()); ++i) {
      if (i < a.size()) issue.push_back(&a[i]);
      if (i < b.size()) issue.push_back(&b[i]);
    }
  } else if (sendFirst) {
    all(sends);
    all(recvs);
  } else {
    all(recvs);
    all(sends);
  }

  if (!check.expectOk(gyreGroupStart(), what + ": group start")) return;
  for (Message* m : issue) {
    gyreResult_t r = m->send ? gyreSend(m->buf.data(), count, t, m->peer, comm, nullptr)
                             : gyreRecv(m->buf.data(), count, t, m->peer, comm, nullptr);
    check.expectOk(r, what + ": " + (m->send ? "send to " : "recv from ") + std::to_string(m->peer));
  }
  if (!check.expectOk(gyreGroupEnd(), what + ": group end")) return;
  for (const Message& m : recvs) {
    std::string bad;
    const size_t wrong = countPatternWrong(m.buf.data(), count, t, m.seed, &bad);
    check.expect(wrong == 0, what + ": message from rank " + std::to_string(m.peer) + ": " + std::to_string(wrong) +
                                 " wrong; " + bad);
    check.expect(untouched(m.buf.data() + bytes, kGuard),
                 what + ": wrote past the end of the receive from rank " + std::to_string(m.peer));
  }
  for (const Message& m : sends) {
    std::string bad;
    check.expect(countPatternWrong(m.buf.data(), count, t, m.seed, &bad) == 0,
                 what + ": the send buffer to rank " + std::to_string(m.peer) + " was modified; " + bad);
  }
}

// Several collectives and a ring of sends and receives in one group, every
// result checked.
void groupOfCollectives(gyreComm_t comm, int me, int n, Checker& check) {
  const std::string what = "group of collectives";
  // AllReduce, int32 sum.
  std::vector<int32_t> arIn(1000), arOut(1000, -7);
  fillInput(arIn.data(), arIn.size(), gyreInt32, gyreSum, me);
  // Broadcast from the last rank, float32, out of place.
  const size_t bcCount = 70000;
  const int bcRoot = n - 1;
  std::vector<float> bcIn(bcCount), bcOut(bcCount + kGuard / sizeof(float), -1.0f);
  if (me == bcRoot) fillPattern(bcIn.data(), bcCount, gyreFloat32, 77);
  // AllGather, int32.
  const size_t agCount = 333;
  std::vector<int32_t> agIn(agCount), agOut(agCount * n, -3);
  fillPattern(agIn.data(), agCount, gyreInt32, 200 + uint64_t(me));
  // ReduceScatter, float64 max.
  const size_t rsCount = 500;
  std::vector<double> rsIn(rsCount * n), rsOut(rsCount, -1.0);
  fillInput(rsIn.data(), rsIn.size(), gyreFloat64, gyreMax, me);
  // A ring of sends and receives.
  const int right = (me + 1) % n, left = (me + n - 1) % n;
  std::vector<float> p2pOut(1000), p2pIn(1000, -1.0f);
  fillPattern(p2pOut.data(), p2pOut.size(), gyreFloat32, messageSeed(me, right, 0));

  if (!check.expectOk(gyreGroupStart(), what + ": group start")) return;
  check.expectOk(gyreAllReduce(arIn.data(), arOut.data(), arIn.size(), gyreInt32, gyreSum, comm, nullptr),
                 what + ": allreduce");
  check.expectOk(gyreBroadcast(bcIn.data(), bcOut.data(), bcCount, gyreFloat32, bcRoot, comm, nullptr),
                 what + ": broadcast");
  check.expectOk(gyreGroupStart(), what + ": nested group start");  // groups nest
  check.expectOk(gyreAllGather(agIn.data(), agOut.data(), agCount, gyreInt32, comm, nullptr), what + ": allgather");
  check.expectOk(gyreGroupEnd(), what + ": nested group end");
  check.expectOk(gyreReduceScatter(rsIn.data(), rsOut.data(), rsCount, gyreFloat64, gyreMax, comm, nullptr),
                 what + ": reducescatter");
  check.expectOk(gyreBarrier(comm, nullptr), what + ": barrier");
  if (me % 2) {
    check.expectOk(gyreRecv(p2pIn.data(), p2pIn.size(), gyreFloat32, left, comm, nullptr), what + ": recv");
    check.expectOk(gyreSend(p2pOut.data(), p2pOut.size(), gyreFloat32, right, comm, nullptr), what + ": send");
  } else {
    check.expectOk(gyreSend(p2pOut.data(), p2pOut.size(), gyreFloat32, right, comm, nullptr), what + ": send");
    check.expectOk(gyreRecv(p2pIn.data(), p2pIn.size(), gyreFloat32, left, comm, nullptr), what + ": recv");
  }
  if (!check.expectOk(gyreGroupEnd(), what + ": group end")) return;

  std::string bad;
  size_t wrong = countWrong(arOut.data(), arOut.size(), gyreInt32, gyreSum, n, &bad);
  check.expect(wrong == 0, what + ": allreduce: " + std::to_string(wrong) + " wrong; " + bad);
  wrong = countPatternWrong(bcOut.data(), bcCount, gyreFloat32, 77, &bad);
  check.expect(wrong == 0, what + ": broadcast: " + std::to_string(wrong) + " wrong; " + bad);
  for (size_t i = bcCount; i < bcOut.size(); ++i)
    if (!check.expect(bcOut[i] == -1.0f, what + ": broadcast wrote past the end")) break;
  for (int q = 0; q < n; ++q) {
    wrong = countPatternWrong(agOut.data() + agCount * q, agCount, gyreInt32, 200 + uint64_t(q), &bad);
    check.expect(wrong == 0, what + ": allgather block " + std::to_string(q) + ": " + std::to_string(wrong) +
                                 " wrong; " + bad);
  }
  wrong = countWrong(rsOut.data(), rsCount, gyreFloat64, gyreMax, n, &bad, rsCount * me);
  check.expect(wrong == 0, what + ": reducescatter: " + std::to_string(wrong) + " wrong; " + bad);
  wrong = countPatternWrong(p2pIn.data(), p2pIn.size(), gyreFloat32, messageSeed(left, me, 0), &bad);
  check.expect(wrong == 0, what + ": ring message: " + std::to_string(wrong) + " wrong; " + bad);
}

// Blocking Send/Recv outside a group between the first and the last rank
// (the others idle), both directions, small and large.
void pairOutsideGroup(gyreComm_t comm, int me, int n, Checker& check) {
  const int a = 0, b = n - 1;
  for (size_t count : {size_t(0), size_t(5), size_t(1000), kLarge}) {
    const std::string what = "send/recv outside a group, " + std::to_string(count) + " x float32";
    std::vector<float> out(count), in(count + kGuard / sizeof(float), -1.0f);
    if (me == a) {
      fillPattern(out.data(), count, gyreFloat32, messageSeed(a, b, 0));
      check.expectOk(gyreSend(out.data(), count, gyreFloat32, b, comm, nullptr), what + ": send");
      check.expectOk(gyreRecv(in.data(), count, gyreFloat32, b, comm, nullptr), what + ": recv");
    } else if (me == b) {
      fillPattern(out.data(), count, gyreFloat32, messageSeed(b, a, 0));
      check.expectOk(gyreRecv(in.data(), count, gyreFloat32, a, comm, nullptr), what + ": recv");
      check.expectOk(gyreSend(out.data(), count, gyreFloat32, a, comm, nullptr), what + ": send");
    } else {
      continue;
    }
    std::string bad;
    const size_t wrong = countPatternWrong(in.data(), count, gyreFloat32, messageSeed(me == a ? b : a, me, 0), &bad);
    check.expect(wrong == 0, what + ": " + std::to_string(wrong) + " wrong; " + bad);
    for (size_t i = count; i < in.size(); ++i)
      if (!check.expect(in[i] == -1.0f, what + ": wrote past the end")) break;
  }
}

int groupBody(int rank, int nranks, const gyreUniqueId& id, const char* transport) {
  Checker check(rank);
  gyreComm_t comm = initRank(rank, nranks, id, transport, kCommTimeoutMs);
  if (!comm) return 1;
  for (Order order : {Order::RecvFirst, Order::SendFirst, Order::ByParity, Order::Interleaved}) {
    for (size_t count : {size_t(0), size_t(3), size_t(1000)}) groupRing(comm, rank, nranks, order, count, gyreInt32, 0, check);
    groupRing(comm, rank, nranks, order, kLarge, gyreFloat32, 0, check);
    groupRing(comm, rank, nranks, order, 1000, gyreBfloat16, 2, check);
    if (check.failures()) break;
  }
  // Self messages with large payloads, alone and in a ring.
  groupRing(comm, rank, nranks, Order::RecvFirst, kLarge, gyreFloat32, 1, check);
  groupRing(comm, rank, nranks, Order::SendFirst, 1000, gyreInt64, 3, check);
  groupOfCollectives(comm, rank, nranks, check);
  pairOutsideGroup(comm, rank, nranks, check);
  expectAllReduceWorks(comm, nranks, check, "the group tests");
  check.expectOk(gyreCommDestroy(comm), "destroy");
  return check.failures() ? 1 : 0;
}

class GroupSemantics : public testing::TestWithParam<Param> {};

TEST_P(GroupSemantics, SendRecvInAnyOrderSelfMessagesAndSeveralCollectives) {
  const Param p = GetParam();
  RunOutcome out = runWithDeadline(
      p.nranks, [&](int r, int n, const gyreUniqueId& id) { return groupBody(r, n, id, p.transport); });
  EXPECT_FALSE(out.timedOut) << out.describe();
  EXPECT_TRUE(out.allSucceeded()) << out.describe();
}

INSTANTIATE_TEST_SUITE_P(Transports, GroupSemantics,
                         testing::Values(Param{"shm", 2}, Param{"shm", 3}, Param{"shm", 5}, Param{"shm", 8},
                                         Param{"tcp", 2}, Param{"tcp", 4}),
                         paramName);

TEST(GroupErrorSemantics, UnbalancedGroupEndAndSelfSendOutsideAGroupAreRefused) {
  RunOutcome out = runWithDeadline(2, [](int rank, int n, const gyreUniqueId& id) {
    Checker check(rank);
    gyreComm_t comm = initRank(rank, n, id, "shm", kCommTimeoutMs);
    if (!comm) return 1;
    gyreResult_t r = gyreGroupEnd();
    std::string msg = gyreGetLastError(comm);
    check.expect(r == gyreInvalidUsage, std::string("group end without start: got ") + gyreGetErrorString(r));
    check.expect(contains(msg, "gyreGroupStart"), "the message names the missing gyreGroupStart: " + msg);
    std::vector<float> v(10, 1.0f);
    r = gyreSend(v.data(), v.size(), gyreFloat32, rank, comm, nullptr);
    msg = gyreGetLastError(comm);
    check.expect(r == gyreInvalidUsage, std::string("self send outside a group: got ") + gyreGetErrorString(r));
    check.expect(contains(msg, "inside a group"), "the message says a self send needs a group: " + msg);
    r = gyreRecv(v.data(), v.size(), gyreFloat32, rank, comm, nullptr);
    check.expect(r == gyreInvalidUsage, std::string("self recv outside a group: got ") + gyreGetErrorString(r));
    // An empty group is fine.
    check.expectOk(gyreGroupStart(), "empty group start");
    check.expectOk(gyreGroupEnd(), "empty group end");
    expectAllReduceWorks(comm, n, check, "refused group calls");
    check.expectOk(gyreCommDestroy(comm), "destroy");
    return check.failures();
  });
  EXPECT_TRUE(out.allSucceeded()) << out.describe();
}

// A group where every rank calls Send(right), AllReduce, Recv(left): the
// sends and receives of a group run first, together, then its collectives,
// so the ring cannot wait behind the AllReduce (which once split them and
// failed with a false mismatch, or a deadlock for messages larger than the
// transport's buffers).
int sendCollectiveRecvBody(int rank, int n, const gyreUniqueId& id, const char* transport, size_t count) {
  Checker check(rank);
  gyreComm_t comm = initRank(rank, n, id, transport, kHangTimeoutMs);
  if (!comm) return 1;
  const int right = (rank + 1) % n, left = (rank + n - 1) % n;
  std::vector<float> out(count), in(count, -1.0f);
  fillPattern(out.data(), count, gyreFloat32, messageSeed(rank, right, 0));
  std::vector<int32_t> ar(100);
  fillInput(ar.data(), ar.size(), gyreInt32, gyreSum, rank);
  const std::string what = "group of send (" + std::to_string(count) + " x float32), allreduce, recv";
  check.expectOk(gyreGroupStart(), what + ": group start");
  check.expectOk(gyreSend(out.data(), count, gyreFloat32, right, comm, nullptr), what + ": send");
  check.expectOk(gyreAllReduce(ar.data(), ar.data(), ar.size(), gyreInt32, gyreSum, comm, nullptr), what + ": allreduce");
  check.expectOk(gyreRecv(in.data(), count, gyreFloat32, left, comm, nullptr), what + ": recv");
  if (check.expectOk(gyreGroupEnd(), what + ": group end")) {
    std::string bad;
    size_t wrong = countPatternWrong(in.data(), count, gyreFloat32, messageSeed(left, rank, 0), &bad);
    check.expect(wrong == 0, what + ": ring message: " + std::to_string(wrong) + " wrong; " + bad);
    wrong = countWrong(ar.data(), ar.size(), gyreInt32, gyreSum, n, &bad);
    check.expect(wrong == 0, what + ": allreduce: " + std::to_string(wrong) + " wrong; " + bad);
  }
  gyreCommDestroy(comm);
  return check.failures() ? 1 : 0;
}

class GroupMixedSemantics : public testing::TestWithParam<std::tuple<const char*, size_t>> {};

TEST_P(GroupMixedSemantics, SendsAndReceivesSeparatedByACollectiveInOneGroup) {
  const char* transport = std::get<0>(GetParam());
  const size_t count = std::get<1>(GetParam());
  RunOutcome out = runWithDeadline(
      3, [&](int r, int n, const gyreUniqueId& id) { return sendCollectiveRecvBody(r, n, id, transport, count); });
  EXPECT_FALSE(out.timedOut) << out.describe();
  EXPECT_TRUE(out.allSucceeded()) << out.describe();
}

INSTANTIATE_TEST_SUITE_P(Transports, GroupMixedSemantics,
                         testing::Combine(testing::Values("shm", "tcp"), testing::Values(size_t(1000), kLarge)),
                         [](const testing::TestParamInfo<std::tuple<const char*, size_t>>& p) {
                           return std::string(std::get<0>(p.param)) + "_" + std::to_string(std::get<1>(p.param));
                         });

// A group that spans two communicators, used in different orders on the two
// ranks: rank 0 sends 4 MiB on the parent and receives on a duplicate (a
// split with one color), rank 1 sends on the duplicate and receives on the
// parent. Run one communicator after the other, this would deadlock (each
// send waits for room that only the peer's later receive makes); the
// calls of a group are launched together, so it must not.
TEST(MultiCommGroupSemantics, CallsOnTwoCommunicatorsInOneGroup) {
  RunOutcome out = runWithDeadline(2, [](int rank, int n, const gyreUniqueId& id) {
    Checker check(rank);
    gyreComm_t comm = initRank(rank, n, id, "shm", kHangTimeoutMs);
    if (!comm) return 1;
    gyreComm_t dup = nullptr;
    if (!check.expectOk(gyreCommSplit(comm, 0, rank, &dup, nullptr), "duplicate by split")) return 1;
    const int peer = 1 - rank;
    gyreComm_t sendOn = rank == 0 ? comm : dup, recvOn = rank == 0 ? dup : comm;
    std::vector<float> payload(kLarge), in(kLarge, -1.0f);
    fillPattern(payload.data(), kLarge, gyreFloat32, messageSeed(rank, peer, 0));
    check.expectOk(gyreGroupStart(), "group start");
    check.expectOk(gyreSend(payload.data(), kLarge, gyreFloat32, peer, sendOn, nullptr), "send");
    check.expectOk(gyreRecv(in.data(), kLarge, gyreFloat32, peer, recvOn, nullptr), "recv");
    if (check.expectOk(gyreGroupEnd(), "group end (two communicators)")) {
      std::string bad;
      const size_t wrong = countPatternWrong(in.data(), kLarge, gyreFloat32, messageSeed(peer, rank, 0), &bad);
      check.expect(wrong == 0, "message: " + std::to_string(wrong) + " wrong; " + bad);
    }
    gyreCommDestroy(dup);
    gyreCommDestroy(comm);
    return check.failures() ? 1 : 0;
  });
  EXPECT_FALSE(out.timedOut) << out.describe();
  EXPECT_TRUE(out.allSucceeded()) << out.describe();
}

// =====================================================================
// 2. Nonblocking calls
// =====================================================================

struct Bucket {
  gyreDataType_t dtype;
  size_t count;
  bool inPlace;
  std::vector<unsigned char> in, out;
};

int nonblockingBody(int rank, int n, const gyreUniqueId& id, const char* transport) {
  Checker check(rank);
  gyreComm_t comm = initRank(rank, n, id, transport, kCommTimeoutMs);
  if (!comm) return 1;

  // Four AllReduce buckets of different sizes and types and a Broadcast,
  // waited on in reverse order.
  {
    std::vector<Bucket> buckets;
    buckets.push_back({gyreFloat32, 1, false, {}, {}});
    buckets.push_back({gyreInt32, 1000, true, {}, {}});
    buckets.push_back({gyreBfloat16, 65537, false, {}, {}});
    buckets.push_back({gyreFloat64, kLarge / 2, false, {}, {}});
    std::vector<gyreRequest_t> requests;
    for (Bucket& b : buckets) {
      const size_t bytes = b.count * dtypeBytes(b.dtype);
      b.in.assign(bytes, 0);
      b.out.assign(bytes, kFill);
      fillInput(b.in.data(), b.count, b.dtype, gyreSum, rank);
      void* out = b.inPlace ? b.in.data() : b.out.data();
      gyreRequest_t req = nullptr;
      check.expectOk(gyreIallReduce(b.in.data(), out, b.count, b.dtype, gyreSum, comm, &req), "iallreduce");
      requests.push_back(req);
    }
    const size_t bcCount = 100003;
    const int root = n - 1;
    std::vector<int32_t> bc(bcCount, -1);
    if (rank == root) fillPattern(bc.data(), bcCount, gyreInt32, 99);
    gyreRequest_t bcReq = nullptr;
    check.expectOk(gyreIbroadcast(bc.data(), bc.data(), bcCount, gyreInt32, root, comm, &bcReq), "ibroadcast");
    check.expectOk(gyreWait(bcReq), "wait for the broadcast (issued last, waited first)");
    std::string bad;
    size_t wrong = countPatternWrong(bc.data(), bcCount, gyreInt32, 99, &bad);
    check.expect(wrong == 0, "ibroadcast: " + std::to_string(wrong) + " wrong; " + bad);
    for (size_t k = buckets.size(); k-- > 0;) {
      Bucket& b = buckets[k];
      const std::string what = "iallreduce bucket " + std::to_string(k) + " (" + std::to_string(b.count) + " x " +
                               dtypeLabel(b.dtype) + ")";
      if (!check.expectOk(gyreWait(requests[k]), "wait for " + what)) continue;
      const void* result = b.inPlace ? b.in.data() : b.out.data();
      wrong = countWrong(result, b.count, b.dtype, gyreSum, n, &bad);
      check.expect(wrong == 0, what + ": " + std::to_string(wrong) + " wrong; " + bad);
    }
  }

  // gyreTest polled until done: no sleeps, bounded by the run's deadline.
  {
    std::vector<float> v(kLarge / 4);
    fillInput(v.data(), v.size(), gyreFloat32, gyreSum, rank);
    gyreRequest_t req = nullptr, bar = nullptr;
    check.expectOk(gyreIallReduce(v.data(), v.data(), v.size(), gyreFloat32, gyreSum, comm, &req), "iallreduce (polled)");
    check.expectOk(gyreIbarrier(comm, &bar), "ibarrier (polled)");
    int done = 0;
    gyreResult_t r = gyreSuccess;
    while (!done && r == gyreSuccess) r = gyreTest(req, &done);
    check.expectOk(r, "gyreTest on the allreduce");
    std::string bad;
    size_t wrong = countWrong(v.data(), v.size(), gyreFloat32, gyreSum, n, &bad);
    check.expect(wrong == 0, "polled iallreduce: " + std::to_string(wrong) + " wrong; " + bad);
    done = 0;
    r = gyreSuccess;
    while (!done && r == gyreSuccess) r = gyreTest(bar, &done);
    check.expectOk(r, "gyreTest on the barrier");
  }

  // Overlap: CPU work between issue and wait; a blocking call issued while
  // nonblocking ones are pending runs after them.
  {
    std::vector<int64_t> a(kLarge / 2), blocking(4096);
    fillInput(a.data(), a.size(), gyreInt64, gyreSum, rank);
    fillInput(blocking.data(), blocking.size(), gyreInt64, gyreMax, rank);
    gyreRequest_t req = nullptr;
    check.expectOk(gyreIallReduce(a.data(), a.data(), a.size(), gyreInt64, gyreSum, comm, &req), "iallreduce (overlap)");
    // Work of our own, on memory the operation does not touch.
    std::vector<uint64_t> work(1 << 18);
    std::iota(work.begin(), work.end(), uint64_t(rank));
    uint64_t acc = 0;
    for (int pass = 0; pass < 8; ++pass)
      for (uint64_t& w : work) acc = (acc ^ (w = w * 6364136223846793005ULL + 1442695040888963407ULL)) + 1;
    uint64_t again = 0;
    {
      std::vector<uint64_t> w2(1 << 18);
      std::iota(w2.begin(), w2.end(), uint64_t(rank));
      for (int pass = 0; pass < 8; ++pass)
        for (uint64_t& w : w2) again = (again ^ (w = w * 6364136223846793005ULL + 1442695040888963407ULL)) + 1;
    }
    check.expect(acc == again, "the overlapped work computed what it computes alone");
    check.expectOk(gyreAllReduce(blocking.data(), blocking.data(), blocking.size(), gyreInt64, gyreMax, comm, nullptr),
                   "blocking allreduce while a nonblocking one is pending");
    check.expectOk(gyreWait(req), "wait (overlap)");
    std::string bad;
    size_t wrong = countWrong(a.data(), a.size(), gyreInt64, gyreSum, n, &bad);
    check.expect(wrong == 0, "overlapped iallreduce: " + std::to_string(wrong) + " wrong; " + bad);
    wrong = countWrong(blocking.data(), blocking.size(), gyreInt64, gyreMax, n, &bad);
    check.expect(wrong == 0, "blocking allreduce after a nonblocking one: " + std::to_string(wrong) + " wrong; " + bad);
  }

  // The other nonblocking collectives, issued together and waited in order.
  {
    const size_t c = 777;
    const int root = n > 2 ? 1 : 0;
    std::vector<int32_t> redIn(c), redOut(c, -5), agIn(c), agOut(c * n, -5), rsIn(c * n), rsOut(c, -5),
        a2aIn(c * n), a2aOut(c * n, -5);
    fillInput(redIn.data(), c, gyreInt32, gyreMin, rank);
    fillPattern(agIn.data(), c, gyreInt32, 300 + uint64_t(rank));
    fillInput(rsIn.data(), c * n, gyreInt32, gyreSum, rank);
    for (int p = 0; p < n; ++p) fillPattern(a2aIn.data() + c * p, c, gyreInt32, uint64_t(rank) * n + p);
    // AllToAllv: rank s sends (s + d) % 3 * 10 elements to rank d.
    auto vc = [](int s, int d) { return size_t((s + d) % 3) * 10; };
    std::vector<size_t> sc(n), sd(n), rc(n), rd(n);
    size_t sEnd = 0, rEnd = 0;
    for (int p = 0; p < n; ++p) {
      sc[p] = vc(rank, p);
      sd[p] = sEnd;
      sEnd += sc[p];
      rc[p] = vc(p, rank);
      rd[p] = rEnd;
      rEnd += rc[p];
    }
    std::vector<int32_t> vIn(sEnd), vOut(rEnd, -5);
    for (int p = 0; p < n; ++p) fillPattern(vIn.data() + sd[p], sc[p], gyreInt32, 500 + uint64_t(rank) * n + p);
    std::vector<gyreRequest_t> reqs(6, nullptr);
    check.expectOk(gyreIreduce(redIn.data(), redOut.data(), c, gyreInt32, gyreMin, root, comm, &reqs[0]), "ireduce");
    check.expectOk(gyreIallGather(agIn.data(), agOut.data(), c, gyreInt32, comm, &reqs[1]), "iallgather");
    check.expectOk(gyreIreduceScatter(rsIn.data(), rsOut.data(), c, gyreInt32, gyreSum, comm, &reqs[2]),
                   "ireducescatter");
    check.expectOk(gyreIallToAll(a2aIn.data(), a2aOut.data(), c, gyreInt32, comm, &reqs[3]), "ialltoall");
    check.expectOk(gyreIallToAllv(vIn.data(), sc.data(), sd.data(), vOut.data(), rc.data(), rd.data(), gyreInt32, comm,
                                  &reqs[4]),
                   "ialltoallv");
    // The count arrays were copied at the call: changing them now is harmless.
    std::fill(sc.begin(), sc.end(), size_t(12345));
    check.expectOk(gyreIbarrier(comm, &reqs[5]), "ibarrier");
    for (size_t k = 0; k < reqs.size(); ++k) check.expectOk(gyreWait(reqs[k]), "wait " + std::to_string(k));
    std::string bad;
    size_t wrong;
    if (rank == root) {
      wrong = countWrong(redOut.data(), c, gyreInt32, gyreMin, n, &bad);
      check.expect(wrong == 0, "ireduce: " + std::to_string(wrong) + " wrong; " + bad);
    } else {
      check.expect(std::all_of(redOut.begin(), redOut.end(), [](int32_t x) { return x == -5; }),
                   "ireduce wrote a non-root's recvbuff");
    }
    for (int q = 0; q < n; ++q) {
      wrong = countPatternWrong(agOut.data() + c * q, c, gyreInt32, 300 + uint64_t(q), &bad);
      check.expect(wrong == 0, "iallgather block " + std::to_string(q) + ": " + std::to_string(wrong) + " wrong; " + bad);
      wrong = countPatternWrong(a2aOut.data() + c * q, c, gyreInt32, uint64_t(q) * n + rank, &bad);
      check.expect(wrong == 0, "ialltoall block " + std::to_string(q) + ": " + std::to_string(wrong) + " wrong; " + bad);
      wrong = countPatternWrong(vOut.data() + rd[q], rc[q], gyreInt32, 500 + uint64_t(q) * n + rank, &bad);
      check.expect(wrong == 0, "ialltoallv block " + std::to_string(q) + ": " + std::to_string(wrong) + " wrong; " + bad);
    }
    wrong = countWrong(rsOut.data(), c, gyreInt32, gyreSum, n, &bad, c * rank);
    check.expect(wrong == 0, "ireducescatter: " + std::to_string(wrong) + " wrong; " + bad);
  }

  // Isend/Irecv around the ring, even ranks sending first (nonblocking calls
  // run in call order, so an order that works blocking works here).
  {
    const int right = (rank + 1) % n, left = (rank + n - 1) % n;
    for (size_t count : {size_t(10), kLarge}) {
      std::vector<float> out(count), in(count, -1.0f);
      fillPattern(out.data(), count, gyreFloat32, messageSeed(rank, right, 0));
      gyreRequest_t s = nullptr, r = nullptr;
      if (rank % 2 == 0) {
        check.expectOk(gyreIsend(out.data(), count, gyreFloat32, right, comm, &s), "isend");
        check.expectOk(gyreIrecv(in.data(), count, gyreFloat32, left, comm, &r), "irecv");
      } else {
        check.expectOk(gyreIrecv(in.data(), count, gyreFloat32, left, comm, &r), "irecv");
        check.expectOk(gyreIsend(out.data(), count, gyreFloat32, right, comm, &s), "isend");
      }
      check.expectOk(gyreWait(r), "wait irecv");
      check.expectOk(gyreWait(s), "wait isend");
      std::string bad;
      const size_t wrong = countPatternWrong(in.data(), count, gyreFloat32, messageSeed(left, rank, 0), &bad);
      check.expect(wrong == 0, "isend/irecv ring of " + std::to_string(count) + ": " + std::to_string(wrong) +
                                   " wrong; " + bad);
    }
  }

  // Nonblocking calls inside a group complete at the group's end.
  {
    std::vector<int32_t> v(5000);
    fillInput(v.data(), v.size(), gyreInt32, gyreProd, rank);
    gyreRequest_t req = nullptr;
    check.expectOk(gyreGroupStart(), "group start (nonblocking inside)");
    check.expectOk(gyreIallReduce(v.data(), v.data(), v.size(), gyreInt32, gyreProd, comm, &req), "iallreduce in group");
    check.expectOk(gyreGroupEnd(), "group end (nonblocking inside)");
    int done = 0;
    check.expectOk(gyreTest(req, &done), "test after the group");
    check.expect(done == 1, "a nonblocking call inside a group is done when the group ends");
    if (!done) check.expectOk(gyreWait(req), "wait after the group");
    std::string bad;
    const size_t wrong = countWrong(v.data(), v.size(), gyreInt32, gyreProd, n, &bad);
    check.expect(wrong == 0, "iallreduce in a group: " + std::to_string(wrong) + " wrong; " + bad);
  }

  expectAllReduceWorks(comm, n, check, "the nonblocking tests");
  check.expectOk(gyreCommDestroy(comm), "destroy");
  return check.failures() ? 1 : 0;
}

class NonblockingSemantics : public testing::TestWithParam<Param> {};

TEST_P(NonblockingSemantics, ReverseWaitPollingOverlapAndEveryOperation) {
  const Param p = GetParam();
  RunOutcome out = runWithDeadline(
      p.nranks, [&](int r, int n, const gyreUniqueId& id) { return nonblockingBody(r, n, id, p.transport); });
  EXPECT_FALSE(out.timedOut) << out.describe();
  EXPECT_TRUE(out.allSucceeded()) << out.describe();
}

INSTANTIATE_TEST_SUITE_P(Transports, NonblockingSemantics,
                         testing::Values(Param{"shm", 2}, Param{"shm", 3}, Param{"shm", 8}, Param{"tcp", 2},
                                         Param{"tcp", 3}),
                         paramName);

// =====================================================================
// 3. PreMulSum
// =====================================================================

// Rank r contributes scalar_r * x_r[i] with x_r[i] = (i + r) % 4: small
// integers, so that every sum is exact in every type (5 ranks, scalars up
// to 7: at most 7 * 3 * 5 = 105).
double premulInput(size_t i, int r) { return double((i + size_t(r)) % 4); }

double premulExpected(size_t i, int n, const std::function<double(int)>& scalarOf) {
  double s = 0;
  for (int r = 0; r < n; ++r) s += scalarOf(r) * premulInput(i, r);
  return s;
}

void fillPremulInput(void* buf, size_t count, gyreDataType_t t, int r) {
  for (size_t i = 0; i < count; ++i) setElem(buf, i, t, premulInput(i, r));
}

class PremulRun {
 public:
  PremulRun(gyreComm_t comm, int me, int n, Checker& check) : comm_(comm), me_(me), n_(n), check_(check) {}

  // AllReduce (out of place and in place), ReduceScatter and Reduce with
  // op, each checked against scalarOf (the scalar every rank should use).
  void allOps(gyreRedOp_t op, gyreDataType_t t, const std::function<double(int)>& scalarOf, const std::string& what) {
    const size_t esz = dtypeBytes(t);
    const size_t count = 1029;
    std::string bad;
    for (int inPlace = 0; inPlace < 2; ++inPlace) {
      std::vector<unsigned char> in(count * esz), out((count + 8) * esz, kFill);
      fillPremulInput(in.data(), count, t, me_);
      void* dst = inPlace ? in.data() : out.data();
      const std::string w = what + " allreduce" + (inPlace ? " in place" : "");
      if (check_.expectOk(gyreAllReduce(in.data(), dst, count, t, op, comm_, nullptr), w)) {
        const size_t wrong =
            countMismatches(dst, count, t, [&](size_t i) { return premulExpected(i, n_, scalarOf); }, &bad);
        check_.expect(wrong == 0, w + ": " + std::to_string(wrong) + " wrong; " + bad);
        if (!inPlace) {
          check_.expect(untouched(out.data() + count * esz, 8 * esz), w + ": wrote past the end");
          const size_t changed =
              countMismatches(in.data(), count, t, [&](size_t i) { return premulInput(i, me_); }, &bad);
          check_.expect(changed == 0, w + ": the input was modified; " + bad);
        }
      }
    }
    {
      const size_t rc = 333;
      std::vector<unsigned char> in(rc * n_ * esz), out(rc * esz, kFill);
      fillPremulInput(in.data(), rc * n_, t, me_);
      const std::string w = what + " reducescatter";
      if (check_.expectOk(gyreReduceScatter(in.data(), out.data(), rc, t, op, comm_, nullptr), w)) {
        const size_t wrong = countMismatches(
            out.data(), rc, t, [&](size_t i) { return premulExpected(rc * me_ + i, n_, scalarOf); }, &bad);
        check_.expect(wrong == 0, w + ": " + std::to_string(wrong) + " wrong; " + bad);
      }
      // In place: recvbuff == sendbuff + rank * recvcount.
      fillPremulInput(in.data(), rc * n_, t, me_);
      unsigned char* place = in.data() + rc * me_ * esz;
      if (check_.expectOk(gyreReduceScatter(in.data(), place, rc, t, op, comm_, nullptr), w + " in place")) {
        const size_t wrong = countMismatches(
            place, rc, t, [&](size_t i) { return premulExpected(rc * me_ + i, n_, scalarOf); }, &bad);
        check_.expect(wrong == 0, w + " in place: " + std::to_string(wrong) + " wrong; " + bad);
      }
    }
    for (int root : {0, n_ - 1}) {
      const size_t c = 517;
      std::vector<unsigned char> in(c * esz), out(c * esz, kFill);
      fillPremulInput(in.data(), c, t, me_);
      const std::string w = what + " reduce root " + std::to_string(root);
      if (!check_.expectOk(gyreReduce(in.data(), out.data(), c, t, op, root, comm_, nullptr), w)) continue;
      if (me_ == root) {
        const size_t wrong =
            countMismatches(out.data(), c, t, [&](size_t i) { return premulExpected(i, n_, scalarOf); }, &bad);
        check_.expect(wrong == 0, w + ": " + std::to_string(wrong) + " wrong; " + bad);
      } else {
        check_.expect(untouched(out.data(), c * esz), w + ": a non-root's recvbuff was written");
      }
    }
  }

 private:
  gyreComm_t comm_;
  int me_, n_;
  Checker& check_;
};

int premulBody(int rank, int n, const gyreUniqueId& id, const char* transport) {
  Checker check(rank);
  gyreComm_t comm = initRank(rank, n, id, transport, kCommTimeoutMs);
  if (!comm) return 1;
  PremulRun run(comm, rank, n, check);
  for (int ti = 0; ti < gyreNumTypes; ++ti) {
    const auto t = static_cast<gyreDataType_t>(ti);
    const std::string label = std::string("premulsum ") + dtypeLabel(t);
    // Host immediate: the value at creation counts, later changes do not.
    unsigned char scalar[8] = {};
    setElem(scalar, 0, t, rank + 1);
    gyreRedOp_t imm = gyreMaxRedOp;
    if (!check.expectOk(gyreRedOpCreatePreMulSum(&imm, scalar, t, gyreScalarHostImmediate, comm), label + " create immediate"))
      continue;
    check.expect(int(imm) >= int(gyreNumOps), label + ": the new op is not a built-in one");
    setElem(scalar, 0, t, 7);
    run.allOps(imm, t, [](int r) { return double(r + 1); }, label + " immediate");
    // Device (pointer): read at each call.
    unsigned char live[8] = {};
    setElem(live, 0, t, rank + 1);
    gyreRedOp_t dev = gyreMaxRedOp;
    if (!check.expectOk(gyreRedOpCreatePreMulSum(&dev, live, t, gyreScalarDevice, comm), label + " create pointer"))
      continue;
    check.expect(dev != imm, label + ": two live ops have different numbers");
    run.allOps(dev, t, [](int r) { return double(r + 1); }, label + " pointer, first value");
    setElem(live, 0, t, (rank % 3) + 2);
    run.allOps(dev, t, [](int r) { return double((r % 3) + 2); }, label + " pointer, changed value");
    // The immediate op still uses its value.
    run.allOps(imm, t, [](int r) { return double(r + 1); }, label + " immediate again");
    check.expectOk(gyreRedOpDestroy(imm, comm), label + " destroy immediate");
    check.expectOk(gyreRedOpDestroy(dev, comm), label + " destroy pointer");
    if (check.failures()) break;
  }

  // PreMulSum as a nonblocking call and inside a group.
  {
    float s = float(rank + 1);
    gyreRedOp_t op = gyreMaxRedOp;
    check.expectOk(gyreRedOpCreatePreMulSum(&op, &s, gyreFloat32, gyreScalarDevice, comm), "create for iallreduce");
    std::vector<float> a(4099), b(4099);
    fillPremulInput(a.data(), a.size(), gyreFloat32, rank);
    fillPremulInput(b.data(), b.size(), gyreFloat32, rank);
    gyreRequest_t req = nullptr;
    check.expectOk(gyreIallReduce(a.data(), a.data(), a.size(), gyreFloat32, op, comm, &req), "premulsum iallreduce");
    check.expectOk(gyreWait(req), "premulsum iallreduce wait");
    check.expectOk(gyreGroupStart(), "group start");
    check.expectOk(gyreAllReduce(b.data(), b.data(), b.size(), gyreFloat32, op, comm, nullptr), "premulsum in group");
    check.expectOk(gyreGroupEnd(), "group end");
    std::string bad;
    for (auto* v : {&a, &b}) {
      const size_t wrong = countMismatches(
          v->data(), v->size(), gyreFloat32, [&](size_t i) { return premulExpected(i, n, [](int r) { return r + 1.0; }); },
          &bad);
      check.expect(wrong == 0, std::string(v == &a ? "premulsum iallreduce: " : "premulsum in a group: ") +
                                   std::to_string(wrong) + " wrong; " + bad);
    }
    check.expectOk(gyreRedOpDestroy(op, comm), "destroy");
  }

  // Errors: each is invalid-argument with a message, and harmless.
  auto expectInvalid = [&](gyreResult_t r, const std::string& what, const std::string& mentions) {
    const std::string msg = gyreGetLastError(comm);
    check.expect(r == gyreInvalidArgument, what + ": expected invalid argument, got " + gyreGetErrorString(r) + ": " + msg);
    check.expect(contains(msg, mentions), what + ": the message should mention '" + mentions + "': " + msg);
  };
  float one = 1.0f;
  gyreRedOp_t op = gyreMaxRedOp;
  expectInvalid(gyreRedOpCreatePreMulSum(&op, &one, static_cast<gyreDataType_t>(42), gyreScalarHostImmediate, comm),
                "create with datatype 42", "datatype 42");
  expectInvalid(gyreRedOpCreatePreMulSum(&op, &one, static_cast<gyreDataType_t>(-1), gyreScalarDevice, comm),
                "create with datatype -1", "datatype -1");
  expectInvalid(gyreRedOpCreatePreMulSum(&op, &one, gyreFloat32, static_cast<gyreScalarResidence_t>(7), comm),
                "create with residence 7", "residence 7");
  expectInvalid(gyreRedOpCreatePreMulSum(&op, nullptr, gyreFloat32, gyreScalarHostImmediate, comm), "create with NULL scalar",
                "scalar");
  expectInvalid(gyreRedOpCreatePreMulSum(nullptr, &one, gyreFloat32, gyreScalarHostImmediate, comm), "create with NULL op",
                "op");
  expectInvalid(gyreRedOpCreatePreMulSum(&op, &one, gyreFloat32, gyreScalarHostImmediate, nullptr), "create with NULL comm",
                "comm");
  check.expectOk(gyreRedOpCreatePreMulSum(&op, &one, gyreFloat32, gyreScalarHostImmediate, comm), "create float32 op");
  std::vector<double> d(100, 1.0);
  std::vector<float> f(100, 1.0f), g(100 * n);
  expectInvalid(gyreAllReduce(d.data(), d.data(), d.size(), gyreFloat64, op, comm, nullptr),
                "a float32 op used on float64 data", "made for datatype");
  const std::string opText = "op " + std::to_string(int(op));
  check.expectOk(gyreRedOpDestroy(op, comm), "destroy float32 op");
  expectInvalid(gyreAllReduce(f.data(), f.data(), f.size(), gyreFloat32, op, comm, nullptr), "allreduce with a destroyed op",
                opText);
  expectInvalid(gyreReduce(f.data(), f.data(), f.size(), gyreFloat32, op, 0, comm, nullptr), "reduce with a destroyed op",
                opText);
  expectInvalid(gyreReduceScatter(g.data(), f.data(), f.size(), gyreFloat32, op, comm, nullptr),
                "reducescatter with a destroyed op", opText);
  gyreRequest_t req = nullptr;
  expectInvalid(gyreIallReduce(f.data(), f.data(), f.size(), gyreFloat32, op, comm, &req), "iallreduce with a destroyed op",
                opText);
  expectInvalid(gyreRedOpDestroy(op, comm), "destroying an op twice", opText);
  expectInvalid(gyreRedOpDestroy(gyreSum, comm), "destroying a built-in op", "op 0");
  expectInvalid(gyreRedOpDestroy(static_cast<gyreRedOp_t>(gyreNumOps + 1000), comm), "destroying an op never made",
                "op " + std::to_string(gyreNumOps + 1000));
  expectAllReduceWorks(comm, n, check, "refused premulsum calls");
  check.expectOk(gyreCommDestroy(comm), "destroy");
  return check.failures() ? 1 : 0;
}

class PreMulSumSemantics : public testing::TestWithParam<Param> {};

TEST_P(PreMulSumSemantics, ImmediateAndPointerScalarsInEveryTypeAndOperation) {
  const Param p = GetParam();
  RunOutcome out = runWithDeadline(
      p.nranks, [&](int r, int n, const gyreUniqueId& id) { return premulBody(r, n, id, p.transport); });
  EXPECT_FALSE(out.timedOut) << out.describe();
  EXPECT_TRUE(out.allSucceeded()) << out.describe();
}

INSTANTIATE_TEST_SUITE_P(Transports, PreMulSumSemantics,
                         testing::Values(Param{"shm", 2}, Param{"shm", 3}, Param{"shm", 5}, Param{"tcp", 3}),
                         paramName);

// The same with an AllReduce algorithm forced: the automatic choice above
// runs only the ones its sizes pick, and PreMulSum must pass through every
// plan (the scaled input is an ordinary input to it).
class PreMulSumAllReduceAlgorithms : public testing::TestWithParam<const char*> {};

TEST_P(PreMulSumAllReduceAlgorithms, ImmediateAndPointerScalarsInEveryType) {
  const std::string algo = std::string("allreduce:") + GetParam();
  RunOutcome out = runWithDeadline(5, [&](int r, int n, const gyreUniqueId& id) {
    setenv("GYRE_ALGO", algo.c_str(), 1);  // in the forked rank only
    return premulBody(r, n, id, "shm");
  });
  EXPECT_FALSE(out.timedOut) << out.describe();
  EXPECT_TRUE(out.allSucceeded()) << out.describe();
}

INSTANTIATE_TEST_SUITE_P(Forced, PreMulSumAllReduceAlgorithms,
                         testing::Values("double_binary_tree"),
                         [](const auto& p) { return std::string(p.param); });

// NCCL's rule, which gyre's API follows: "an operator may be destroyed as
// soon as the last NCCL function which is given that operator returns".
// Here a nonblocking AllReduce with a PreMulSum op (scalar 3) is queued -
// deterministically: it waits behind an Ibarrier that rank 1 joins only when
// rank 0 lets it - the op is destroyed and another one (scalar 100) created,
// which takes the same number; the queued call must still use scalar 3 (the
// call binds the op's scalar when it is made).
TEST(PreMulSumLifetimeSemantics, DestroyingAnOpAfterANonblockingCallReturns) {
  int gate[2];
  ASSERT_EQ(pipe(gate), 0);
  RunOutcome out = runWithDeadline(2, [&](int rank, int n, const gyreUniqueId& id) {
    Checker check(rank);
    gyreComm_t comm = initRank(rank, n, id, "shm", kHangTimeoutMs);
    if (!comm) return 1;
    const size_t count = 1000;
    std::vector<float> v(count);
    fillPremulInput(v.data(), count, gyreFloat32, rank);
    if (rank == 1) {
      char b;
      check.expect(read(gate[0], &b, 1) == 1, "gate");
      check.expectOk(gyreBarrier(comm, nullptr), "barrier");
      float one = 1.0f;
      gyreRedOp_t op = gyreMaxRedOp;
      check.expectOk(gyreRedOpCreatePreMulSum(&op, &one, gyreFloat32, gyreScalarHostImmediate, comm), "create");
      check.expectOk(gyreAllReduce(v.data(), v.data(), count, gyreFloat32, op, comm, nullptr), "allreduce");
    } else {
      float three = 3.0f, hundred = 100.0f;
      gyreRedOp_t op = gyreMaxRedOp, other = gyreMaxRedOp;
      gyreRequest_t bar = nullptr, req = nullptr;
      check.expectOk(gyreIbarrier(comm, &bar), "ibarrier");  // cannot finish before rank 1 is let go
      check.expectOk(gyreRedOpCreatePreMulSum(&op, &three, gyreFloat32, gyreScalarHostImmediate, comm), "create x3");
      check.expectOk(gyreIallReduce(v.data(), v.data(), count, gyreFloat32, op, comm, &req), "iallreduce x3");
      check.expectOk(gyreRedOpDestroy(op, comm), "destroy x3 after the call returned");
      check.expectOk(gyreRedOpCreatePreMulSum(&other, &hundred, gyreFloat32, gyreScalarHostImmediate, comm),
                     "create x100");
      check.expect(write(gate[1], "x", 1) == 1, "let rank 1 go");
      check.expectOk(gyreWait(bar), "wait ibarrier");
      check.expectOk(gyreWait(req), "wait iallreduce");
      check.expectOk(gyreRedOpDestroy(other, comm), "destroy x100");
    }
    // Rank 0 contributes 3 * x0, rank 1 contributes 1 * x1.
    std::string bad;
    const size_t wrong = countMismatches(
        v.data(), count, gyreFloat32, [&](size_t i) { return 3 * premulInput(i, 0) + premulInput(i, 1); }, &bad);
    check.expect(wrong == 0, "allreduce with an op destroyed after the call: " + std::to_string(wrong) + " wrong; " + bad);
    gyreCommDestroy(comm);
    return check.failures() ? 1 : 0;
  });
  close(gate[0]);
  close(gate[1]);
  EXPECT_FALSE(out.timedOut) << out.describe();
  EXPECT_TRUE(out.allSucceeded()) << out.describe();
}

// =====================================================================
// 4. Split
// =====================================================================

// Child ranks in order: members sorted by key, then by parent rank.
std::vector<int> expectedMembers(int n, const std::function<int(int)>& color, const std::function<int(int)>& key,
                                 int myColor) {
  std::vector<int> m;
  for (int r = 0; r < n; ++r)
    if (color(r) == myColor) m.push_back(r);
  std::stable_sort(m.begin(), m.end(), [&](int a, int b) { return key(a) < key(b); });
  return m;
}

// Checks a child's rank, size and order (an AllGather of parent ranks) and
// an AllReduce over it.
void checkChild(gyreComm_t child, int parentRank, const std::vector<int>& members, Checker& check,
                const std::string& what) {
  if (!check.expect(child != nullptr, what + ": got no communicator")) return;
  int size = -1, rank = -1;
  check.expectOk(gyreCommCount(child, &size), what + ": count");
  check.expectOk(gyreCommUserRank(child, &rank), what + ": rank");
  const int want = int(std::find(members.begin(), members.end(), parentRank) - members.begin());
  check.expect(size == int(members.size()),
               what + ": size " + std::to_string(size) + ", expected " + std::to_string(members.size()));
  check.expect(rank == want, what + ": rank " + std::to_string(rank) + ", expected " + std::to_string(want));
  std::vector<int32_t> mine = {parentRank}, all(members.size(), -1);
  if (check.expectOk(gyreAllGather(mine.data(), all.data(), 1, gyreInt32, child, nullptr), what + ": allgather")) {
    for (size_t i = 0; i < members.size(); ++i)
      check.expect(all[i] == members[i], what + ": child rank " + std::to_string(i) + " is parent rank " +
                                             std::to_string(all[i]) + ", expected " + std::to_string(members[i]));
  }
  std::vector<int64_t> v(3000);
  for (size_t i = 0; i < v.size(); ++i) v[i] = int64_t(i) * 1000 + parentRank + 1;
  if (check.expectOk(gyreAllReduce(v.data(), v.data(), v.size(), gyreInt64, gyreSum, child, nullptr),
                     what + ": allreduce")) {
    int64_t memberSum = 0;
    for (int m : members) memberSum += m + 1;
    for (size_t i = 0; i < v.size(); ++i) {
      const int64_t exp = int64_t(i) * 1000 * int64_t(members.size()) + memberSum;
      if (!check.expect(v[i] == exp, what + ": allreduce element " + std::to_string(i) + " is " + std::to_string(v[i]) +
                                         ", expected " + std::to_string(exp)))
        break;
    }
  }
}

int splitBody(int rank, int n, const gyreUniqueId& id, const char* transport) {
  Checker check(rank);
  gyreComm_t parent = initRank(rank, n, id, transport, kCommTimeoutMs);
  if (!parent) return 1;

  // By parity, keys reversing the order.
  auto parity = [](int r) { return r % 2; };
  auto reversed = [](int r) { return -r; };
  gyreComm_t half = nullptr;
  if (check.expectOk(gyreCommSplit(parent, parity(rank), reversed(rank), &half, nullptr), "split by parity"))
    checkChild(half, rank, expectedMembers(n, parity, reversed, parity(rank)), check, "parity child");
  // The parent works, interleaved with the child.
  expectAllReduceWorks(parent, n, check, "a split");
  if (half) {
    std::vector<float> b(1000, -1.0f);
    const int root = n - 1;
    if (rank == root) fillPattern(b.data(), b.size(), gyreFloat32, 55);
    check.expectOk(gyreBroadcast(b.data(), b.data(), b.size(), gyreFloat32, root, parent, nullptr), "parent broadcast");
    std::string bad;
    check.expect(countPatternWrong(b.data(), b.size(), gyreFloat32, 55, &bad) == 0, "parent broadcast result; " + bad);
  }

  // A split of the split: halves of each parity child, ties in key broken
  // by (child) rank.
  if (half) {
    int hs = 0, hr = 0;
    gyreCommCount(half, &hs);
    gyreCommUserRank(half, &hr);
    auto lower = [hs](int r) { return r < hs / 2 ? 0 : 1; };
    auto zero = [](int) { return 0; };
    gyreComm_t quarter = nullptr;
    if (check.expectOk(gyreCommSplit(half, lower(hr), 0, &quarter, nullptr), "split of the split")) {
      // Members by child rank; their parent ranks are what the AllGather shows.
      std::vector<int> childMembers = expectedMembers(hs, lower, zero, lower(hr));
      const std::vector<int> halfMembers = expectedMembers(n, parity, reversed, parity(rank));
      std::vector<int> parentMembers;
      for (int c : childMembers) parentMembers.push_back(halfMembers[c]);
      checkChild(quarter, rank, parentMembers, check, "split of the split");
      check.expectOk(gyreCommDestroy(quarter), "destroy the split of the split");
    }
    expectAllReduceWorks(half, hs, check, "splitting the child");
  }

  // NOCOLOR: rank 0 joins none; the others, keyed by parity, form one.
  auto color = [](int r) { return r == 0 ? GYRE_SPLIT_NOCOLOR : 7; };
  auto byParity = [](int r) { return r % 2; };
  gyreComm_t rest = reinterpret_cast<gyreComm_t>(&check);  // must be overwritten with NULL on rank 0
  if (check.expectOk(gyreCommSplit(parent, color(rank), byParity(rank), &rest, nullptr), "split with NOCOLOR")) {
    if (rank == 0)
      check.expect(rest == nullptr, "a GYRE_SPLIT_NOCOLOR rank gets a NULL communicator");
    else
      checkChild(rest, rank, expectedMembers(n, color, byParity, 7), check, "the ranks with a color");
  }
  if (rank == 0) rest = nullptr;

  // A negative color other than NOCOLOR is refused on every rank, locally.
  gyreComm_t bad = reinterpret_cast<gyreComm_t>(&check);
  gyreResult_t r = gyreCommSplit(parent, -3, 0, &bad, nullptr);
  const std::string msg = gyreGetLastError(parent);
  check.expect(r == gyreInvalidArgument, std::string("color -3: expected invalid argument, got ") + gyreGetErrorString(r));
  check.expect(contains(msg, "color -3"), "the message names the color: " + msg);
  check.expect(bad == nullptr, "a refused split sets newcomm to NULL");
  r = gyreCommSplit(parent, 0, 0, nullptr, nullptr);
  check.expect(r == gyreInvalidArgument, "a NULL newcomm is refused");

  // PreMulSum ops belong to their communicator.
  float s = 2.0f;
  gyreRedOp_t op = gyreMaxRedOp;
  check.expectOk(gyreRedOpCreatePreMulSum(&op, &s, gyreFloat32, gyreScalarHostImmediate, parent), "premulsum on parent");
  if (half) {
    std::vector<float> v(10, 1.0f);
    r = gyreAllReduce(v.data(), v.data(), v.size(), gyreFloat32, op, half, nullptr);
    check.expect(r == gyreInvalidArgument, std::string("the parent's premulsum op on the child: expected invalid argument, got ") +
                                               gyreGetErrorString(r));
    expectAllReduceWorks(half, int(expectedMembers(n, parity, reversed, parity(rank)).size()), check,
                         "a foreign op on the child");
  }
  check.expectOk(gyreRedOpDestroy(op, parent), "destroy premulsum");
  expectAllReduceWorks(parent, n, check, "all the splits");

  // The parent goes first; its children live on.
  check.expectOk(gyreCommDestroy(parent), "destroy parent");
  if (rest) {
    checkChild(rest, rank, expectedMembers(n, color, byParity, 7), check, "a child after its parent's destroy");
    check.expectOk(gyreCommDestroy(rest), "destroy the NOCOLOR split's child");
  }
  if (half) check.expectOk(gyreCommDestroy(half), "destroy the parity child");
  return check.failures() ? 1 : 0;
}

class SplitSemantics : public testing::TestWithParam<Param> {};

TEST_P(SplitSemantics, ColorsKeysNoColorNestedAndParentStaysUsable) {
  const Param p = GetParam();
  RunOutcome out = runWithDeadline(
      p.nranks, [&](int r, int n, const gyreUniqueId& id) { return splitBody(r, n, id, p.transport); });
  EXPECT_FALSE(out.timedOut) << out.describe();
  EXPECT_TRUE(out.allSucceeded()) << out.describe();
}

INSTANTIATE_TEST_SUITE_P(Transports, SplitSemantics,
                         testing::Values(Param{"shm", 2}, Param{"shm", 5}, Param{"shm", 8}, Param{"tcp", 3},
                                         Param{"tcp", 4}),
                         paramName);

// =====================================================================
// 5. Mismatched calls: an error on every rank, naming both sides
// =====================================================================

struct MismatchCase {
  const char* name;
  // This rank's call (the odd one out is rank `odd`); returns its result.
  std::function<gyreResult_t(gyreComm_t comm, int rank, int n, int odd)> call;
  // Both sides' descriptions must appear in the message.
  std::function<std::vector<std::string>(int n)> mentions;
};

const std::vector<MismatchCase>& mismatchCases() {
  static const std::vector<MismatchCase> cases = {
      {"allreduce_count",
       [](gyreComm_t c, int rank, int, int odd) {
         std::vector<float> v(11, 1.0f);
         return gyreAllReduce(v.data(), v.data(), rank == odd ? 11 : 10, gyreFloat32, gyreSum, c, nullptr);
       },
       [](int) { return std::vector<std::string>{"11 x float32", "10 x float32"}; }},
      {"allreduce_dtype",
       [](gyreComm_t c, int rank, int, int odd) {
         std::vector<float> v(1000, 1.0f);
         return gyreAllReduce(v.data(), v.data(), v.size(), rank == odd ? gyreInt32 : gyreFloat32, gyreSum, c, nullptr);
       },
       [](int) { return std::vector<std::string>{"int32", "float32"}; }},
      // Rank 1 says root 1, the others root 0: two ranks would only send,
      // and without a check every rank could return success with the
      // non-roots silently keeping root 0's data.
      {"broadcast_root",
       [](gyreComm_t c, int rank, int, int odd) {
         std::vector<float> v(1000, float(rank));
         return gyreBroadcast(v.data(), v.data(), v.size(), gyreFloat32, rank == odd ? odd : 0, c, nullptr);
       },
       [](int) { return std::vector<std::string>{"root 0", "root 1"}; }},
      // Rank 1 says root 1, the others root 0: without a check the ranks
      // wait on each other in a cycle in which no rank ever reads a wrongly
      // tagged message, until GYRE_TIMEOUT_MS.
      {"reduce_root",
       [](gyreComm_t c, int rank, int n, int odd) {
         std::vector<int32_t> v(1000, 1), out(1000);
         return gyreReduce(v.data(), out.data(), v.size(), gyreInt32, gyreSum, rank == odd ? odd : 0, c, nullptr);
       },
       [](int) { return std::vector<std::string>{"root 0", "root 1"}; }},
      {"allgather_vs_allreduce",
       [](gyreComm_t c, int rank, int n, int odd) {
         std::vector<float> in(100, 1.0f), out(100 * n);
         if (rank == odd) return gyreAllGather(in.data(), out.data(), 100, gyreFloat32, c, nullptr);
         return gyreAllReduce(in.data(), out.data(), 100, gyreFloat32, gyreSum, c, nullptr);
       },
       [](int) { return std::vector<std::string>{"allgather", "allreduce"}; }},
      {"reducescatter_count",
       [](gyreComm_t c, int rank, int n, int odd) {
         std::vector<double> in(300 * n, 1.0), out(300);
         return gyreReduceScatter(in.data(), out.data(), rank == odd ? 299 : 300, gyreFloat64, gyreSum, c, nullptr);
       },
       [](int) { return std::vector<std::string>{"299 x float64", "300 x float64"}; }},
      {"alltoall_vs_barrier",
       [](gyreComm_t c, int rank, int n, int odd) {
         std::vector<int32_t> in(50 * n, rank), out(50 * n);
         if (rank == odd) return gyreBarrier(c, nullptr);
         return gyreAllToAll(in.data(), out.data(), 50, gyreInt32, c, nullptr);
       },
       [](int) { return std::vector<std::string>{"alltoall", "barrier"}; }},
      // Rank `odd` sends each peer one element more than the peer expects.
      {"alltoallv_counts",
       [](gyreComm_t c, int rank, int n, int odd) {
         std::vector<size_t> sc(n, 20), sd(n), rc(n, 20), rd(n);
         if (rank == odd)
           for (int p = 0; p < n; ++p)
             if (p != rank) sc[p] = 21;
         for (int p = 0; p < n; ++p) sd[p] = rd[p] = size_t(p) * 21;
         std::vector<int32_t> in(21 * n, rank), out(21 * n);
         return gyreAllToAllv(in.data(), sc.data(), sd.data(), out.data(), rc.data(), rd.data(), gyreInt32, c, nullptr);
       },
       [](int) { return std::vector<std::string>{"84 bytes sent", "80 expected"}; }},
  };
  return cases;
}

struct MismatchParam {
  const char* transport;
  int nranks;
  size_t caseIndex;
};

void PrintTo(const MismatchParam& p, std::ostream* os) {
  *os << mismatchCases()[p.caseIndex].name << ", " << p.transport << ", " << p.nranks << " ranks";
}

class MismatchSemantics : public testing::TestWithParam<MismatchParam> {};

// The first error each rank sees: from the mismatched call itself, or, on a
// rank whose part of it only sent (eager sends complete before a peer can
// object), from its next call. Never a timeout, always the mismatch.
constexpr const char* kMismatchSentence = "every rank must make the same calls in the same order";

TEST_P(MismatchSemantics, EveryRankGetsAnErrorNamingBothSides) {
  const MismatchParam p = GetParam();
  const MismatchCase& mc = mismatchCases()[p.caseIndex];
  RunOutcome out = runWithDeadline(p.nranks, [&](int rank, int n, const gyreUniqueId& id) {
    Checker check(rank);
    gyreComm_t comm = initRank(rank, n, id, p.transport, kHangTimeoutMs);
    if (!comm) return 1;
    const int odd = 1;
    // A clean call first, so the mismatch is not the first message.
    expectAllReduceWorks(comm, n, check, "init");
    const gyreResult_t r = mc.call(comm, rank, n, odd);
    std::string msg = gyreGetLastError(comm);
    gyreResult_t first = r;
    std::string where = "the mismatched call";
    if (r == gyreSuccess) {
      std::vector<float> v(10, 1.0f);
      first = gyreAllReduce(v.data(), v.data(), v.size(), gyreFloat32, gyreSum, comm, nullptr);
      msg = gyreGetLastError(comm);
      where = "the next call";
    }
    // The parent looks for both sides in what the ranks print.
    std::printf("rank %d: first error, from %s: %s: %s\n", rank, where.c_str(), gyreGetErrorString(first), msg.c_str());
    check.expect(first != gyreSuccess, std::string(mc.name) + ": no error from the mismatched call or the next one");
    check.expect(first != gyreTimeout, std::string(mc.name) + ": a timeout, not a mismatch error (the ranks hung): " + msg);
    if (first != gyreSuccess)
      check.expect(contains(msg, kMismatchSentence),
                   std::string(mc.name) + ": the error from " + where + " should report the mismatch: " + msg);
    gyreResult_t async = gyreSuccess;
    check.expectOk(gyreCommGetAsyncError(comm, &async), "async error query");
    check.expect(async != gyreSuccess, "the communicator reports the failure afterwards");
    std::vector<float> v(10, 1.0f);
    const gyreResult_t again = gyreAllReduce(v.data(), v.data(), v.size(), gyreFloat32, gyreSum, comm, nullptr);
    check.expect(again == gyreInvalidUsage, std::string("a call on the failed communicator is refused, got ") +
                                                gyreGetErrorString(again));
    gyreCommDestroy(comm);
    return check.failures();
  });
  EXPECT_FALSE(out.timedOut) << out.describe();
  EXPECT_TRUE(out.allSucceeded()) << out.describe();
  // Some rank's error names both sides of the mismatched call.
  bool named = false;
  for (const RankOutcome& r : out.ranks) {
    bool all = true;
    for (const std::string& m : mc.mentions(p.nranks)) all = all && contains(r.output, m);
    named = named || all;
  }
  EXPECT_TRUE(named) << "no rank's error names both sides (" << ::testing::PrintToString(mc.mentions(p.nranks))
                     << "):\n" << out.describe();
}

std::vector<MismatchParam> mismatchParams() {
  std::vector<MismatchParam> ps;
  for (size_t i = 0; i < mismatchCases().size(); ++i) {
    ps.push_back({"shm", 3, i});
    ps.push_back({"tcp", 4, i});
  }
  ps.push_back({"shm", 4, 0});
  ps.push_back({"shm", 2, 2});  // rank 0 Broadcast root 0, rank 1 root 1
  return ps;
}

std::string mismatchName(const testing::TestParamInfo<MismatchParam>& p) {
  return std::string(mismatchCases()[p.param.caseIndex].name) + "_" + p.param.transport + "_" +
         std::to_string(p.param.nranks) + "ranks";
}

INSTANTIATE_TEST_SUITE_P(Calls, MismatchSemantics, testing::ValuesIn(mismatchParams()), mismatchName);

// =====================================================================
// 6. Argument checks of the newer operations
// =====================================================================

int argumentsBody(int rank, int n, const gyreUniqueId& id, const char* transport) {
  Checker check(rank);
  gyreComm_t comm = initRank(rank, n, id, transport, kCommTimeoutMs);
  if (!comm) return 1;
  auto expectInvalid = [&](gyreResult_t r, const std::string& what, const std::string& mentions) {
    const std::string msg = gyreGetLastError(comm);
    check.expect(r == gyreInvalidArgument, what + ": expected invalid argument, got " + gyreGetErrorString(r) + ": " + msg);
    check.expect(contains(msg, mentions), what + ": the message should mention '" + mentions + "': " + msg);
  };
  const size_t c = 10;
  std::vector<float> a(c * n + 16, 1.0f), b(c * n + 16, 2.0f);
  float* s = a.data();
  float* r = b.data();
  // Each call must fail locally on every rank (nothing is sent), so checks
  // made only on the root use root = this rank.
  const int me = rank;
  const std::string outside = "outside [0, " + std::to_string(n) + ")";

  // NULL buffers with a nonzero count.
  expectInvalid(gyreBroadcast(s, nullptr, c, gyreFloat32, 0, comm, nullptr), "broadcast NULL recvbuff", "recvbuff");
  expectInvalid(gyreBroadcast(nullptr, r, c, gyreFloat32, me, comm, nullptr), "broadcast NULL sendbuff on the root",
                "sendbuff");
  expectInvalid(gyreReduce(nullptr, r, c, gyreFloat32, gyreSum, 0, comm, nullptr), "reduce NULL sendbuff", "sendbuff");
  expectInvalid(gyreReduce(s, nullptr, c, gyreFloat32, gyreSum, me, comm, nullptr), "reduce NULL recvbuff on the root",
                "recvbuff");
  expectInvalid(gyreAllGather(nullptr, r, c, gyreFloat32, comm, nullptr), "allgather NULL sendbuff", "sendbuff");
  expectInvalid(gyreAllGather(s, nullptr, c, gyreFloat32, comm, nullptr), "allgather NULL recvbuff", "recvbuff");
  expectInvalid(gyreReduceScatter(nullptr, r, c, gyreFloat32, gyreSum, comm, nullptr), "reducescatter NULL sendbuff",
                "sendbuff");
  expectInvalid(gyreReduceScatter(s, nullptr, c, gyreFloat32, gyreSum, comm, nullptr), "reducescatter NULL recvbuff",
                "recvbuff");
  expectInvalid(gyreAllToAll(nullptr, r, c, gyreFloat32, comm, nullptr), "alltoall NULL sendbuff", "sendbuff");
  expectInvalid(gyreAllToAll(s, nullptr, c, gyreFloat32, comm, nullptr), "alltoall NULL recvbuff", "recvbuff");
  expectInvalid(gyreGather(nullptr, r, c, gyreFloat32, 0, comm, nullptr), "gather NULL sendbuff", "sendbuff");
  expectInvalid(gyreGather(s, nullptr, c, gyreFloat32, me, comm, nullptr), "gather NULL recvbuff on the root", "recvbuff");
  expectInvalid(gyreScatter(s, nullptr, c, gyreFloat32, 0, comm, nullptr), "scatter NULL recvbuff", "recvbuff");
  expectInvalid(gyreScatter(nullptr, r, c, gyreFloat32, me, comm, nullptr), "scatter NULL sendbuff on the root", "sendbuff");
  expectInvalid(gyreSend(nullptr, c, gyreFloat32, (me + 1) % n, comm, nullptr), "send NULL buffer", "sendbuff");
  expectInvalid(gyreRecv(nullptr, c, gyreFloat32, (me + 1) % n, comm, nullptr), "recv NULL buffer", "recvbuff");
  gyreRequest_t req = nullptr;
  expectInvalid(gyreIallGather(nullptr, r, c, gyreFloat32, comm, &req), "iallgather NULL sendbuff", "sendbuff");
  expectInvalid(gyreIsend(nullptr, c, gyreFloat32, (me + 1) % n, comm, &req), "isend NULL buffer", "sendbuff");

  // Roots and peers out of range.
  for (int bad : {-1, n, n + 7}) {
    const std::string txt = std::to_string(bad) + " is " + outside;
    expectInvalid(gyreBroadcast(s, r, c, gyreFloat32, bad, comm, nullptr), "broadcast root " + std::to_string(bad),
                  "root " + txt);
    expectInvalid(gyreReduce(s, r, c, gyreFloat32, gyreSum, bad, comm, nullptr), "reduce root " + std::to_string(bad),
                  "root " + txt);
    expectInvalid(gyreGather(s, r, c, gyreFloat32, bad, comm, nullptr), "gather root " + std::to_string(bad),
                  "root " + txt);
    expectInvalid(gyreScatter(s, r, c, gyreFloat32, bad, comm, nullptr), "scatter root " + std::to_string(bad),
                  "root " + txt);
    expectInvalid(gyreIbroadcast(s, r, c, gyreFloat32, bad, comm, &req), "ibroadcast root " + std::to_string(bad),
                  "root " + txt);
    expectInvalid(gyreSend(s, c, gyreFloat32, bad, comm, nullptr), "send peer " + std::to_string(bad), "peer " + txt);
    expectInvalid(gyreRecv(r, c, gyreFloat32, bad, comm, nullptr), "recv peer " + std::to_string(bad), "peer " + txt);
    expectInvalid(gyreIrecv(r, c, gyreFloat32, bad, comm, &req), "irecv peer " + std::to_string(bad), "peer " + txt);
  }
  // A bad peer inside a group is refused at the call; the group still ends cleanly.
  check.expectOk(gyreGroupStart(), "group start");
  expectInvalid(gyreSend(s, c, gyreFloat32, n, comm, nullptr), "send to a bad peer in a group", "peer " + std::to_string(n));
  expectInvalid(gyreRecv(r, c, gyreFloat32, -2, comm, nullptr), "recv from a bad peer in a group", "peer -2");
  check.expectOk(gyreGroupEnd(), "group end after refused calls");

  // Overlapping buffers that are not the documented in-place form.
  expectInvalid(gyreBroadcast(s, s + 1, c, gyreFloat32, me, comm, nullptr), "broadcast partial overlap", "overlap");
  expectInvalid(gyreReduce(s, s + 1, c, gyreFloat32, gyreSum, me, comm, nullptr), "reduce partial overlap", "overlap");
  // AllGather in place is sendbuff == recvbuff + rank * sendcount: one element off is not.
  expectInvalid(gyreAllGather(r + c * me + 1, r, c, gyreFloat32, comm, nullptr), "allgather off-by-one in place",
                "recvbuff + rank * sendcount");
  if (me != 0)
    expectInvalid(gyreAllGather(r, r, c, gyreFloat32, comm, nullptr), "allgather sendbuff == recvbuff on rank != 0",
                  "overlap");
  expectInvalid(gyreReduceScatter(s, s + c * me + 1, c, gyreFloat32, gyreSum, comm, nullptr),
                "reducescatter off-by-one in place", "sendbuff + rank * recvcount");
  expectInvalid(gyreAllToAll(s, s + 1, c, gyreFloat32, comm, nullptr), "alltoall partial overlap", "overlap");
  expectInvalid(gyreGather(r + c * me + 3, r, c, gyreFloat32, me, comm, nullptr), "gather partial overlap on the root",
                "overlap");
  expectInvalid(gyreScatter(s, s + 2, c, gyreFloat32, me, comm, nullptr), "scatter partial overlap on the root",
                "overlap");
  expectInvalid(gyreIallToAll(s, s + 1, c, gyreFloat32, comm, &req), "ialltoall partial overlap", "overlap");

  // AllToAllv.
  std::vector<size_t> sc(n, 2), sd(n), rc(n, 2), rd(n);
  for (int p = 0; p < n; ++p) sd[p] = rd[p] = size_t(p) * 2;
  rc[me] = 3;
  expectInvalid(gyreAllToAllv(s, sc.data(), sd.data(), r, rc.data(), rd.data(), gyreFloat32, comm, nullptr),
                "alltoallv sendcounts[me] != recvcounts[me]",
                "sendcounts[" + std::to_string(me) + "] (2) must equal recvcounts[" + std::to_string(me) + "] (3)");
  expectInvalid(gyreIallToAllv(s, sc.data(), sd.data(), r, rc.data(), rd.data(), gyreFloat32, comm, &req),
                "ialltoallv sendcounts[me] != recvcounts[me]", "recvcounts[" + std::to_string(me) + "]");
  rc[me] = 2;
  expectInvalid(gyreAllToAllv(s, nullptr, sd.data(), r, rc.data(), rd.data(), gyreFloat32, comm, nullptr),
                "alltoallv NULL sendcounts", "sendcounts is NULL");
  expectInvalid(gyreAllToAllv(s, sc.data(), sd.data(), r, rc.data(), nullptr, gyreFloat32, comm, nullptr),
                "alltoallv NULL rdispls", "rdispls is NULL");
  expectInvalid(gyreAllToAllv(s, sc.data(), sd.data(), s + 1, rc.data(), rd.data(), gyreFloat32, comm, nullptr),
                "alltoallv overlapping buffers", "overlap");
  expectInvalid(gyreAllToAllv(nullptr, sc.data(), sd.data(), r, rc.data(), rd.data(), gyreFloat32, comm, nullptr),
                "alltoallv NULL sendbuff", "sendbuff");
  std::vector<size_t> huge = sd;
  huge[0] = SIZE_MAX - 1;
  expectInvalid(gyreAllToAllv(s, sc.data(), huge.data(), r, rc.data(), rd.data(), gyreFloat32, comm, nullptr),
                "alltoallv displacement overflow", "overflows");

  // Counts whose bytes overflow the address space: one block, and the n
  // blocks of AllGather's output and ReduceScatter's input.
  const size_t tooMany = SIZE_MAX / 4 + 1, perRankTooMany = (size_t(PTRDIFF_MAX) / 4) / size_t(n) + 1;
  expectInvalid(gyreAllReduce(s, r, tooMany, gyreFloat32, gyreSum, comm, nullptr), "allreduce count overflow",
                "count " + std::to_string(tooMany) + " of float32 overflows the address space");
  expectInvalid(gyreBroadcast(s, r, size_t(PTRDIFF_MAX) / 8 + 1, gyreFloat64, me, comm, nullptr),
                "broadcast count overflow", "overflows the address space");
  expectInvalid(gyreAllGather(s, r, perRankTooMany, gyreFloat32, comm, nullptr), "allgather count x ranks overflow",
                "times " + std::to_string(n) + " ranks overflows the address space");
  expectInvalid(gyreReduceScatter(s, r, perRankTooMany, gyreFloat32, gyreSum, comm, nullptr),
                "reducescatter count x ranks overflow", "overflows the address space");
  expectInvalid(gyreAllToAll(s, r, perRankTooMany, gyreFloat32, comm, nullptr), "alltoall count x ranks overflow",
                "overflows the address space");

  // Data types, requests.
  expectInvalid(gyreBroadcast(s, r, c, static_cast<gyreDataType_t>(99), 0, comm, nullptr), "broadcast datatype 99",
                "datatype 99");
  expectInvalid(gyreAllToAll(s, r, c, static_cast<gyreDataType_t>(-4), comm, nullptr), "alltoall datatype -4",
                "datatype -4");
  expectInvalid(gyreIallReduce(s, r, c, gyreFloat32, gyreSum, comm, nullptr), "iallreduce NULL request", "request");
  expectInvalid(gyreIbarrier(comm, nullptr), "ibarrier NULL request", "request");
  expectInvalid(gyreWait(nullptr), "wait on NULL", "request");
  int done = 0;
  expectInvalid(gyreTest(nullptr, &done), "test on NULL", "request");
  expectInvalid(gyreIbarrier(nullptr, &req), "ibarrier NULL comm", "comm");
  // Without a GPU (no driver, or no CUDA in this build) a stream is refused,
  // saying why. (With one, 8 would go to CUDA as a stream handle.)
  if (!gyre::device::backend())
    expectInvalid(gyreBroadcast(s, r, c, gyreFloat32, 0, comm, reinterpret_cast<gyreStream_t>(8)),
                  "broadcast with a stream", "a stream was given, but there is no GPU to run on");

  // A valid request and a NULL done pointer: refused, the request stays valid.
  gyreRequest_t bar = nullptr;
  if (check.expectOk(gyreIbarrier(comm, &bar), "ibarrier")) {
    expectInvalid(gyreTest(bar, nullptr), "test with NULL done", "done");
    check.expectOk(gyreWait(bar), "wait on the barrier after the refused test");
  }

  expectAllReduceWorks(comm, n, check, "refused arguments");
  // And the newer operations still work too.
  std::vector<float> bc(1000, -1.0f);
  if (rank == 0) fillPattern(bc.data(), bc.size(), gyreFloat32, 5);
  if (check.expectOk(gyreBroadcast(bc.data(), bc.data(), bc.size(), gyreFloat32, 0, comm, nullptr), "broadcast after")) {
    std::string bad;
    check.expect(countPatternWrong(bc.data(), bc.size(), gyreFloat32, 5, &bad) == 0, "broadcast after: " + bad);
  }
  check.expectOk(gyreCommDestroy(comm), "destroy");
  return check.failures() ? 1 : 0;
}

class ArgumentSemantics : public testing::TestWithParam<Param> {};

TEST_P(ArgumentSemantics, BadArgumentsOfNewerOperationsAreInvalidAndHarmless) {
  const Param p = GetParam();
  RunOutcome out = runWithDeadline(
      p.nranks, [&](int r, int n, const gyreUniqueId& id) { return argumentsBody(r, n, id, p.transport); });
  EXPECT_FALSE(out.timedOut) << out.describe();
  EXPECT_TRUE(out.allSucceeded()) << out.describe();
}

INSTANTIATE_TEST_SUITE_P(Transports, ArgumentSemantics, testing::Values(Param{"shm", 3}, Param{"tcp", 2}), paramName);

}  // namespace
}  // namespace gyre::test
