// The executor's scheduling of lanes, against stand-in connections that
// record the order in which messages move (no processes: the order is what
// is checked, and it must not depend on a peer's timing).
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "collectives/executor.h"
#include "collectives/steps.h"

namespace gyre::test {
namespace {

using collectives::BufId;
using collectives::Plan;
using collectives::Prim;

class NullTransport : public transport::Transport {
 public:
  const char* name() const override { return "null"; }
  transport::Capabilities capabilities() const override { return 0; }
  bool canConnect(int, std::string*) const override { return true; }
  void connect(std::span<const int>, Deadline) override {}
  transport::Connection* connection(int) override { return nullptr; }
  int64_t spinNs() const override { return 0; }
  bool block(int64_t, FunctionRef<bool()> ready) override { return ready(); }
  bool hasPendingOutput() const override { return false; }
  void shutdown() override {}
  void interrupt() override {}
};

// Always has room and always has the next message; appends "S<peer>" or
// "R<peer>" to the log for every message moved.
class RecordingConnection : public transport::Connection {
 public:
  RecordingConnection(int peer, std::vector<std::string>& log, NullTransport& t)
      : Connection(0), peer_(peer), log_(log), t_(t) {}
  transport::Transport& transport() override { return t_; }
  int peer() const override { return peer_; }
  size_t maxMessageBytes() const override { return sizeof(payload_); }
  void* trySendBuffer(size_t) override { return payload_; }
  void sendCommit(size_t, const transport::MessageTag&) override { log_.push_back("S" + std::to_string(peer_)); }
  bool trySendFrom(const void*, size_t, const transport::MessageTag&) override {
    if (refusals > 0) {
      --refusals;
      return false;
    }
    log_.push_back("S" + std::to_string(peer_));
    return true;
  }
  // The memory layer, logged: K<peer>:<id> registers, D deregisters, F
  // releases a key the peer sent.
  transport::RemoteKey registerMemory(const void* p, size_t bytes, transport::MemoryType type) override {
    transport::RemoteKey k = Connection::registerMemory(p, bytes, type);
    k.handle[0] = ++registrations_;
    log_.push_back(keyed("K", k));
    return k;
  }
  void deregisterMemory(const transport::RemoteKey& k) override { log_.push_back(keyed("D", k)); }
  void releaseRemoteKey(const transport::RemoteKey& k) noexcept override { log_.push_back(keyed("F", k)); }
  // What the next received message holds (a peer's address message).
  void arriving(const void* p, size_t bytes) { std::memcpy(payload_, p, bytes); }
  int refusals = 0;  // trySendFrom refuses this many times first
  const void* tryRecvBuffer(size_t, const transport::MessageTag&) override { return payload_; }
  void recvRelease(size_t) override { log_.push_back("R" + std::to_string(peer_)); }
  bool tryRecvInto(void*, size_t, const transport::MessageTag&) override {
    log_.push_back("R" + std::to_string(peer_));
    return true;
  }
  transport::ProgressResult progress(transport::ReadAhead) override { return {}; }
  const unsigned char* payload() const { return payload_; }  // what the last buffered send wrote

 private:
  std::string keyed(const char* what, const transport::RemoteKey& k) const {
    return what + std::to_string(peer_) + ":" + std::to_string(k.handle[0]);
  }
  uint64_t registrations_ = 0;
  int peer_;
  std::vector<std::string>& log_;
  NullTransport& t_;
  unsigned char payload_[256] = {};
};

class RecordingContext final : public collectives::ExecContext {
 public:
  RecordingContext() : a_(1, log, t_), b_(2, log, t_) {}
  virtual ~RecordingContext() = default;
  transport::Connection& connection(int peer) override { return peer == 1 ? a_ : b_; }
  void waitUntil(std::span<const WaitItem>, FunctionRef<bool()> ready) override {
    if (!mayWait) {
      ADD_FAILURE() << "nothing here ever waits";
      throw std::runtime_error("waited");
    }
    log.push_back("wait");
    while (!ready()) {
    }
  }
  std::vector<std::string> log;
  bool mayWait = false;  // a test whose connection refuses a send at first
  const RecordingConnection& to(int peer) const { return peer == 1 ? a_ : b_; }
  RecordingConnection& to(int peer) { return peer == 1 ? a_ : b_; }

 private:
  NullTransport t_;
  RecordingConnection a_, b_;
};

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& x : v) s += (s.empty() ? "" : " ") + x;
  return s;
}

struct Fixture {
  Plan plan;
  collectives::CallArgs args;
  float in[16] = {}, out[16] = {};
  Fixture() {
    plan.reset("test");
    plan.tags.resize(1);
    args.input = in;
    args.output = out;
  }
  void send(int peer) { collectives::add(plan, Prim::Send, BufId::Input, 0, BufId::Output, 0, 1, peer); }
  void recv(int peer) { collectives::add(plan, Prim::Recv, BufId::Output, 0, BufId::Output, 0, 1, -1, peer); }
  void copy(size_t at) { collectives::add(plan, Prim::Copy, BufId::Input, at, BufId::Output, at, 1); }
};

// A lane of sends beside a lane of receives, every message ready at once:
// they take turns, one message each, instead of the sends all going first
// (which kept peers' FIFOs full while their messages to us waited).
TEST(ExecutorLanes, LanesTakeTurnsOneMessageEach) {
  Fixture f;
  f.plan.beginLane();
  for (int i = 0; i < 4; ++i) f.send(1);
  f.plan.beginLane();
  for (int i = 0; i < 4; ++i) f.recv(2);
  f.plan.closeLane();
  RecordingContext ctx;
  collectives::execute(f.plan, f.args, ctx);
  EXPECT_EQ(joined(ctx.log), "S1 R2 S1 R2 S1 R2 S1 R2");
}

// Local copies wait for nobody: they run at the start of their lane's next
// turn and do not use it up. Lanes of different lengths: the longer one
// finishes alone.
TEST(ExecutorLanes, CopiesRideAlongAndALongerLaneFinishesAlone) {
  Fixture f;
  f.in[3] = 7.0f;
  f.plan.beginLane();
  f.send(1);
  f.copy(3);
  f.send(1);
  f.send(1);
  f.send(1);
  f.plan.beginLane();
  f.recv(2);
  f.recv(2);
  f.plan.closeLane();
  RecordingContext ctx;
  collectives::execute(f.plan, f.args, ctx);
  EXPECT_EQ(joined(ctx.log), "S1 R2 S1 R2 S1 S1");
  EXPECT_EQ(f.out[3], 7.0f);
}

// One lane (most plans) runs straight through in its order.
TEST(ExecutorLanes, ASingleLaneKeepsItsOrder) {
  Fixture f;
  f.send(1);
  f.send(1);
  f.recv(2);
  f.send(1);
  f.recv(2);
  RecordingContext ctx;
  collectives::execute(f.plan, f.args, ctx);
  EXPECT_EQ(joined(ctx.log), "S1 S1 R2 S1 R2");
}

// CopySend: the source lands in dst and in the peer's buffer from one step,
// one message.
TEST(ExecutorLanes, CopySendWritesTheOutputAndSendsTheSameBytes) {
  Fixture f;
  for (int i = 0; i < 16; ++i) f.in[i] = float(i + 1);
  collectives::add(f.plan, Prim::CopySend, BufId::Input, 2, BufId::Output, 5, 4, 1);
  RecordingContext ctx;
  collectives::execute(f.plan, f.args, ctx);
  EXPECT_EQ(joined(ctx.log), "S1");
  for (int i = 0; i < 16; ++i) EXPECT_EQ(f.out[i], i >= 5 && i < 9 ? float(i - 2) : 0.0f) << i;
  float sent[4];
  std::memcpy(sent, ctx.to(1).payload(), sizeof sent);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(sent[i], float(i + 3)) << i;
}

// A single-copy plan's registrations: made once per address message, even
// when its send is refused and retried; held to the call's end and then
// deregistered, and the keys a peer sent released, so nothing a call
// registers outlives it (verbs pinned a region per call and never let go).
TEST(ExecutorMemory, RegistrationsLastTheCallAndAreReleasedAtItsEnd) {
  Fixture f;
  collectives::add(f.plan, Prim::SendAddresses, BufId::Input, 0, BufId::Output, 0, 1, 1);
  collectives::add(f.plan, Prim::RecvAddresses, BufId::Input, 0, BufId::Output, 0, collectives::kAnyCount, -1, 2);
  f.plan.inputElems = f.plan.outputElems = 16;
  RecordingContext ctx;
  ctx.mayWait = true;
  ctx.to(1).refusals = 2;
  // Peer 2's address message: two keys, ids 7 and 8.
  transport::RemoteKey theirs[2];
  theirs[0].type = theirs[1].type = transport::MemoryType::Host;
  theirs[0].bytes = theirs[1].bytes = 64;
  theirs[0].handle[0] = 7;
  theirs[1].handle[0] = 8;
  unsigned char message[2 * sizeof(transport::RemoteKey) + 8] = {};
  std::memcpy(message, theirs, sizeof theirs);
  ctx.to(2).arriving(message, sizeof message);
  collectives::execute(f.plan, f.args, ctx);
  EXPECT_EQ(joined(ctx.log), "K1:1 K1:2 wait S1 R2 D1:1 D1:2 F2:7 F2:8");
}

// ---- a device call's staging, arriving and leaving in pieces ----

// Input that arrives in pieces of 8 bytes (two floats): logs each wait as
// I<bytes asked>.
class PiecewiseInput final : public collectives::InputArrival {
 public:
  explicit PiecewiseInput(std::vector<std::string>& log) : log_(log) {}
  size_t waitFor(size_t bytes) override {
    log_.push_back("I" + std::to_string(bytes));
    return bytes > 64 ? ~size_t{0} : (bytes + 7) / 8 * 8;
  }

 private:
  std::vector<std::string>& log_;
};

// Output pieces of 16, 16 and 32 bytes: logs P<k> as each is final.
class PiecewiseOutput final : public collectives::OutputDeparture {
 public:
  explicit PiecewiseOutput(std::vector<std::string>& log) : log_(log) {}
  const std::vector<size_t>& pieceEnds() const override { return ends_; }
  void pieceFinal(size_t k) override { log_.push_back("P" + std::to_string(k)); }

 private:
  std::vector<std::string>& log_;
  std::vector<size_t> ends_{16, 32, 64};
};

// A step waits for the input it reads and no more; what it has waited for
// once it does not ask again; offering the buffers to a peer (who may read
// any of them) waits for all.
TEST(ExecutorStaging, AStepWaitsForTheInputPiecesItReads) {
  Fixture f;
  f.send(1);   // element 0: the first piece
  f.copy(1);   // element 1: the same piece, no wait
  f.recv(2);   // reads no input
  f.copy(3);   // element 3: up to 16 bytes
  collectives::add(f.plan, Prim::SendAddresses, BufId::Input, 0, BufId::Output, 0, 1, 1);
  f.plan.inputElems = f.plan.outputElems = 16;
  RecordingContext ctx;
  PiecewiseInput input(ctx.log);
  f.args.inputArrival = &input;
  f.in[3] = 5.0f;
  collectives::execute(f.plan, f.args, ctx);
  EXPECT_EQ(joined(ctx.log), "I4 S1 R2 I16 I" + std::to_string(~size_t{0}) + " K1:1 K1:2 S1 D1:1 D1:2");
  EXPECT_EQ(f.out[3], 5.0f);
}

// An output piece is final when the last step that writes it is done,
// whatever the order of the pieces; one that no step writes is final at
// once.
TEST(ExecutorStaging, AnOutputPieceIsFinalOnceNoLaterStepWritesIt) {
  Fixture f;
  f.recv(2);                                                                             // piece 0
  f.copy(5);                                                                             // piece 1
  collectives::add(f.plan, Prim::Recv, BufId::Output, 0, BufId::Output, 2, 2, -1, 2);  // piece 0 again
  f.send(1);                                                                             // writes nothing
  RecordingContext ctx;
  PiecewiseOutput output(ctx.log);
  f.args.outputDeparture = &output;
  collectives::execute(f.plan, f.args, ctx);
  EXPECT_EQ(joined(ctx.log), "P2 R2 P1 R2 P0 S1");
}

// A step that writes across a piece boundary counts for both pieces.
TEST(ExecutorStaging, AStepAcrossABoundaryHoldsBothPieces) {
  Fixture f;
  collectives::add(f.plan, Prim::Copy, BufId::Input, 0, BufId::Output, 2, 4);   // bytes 8-24: pieces 0, 1
  collectives::add(f.plan, Prim::Copy, BufId::Input, 0, BufId::Output, 8, 8);   // bytes 32-64: piece 2
  collectives::add(f.plan, Prim::Copy, BufId::Input, 0, BufId::Output, 0, 2);   // bytes 0-8: piece 0
  RecordingContext ctx;
  PiecewiseOutput output(ctx.log);
  f.args.outputDeparture = &output;
  collectives::execute(f.plan, f.args, ctx);
  EXPECT_EQ(joined(ctx.log), "P1 P2 P0");
}

}  // namespace
}  // namespace gyre::test
