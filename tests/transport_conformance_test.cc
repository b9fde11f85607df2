// The transport conformance suite: what every transport must do, run
// against each one (shm and tcp now; UCX, verbs and network plugins join
// the list as they land). Two real rank processes rendezvous through a real
// bootstrap and talk through the transport under test alone, without the
// communicator: ordering, empty, small and largest messages in both the
// buffer and the direct form, many messages and many asynchronous requests
// outstanding, a mismatched size or
// tag, registered memory (get, put, map, and accesses outside the key), an
// interrupt from another thread, a peer that dies, one that dies
// mid-message, and one that sends garbage. Every run has a hard deadline (runRanks); no test waits on
// a timer for a peer.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/clock.h"
#include "base/error.h"
#include "bootstrap/bootstrap.h"
#include "bootstrap/unique_id.h"
#include "device/emulated.h"
#include "kernels/cpu/reduce.h"
#include "tests/support/multiprocess.h"
#include "transport/net/net_transport.h"
#include "transport/shm/shm_transport.h"
#include "transport/tcp/tcp_transport.h"
#ifdef GYRE_HAVE_UCX
#include "transport/ucx/ucx_transport.h"
#endif
#ifdef GYRE_HAVE_VERBS
#include <infiniband/verbs.h>

#include "transport/verbs/verbs_transport.h"
#endif

namespace gyre::test {
namespace {

using transport::Connection;
using transport::MessageTag;

// One rank's end: its bootstrap, the transport under test, and its
// connection to the other rank.
struct Endpoint {
  std::unique_ptr<bootstrap::Bootstrap> bs;
  std::unique_ptr<transport::Transport> t;
  Connection* conn = nullptr;
  int peer = -1;
};

constexpr int64_t kStepMs = 20000;  // any one step; runRanks' bound is above it

std::unique_ptr<bootstrap::Bootstrap> rendezvous(int rank, int n, const gyreUniqueId& id) {
  bootstrap::Bootstrap::Params p;
  p.id = bootstrap::decodeUniqueId(id);
  p.rank = rank;
  p.nranks = n;
  p.hostHash = 1;  // one host: shared memory can connect every pair
  p.deadline = Deadline::afterMs(kStepMs);
  p.timeoutMs = kStepMs;
  return bootstrap::Bootstrap::create(p);
}

// The transports under test, made as the communicator makes them (small
// buffers, so that the suite's messages fill them).
// tightBuffers: the kernel's socket buffers at their smallest, so a message
// cannot hide whole in them. lanes: TCP's sockets per peer (each message cut
// into one part per socket).
// advertisedGid (verbs): the GID this rank tells its peers instead of its own.
std::unique_ptr<transport::Transport> makeTransport(const std::string& kind, bootstrap::Bootstrap& bs,
                                                    bool tightBuffers = false,
                                                    const uint8_t* advertisedGid = nullptr, int lanes = 1) {
  const transport::MemoryCopy copy{kernels::copy, kernels::repMovsbCrawls};
  const Deadline d = Deadline::afterMs(kStepMs);
  std::vector<int> all;
  for (int r = 0; r < bs.nranks(); ++r) all.push_back(r);
  if (kind == "shm") {
    transport::ShmTransport::Options o;
    o.slotBytes = 64 * 1024;
    o.slots = 4;
    o.memoryCopy = copy;
    return transport::ShmTransport::create(bs, all, o, d);
  }
#ifdef GYRE_HAVE_UCX
  if (kind == "ucx") {
    transport::UcxTransport::Options o;
    o.maxMessageBytes = 256 * 1024;
    o.memoryCopy = copy;
    return transport::UcxTransport::create(bs, o, d);
  }
#endif
  if (kind == "net") {  // gyre's socket network, loaded as an NCCL net plugin
    transport::NetTransport::Options o;
    o.plugin = GYRE_TEST_NET_PLUGIN;
    o.pieceBytes = 64 * 1024;
    o.memoryCopy = copy;
    auto t = transport::NetTransport::create(bs, o, d);
    std::string why;
    if (!t->canConnect(1 - bs.rank(), &why)) throw Error(gyreInternalError, "net plugin unusable: " + why);
    return t;
  }
#ifdef GYRE_HAVE_VERBS
  if (kind == "verbs") {
    // Few slots, so that the suite's messages run out of credits; the
    // largest message goes by rendezvous.
    transport::VerbsTransport::Options o;
    o.slots = 4;
    o.maxMessageBytes = 64 * 1024;
    o.memoryCopy = copy;
    if (const char* hca = std::getenv("GYRE_IB_HCA")) o.hca = hca;
    if (const char* qps = std::getenv("GYRE_IB_QPS_PER_CONNECTION")) {
      // Reads split across the queue pairs: messages large enough to split.
      o.qpsPerPeer = std::atoi(qps);
      o.maxMessageBytes = 256 * 1024;
    }
    if (advertisedGid) {
      o.advertisedGid.emplace();
      std::memcpy(o.advertisedGid->data(), advertisedGid, 16);
    }
    return transport::VerbsTransport::create(bs, o, d);
  }
#endif
  transport::TcpTransport::Options o;
  o.chunkBytes = 64 * 1024;
  o.memoryCopy = copy;
  if (tightBuffers) o.socketBufferBytes = 4096;
  o.lanes = lanes;
  bs.openDataListener("", d);
  return std::make_unique<transport::TcpTransport>(bs, o);
}

// Connects e's transport to its peer.
void connectPeer(Endpoint& e) {
  std::string why;
  if (!e.t->canConnect(e.peer, &why)) throw Error(gyreInternalError, "cannot connect: " + why);
  const int peers[] = {e.peer};
  e.t->connect(peers, Deadline::afterMs(kStepMs));
  e.conn = e.t->connection(e.peer);
  if (!e.conn) throw Error(gyreInternalError, "connect() made no connection");
}

// connect false: the transport only, connectPeer to follow.
Endpoint open(const std::string& kind, int rank, int n, const gyreUniqueId& id, bool tightBuffers = false,
              int lanes = 1, bool connect = true) {
  Endpoint e;
  e.bs = rendezvous(rank, n, id);
  e.t = makeTransport(kind, *e.bs, tightBuffers, nullptr, lanes);
  e.peer = 1 - rank;
  if (connect) connectPeer(e);
  return e;
}

// Calls step() until it returns true, moving the transport's queued bytes
// and blocking on it between tries; false when kStepMs pass first.
template <typename F>
bool until(Endpoint& e, F step) {
  const Deadline d = Deadline::afterMs(kStepMs);
  while (!d.expired()) {
    if (step()) return true;
    if (e.conn->can(transport::kNeedsProgress)) e.conn->progress(transport::ReadAhead::All);
    if (e.t->block(1'000'000, [&] { return step(); })) return true;
  }
  return false;
}

unsigned char pattern(int from, uint64_t msg, size_t i) {
  return static_cast<unsigned char>(from * 89 + msg * 131 + i * 7 + 1);
}
// The first of `bytes` bytes at got that is not pattern(from, msg, offset +
// i), as its index i; nothing when all are right.
std::optional<size_t> firstWrong(const unsigned char* got, size_t bytes, int from, uint64_t msg, size_t offset = 0) {
  for (size_t i = 0; i < bytes; ++i)
    if (got[i] != pattern(from, msg, offset + i)) return i;
  return std::nullopt;
}
MessageTag tagOf(uint64_t msg, size_t bytes) { return MessageTag{{msg, bytes, 0x0102030405060708ull}}; }

// Sizes every transport must carry: empty, one byte, odd, a cache line, a
// page less one, and the largest it takes.
std::vector<size_t> sizesFor(const Connection& c) {
  return {0, 1, 7, 64, 4095, c.maxMessageBytes()};
}

// A message's bytes as runs of caller memory (trySendRunsFrom,
// tryRecvRunsInto): runs of 1, 7, 64, 300 and 5000 bytes in turn, each
// followed by a 3-byte gap the transport must not touch.
struct Spread {
  static constexpr unsigned char kGap = 0xee;
  std::vector<unsigned char> memory;
  std::vector<iovec> runs;
  std::vector<size_t> at;  // where each run starts in memory
  void layOut(size_t bytes) {
    static const size_t lengths[] = {1, 7, 64, 300, 5000};
    size_t total = 0, placed = 0;
    std::vector<size_t> lens;
    for (size_t i = 0; placed < bytes; ++i) {
      lens.push_back(std::min(lengths[i % 5], bytes - placed));
      placed += lens.back();
      total += lens.back() + 3;
    }
    memory.assign(total, kGap);
    runs.clear();
    at.clear();
    size_t off = 0;
    for (size_t len : lens) {
      at.push_back(off);
      runs.push_back(iovec{memory.data() + off, len});
      off += len + 3;
    }
  }
};

// Sends message `msg` of `bytes` in the buffer form, the direct form or as
// runs (msg % 3); true once done.
struct Sender {
  Endpoint& e;
  int me;
  std::vector<unsigned char> data;
  bool started = false;
  Spread spread;
  bool trySend(uint64_t msg, size_t bytes) {
    if (!started) {
      data.resize(bytes);
      for (size_t i = 0; i < bytes; ++i) data[i] = pattern(me, msg, i);
      if (msg % 3 == 2) {
        spread.layOut(bytes);
        size_t i = 0;
        for (const iovec& r : spread.runs)
          for (size_t j = 0; j < r.iov_len; ++j) static_cast<unsigned char*>(r.iov_base)[j] = data[i++];
      }
      started = true;
    }
    bool done;
    if (msg % 3 == 0) {
      void* buf = e.conn->trySendBuffer(bytes);
      done = buf != nullptr;
      if (done) {
        if (bytes) std::memcpy(buf, data.data(), bytes);
        e.conn->sendCommit(bytes, tagOf(msg, bytes));
      }
    } else if (msg % 3 == 1) {
      done = e.conn->trySendFrom(data.data(), bytes, tagOf(msg, bytes));
    } else {
      done = e.conn->trySendRunsFrom(spread.runs, bytes, tagOf(msg, bytes));
    }
    if (done) started = false;
    return done;
  }
};

// Receives message `msg` in the form (msg / 3) % 3 (so every sender's form
// meets every receiver's) and checks every byte, and that nothing around
// the caller's memory was written.
struct Receiver {
  Endpoint& e;
  int from;
  std::vector<unsigned char> into;
  bool started = false;  // a direct-form receive is under way: into is the transport's until it completes
  Spread spread;
  bool tryRecv(uint64_t msg, size_t bytes, std::string* wrong) {
    const unsigned char* got = nullptr;
    const uint64_t form = (msg / 3) % 3;
    if (form == 0) {
      got = static_cast<const unsigned char*>(e.conn->tryRecvBuffer(bytes, tagOf(msg, bytes)));
      if (!got) return false;
    } else if (form == 1) {
      if (!started) into.assign(bytes + 1, 0xee);
      started = true;
      if (!e.conn->tryRecvInto(into.data(), bytes, tagOf(msg, bytes))) return false;
      started = false;
      got = into.data();
      if (into[bytes] != 0xee) *wrong = "message " + std::to_string(msg) + " wrote past its end";
    } else {
      if (!started) spread.layOut(bytes);
      started = true;
      if (!e.conn->tryRecvRunsInto(spread.runs, bytes, tagOf(msg, bytes))) return false;
      started = false;
      into.clear();
      for (size_t r = 0; r < spread.runs.size(); ++r) {
        const auto* p = static_cast<const unsigned char*>(spread.runs[r].iov_base);
        into.insert(into.end(), p, p + spread.runs[r].iov_len);
        for (size_t g = 0; g < 3; ++g)
          if (spread.memory[spread.at[r] + spread.runs[r].iov_len + g] != Spread::kGap)
            *wrong = "message " + std::to_string(msg) + " wrote between its runs";
      }
      got = into.data();
    }
    if (const auto i = firstWrong(got, bytes, from, msg); i && wrong->empty())
      *wrong = "message " + std::to_string(msg) + " (" + std::to_string(bytes) + " bytes): byte " +
               std::to_string(*i) + " is wrong";
    if (form == 0) e.conn->recvRelease(bytes);
    return true;
  }
};

#ifdef GYRE_HAVE_VERBS
// Whether this host has an RDMA device at all: without one (most CI hosts)
// the verbs cases skip; the Soft-RoCE guest (tests/verbs/softroce_vm.sh)
// runs them.
bool haveRdmaDevice() {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (list) ibv_free_device_list(list);
  return n > 0;
}
#endif

class Conformance : public testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
#ifdef GYRE_HAVE_VERBS
    if (kind() == "verbs" && !haveRdmaDevice()) GTEST_SKIP() << "no RDMA device here (the Soft-RoCE VM test runs these)";
#endif
  }
  std::string kind() const { return GetParam(); }
};

// Both ranks send and receive at once, every size in every form (buffer,
// direct, runs) against every form, in order.
TEST_P(Conformance, MessagesOfEverySizeArriveInOrderBothWays) {
  const std::string kind = this->kind();
  RunOutcome out = runRanks(2, [&](int rank, int n, const gyreUniqueId& id) {
    Checker check(rank);
    Endpoint e = open(kind, rank, n, id);
    const std::vector<size_t> sizes = sizesFor(*e.conn);
    constexpr uint64_t kMessages = 240;
    Sender s{e, rank, {}, false, {}};
    Receiver r{e, e.peer, {}, false, {}};
    uint64_t sent = 0, received = 0;
    std::string wrong;
    const bool ok = until(e, [&] {
      while (sent < kMessages && s.trySend(sent, sizes[sent % sizes.size()])) ++sent;
      while (received < kMessages && wrong.empty() && r.tryRecv(received, sizes[received % sizes.size()], &wrong))
        ++received;
      // A buffer-form send is done once committed; a transport that moves
      // output as it progresses (UCX's rendezvous) must still carry it.
      const bool drained = !e.conn->can(transport::kNeedsProgress) || !e.conn->progress(transport::ReadAhead::None).sendBlocked;
      return (sent == kMessages && received == kMessages && drained) || !wrong.empty();
    });
    check.expect(wrong.empty(), wrong);
    check.expect(ok, "stuck after " + std::to_string(sent) + " sent and " + std::to_string(received) + " received");
    // Neither rank may leave while the other still reads from it.
    e.bs->barrier(Deadline::afterMs(kStepMs));
    return check.failures();
  });
  EXPECT_FALSE(out.timedOut) << out.describe();
  EXPECT_TRUE(out.allSucceeded()) << out.describe();
}

// The largest messages in every form against every form, cut into parts
// over three sockets where the transport has them (TCP): a part starts in
// the middle of a run.
TEST_P(Conformance, LargestMessagesInEveryFormInParts) {
  const std::string kind = this->kind();
  RunOutcome out = runRanks(2, [&](int rank, int n, const gyreUniqueId& id) {
    Checker check(rank);
    Endpoint e = open(kind, rank, n, id, false, 3);
    const size_t bytes = e.conn->maxMessageBytes();
    constexpr uint64_t kMessages = 27;  // every (send form, receive form) pair three times
    Sender s{e, rank, {}, false, {}};
    Receiver r{e, e.peer, {}, false, {}};
    uint64_t sent = 0, received = 0;
    std::string wrong;
    const bool ok = until(e, [&] {
      while (sent < kMessages && s.trySend(sent, bytes)) ++sent;
      while (received < kMessages && wrong.empty() && r.tryRecv(received, bytes, &wrong)) ++received;
      const bool drained = !e.conn->can(transport::kNeedsProgress) || !e.conn->progress(transport::ReadAhead::None).sendBlocked;
      return (sent == kMessages && received == kMessages && drained) || !wrong.empty();
    });
    check.expect(wrong.empty(), wrong);
    check.expect(ok, "stuck after " + std::to_string(sent) + " sent and " + std::to_string(received) + " received");
    e.bs->barrier(Deadline::afterMs(kStepMs));
    return check.failures();
  });
  EXPECT_FALSE(out.timedOut) << out.describe();
  EXPECT_TRUE(out.allSucceeded()) << out.describe();
}

// The sender runs ahead of a receiver that does not read yet: the transport
// takes what it can buffer, then says "not now" (never blocks, never drops),
// and everything arrives in order once the receiver reads.
TEST_P(Conformance, ManyMessagesOutstandingBeforeTheReceiverReads) {
  const std::string kind = this->kind();
  auto* held = static_cast<std::atomic<int>*>(
      mmap(nullptr, sizeof(std::atomic<int>), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(held, MAP_FAILED);
  new (held) std::atomic<int>(0);
  RunOutcome out = runRanks(2, [&](int rank, int n, const gyreUniqueId& id) {
    Checker check(rank);
    Endpoint e = open(kind, rank, n, id);
    constexpr uint64_t kMessages = 2000;
    constexpr size_t kBytes = 100;
    if (rank == 0) {
      Sender s{e, rank, {}, false, {}};
      uint64_t sent = 0;
      // As far as the transport lets it before anyone reads. A transport
      // whose sends complete only as it progresses gets 2 s of turns at each
      // before "no" counts as full (a connection UCX is still wiring up on a
      // loaded host took longer than 10000 quick turns).
      while (sent < kMessages) {
        bool took = s.trySend(sent, kBytes);
        const Deadline full = Deadline::afterMs(2000);
        while (!took && !full.expired() && e.conn->can(transport::kNeedsProgress)) {
          e.conn->progress(transport::ReadAhead::None);
          took = s.trySend(sent, kBytes);
        }
        if (!took) break;
        ++sent;
      }
      std::printf("rank 0: %llu messages outstanding before the receiver read\n",
                  static_cast<unsigned long long>(sent));
      check.expect(sent >= 2, "the transport took fewer than 2 messages ahead of the receiver");
      held->store(1);
      check.expect(until(e, [&] {
                     while (sent < kMessages && s.trySend(sent, kBytes)) ++sent;
                     return sent == kMessages;
                   }),
                   "the rest was never sent");
    } else {
      // Reads only once the sender has run into the transport's limit.
      while (held->load() == 0) {
        if (e.conn->can(transport::kNeedsProgress)) e.conn->progress(transport::ReadAhead::None);
        sched_yield();
      }
      Receiver r{e, 0, {}, false, {}};
      uint64_t received = 0;
      std::string wrong;
      check.expect(until(e, [&] {
                     while (received < kMessages && wrong.empty() && r.tryRecv(received, kBytes, &wrong)) ++received;
                     return received == kMessages || !wrong.empty();
                   }),
                   "stuck at message " + std::to_string(received));
      check.expect(wrong.empty(), wrong);
    }
    e.bs->barrier(Deadline::afterMs(kStepMs));
    return check.failures();
  });
  munmap(held, sizeof(std::atomic<int>));
  EXPECT_FALSE(out.timedOut) << out.describe();
  EXPECT_TRUE(out.allSucceeded()) << out.describe();
}

// Asynchronous requests: many receives posted before anything is sent, many
// sends posted at once, completed in order by test(); a receive whose
// message differs is a mismatch from test(), not a silent success.
TEST_P(Conformance, ManyRequestsOutstandingCompleteInOrder) {
  const std::string kind = this->kind();
  RunOutcome out = runRanks(2, [&](int rank, int n, const gyreUniqueId& id) {
    Checker check(rank);
    Endpoint e = open(kind, rank, n, id);
    Connection& c = *e.conn;
    constexpr int kRequests = 64;
    const std::vector<size_t> sizes = sizesFor(c);
    auto sizeOf = [&](int i) { return sizes[static_cast<size_t>(i) % sizes.size()]; };
    std::vector<std::vector<unsigned char>> bufs(kRequests);
    std::vector<transport::Request> reqs;
    if (rank == 1) {
      // Every receive posted before the sender posts anything (the bootstrap
      // barrier below orders it), each a byte longer than its message so an
      // overrun shows.
      for (int i = 0; i < kRequests; ++i) {
        bufs[i].assign(sizeOf(i) + 1, 0xee);
        reqs.push_back(c.irecv(bufs[i].data(), sizeOf(i), tagOf(i, sizeOf(i))));
      }
      e.bs->barrier(Deadline::afterMs(kStepMs));
    } else {
      e.bs->barrier(Deadline::afterMs(kStepMs));
      for (int i = 0; i < kRequests; ++i) {
        bufs[i].resize(sizeOf(i));
        for (size_t j = 0; j < bufs[i].size(); ++j) bufs[i][j] = pattern(0, i, j);
        reqs.push_back(c.isend(bufs[i].data(), sizeOf(i), tagOf(i, sizeOf(i))));
      }
    }
    check.expect(until(e, [&] { return c.test(reqs.back()); }), "the last request never completed");
    for (int i = 0; i < kRequests; ++i) check.expect(c.test(reqs[i]), "an earlier request is still open after a later one");
    if (rank == 1)
      for (int i = 0; i < kRequests; ++i) {
        if (const auto j = firstWrong(bufs[i].data(), sizeOf(i), 0, i))
          check.fail("request " + std::to_string(i) + ": byte " + std::to_string(*j) + " is wrong");
        check.expect(bufs[i][sizeOf(i)] == 0xee, "request " + std::to_string(i) + " wrote past its end");
      }
    // A mismatched receive: the error comes out of test().
    if (rank == 0) {
      std::vector<unsigned char> d(300, 1);
      const transport::Request r = c.isend(d.data(), 300, tagOf(99, 300));
      check.expect(until(e, [&] { return c.test(r); }), "the odd send never completed");
    } else {
      std::vector<unsigned char> d(200);
      const transport::Request r = c.irecv(d.data(), 200, tagOf(99, 200));
      bool mismatch = false;
      try {
        until(e, [&] { return c.test(r); });
      } catch (const transport::MessageMismatch& m) {
        mismatch = m.gotBytes == 300 && m.expectedBytes == 200;
      }
      check.expect(mismatch, "a 300-byte message completed a 200-byte receive");
    }
    e.bs->barrier(Deadline::afterMs(kStepMs));
    return check.failures();
  });
  EXPECT_FALSE(out.timedOut) << out.describe();
  EXPECT_TRUE(out.allSucceeded()) << out.describe();
}

// A message whose size or tag is not what the receiver expects is an error
// carrying both, in either form, and never lands in the receiver's memory.
TEST_P(Conformance, AMismatchedSizeOrTagIsAnErrorCarryingBoth) {
  const std::string kind = this->kind();
  RunOutcome out = runRanks(2, [&](int rank, int n, const gyreUniqueId& id) {
    Checker check(rank);
    Endpoint e = open(kind, rank, n, id);
    if (rank == 0) {
      std::vector<unsigned char> data(200, 7);
      check.expect(until(e, [&] { return e.conn->trySendFrom(data.data(), 200, tagOf(5, 200)); }), "send");
    } else {
      std::vector<unsigned char> into(300, 0xee);
      bool threw = false;
      try {
        until(e, [&] { return e.conn->tryRecvInto(into.data(), 100, tagOf(5, 100)); });
      } catch (const transport::MessageMismatch& m) {
        threw = true;
        check.expect(m.peer() == 0, "the mismatch names the sender");
        check.expect(m.gotBytes == 200 && m.expectedBytes == 100, "the mismatch carries both sizes");
        check.expect(m.got == tagOf(5, 200) && m.expected == tagOf(5, 100), "the mismatch carries both tags");
      }
      check.expect(threw, "a 200-byte message was taken for a 100-byte one");
      check.expect(into[100] == 0xee, "the larger message spilled past the receiver's buffer");
    }
    // The pair is broken now (the receiver did not consume): rank 0 must not
    // wait on rank 1 beyond the bootstrap's barrier.
    e.bs->barrier(Deadline::afterMs(kStepMs));
    return check.failures();
  });
  EXPECT_FALSE(out.timedOut) << out.describe();
  EXPECT_TRUE(out.allSucceeded()) << out.describe();
}

// The receiver already waits when the message comes (a transport may post
// the receive into the caller's buffer ahead of it: UCX does, the whole
// message or a two-part message's payload). The right message lands whole;
// one of another size (smaller, empty, larger) or tag is a mismatch
// carrying both, and never lands past the end of the caller's buffer.
TEST_P(Conformance, AReceiveWaitingAheadTakesTheRightMessageAndRefusesAnother) {
  const std::string kind = this->kind();
  struct Case {
    int sent;             // bytes, or -1: twice the expected (at most the largest message)
    uint64_t msg;         // 5: the tag the receiver expects
    size_t expected = 0;  // bytes the receiver waits for (0: 64 KiB, two parts over UCX)
  };
  // A wait for 1000 bytes, one part over UCX, refusing a small message
  // (which UCX sends without its header's size: 8 B makes the 32 bytes a
  // header alone would) as well as a large one.
  for (const Case c : {Case{200, 5}, Case{0, 5}, Case{-1, 5}, Case{-2, 6}, Case{8, 5, 1000}, Case{200, 5, 1000},
                       Case{0, 5, 1000}, Case{-1, 5, 1000}}) {
    SCOPED_TRACE("case " + std::to_string(c.sent) + " as message " + std::to_string(c.msg) + " where " +
                 std::to_string(c.expected) + " are awaited");
    RunOutcome out = runRanks(2, [&](int rank, int n, const gyreUniqueId& id) {
      Checker check(rank);
      Endpoint e = open(kind, rank, n, id);
      // Large enough to go in two parts over UCX (above 8 KiB).
      const size_t expected = c.expected ? c.expected : std::min<size_t>(64 << 10, e.conn->maxMessageBytes() / 2);
      const size_t sent = c.sent == -1 ? 2 * expected : c.sent == -2 ? expected : size_t(c.sent);
      auto barrier = [&] { e.bs->barrier(Deadline::afterMs(kStepMs)); };  // a bound of its own each
      if (rank == 0) {
        std::vector<unsigned char> first(expected), second(sent, 7);
        for (size_t i = 0; i < expected; ++i) first[i] = pattern(0, 1, i);
        barrier();  // the receiver waits for the first already
        check.expect(until(e, [&] { return e.conn->trySendFrom(first.data(), expected, tagOf(1, expected)); }),
                     "send the first");
        barrier();  // and for the second
        check.expect(until(e, [&] { return e.conn->trySendFrom(second.data(), sent, tagOf(c.msg, sent)); }),
                     "send the second");
      } else {
        std::vector<unsigned char> into(expected + 1, 0xee);
        auto first = [&] { return e.conn->tryRecvInto(into.data(), expected, tagOf(1, expected)); };
        check.expect(!first(), "a message arrived before it was sent");
        barrier();
        check.expect(until(e, first), "receive the first");
        if (const auto i = firstWrong(into.data(), expected, 0, 1))
          check.fail("byte " + std::to_string(*i) + " of the first message is wrong");
        into.assign(expected + 1, 0xee);
        auto second = [&] { return e.conn->tryRecvInto(into.data(), expected, tagOf(5, expected)); };
        check.expect(!second(), "the second arrived before it was sent");
        barrier();
        bool threw = false;
        try {
          until(e, second);
        } catch (const transport::MessageMismatch& m) {
          threw = true;
          check.expect(m.gotBytes == sent && m.expectedBytes == expected, "the mismatch carries both sizes");
          check.expect(m.got == tagOf(c.msg, sent) && m.expected == tagOf(5, expected),
                       "the mismatch carries both tags");
        }
        check.expect(threw, "the second message was taken for the one expected");
        check.expect(into[expected] == 0xee, "a message spilled past the receiver's buffer");
      }
      e.bs->barrier(Deadline::afterMs(kStepMs));
      return check.failures();
    });
    EXPECT_FALSE(out.timedOut) << out.describe();
    EXPECT_TRUE(out.allSucceeded()) << out.describe();
  }
}

// Device memory (on the emulated GPU, as a CUDA build's GPU): shared memory
// registers it by its CUDA IPC handle, and the peer reads, writes and maps
// it (a device pointer) within the key; every other transport refuses to
// register it, naming the peer, instead of handing out a key no one can use.
TEST_P(Conformance, DeviceMemoryKeysReachAPeersGpuOrAreRefused) {
  const std::string kind = this->kind();
  RunOutcome out = runRanks(2, [&](int rank, int n, const gyreUniqueId& id) {
    Checker check(rank);
    device::EmulatedBackend gpu;
    device::setBackendForTesting(&gpu);
    int failures = 0;
    {
      Endpoint e = open(kind, rank, n, id);
      Connection& c = *e.conn;
      constexpr size_t kBytes = 1 << 20, kAt = 4096, kPut = 3000;
      auto* mine = static_cast<unsigned char*>(gpu.allocate(kBytes + kAt, 0));
      std::vector<unsigned char> pattern9(kBytes);
      for (size_t i = 0; i < kBytes; ++i) pattern9[i] = pattern(rank, 9, i);
      gpu.copy(mine + kAt, pattern9.data(), kBytes);
      transport::RemoteKey key;
      bool refused = false;
      try {
        key = c.registerMemory(mine + kAt, kBytes, transport::MemoryType::Device);
      } catch (const transport::ConnectionError& err) {
        refused = err.peer() == e.peer && std::string(err.what()).find("device") != std::string::npos;
        check.expect(refused, std::string("the refusal names the peer and device memory: ") + err.what());
      }
      if (kind != "shm") {
        check.expect(refused, kind + " registered device memory");
      } else {
        check.expect(!refused && key.type == transport::MemoryType::Device && key.bytes == kBytes,
                     "shm registers device memory");
        transport::RemoteKey theirs;
        check.expect(until(e, [&] { return c.trySendFrom(&key, sizeof key, tagOf(1, sizeof key)); }), "send key");
        check.expect(until(e, [&] { return c.tryRecvInto(&theirs, sizeof theirs, tagOf(1, sizeof theirs)); }),
                     "recv key");
        std::vector<unsigned char> got(kBytes - 7);
        c.get(got.data(), theirs, 7, got.size());
        if (const auto i = firstWrong(got.data(), got.size(), e.peer, 9, 7))
          check.fail("get of the peer's device memory: byte " + std::to_string(*i) + " is wrong");
        const auto* mapped = static_cast<const unsigned char*>(c.map(theirs, 100, 1000));
        check.expect(gpu.classify(mapped).kind == device::MemoryKind::Device, "a mapping is device memory here");
        unsigned char first = 0;
        gpu.copy(&first, mapped, 1);
        check.expect(first == pattern(e.peer, 9, 100), "the mapping shows the peer's bytes");
        std::vector<unsigned char> put(kPut, static_cast<unsigned char>(0xC0 + rank));
        c.put(theirs, 50, put.data(), kPut);
        try {
          c.get(got.data(), theirs, kBytes - 8, 16);
          check.fail("a get past the device key's end was not refused");
        } catch (const transport::ConnectionError& err) {
          check.expect(err.peer() == e.peer, "the refusal names the owner");
        }
        const unsigned char done = 1;
        unsigned char theirDone = 0;
        check.expect(until(e, [&] { return c.trySendFrom(&done, 1, tagOf(2, 1)); }), "send done");
        check.expect(until(e, [&] { return c.tryRecvInto(&theirDone, 1, tagOf(2, 1)); }), "recv done");
        std::vector<unsigned char> back(kBytes);
        gpu.copy(back.data(), mine + kAt, kBytes);
        for (size_t i = 0; i < kBytes; ++i) {
          const unsigned char want = i >= 50 && i < 50 + kPut ? 0xC0 + e.peer : pattern(rank, 9, i);
          if (back[i] != want) {
            check.fail("after the peer's put, byte " + std::to_string(i) + " is " + std::to_string(back[i]));
            break;
          }
        }
        c.deregisterMemory(key);
        c.releaseRemoteKey(theirs);
      }
      failures = check.failures();
    }  // the transport closes what it opened while the backend is still there
    device::setBackendForTesting(nullptr);
    return failures;
  });
  EXPECT_TRUE(out.allSucceeded()) << out.describe();
}


// Messages whose payload lies in device memory (kDeviceMessages; on the
// emulated GPU): before the peer accepts them, a sender's device room is
// host memory; once it has, every message with bytes goes into the peer's
// device slot and arrives there (tryRecvMessage: a device pointer), or
// copied out to host memory (tryRecvBuffer), in the one order with host
// messages, over more laps than the FIFO has slots. A transport without
// the capability refuses to accept them, naming the peer, and its device
// room is its host room.
TEST_P(Conformance, DeviceMessagesArriveInOrderInDeviceMemoryOrAreRefused) {
  const std::string kind = this->kind();
  RunOutcome out = runRanks(2, [&](int rank, int n, const gyreUniqueId& id) {
    Checker check(rank);
    device::EmulatedBackend gpu;
    device::setBackendForTesting(&gpu);
    int failures = 0;
    {
      Endpoint e = open(kind, rank, n, id);
      Connection& c = *e.conn;
      const bool able = c.can(transport::kDeviceMessages);
      check.expect(able == (kind == "shm"), kind + (able ? " carries" : " does not carry") + " device messages");
      const size_t max = c.maxMessageBytes();
      std::vector<unsigned char> data(max);
      auto fill = [&](uint64_t msg, size_t bytes) {
        for (size_t i = 0; i < bytes; ++i) data[i] = pattern(rank, msg, i);
      };
      // Sends message msg through the device room; says where it went.
      auto sendDevice = [&](uint64_t msg, size_t bytes) {
        fill(msg, bytes);
        transport::Connection::Room room;
        if (!until(e, [&] { return (room = c.trySendDeviceBuffer(bytes)).data != nullptr; })) {
          check.fail("no room for message " + std::to_string(msg));
          return transport::MemoryType::None;
        }
        if (bytes) gpu.copy(room.data, data.data(), bytes);  // (the device's write, complete)
        c.sendCommit(bytes, tagOf(msg, bytes));
        return room.type;
      };
      auto receive = [&](uint64_t msg, size_t bytes, bool asMessage, transport::MemoryType expect) {
        std::vector<unsigned char> got(bytes);
        transport::Connection::Arrival a;
        const bool came = until(e, [&] {
          if (asMessage) return (a = c.tryRecvMessage(bytes, tagOf(msg, bytes))).data != nullptr;
          a.data = c.tryRecvBuffer(bytes, tagOf(msg, bytes));
          a.type = transport::MemoryType::Host;
          return a.data != nullptr;
        });
        if (!came) return check.fail("message " + std::to_string(msg) + " did not come");
        check.expect(a.type == expect, "message " + std::to_string(msg) + " arrived in " +
                                           transport::memoryTypeName(a.type) + " memory, expected " +
                                           transport::memoryTypeName(expect));
        if (a.type == transport::MemoryType::Device) {
          check.expect(gpu.classify(a.data).kind == device::MemoryKind::Device, "a device arrival is device memory");
          if (bytes) gpu.copy(got.data(), a.data, bytes);
        } else if (bytes) {
          std::memcpy(got.data(), a.data, bytes);
        }
        if (const auto i = firstWrong(got.data(), bytes, e.peer, msg))
          check.fail("message " + std::to_string(msg) + " (" + std::to_string(bytes) + " bytes): byte " +
                     std::to_string(*i) + " is wrong");
        c.recvRelease(bytes);
      };
      // Message 0 leaves before either side accepts: host memory.
      check.expect(sendDevice(0, 1000) == transport::MemoryType::Host, "before the peer accepts, the room is the host's");
      receive(0, 1000, true, transport::MemoryType::Host);
      if (!able) {
        try {
          c.acceptDeviceMessages(0);
          check.fail(kind + " accepted device messages");
        } catch (const transport::ConnectionError& err) {
          check.expect(err.peer() == e.peer, std::string("the refusal names the peer: ") + err.what());
        }
      } else {
        c.acceptDeviceMessages(0);
        c.acceptDeviceMessages(0);  // (idempotent)
        try {
          c.acceptDeviceMessages(1);
          check.fail("device messages accepted on a second GPU");
        } catch (const transport::ConnectionError& err) {
          check.expect(std::string(err.what()).find("GPU 1") != std::string::npos,
                       std::string("the refusal names the GPU: ") + err.what());
        }
        // Message 1 says so (host memory); from message 2 on, device rooms
        // are the peer's slots, beside host messages in the same order.
        fill(1, 1);
        check.expect(until(e, [&] { return c.trySendFrom(data.data(), 1, tagOf(1, 1)); }), "send message 1");
        receive(1, 1, false, transport::MemoryType::Host);
        const size_t sizes[] = {max, 1, 0, 4097, max - 3, 64};
        for (uint64_t msg = 2; msg < 40; ++msg) {
          const size_t bytes = sizes[msg % std::size(sizes)];
          const bool viaDevice = msg % 3 != 0;
          if (viaDevice) {
            const transport::MemoryType t = sendDevice(msg, bytes);
            check.expect(t == (bytes ? transport::MemoryType::Device : transport::MemoryType::Host),
                         "message " + std::to_string(msg) + "'s room is in " + transport::memoryTypeName(t) + " memory");
          } else {
            fill(msg, bytes);
            check.expect(until(e, [&] { return c.trySendFrom(data.data(), bytes, tagOf(msg, bytes)); }), "send");
          }
          // The peer sent the same kind; every other one is read by the host.
          const bool asMessage = msg % 2 == 0;
          const bool inDevice = viaDevice && bytes && asMessage;
          receive(msg, bytes, asMessage, inDevice ? transport::MemoryType::Device : transport::MemoryType::Host);
        }
      }
    }  // the transport closes what it opened while the backend is still there
    failures = check.failures();
    device::setBackendForTesting(nullptr);
    return failures;
  });
  EXPECT_FALSE(out.timedOut) << out.describe();
  EXPECT_TRUE(out.allSucceeded()) << out.describe();
}

// The memory layer: each rank registers a buffer and sends the key; the
// peer gets and puts within it exactly where the transport offers that
// (kPeerRead, kPeerWrite), maps a gyreMemAllocHost buffer where it offers
// kPeerMap, and is refused (a ConnectionError naming the owner) outside the
// key, with an empty key, or when the transport cannot.
TEST_P(Conformance, RegisteredMemoryGetPutAndMapWithinTheKeyOnly) {
  const std::string kind = this->kind();
  RunOutcome out = runRanks(2, [&](int rank, int n, const gyreUniqueId& id) {
    Checker check(rank);
    Endpoint e = open(kind, rank, n, id);
    Connection& c = *e.conn;
    constexpr size_t kBytes = 3 << 20, kPutAt = 100, kPutBytes = 5000;
    std::vector<unsigned char> mine(kBytes);
    for (size_t i = 0; i < kBytes; ++i) mine[i] = pattern(rank, 9, i);
    void* mapped = nullptr;
    check.expect(gyreMemAllocHost(&mapped, 1 << 20) == gyreSuccess, "gyreMemAllocHost");
    std::memset(mapped, 0x40 + rank, 1 << 20);
    // Both keys in one message each way.
    transport::RemoteKey keys[2] = {c.registerMemory(mine.data(), kBytes),
                                    c.registerMemory(mapped, 1 << 20)};
    check.expect(keys[0].bytes == kBytes && keys[0].type == transport::MemoryType::Host, "the key's size and type");
    transport::RemoteKey theirs[2];
    check.expect(until(e, [&] { return c.trySendFrom(keys, sizeof keys, tagOf(1, sizeof keys)); }), "send keys");
    check.expect(until(e, [&] { return c.tryRecvInto(theirs, sizeof theirs, tagOf(1, sizeof theirs)); }), "recv keys");
    auto refused = [&](auto access, const char* what) {
      try {
        access();
      } catch (const transport::ConnectionError& err) {
        return err.peer() == e.peer;
      }
      check.fail(std::string(what) + " was not refused");
      return false;
    };
    unsigned char small[16];
    check.expect(refused([&] { c.get(small, theirs[0], kBytes - 8, 16); }, "a get past the key's end"),
                 "a get past the key's end names the owner");
    check.expect(refused([&] { c.get(small, transport::RemoteKey{}, 0, 1); }, "a get with an empty key"),
                 "an empty key names the owner");
    if (c.can(transport::kPeerRead)) {
      for (size_t bytes : {size_t{1}, size_t{4097}, kBytes - 3}) {
        std::vector<unsigned char> got(bytes);
        c.get(got.data(), theirs[0], 3, bytes);
        if (const auto i = firstWrong(got.data(), bytes, e.peer, 9, 3))
          check.fail("get of " + std::to_string(bytes) + " bytes: byte " + std::to_string(*i) + " is wrong");
      }
    } else {
      check.expect(refused([&] { c.get(small, theirs[0], 0, 1); }, "a get without kPeerRead"), "get refused");
    }
    std::vector<unsigned char> put(kPutBytes);
    for (size_t i = 0; i < kPutBytes; ++i) put[i] = pattern(rank + 2, 4, i);
    if (c.can(transport::kPeerWrite)) {
      c.put(theirs[0], kPutAt, put.data(), kPutBytes);
      check.expect(refused([&] { c.put(theirs[0], kBytes, put.data(), 1); }, "a put past the key's end"),
                   "a put past the end names the owner");
    } else {
      check.expect(refused([&] { c.put(theirs[0], 0, put.data(), 1); }, "a put without kPeerWrite"), "put refused");
    }
    if (c.can(transport::kPeerMap) && c.can(transport::kPeerRead)) {
      const auto* m = static_cast<const unsigned char*>(c.map(theirs[1], 4096, 8192));
      check.expect(m != nullptr, "a gyreMemAllocHost buffer could not be mapped");
      if (m) check.expect(m[0] == 0x40 + e.peer && m[8191] == 0x40 + e.peer, "the mapping shows the peer's bytes");
    }
    // Done with the peer's memory: say so, then look at what it put in ours.
    const unsigned char done = 1;
    unsigned char theirDone = 0;
    check.expect(until(e, [&] { return c.trySendFrom(&done, 1, tagOf(2, 1)); }), "send done");
    check.expect(until(e, [&] { return c.tryRecvInto(&theirDone, 1, tagOf(2, 1)); }), "recv done");
    if (c.can(transport::kPeerWrite)) {
      if (const auto i = firstWrong(mine.data() + kPutAt, kPutBytes, e.peer + 2, 4))
        check.fail("the peer's put: byte " + std::to_string(*i) + " is wrong");
      check.expect(mine[kPutAt - 1] == pattern(rank, 9, kPutAt - 1) &&
                       mine[kPutAt + kPutBytes] == pattern(rank, 9, kPutAt + kPutBytes),
                   "the peer's put wrote outside its range");
    }
    for (const auto& k : theirs) c.releaseRemoteKey(k);
    for (const auto& k : keys) c.deregisterMemory(k);
    gyreMemFree(mapped);
    e.bs->barrier(Deadline::afterMs(kStepMs));
    return check.failures();
  });
  EXPECT_FALSE(out.timedOut) << out.describe();
  EXPECT_TRUE(out.allSucceeded()) << out.describe();
}

// interrupt() from another thread wakes a waiter blocked on data that will
// never come (gyreCommAbort's path); block()'s own timeout is far off.
TEST_P(Conformance, InterruptFromAnotherThreadWakesABlockedWaiter) {
  const std::string kind = this->kind();
  RunOutcome out = runRanks(2, [&](int rank, int n, const gyreUniqueId& id) {
    Checker check(rank);
    Endpoint e = open(kind, rank, n, id);
    if (rank == 0) {
      std::atomic<bool> armed{false}, interrupted{false};
      std::thread other([&] {
        while (!armed.load()) sched_yield();
        interrupted.store(true);
        e.t->interrupt();
      });
      unsigned char b[8];
      // ready() runs once the wake-up is armed; the interrupt comes after.
      // A spurious return goes round again; only the interrupt ends it.
      const int64_t start = nowNs();
      bool woke = false;
      while (!woke && nowNs() - start < 10'000'000'000) {
        try {
          e.t->block(600'000'000'000, [&] {
            armed.store(true);
            return e.conn->tryRecvInto(b, sizeof b, tagOf(1, 8));
          });
        } catch (const transport::ConnectionError&) {
          // A transport whose interrupt stops its I/O may say so here.
        }
        woke = interrupted.load();
      }
      other.join();
      check.expect(woke, "block() did not return after interrupt()");
    }
    e.bs->barrier(Deadline::afterMs(kStepMs));
    return check.failures();
  });
  EXPECT_FALSE(out.timedOut) << out.describe();
  EXPECT_TRUE(out.allSucceeded()) << out.describe();
}

// A peer that dies, before or in the middle of a message: the survivor
// never takes a partial message as complete and learns of the death within
// the step, from the connection (ConnectionError naming the peer) or, for a
// transport without a signal of its own (shared memory), from the
// bootstrap's liveness check the communicator uses.
void peerDies(const std::string& kind, bool midMessage) {
  RunOutcome out = runRanks(2, [&](int rank, int n, const gyreUniqueId& id) {
    Checker check(rank);
    Endpoint e = open(kind, rank, n, id, midMessage);
    const size_t bytes = e.conn->maxMessageBytes();
    std::vector<unsigned char> data(bytes, 0x5a);
    if (rank == 1) {
      e.bs->barrier(Deadline::afterMs(kStepMs));
      if (midMessage) {
        // Starts one message (tight socket buffers take part of it) and dies
        // with the rest unsent; shared memory publishes a message whole or
        // not at all.
        for (int i = 0; i < 4 && !e.conn->trySendFrom(data.data(), bytes, tagOf(1, bytes)); ++i)
          if (e.conn->can(transport::kNeedsProgress)) e.conn->progress(transport::ReadAhead::None);
      }
      _exit(0);
    }
    e.bs->barrier(Deadline::afterMs(kStepMs));
    // Mid-message: what the peer left behind is read only after it is gone
    // (the bootstrap watches its pid), so the message is cut for certain.
    if (midMessage)
      while (!e.bs->liveness().isDead(1)) sched_yield();
    std::vector<unsigned char> into(bytes);
    std::string how;
    const Deadline d = Deadline::afterMs(kStepMs);
    while (how.empty() && !d.expired()) {
      try {
        if (e.conn->tryRecvInto(into.data(), bytes, tagOf(1, bytes))) {
          // Complete only if the peer sent it whole before dying.
          how = std::memcmp(into.data(), data.data(), bytes) == 0 ? "whole" : "partial";
          break;
        }
        if (e.conn->can(transport::kNeedsProgress)) e.conn->progress(transport::ReadAhead::All);
        e.t->block(10'000'000, [&] { return false; });
      } catch (const transport::ConnectionError& err) {
        check.expect(err.peer() == 1, "the error names another rank: " + std::string(err.what()));
        how = "error";
      }
      if (how.empty() && !e.conn->can(transport::kNeedsProgress) && e.bs->liveness().isDead(1)) how = "liveness";
    }
    check.expect(how != "partial", "a partial message was delivered as complete");
    check.expect(!how.empty(), "the survivor never learned of the death");
    std::printf("rank 0: the death was seen by %s\n", how.c_str());
    return check.failures();
  });
  EXPECT_FALSE(out.timedOut) << out.describe();
  EXPECT_EQ(out.ranks[0].exitCode, 0) << out.describe();
}

// A peer that sent its last messages and left (a rank that finished its
// calls and exited is no failure): what it sent is still received, in
// each send form and two receive forms. Over UCX's shared memory an endpoint cannot be made once the
// peer's worker is gone, so the transport connects its host's peers when it
// is made (ucx_transport.cc), before any of them can leave.
TEST_P(Conformance, WhatAPeerSentBeforeItLeftIsStillReceived) {
  const std::string kind = this->kind();
  RunOutcome out = runRanks(2, [&](int rank, int n, const gyreUniqueId& id) {
    Checker check(rank);
    constexpr uint64_t kMessages = 4;  // within shared memory's 4 FIFO slots: nobody reads before it leaves
    auto bytesOf = [](uint64_t m) { return m % 2 ? size_t{4096} : size_t{64}; };
    // Over UCX the receiver looks at the peer only after it has left (a
    // UCX message needs no connection of the receiver's: its worker takes
    // it); the others' connections are made by both sides together.
    const bool late = rank == 0 && kind == "ucx";
    Endpoint e = open(kind, rank, n, id, false, 1, !late);
    if (rank == 1) {
      Sender s{e, rank, {}, false, {}};
      for (uint64_t m = 0; m < kMessages; ++m)
        check.expect(until(e, [&] { return s.trySend(m, bytesOf(m)); }), "send " + std::to_string(m));
      return check.failures();  // the transport closes (flushing), the process exits
    }
    const Deadline d = Deadline::afterMs(kStepMs);
    while (!e.bs->liveness().isDead(1) && !d.expired()) ::poll(nullptr, 0, 1);
    check.expect(e.bs->liveness().isDead(1), "rank 1 exited");
    if (late) connectPeer(e);
    Receiver r{e, e.peer, {}, false, {}};
    std::string wrong;
    for (uint64_t m = 0; m < kMessages && wrong.empty(); ++m) {
      const bool got = until(e, [&] { return r.tryRecv(m, bytesOf(m), &wrong) || !wrong.empty(); });
      check.expect(got && wrong.empty(), "message " + std::to_string(m) + " from the rank that left: " + wrong);
    }
    return check.failures();
  });
  EXPECT_FALSE(out.timedOut) << out.describe();
  EXPECT_TRUE(out.allSucceeded()) << out.describe();
}

// A waiter with more ranks than cores keeps its core while progress says
// bytes moved (Communicator::waitUntil). Over UCX the waiter's receive
// looks at the worker first, so progress counts what such a look took in
// too: a message that came in through a receive's look alone is reported
// by the next progress (where it was not, the waiter yielded its core
// right after the first of a message's fragments came in).
// (Not one of the parameterized cases: it is UCX's alone, and the
// Soft-RoCE guest counts the verbs cases it skips.)
#ifdef GYRE_HAVE_UCX
TEST(UcxConnection, ProgressReportsWhatAReceivesLooksTookIn) {
  RunOutcome out = runRanks(2, [&](int rank, int n, const gyreUniqueId& id) {
    Checker check(rank);
    Endpoint e = open("ucx", rank, n, id);
    constexpr size_t kBytes = 4096;  // one of UCX's fragments: the receive's look takes it whole
    std::string wrong;
    if (rank == 1) {
      Receiver go{e, e.peer, {}, false, {}};
      check.expect(until(e, [&] { return go.tryRecv(0, 64, &wrong) || !wrong.empty(); }) && wrong.empty(),
                   "the go-ahead: " + wrong);
      Sender s{e, rank, {}, false, {}};
      check.expect(until(e, [&] { return s.trySend(1, kBytes); }), "send");
      return check.failures();
    }
    // What connecting left for the worker is taken in first.
    for (int i = 0; i < 1000 && e.conn->progress(transport::ReadAhead::None).moved; ++i) {
    }
    Sender go{e, rank, {}, false, {}};
    check.expect(until(e, [&] { return go.trySend(0, 64); }), "send the go-ahead");
    // Only receives look at the worker from here on.
    Receiver r{e, e.peer, {}, false, {}};
    const Deadline d = Deadline::afterMs(kStepMs);
    bool got = false;
    while (!got && wrong.empty() && !d.expired()) got = r.tryRecv(1, kBytes, &wrong);
    check.expect(got && wrong.empty(), "the message: " + wrong);
    check.expect(e.conn->progress(transport::ReadAhead::None).moved,
                 "progress said nothing moved after receives took a message in");
    return check.failures();
  });
  EXPECT_FALSE(out.timedOut) << out.describe();
  EXPECT_TRUE(out.allSucceeded()) << out.describe();
}
#endif

TEST_P(Conformance, APeerThatDiesIsSeen) { peerDies(kind(), false); }
TEST_P(Conformance, APeerThatDiesMidMessageDeliversNoPartialMessage) { peerDies(kind(), true); }

// Garbage in place of the transport's framing: an error naming the peer,
// never a crash, a hang or bytes taken for a message. Shared memory's peers
// share its memory and user; what they could write there is not a threat a
// transport can defend against, so it has no such test.
TEST_P(Conformance, GarbageFromThePeerIsAnErrorNamingIt) {
  const std::string kind = this->kind();
  if (kind == "shm") GTEST_SKIP() << "a local peer writes our memory; nothing to defend";
  if (kind == "ucx" || kind == "net")
    GTEST_SKIP() << "the wire is UCX's or the plugin's protocol, not ours; a wrong header is the mismatch test's";
  if (kind == "verbs")
    GTEST_SKIP() << "a hostile peer would need a queue pair of its own; the connection checks every header's "
                    "number, kind and size and every notice (verbs_connection.cc)";
  RunOutcome out = runRanks(2, [&](int rank, int n, const gyreUniqueId& id) {
    Checker check(rank);
    if (rank == 1) {
      // The hostile peer: a real rank that answers the data connection
      // through the bootstrap (as the TCP transport does), then writes junk.
      auto bs = rendezvous(rank, n, id);
      bs->openDataListener("", Deadline::afterMs(kStepMs));
      bootstrap::Socket s = bs->acceptFrom(0, bootstrap::ConnKind::Data, 0, Deadline::afterMs(kStepMs));
      std::vector<unsigned char> junk(4096);
      for (size_t i = 0; i < junk.size(); ++i) junk[i] = static_cast<unsigned char>(i * 37 + 11);
      s.sendAll(junk.data(), junk.size(), Deadline::afterMs(kStepMs), "rank 0");
      bs->barrier(Deadline::afterMs(kStepMs));
      return 0;
    }
    Endpoint e = open(kind, rank, n, id);
    std::vector<unsigned char> into(1000, 0xee);
    bool named = false;
    try {
      until(e, [&] { return e.conn->tryRecvInto(into.data(), 1000, tagOf(1, 1000)); });
    } catch (const transport::ConnectionError& err) {
      named = err.peer() == 1;
      std::printf("rank 0: %s\n", err.what());
    }
    check.expect(named, "garbage was not an error naming the peer");
    e.bs->barrier(Deadline::afterMs(kStepMs));
    return check.failures();
  });
  EXPECT_FALSE(out.timedOut) << out.describe();
  EXPECT_TRUE(out.allSucceeded()) << out.describe();
}

// A peer whose GID reaches nobody (rank 1 tells rank 0 an address no host
// has): an error naming the peer on both ranks, within the step's bound,
// whether the queue pair refuses to come up (the transport is then unusable,
// saying why) or its packets go nowhere (the ack timeout's retries run out).
TEST_P(Conformance, AnUnreachableGidIsAnErrorNamingThePeerOnBothRanks) {
  const std::string kind = this->kind();
  if (kind != "verbs") GTEST_SKIP() << "GIDs are verbs'";
  RunOutcome out = runRanks(2, [&](int rank, int n, const gyreUniqueId& id) {
    Checker check(rank);
    auto bs = rendezvous(rank, n, id);
    // ::ffff:10.9.9.9, a RoCE v2 GID (IPv4-mapped, as the guest's own) in a
    // network no interface here has a route to.
    const uint8_t nowhere[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 9, 9, 9};
    auto t = makeTransport(kind, *bs, false, rank == 1 ? nowhere : nullptr);
    const int peer = 1 - rank;
    std::string why;
    bool named = false;
    if (!t->canConnect(peer, &why)) {
      named = why.find("rank") != std::string::npos;
      std::printf("rank %d: unusable: %s\n", rank, why.c_str());
    } else {
      const int peers[] = {peer};
      t->connect(peers, Deadline::afterMs(kStepMs));
      Endpoint e;
      e.t = std::move(t);
      e.peer = peer;
      e.conn = e.t->connection(peer);
      std::vector<unsigned char> mine(100, 1), in(100);
      try {
        // Each sends, then waits for the other's message, which cannot come.
        const bool sent = until(e, [&] { return e.conn->trySendFrom(mine.data(), mine.size(), tagOf(1, 100)); });
        const bool got = sent && until(e, [&] { return e.conn->tryRecvInto(in.data(), in.size(), tagOf(1, 100)); });
        check.fail(got ? "a message crossed a link to a GID nobody has" : "no error within the step's bound");
      } catch (const transport::ConnectionError& err) {
        named = err.peer() == peer;
        std::printf("rank %d: %s\n", rank, err.what());
      }
      t = std::move(e.t);
    }
    check.expect(named, "the unreachable GID was not an error naming the peer");
    bs->barrier(Deadline::afterMs(kStepMs));
    return check.failures();
  });
  EXPECT_FALSE(out.timedOut) << out.describe();
  EXPECT_TRUE(out.allSucceeded()) << out.describe();
}

// Verbs joins this suite only (not GYRE_TEST_TRANSPORTS): the collective
// suites would need a device on every host that runs them.
#ifdef GYRE_HAVE_VERBS
#define GYRE_CONFORMANCE_TRANSPORTS GYRE_TEST_TRANSPORTS, "verbs"
#else
#define GYRE_CONFORMANCE_TRANSPORTS GYRE_TEST_TRANSPORTS
#endif
#ifdef GYRE_HAVE_UCX
// Where gyre sets UCX's rendezvous threshold itself (no RDMA here) it sends
// a piece of up to about 1 MiB as one UCP message; a rank whose user set
// UCX_RNDV_THRESH sends those above 8 KiB in two parts. Each tells the
// other's messages apart by their first part, whether its receive waited
// ahead (the whole message's receive, or its payload's, posted early) or
// the message came first.
TEST(UcxMessages, RanksThatSplitMessagesDifferentlyUnderstandEachOther) {
  RunOutcome out = runRanks(2, [&](int rank, int n, const gyreUniqueId& id) {
    Checker check(rank);
    if (rank == 1) setenv("UCX_RNDV_THRESH", "1m", 1);  // two parts above 8 KiB here
    Endpoint e = open("ucx", rank, n, id);
    auto barrier = [&] { e.bs->barrier(Deadline::afterMs(kStepMs)); };
    uint64_t msg = 0;
    for (size_t bytes : {size_t{200}, size_t{9000}, size_t{64} << 10, size_t{200} << 10}) {
      for (bool waitAhead : {true, false}) {
        ++msg;
        std::vector<unsigned char> data(bytes), into(bytes + 1, 0xee);
        for (size_t i = 0; i < bytes; ++i) data[i] = pattern(rank, msg, i);
        auto recv = [&] { return e.conn->tryRecvInto(into.data(), bytes, tagOf(msg, bytes)); };
        if (waitAhead) check.expect(!recv(), "a message arrived before it was sent");
        barrier();
        check.expect(until(e, [&] { return e.conn->trySendFrom(data.data(), bytes, tagOf(msg, bytes)); }), "send");
        if (!waitAhead) barrier();  // it came first
        check.expect(until(e, recv), "receive " + std::to_string(bytes) + " bytes");
        if (const auto i = firstWrong(into.data(), bytes, 1 - rank, msg))
          check.fail(std::to_string(bytes) + " bytes: byte " + std::to_string(*i) + " is wrong");
        check.expect(into[bytes] == 0xee, "a message spilled past the receiver's buffer");
      }
    }
    e.bs->barrier(Deadline::afterMs(kStepMs));
    return check.failures();
  });
  EXPECT_FALSE(out.timedOut) << out.describe();
  EXPECT_TRUE(out.allSucceeded()) << out.describe();
}
#endif

INSTANTIATE_TEST_SUITE_P(Transports, Conformance,
                         testing::Values(GYRE_CONFORMANCE_TRANSPORTS),
                         [](const testing::TestParamInfo<const char*>& i) { return std::string(i.param); });

}  // namespace
}  // namespace gyre::test
