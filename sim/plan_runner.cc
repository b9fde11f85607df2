#include "sim/plan_runner.h"

#include <algorithm>
#include <cstdio>
#include <unordered_map>
#include <memory>
#include <string>
#include <utility>

#include "base/error.h"
#include "sim/huge_pages.h"
#include "sim/symmetry.h"

namespace gyre::sim {

namespace {

using collectives::Prim;
using collectives::primName;

// An address message's payload (collectives' SendAddresses: two addresses
// and a count), as the executor sends it.
constexpr double kAddressBytes = 24;

bool receives(Prim p) {
  switch (p) {
    case Prim::Recv:
    case Prim::RecvReduce:
    case Prim::RecvReduceSend:
    case Prim::RecvReduceCopySend:
    case Prim::RecvCopySend:
    case Prim::RecvAddresses:
    case Prim::RecvDecode: return true;
    default: return false;
  }
}

bool sends(Prim p) {
  switch (p) {
    case Prim::Send:
    case Prim::RecvReduceSend:
    case Prim::RecvReduceCopySend:
    case Prim::RecvCopySend:
    case Prim::CopySend:
    case Prim::SendAddresses: return true;
    default: return false;
  }
}

bool reduces(Prim p) {
  switch (p) {
    case Prim::Reduce:
    case Prim::RecvReduce:
    case Prim::RecvReduceSend:
    case Prim::RecvReduceCopySend:
    case Prim::ReadReduce:
    case Prim::Encode:
    case Prim::Decode:
    case Prim::RecvDecode:
    case Prim::Widen:
    case Prim::Divide: return true;
    default: return false;
  }
}

// A step that neither sends, receives nor reads a peer.
bool localOnly(Prim p) {
  switch (p) {
    case Prim::Copy:
    case Prim::Reduce:
    case Prim::Encode:
    case Prim::Decode:
    case Prim::Widen:
    case Prim::Divide: return true;
    default: return false;
  }
}

// Whether a step copies on its own CPU beside its message (one operand's
// bytes). A receive's copy is the transport's (out of a shared-memory FIFO,
// or a socket's read into place), which the link's rate already has; a
// CopySend into a FIFO writes its output and the FIFO in one pass (the
// executor's CopySend), and only over a socket copies first and lets the
// socket read the copy.
bool copiesLocally(Prim p, bool sendsWithinHost) { return p == Prim::Copy || (p == Prim::CopySend && !sendsWithinHost); }

// Whether a step writes two destinations in one pass where it sends into a
// FIFO: its output and the next rank's slot (the executor's CopySend,
// RecvCopySend and RecvReduceCopySend, into a transport without direct I/O).
bool writesTwo(Prim p) { return p == Prim::CopySend || p == Prim::RecvCopySend || p == Prim::RecvReduceCopySend; }

// A receive's flags in a mail box, where cores are modelled.
constexpr char kReduces = 1, kWritesTwo = 2;

class Runner {
 public:
  Runner(const std::vector<SimPlan>& plans, size_t elemSize, const Fabric& fabric, FlowNetwork& net,
         EventLoop& loop, bool record, LinkOrbits* orbits)
      : plans_(plans), elemSize_(static_cast<double>(elemSize)), fabric_(fabric), net_(net), loop_(loop),
        record_(record), orbits_(orbits), sym_(orbits ? &orbits->symmetry() : nullptr) {}

  RunResult run() {
    const int n = static_cast<int>(plans_.size());
    if (sym_ && sym_->nranks() != n) throwError(gyreInternalError, "simulator: a symmetry of another rank count");
    ranks_.resize(static_cast<size_t>(n));
    findSteps();
    if (n <= kSentToRanks) sentTo_.assign(static_cast<size_t>(n) * static_cast<size_t>(n), 0);
    for (int r = 0; r < n; ++r) {
      if (!simulated(r)) continue;
      const SimPlan& p = plans_[static_cast<size_t>(r)];
      bool awaits = false;
      for (const SimStep& s : p.steps) {
        if (s.prim == Prim::Resolve)
          throwError(gyreInvalidArgument, std::string("simulator: rank ") + std::to_string(r) + "'s plan (" +
                                              p.algorithm + ") resolves steps while it runs, which is not simulated");
        awaits |= s.prim == Prim::Await;
      }
      RankRun& k = ranks_[static_cast<size_t>(r)];
      k.senders = p.peers;
      std::sort(k.senders.begin(), k.senders.end());
      k.boxes.resize(k.senders.size());
      k.outboxes.resize(k.senders.size());
      // Only an Await reads which steps are done: a plan without one keeps
      // no mark (a byte a step, 49 MB for a tree's 16,384 ranks, and a
      // cache miss at each step's end).
      if (awaits) k.stepDone.assign(p.steps.size(), 0);
      const uint32_t total = static_cast<uint32_t>(p.steps.size());
      if (p.lanes.empty()) {
        k.phases = {{{0, total}}};
      } else {
        k.phases.push_back({{0, p.lanes.front().begin}});
        std::vector<Span> lanes;
        for (const collectives::Lane& l : p.lanes) lanes.push_back({l.begin, l.end});
        k.phases.push_back(lanes);
        k.phases.push_back({{p.lanes.back().end, total}});
      }
      if (fabric_.coreOf(r) >= 0)
        for (const SimStep& s : p.steps)
          if (receives(s.prim))
            mailbox(s.recvPeer, r).recvFlags.push_back(static_cast<char>((reduces(s.prim) ? kReduces : 0) |
                                                                         (secondWrite(r, s) > 0 ? kWritesTwo : 0)));
      loop_.at(0, [this, r] { startPhase(r, 0); });
    }
    RunResult out;
    out.events = loop_.run();
    out.rankSeconds.resize(static_cast<size_t>(n));
    for (int r = 0; r < n; ++r) {
      if (!simulated(r)) continue;
      const RankRun& k = ranks_[static_cast<size_t>(r)];
      if (!k.finished) throwError(gyreInternalError, "simulator: the plans deadlock: " + stuck(r));
      out.seconds = std::max(out.seconds, k.end);
    }
    // Every rank ends when its orbit's representative does.
    for (int r = 0; r < n; ++r) out.rankSeconds[static_cast<size_t>(r)] = ranks_[static_cast<size_t>(rep(r))].end;
    const int orbitSize = sym_ ? sym_->order() : 1;
    out.messages = messages_ * static_cast<uint64_t>(orbitSize);
    out.bytesSent = bytesSent_ * orbitSize;
    out.sentTo = sym_ ? imagesOfSentTo() : std::move(sentTo_);
    out.steps = std::move(records_);
    if (sym_) out.aggregation = sym_->describe();
    return out;
  }

 private:
  struct Span {
    uint32_t begin, end;
  };
  struct LaneRun {
    uint32_t pc = 0, end = 0;
    bool done = false;
    bool waitingAwait = false;
    bool waitingMail = false;
    uint32_t seen = UINT32_MAX;  // the step whose start is recorded
    Time start = 0;
  };
  // Messages from one rank to another not yet received, in order, and the
  // lane of `to` waiting for the next (-1: none).
  struct Mailbox {
    std::vector<double> bytes;
    size_t head = 0;
    long waiting = -1;
    // Where cores are modelled: whether each receive of these messages
    // reduces and whether it writes two destinations (kReduces,
    // kWritesTwo; by the receiver's steps, in order), and how many were
    // sent.
    std::vector<char> recvFlags;
    size_t sent = 0;
  };
  // A flow from one rank to another: its path, with a symmetry the
  // canonical links of its orbit's and how many images cross each.
  struct Route {
    std::vector<int> path;
    std::vector<double> weights;
    double latency = 0;
  };
  // Where a rank's messages to one peer go: the route and the mail box
  // they are delivered to (with a symmetry, its representative's, from
  // our preimage). Found at the first message, not at each: a tree's rank
  // sends to the same few peers thousands of times, and the path, its
  // latency and the receiver's box each cost cache misses to find.
  struct Outbox {
    Route route;
    int at = -1;  // the rank that receives (simulated)
    Mailbox* box = nullptr;
    // Within a host whose cores are modelled: the sender's and the
    // receiver's (else -1).
    int coreFrom = -1, coreTo = -1;
    bool known = false;
  };
  struct RankRun {
    // Its mail boxes, one per peer of its plan (peers sorted): found by a
    // search in a few cache lines, not a hash of every pair.
    std::vector<int> senders;
    std::vector<Mailbox> boxes;
    std::vector<Outbox> outboxes;  // by the same peers: where its messages to each go
    std::vector<std::vector<Span>> phases;  // each phase's lanes run side by side
    size_t phase = 0;
    std::vector<LaneRun> lanes;  // the current phase's
    size_t lanesLeft = 0;
    std::vector<char> stepDone;  // by step, where the plan awaits any (else empty)
    size_t lanesWaitingMail = 0;  // of the current phase's lanes
    bool finished = false;
    Time end = 0;
  };
  static uint64_t key(int from, int to) { return uint64_t(uint32_t(from)) << 32 | uint32_t(to); }
  Mailbox& mailbox(int from, int to) {
    RankRun& k = ranks_[static_cast<size_t>(to)];
    const auto it = std::lower_bound(k.senders.begin(), k.senders.end(), from);
    if (it != k.senders.end() && *it == from) return k.boxes[static_cast<size_t>(it - k.senders.begin())];
    return mail_[key(from, to)];  // a peer the plan does not list
  }

  const SimPlan& plan(int r) const { return plans_[static_cast<size_t>(r)]; }
  const SimStep* stepsOf(int r) const { return stepsOf_[static_cast<size_t>(r)]; }

  // Each rank's steps, found in a small array (its plan is in a larger
  // one, a cache line of its own at 16,384 ranks).
  void findSteps() {
    stepsOf_.assign(plans_.size(), nullptr);
    for (size_t r = 0; r < plans_.size(); ++r) stepsOf_[r] = plans_[r].steps.data();
  }
  int rep(int r) const { return sym_ ? sym_->representative(r) : r; }
  bool simulated(int r) const { return rep(r) == r; }

  Route route(int from, int to) const {
    Route out;
    out.path = fabric_.path(from, to);
    out.latency = net_.latencyOf(out.path);
    if (orbits_) {
      out.weights.resize(out.path.size());
      for (size_t i = 0; i < out.path.size(); ++i) {
        out.weights[i] = orbits_->weight(out.path[i]);
        out.path[i] = orbits_->canonical(out.path[i]);
      }
    }
    return out;
  }

  // The route with one more link that its flow takes `w` times its rate of
  // (a core's share: what its bytes cost there against a FIFO copy).
  // A link the path has already (two ranks of one core) takes the sum.
  void addLink(Route& rt, int link, double w) const {
    rt.weights.resize(rt.path.size(), 1.0);
    const int at = orbits_ ? orbits_->canonical(link) : link;
    const double weight = orbits_ ? orbits_->weight(link) * w : w;
    for (size_t i = 0; i < rt.path.size(); ++i)
      if (rt.path[i] == at) {
        rt.weights[i] += weight;
        return;
      }
    rt.path.push_back(at);
    rt.weights.push_back(weight);
  }
  // A route read or written by rank r's own CPU through the kernel (a
  // single-copy read, a ReduceFromAll's write): its core carries the bytes
  // too, at the kernel's copy rate.
  Route routeOnCore(int from, int to, int r) const {
    Route rt = route(from, to);
    if (const int core = fabric_.coreOf(r); core >= 0) addLink(rt, core, fabric_.peerReadCost(r));
    return rt;
  }
  double coreRate(int core) const { return net_.link(core).bytesPerSecond; }
  // What a byte reduced costs rank r's core, in FIFO-copy bytes.
  double reduceCost(int r) const { return coreRate(fabric_.coreOf(r)) / fabric_.reduceBytesPerSecond(r); }
  // What step s's second destination costs rank r's core a byte, in
  // FIFO-copy bytes: where it writes its output and a FIFO slot in one
  // pass (a CopySend into a FIFO, or a receive from one that passes it on
  // into another), else 0.
  double secondWrite(int r, const SimStep& s) const {
    if (!writesTwo(s.prim) || fabric_.fifoSlot(r, s.sendPeer) <= 0) return 0;
    if (s.prim != Prim::CopySend && fabric_.fifoSlot(s.recvPeer, r) <= 0) return 0;
    return fabric_.secondWriteCost(r);
  }
  // Work on rank r's core, counted in FIFO-copy bytes, then `then`.
  void onCore(int r, double bytes, Callback then) {
    const int core = fabric_.coreOf(r);
    Route rt;
    addLink(rt, core, 1.0);
    net_.start(rt.path, bytes, std::move(then), rt.weights);
  }
  // What step s's local work costs rank r's core, in FIFO-copy bytes: a
  // reduction or a copy of its own at their rates; a receive within a host
  // its last FIFO slot's copy out or reduction (the message's flow took the
  // rest), across hosts its reduction (the socket's copy is in the link's
  // rate).
  double coreWork(int r, const SimStep& s, double local) const {
    if (receives(s.prim)) {
      if (!fabric_.sameHost(s.recvPeer, r)) return reduces(s.prim) ? local * reduceCost(r) : 0;
      return std::min(local, fabric_.fifoSlot(s.recvPeer, r)) *
             ((reduces(s.prim) ? reduceCost(r) : fabric_.fifoReadCost(r)) + secondWrite(r, s));
    }
    if (reduces(s.prim)) return local * reduceCost(r);
    if (copiesLocally(s.prim, s.prim == Prim::CopySend && fabric_.sameHost(r, s.sendPeer)))
      return local * coreRate(fabric_.coreOf(r)) / fabric_.copyBytesPerSecond(r);
    return 0;
  }

  // The representatives' rows of sentTo, copied to every image of each pair.
  std::vector<double> imagesOfSentTo() const {
    if (sentTo_.empty()) return {};
    const size_t n = plans_.size();
    std::vector<double> all(n * n, 0);
    for (size_t r = 0; r < n; ++r) {
      if (!simulated(static_cast<int>(r))) continue;
      for (size_t to = 0; to < n; ++to) {
        const double v = sentTo_[r * n + to];
        if (v == 0) continue;
        for (int e = 0; e < sym_->order(); ++e)
          all[size_t(sym_->apply(e, int(r))) * n + size_t(sym_->apply(e, int(to)))] = v;
      }
    }
    return all;
  }

  void startPhase(int r, size_t ph) {
    RankRun& k = ranks_[static_cast<size_t>(r)];
    for (; ph < k.phases.size(); ++ph) {
      k.phase = ph;
      k.lanes.clear();
      for (const Span& s : k.phases[ph])
        if (s.end > s.begin) k.lanes.push_back(LaneRun{s.begin, s.end});
      k.lanesLeft = k.lanes.size();
      k.lanesWaitingMail = 0;
      if (k.lanesLeft == 0) continue;
      for (size_t li = 0; li < k.lanes.size(); ++li) advance(r, li);
      return;
    }
    k.finished = true;
    k.end = loop_.now();
  }

  void laneDone(int r, size_t li) {
    RankRun& k = ranks_[static_cast<size_t>(r)];
    k.lanes[li].done = true;
    if (--k.lanesLeft == 0) startPhase(r, k.phase + 1);
  }

  // Runs lane li of rank r from its pc until a step has to wait.
  void advance(int r, size_t li) {
    RankRun& k = ranks_[static_cast<size_t>(r)];
    LaneRun& lane = k.lanes[li];
    if (lane.done) return;
    if (lane.pc >= lane.end) {
      laneDone(r, li);
      return;
    }
    const SimStep& s = stepsOf(r)[lane.pc];
    if (lane.seen != lane.pc) {
      lane.seen = lane.pc;
      lane.start = loop_.now();
    }
    if (s.prim == Prim::Await) {
      if (s.count >= k.stepDone.size() || k.stepDone[s.count]) {
        // Done as an event of its own, not here: stepDone looks at the
        // lane's next step at once, which must not re-enter startPhase's
        // loop over the lanes.
        loop_.at(loop_.now(), [this, r, li] { stepDone(r, li); });
      } else {
        lane.waitingAwait = true;
      }
      return;
    }
    if (receives(s.prim)) {
      Mailbox& box = mailbox(s.recvPeer, r);
      if (box.head == box.bytes.size()) {
        box.waiting = static_cast<long>(li);
        lane.waitingMail = true;
        ++k.lanesWaitingMail;
        return;
      }
      // A rank all of whose lanes waited slept: where its core runs others,
      // it runs again after a switch (coreWork).
      bool woke = false;
      if (lane.waitingMail) {
        woke = k.lanesWaitingMail == k.lanesLeft;
        lane.waitingMail = false;
        --k.lanesWaitingMail;
      }
      const double bytes = box.bytes[box.head++];
      if (box.head == box.bytes.size()) {  // empty: start over, keeping the capacity
        box.bytes.clear();
        box.head = 0;
      }
      work(r, li, s, bytes, woke);
      return;
    }
    work(r, li, s, bytesOf(s));
  }

  double bytesOf(const SimStep& s) const {
    if (s.prim == Prim::SendAddresses) return kAddressBytes;
    return static_cast<double>(s.count) * elemSize_;
  }

  // The step's local work, then its send or read, then the next step.
  void work(int r, size_t li, const SimStep& s, double bytes, bool woke = false) {
    // The software cost per step is the transport's and the executor's per
    // message: a step of local work alone (a Bruck round's rotation of n
    // small blocks, a copy into scratch) costs its bytes, as the executor's
    // tens of nanoseconds are next to nothing beside a message's.
    double t = localOnly(s.prim) ? 0 : fabric_.stepOverhead(r);
    const double local = s.prim == Prim::RecvAddresses ? 0 : static_cast<double>(s.count) * elemSize_;
    if (fabric_.coreOf(r) >= 0) {
      double w = coreWork(r, s, local);
      if (woke) w += fabric_.coreSwitchSeconds(r) * coreRate(fabric_.coreOf(r));
      if (w > 0) {
        loop_.after(t, [this, r, li, &s, bytes, w] {
          onCore(r, w, [this, r, li, &s, bytes] { afterLocal(r, li, s, bytes, 0); });
        }, &s);
        return;
      }
      afterLocal(r, li, s, bytes, t);
      return;
    }
    if (reduces(s.prim)) t += local / fabric_.reduceBytesPerSecond(r);
    else if (copiesLocally(s.prim, s.prim == Prim::CopySend && fabric_.sameHost(r, s.sendPeer)))
      t += local / fabric_.copyBytesPerSecond(r);
    else if (receives(s.prim))
      t += fabric_.fifoFill(s.recvPeer, r, local);  // its last slot copied out (a reduction reads it in place)
    afterLocal(r, li, s, bytes, t);
  }

  // The step's send or read, or its end, t after now (its local work done).
  void afterLocal(int r, size_t li, const SimStep& s, double bytes, double t) {
    if (s.prim == Prim::ReduceFromAll) {
      loop_.after(t, [this, r, li, &s] { reduceFromAll(r, li, s); });
      return;
    }
    if (s.prim == Prim::ReadCopy || s.prim == Prim::ReadReduce) {
      loop_.after(t, [this, r, li, &s] {
        const Route rt = routeOnCore(s.recvPeer, r, r);
        const double lat = rt.latency;
        net_.start(rt.path, static_cast<double>(s.count) * elemSize_,
                   [this, r, li, lat] { loop_.after(lat, [this, r, li] { stepDone(r, li); }); }, rt.weights);
      }, &s);
      return;
    }
    if (sends(s.prim)) {
      // The step's peer and bytes go with the event, not the step: t later,
      // after thousands of other ranks' events, its cache line is gone.
      const double out = s.prim == Prim::SendAddresses ? kAddressBytes : bytes;
      const bool chained = receives(s.prim);
      const double second = s.prim == Prim::CopySend ? secondWrite(r, s) : 0;
      loop_.after(t, [this, r, li, to = s.sendPeer, out, chained, second] { send(r, li, to, out, chained, second); },
                  &ranks_[static_cast<size_t>(r)]);
      return;
    }
    loop_.after(t, [this, r, li] { stepDone(r, li); }, &s);  // the next step is beside it
  }

  // chained: the step received what it sends (its receive's copy or
  // reduction wrote the FIFO slot, in the same pass as its output).
  // second: what the sender's copy in pays for writing its output too
  // (secondWrite), a byte.
  void send(int r, size_t li, int to, double out, bool chained = false, double second = 0) {
    const Outbox& ob = outbox(r, to);
    const double lat = ob.route.latency;
    ++messages_;
    bytesSent_ += out;
    if (!sentTo_.empty()) sentTo_[static_cast<size_t>(r) * plans_.size() + static_cast<size_t>(to)] += out;
    auto done = [this, r, li, at = ob.at, box = ob.box, out, lat] {
      loop_.after(lat, [this, at, box, out] { deliver(*box, at, out); }, box);
      stepDone(r, li);
    };
    if (ob.coreFrom < 0) {
      net_.start(ob.route.path, out, std::move(done), ob.route.weights);
      return;
    }
    // Within a host, on cores: the sender copies every byte in (unless its
    // receive wrote them there); the receiver copies (or reduces) all but
    // the last slot out as they come, that slot after the message is in
    // (its receive's coreWork).
    Route rt = ob.route;
    if (!chained) addLink(rt, ob.coreFrom, 1.0 + second);
    Mailbox& box = *ob.box;
    const char flags = box.sent < box.recvFlags.size() ? box.recvFlags[box.sent] : 0;
    ++box.sent;
    const double early = out > 0 ? std::max(0.0, out - fabric_.fifoSlot(r, to)) / out : 0;
    if (early > 0) {
      const double w = ((flags & kReduces) ? reduceCost(to) : fabric_.fifoReadCost(to)) +
                       ((flags & kWritesTwo) ? fabric_.secondWriteCost(to) : 0);
      addLink(rt, ob.coreTo, early * w);
    }
    net_.start(rt.path, out, std::move(done), rt.weights);
  }

  // ReduceFromAll: the slice read from every peer at once, reduced (one
  // reduction per peer's data), then, with toAll, written to every peer at
  // once; done when the last write has landed.
  void reduceFromAll(int r, size_t li, const SimStep& s) {
    const std::vector<int>& peers = plan(r).peers;
    const double bytes = static_cast<double>(s.count) * elemSize_;
    auto writes = [this, r, li, &s, bytes, &peers] {
      if (!s.toAll || peers.empty() || bytes == 0) return stepDone(r, li);
      auto left = std::make_shared<size_t>(peers.size());
      for (int p : peers) {
        const Route rt = routeOnCore(r, p, r);
        const double lat = rt.latency;
        net_.start(rt.path, bytes, [this, r, li, lat, left] {
          if (--*left == 0) loop_.after(lat, [this, r, li] { stepDone(r, li); });
        }, rt.weights);
      }
    };
    auto reduced = [this, r, bytes, writes, n = peers.size()] {
      const double work = static_cast<double>(n) * bytes;
      if (fabric_.coreOf(r) >= 0 && work > 0)
        onCore(r, work * reduceCost(r), writes);
      else
        loop_.after(work / fabric_.reduceBytesPerSecond(r), writes);
    };
    if (peers.empty() || bytes == 0) return reduced();
    auto left = std::make_shared<size_t>(peers.size());
    for (int p : peers) {
      const Route rt = routeOnCore(p, r, r);
      const double lat = rt.latency;
      net_.start(rt.path, bytes, [this, lat, left, reduced] {
        if (--*left == 0) loop_.after(lat, reduced);
      }, rt.weights);
    }
  }

  // Rank r's outbox to `to`, found the first time. A peer its plan does
  // not list has none kept: it is found anew (in scratch) each time.
  const Outbox& outbox(int r, int to) {
    RankRun& k = ranks_[static_cast<size_t>(r)];
    const auto it = std::lower_bound(k.senders.begin(), k.senders.end(), to);
    const bool listed = it != k.senders.end() && *it == to;
    Outbox& ob = listed ? k.outboxes[static_cast<size_t>(it - k.senders.begin())] : unlisted_;
    if (ob.known) return ob;
    ob.route = route(r, to);
    ob.coreFrom = ob.coreTo = -1;
    if (fabric_.sameHost(r, to) && fabric_.coreOf(r) >= 0 && fabric_.coreOf(to) >= 0) {
      ob.coreFrom = fabric_.coreOf(r);
      ob.coreTo = fabric_.coreOf(to);
    }
    // A message to a rank that is not simulated is the image of the one
    // its representative gets from our preimage: that one is delivered.
    ob.at = rep(to);
    // Boxes stay where they are: a rank's are sized before the run, and
    // mail_'s entries keep their addresses as it grows.
    ob.box = &mailbox(sym_ ? sym_->pullBack(r, to) : r, ob.at);
    ob.known = listed;
    return ob;
  }

  void deliver(Mailbox& box, int to, double bytes) {
    box.bytes.push_back(bytes);
    if (box.waiting < 0) return;
    const size_t li = static_cast<size_t>(box.waiting);
    box.waiting = -1;
    advance(to, li);
  }

  void stepDone(int r, size_t li) {
    RankRun& k = ranks_[static_cast<size_t>(r)];
    LaneRun& lane = k.lanes[li];
    if (record_) {
      const SimStep& s = stepsOf(r)[lane.pc];
      records_.push_back(StepRecord{r, static_cast<uint32_t>(li), lane.pc, s.prim, s.recvPeer, s.sendPeer,
                                    s.prim == Prim::Await ? 0 : bytesOf(s), lane.start, loop_.now()});
    }
    if (!k.stepDone.empty()) k.stepDone[lane.pc] = 1;
    ++lane.pc;
    // Lanes awaiting a step (Await) look again.
    for (size_t o = 0; o < k.lanes.size(); ++o)
      if (o != li && k.lanes[o].waitingAwait) {
        const SimStep& a = stepsOf(r)[k.lanes[o].pc];
        if (k.stepDone[a.count]) {
          k.lanes[o].waitingAwait = false;
          loop_.at(loop_.now(), [this, r, o] { stepDone(r, o); });
        }
      }
    // The lane's next look at once, not as an event for now: a quarter of
    // the events a 16,384-rank tree ran were these. It is called from
    // events alone (never from advance), so it nests no deeper than this.
    advance(r, li);
  }

  std::string stuck(int r) const {
    const RankRun& k = ranks_[static_cast<size_t>(r)];
    std::string why = "rank " + std::to_string(r) + " (" + plan(r).algorithm + ")";
    for (const LaneRun& lane : k.lanes) {
      if (lane.done || lane.pc >= lane.end) continue;
      const SimStep& s = stepsOf(r)[lane.pc];
      why += " waits at step " + std::to_string(lane.pc) + " (" + primName(s.prim);
      if (receives(s.prim)) why += " from rank " + std::to_string(s.recvPeer);
      why += ")";
      break;
    }
    return why;
  }

  const std::vector<SimPlan>& plans_;
  const double elemSize_;
  const Fabric& fabric_;
  FlowNetwork& net_;
  EventLoop& loop_;
  HugeVector<RankRun> ranks_;
  std::unordered_map<uint64_t, Mailbox> mail_;  // by key(from, to), where the plan lists no such peer
  Outbox unlisted_;  // scratch for outbox()
  std::vector<const SimStep*> stepsOf_;  // by rank: its plan's steps
  uint64_t messages_ = 0;
  double bytesSent_ = 0;
  std::vector<double> sentTo_;
  const bool record_;
  std::vector<StepRecord> records_;
  LinkOrbits* const orbits_;
  const Symmetry* const sym_;
};

}  // namespace

std::vector<std::pair<int, double>> bytesSentByPeer(const SimPlan& plan, size_t elemSize) {
  std::vector<std::pair<int, double>> out;
  for (const SimStep& s : plan.steps) {
    if (!sends(s.prim) || s.prim == Prim::SendAddresses || s.sendPeer < 0) continue;
    const double bytes = static_cast<double>(s.count) * static_cast<double>(elemSize);
    auto it = std::lower_bound(out.begin(), out.end(), s.sendPeer, [](const auto& e, int p) { return e.first < p; });
    if (it != out.end() && it->first == s.sendPeer) it->second += bytes;
    else out.insert(it, {s.sendPeer, bytes});
  }
  return out;
}

SimPlan compact(const collectives::Plan& plan, HugeArena* arena) {
  SimPlan out;
  out.steps = decltype(out.steps)(ArenaAllocator<SimStep>(arena));
  out.algorithm = plan.algorithm;
  out.peers = plan.peers;
  out.lanes = plan.lanes;
  out.peersWriteOutput = plan.peersWriteOutput;
  out.steps.reserve(plan.steps.size());
  for (const collectives::Step& s : plan.steps)
    out.steps.push_back(SimStep{s.prim, s.toAll, s.sendPeer, s.recvPeer, s.count});
  return out;
}

RunResult runPlans(const std::vector<SimPlan>& plans, size_t elemSize, const Fabric& fabric, FlowNetwork& net,
                   EventLoop& loop, bool record, LinkOrbits* orbits) {
  return Runner(plans, elemSize, fabric, net, loop, record, orbits).run();
}

RunResult runPlans(const std::vector<collectives::Plan>& plans, size_t elemSize, const Fabric& fabric,
                   FlowNetwork& net, EventLoop& loop, bool record, LinkOrbits* orbits) {
  std::vector<SimPlan> compacted;
  compacted.reserve(plans.size());
  for (const collectives::Plan& p : plans) compacted.push_back(compact(p));
  return runPlans(compacted, elemSize, fabric, net, loop, record, orbits);
}

std::string chromeTrace(const RunResult& run, const std::string& title) {
  std::string out = "[\n";
  char line[320];
  for (size_t r = 0; r < run.rankSeconds.size(); ++r) {
    std::snprintf(line, sizeof line,
                  "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%zu,\"args\":{\"name\":\"rank %zu (simulated)\"}},\n", r, r);
    out += line;
  }
  for (const StepRecord& s : run.steps) {
    std::snprintf(line, sizeof line,
                  "{\"name\":\"%s\",\"cat\":\"step\",\"ph\":\"X\",\"pid\":%d,\"tid\":%u,\"ts\":%.3f,\"dur\":%.3f,"
                  "\"args\":{\"index\":%u,\"from\":%d,\"to\":%d,\"bytes\":%.0f}},\n",
                  primName(s.prim), s.rank, s.lane, s.start * 1e6, (s.end - s.start) * 1e6, s.index, s.from, s.to,
                  s.bytes);
    out += line;
  }
  // The title as the last event's name, on a row of its own: the JSON array
  // ends without a trailing comma.
  std::string name;
  for (char c : title) name += (c == '"' || c == '\\') ? ' ' : c;
  std::snprintf(line, sizeof line, "{\"name\":\"%s\",\"ph\":\"X\",\"pid\":0,\"tid\":999,\"ts\":0,\"dur\":%.3f}\n]\n",
                name.substr(0, 200).c_str(), run.seconds * 1e6);
  out += line;
  return out;
}

}  // namespace gyre::sim
