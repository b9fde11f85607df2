// The tuner's numbers for this communicator: loaded from GYRE_TUNER_FILE,
// inherited from the parent of a split, fixed (GYRE_TUNER=builtin), or
// measured now. The measurement runs through the same executor and
// transports as real calls: rank 0 with the next rank on its host (the
// local link) and with the first rank on another host (the network link);
// every rank times a local reduction, all at once as in a real call. All
// ranks then take rank 0's link numbers and the slowest rank's reduction,
// so every rank holds the same model and makes the same choices.
#include <algorithm>
#include <cstring>
#include <fstream>
#include <map>
#include <vector>

#include "base/clock.h"
#include "base/log.h"
#include "collectives/alltoall.h"
#include "collectives/calibration_plans.h"
#include "collectives/tuner.h"
#include "core/communicator.h"
#include "sim/estimate.h"
#include "transport/connection_manager.h"

namespace gyre::core {

namespace {

// Long enough that latency does not matter and beyond L2 (the last-level
// cache is often larger: large calls that miss it run somewhat slower).
constexpr size_t kExchangeBytes = 4 << 20;
constexpr size_t kReduceElems = 512 << 10;  // 2 MiB of float32 per operand: beyond L2, like large calls
constexpr int kPingPongBatches = 8, kPingPongs = 8;
constexpr int kRepeats = 3;  // the best of these: the machine's speed, not a preempted moment

// What one rank measured (0: not measured here).
struct Measured {
  double localLatencyUs, localGbps, networkLatencyUs, networkGbps, reduceGbps, readGbps, readLatencyUs;
};

// Byte buffers for the link measurements.
collectives::CallArgs byteArgs(std::vector<unsigned char>& in, std::vector<unsigned char>& out) {
  collectives::CallArgs args;
  args.input = in.data();
  args.output = out.data();
  args.dtype = kernels::DType::Uint8;
  args.elemSize = 1;
  return args;
}

// The fastest of `runs` timings (microseconds) after `warmups` untimed
// ones: the machine's speed, not a moment it was preempted.
template <class F>
double fastest(int warmups, int runs, F&& timeOnce) {
  for (int i = 0; i < warmups; ++i) timeOnce();
  double best = 1e300;
  for (int i = 0; i < runs; ++i) best = std::min(best, timeOnce());
  return best;
}

}  // namespace

double Communicator::timePlanUs(collectives::Plan& plan, collectives::CallArgs& args) {
  chunkBytes(plan.peers);  // connects them on first use
  collectives::CallDesc d;
  d.kind = collectives::OpKind::SendRecv;
  d.seq = ~uint64_t{0};  // no user call has this number
  plan.tags.assign(1, collectives::makeTag(d));
  const int64_t t0 = nowNs();
  collectives::execute(plan, args, *this);
  return double(nowNs() - t0) / 1e3;
}

void Communicator::measureLink(int peer, bool first, double* latencyUs, double* gbps, std::vector<unsigned char>& in,
                               std::vector<unsigned char>& out) {
  collectives::CallArgs args = byteArgs(in, out);
  collectives::Plan plan;
  collectives::buildPingPong(plan, peer, first, 8, 8);
  timePlanUs(plan, args);  // warm-up
  collectives::buildPingPong(plan, peer, first, 8, kPingPongs);
  *latencyUs = fastest(0, kPingPongBatches, [&] { return timePlanUs(plan, args); }) / (2.0 * kPingPongs);
  collectives::buildExchange(plan, peer, first, kExchangeBytes, connections_->connection(peer)->maxMessageBytes());
  const double best = fastest(1, kRepeats, [&] { return timePlanUs(plan, args) - 2 * *latencyUs; });
  *gbps = double(kExchangeBytes) / std::max(best, 1.0) / 1e3;
}

double Communicator::measureRead(int peer, std::vector<unsigned char>& in, std::vector<unsigned char>& out,
                                 double* latencyUs) {
  collectives::CallArgs args = byteArgs(in, out);
  collectives::Plan plan;
  // A tiny read first: its time, less the two messages around it, is the
  // read's fixed cost.
  collectives::buildPeerRead(plan, peer, 8);
  *latencyUs = fastest(0, kPingPongBatches, [&] { return timePlanUs(plan, args); });
  collectives::buildPeerRead(plan, peer, kExchangeBytes);
  const double best = fastest(1, kRepeats, [&] { return timePlanUs(plan, args); });
  return double(kExchangeBytes) / std::max(best, 1.0) / 1e3;
}

double Communicator::measureReduce() {
  std::vector<float> a(kReduceElems, 1.0f), b(kReduceElems, 0.5f);
  collectives::CallArgs args;
  args.input = a.data();
  args.output = b.data();
  collectives::Plan plan;
  collectives::buildLocalReduce(plan, kReduceElems);
  const double best = fastest(1, kRepeats, [&] { return timePlanUs(plan, args); });
  return double(kReduceElems * sizeof(float)) / std::max(best, 0.01) / 1e3;
}

collectives::CostModel Communicator::calibrate(Deadline deadline) {
  const auto& peers = bootstrap_->peers();
  const uint64_t host0 = peers[0].hostHash;
  int localPeer = -1, remotePeer = -1;  // rank 0's partners
  for (int r = 1; r < nranks_; ++r) {
    if (peers[r].hostHash == host0 && localPeer < 0) localPeer = r;
    if (peers[r].hostHash != host0 && remotePeer < 0) remotePeer = r;
  }
  std::vector<Measured> all(static_cast<size_t>(nranks_));
  Measured& m = all[rank_];
  std::memset(&m, 0, sizeof m);
  const int64_t t0 = nowNs();
  m.reduceGbps = measureReduce();
  const int64_t t1 = nowNs();
  std::vector<unsigned char> in, out;
  if (rank_ == 0 || rank_ == localPeer || rank_ == remotePeer) {
    in.assign(kExchangeBytes, 1);
    out.assign(kExchangeBytes, 0);
  }
  // Between phases the ranks not measuring wait in the bootstrap's barrier,
  // asleep: on a host with fewer cores than ranks, a rank still reducing
  // or spinning for its partner would steal the measuring pair's core.
  bootstrap_->barrier(deadline);
  if (localPeer > 0 && (rank_ == 0 || rank_ == localPeer))
    measureLink(rank_ == 0 ? localPeer : 0, rank_ == 0, &m.localLatencyUs, &m.localGbps, in, out);
  bootstrap_->barrier(deadline);
  const int64_t t2 = nowNs();
  if (remotePeer > 0 && (rank_ == 0 || rank_ == remotePeer))
    measureLink(rank_ == 0 ? remotePeer : 0, rank_ == 0, &m.networkLatencyUs, &m.networkGbps, in, out);
  if (remotePeer > 0) bootstrap_->barrier(deadline);
  const int64_t t3 = nowNs();
  if (localReads_ && localPeer > 0 && (rank_ == 0 || rank_ == localPeer))
    m.readGbps = measureRead(rank_ == 0 ? localPeer : 0, in, out, &m.readLatencyUs);
  GYRE_TRACE("calibration: reduce %.1f ms, local link %.1f ms, network %.1f ms, reads %.1f ms", (t1 - t0) / 1e6,
             (t2 - t1) / 1e6, (t3 - t2) / 1e6, (nowNs() - t3) / 1e6);
  bootstrap_->allGather(all.data(), sizeof(Measured), deadline);

  collectives::CostModel model;  // defaults stand in for what was not measured
  model.source = "calibrated";
  const Measured& r0 = all[0];
  if (r0.localGbps > 0) model.local = collectives::LinkCost{std::max(r0.localLatencyUs, 0.01), r0.localGbps};
  if (r0.networkGbps > 0)
    model.network = collectives::LinkCost{std::max(r0.networkLatencyUs, 0.01), r0.networkGbps};
  if (r0.readGbps > 0) {
    model.readGBps = r0.readGbps;
    model.readLatencyUs = std::max(r0.readLatencyUs - 2 * model.local.latencyUs, 0.01);
  }
  double reduce = 1e300;
  for (const Measured& x : all) reduce = std::min(reduce, x.reduceGbps);
  model.reduceGBps = reduce;
  model.validate("the tuner's calibration");
  return model;
}

void Communicator::setUpTuner(Deadline deadline, const collectives::CostModel* inherited) {
  const auto& peers = bootstrap_->peers();
  std::map<uint64_t, int> ranksPerHost, hostNumber;
  hostIndex_.clear();
  for (const auto& p : peers) {
    ++ranksPerHost[p.hostHash];
    hostIndex_.push_back(hostNumber.emplace(p.hostHash, static_cast<int>(hostNumber.size())).first->second);
  }
  tuning_.hosts = static_cast<int>(ranksPerHost.size());
  tuning_.perHost = 0;
  for (const auto& [host, count] : ranksPerHost) tuning_.perHost = std::max(tuning_.perHost, count);
  tuning_.localChunk = config_.transport == TransportChoice::Tcp ? config_.tcpChunkBytes : config_.shmSlotBytes;
  tuning_.networkChunk = config_.tcpChunkBytes;
  commonChunk_ = SIZE_MAX;
  if (tuning_.perHost > 1) commonChunk_ = std::min(commonChunk_, tuning_.localChunk);
  if (tuning_.hosts > 1) commonChunk_ = std::min(commonChunk_, tuning_.networkChunk);
  // From the transports the peers were given: whether messages cost system
  // calls (the cost model's pairwise AllToAll), within a host where every
  // rank shares one (every rank then sees the same peers' transports), and
  // between hosts (TCP, or UCX where every rank's UCX goes over tcp); and
  // whether this host's peers talk through FIFOs (shared memory reaches
  // nothing else), which cut pairwise AllToAll's pieces
  // (TuningParams::pairwisePiece).
  bool local = nranks_ > 1, network = tuning_.hosts > 1, fifos = tuning_.perHost > 1;
  for (int p = 0; p < nranks_; ++p) {
    if (p == rank_) continue;
    const transport::Capabilities caps = connections_->transportOf(p).capabilitiesToward(p);
    const bool syscalls = caps & transport::kMessageSyscalls;
    if (hostIndex_[p] == hostIndex_[rank_]) {
      local &= syscalls;
      fifos &= (caps & transport::kSameHostOnly) != 0;
    } else {
      network &= syscalls;
    }
  }
  tuning_.localSockets = tuning_.hosts == 1 && local;
  tuning_.networkSockets = network;
  tuning_.localFifoSlots = fifos ? config_.shmSlots : 0;

  if (!config_.tunerFile.empty()) {
    // Loaded in makeShell; SharedSettings made sure every rank has the same.
  } else if (inherited) {
    tuning_.model = *inherited;
  } else if (config_.calibrate && nranks_ > 1) {
    const int64_t t0 = nowNs();
    tuning_.model = calibrate(deadline);
    GYRE_INFO("tuner calibrated in %.1f ms", double(nowNs() - t0) / 1e6);
  }
  if (tuning_.model.source == "built-in") {
    // The built-in numbers describe a small host's shared memory and a
    // commodity network; the topology knows when the hardware is slower
    // (a 1 Gb/s NIC, a narrow path to it). Measured or loaded numbers need
    // no such hint.
    std::string capped;
    if (tuning_.hosts > 1 && topoNetworkGBps_ > 0 && topoNetworkGBps_ < tuning_.model.network.gbps) {
      tuning_.model.network.gbps = topoNetworkGBps_;
      capped += " network";
    }
    if (tuning_.perHost > 1 && topoLocalGBps_ > 0 && topoLocalGBps_ < tuning_.model.local.gbps) {
      tuning_.model.local.gbps = topoLocalGBps_;
      capped += " local";
    }
    if (!capped.empty()) tuning_.model.source = "built-in, topology-capped" + capped;
  }
  tuning_.blockwiseReadBytes = collectives::blockwiseThresholdOf(*this);
  collectives::logBlockwiseThreshold(*this);
  if (rank_ == 0 && !config_.tunerDumpFile.empty()) {
    std::ofstream f(config_.tunerDumpFile);
    f << tuning_.model.format();
    if (!f) GYRE_WARN("GYRE_TUNER_DUMP_FILE=%s: cannot write it", config_.tunerDumpFile.c_str());
  }
  if (rank_ == 0)
    GYRE_INFO("tuner model (%s): local %.2fus %.2fGB/s, network %.2fus %.2fGB/s, reduce %.2fGB/s, read %.2fus "
              "%.2fGB/s (%.2fx slower beyond %.0f MiB), mapped read %.2fGB/s (%s); %d host(s), up to %d rank(s) "
              "per host, %d core(s)",
              tuning_.model.source.c_str(), tuning_.model.local.latencyUs, tuning_.model.local.gbps,
              tuning_.model.network.latencyUs, tuning_.model.network.gbps, tuning_.model.reduceGBps,
              tuning_.model.readLatencyUs, tuning_.model.readGBps, tuning_.model.readColdSlowdown,
              tuning_.model.cacheMiB, tuning_.model.mappedReadGBps,
              tuning_.mappedBuffers ? "GYRE_MAPPED_BUFFERS=1: used" : "unused", tuning_.hosts, tuning_.perHost, tuning_.cores);
}

collectives::Candidate Communicator::estimate(collectives::OpKind op, size_t bytes,
                                              int groupRanks) const {
  collectives::TuningParams t = tuning_;
  bool reads = localReads_;
  if (groupRanks != nranks_) {
    // Another group: what setUpTuner would give a split's child of
    // groupRanks consecutive ranks, placed perHost to a host as ours are.
    // Single-copy reads only where this communicator has them (then every
    // rank shares one host, and so does any smaller group): whether a group
    // on one host of a larger job could read its peers is not known before
    // its connections exist, and the model then prices the plain exchange.
    t.perHost = std::min(groupRanks, tuning_.perHost);
    t.hosts = (groupRanks + tuning_.perHost - 1) / tuning_.perHost;
    reads = localReads_ && t.hosts == 1;
  }
  collectives::Candidate c = collectives::modelChoice(collectives::callShape(op, bytes, groupRanks, t, reads), t);
  // Its time: the call's own plans simulated on hosts like ours, as
  // gyre-sim would (docs/simulator.md, "One model, three callers").
  const auto key = std::make_tuple(static_cast<int>(op), bytes, groupRanks);
  {
    std::lock_guard<std::mutex> lock(estimatesMu_);
    if (auto it = simulatedUs_.find(key); it != simulatedUs_.end()) {
      c.us = it->second;
      return c;
    }
  }
  try {
    const size_t elemSize = bytes % 4 == 0 ? 4 : 1;
    c.us = 1e6 * sim::estimateSeconds(t, op, bytes / elemSize, elemSize, groupRanks, reads, c.algo->name);
  } catch (const Error& e) {
    GYRE_TRACE("estimate: %s of %zu bytes on %d ranks (%s) not simulated, the model's %.2f us: %s",
               collectives::opKindName(op), bytes, groupRanks, c.algo->name, c.us, e.what());
  }
  std::lock_guard<std::mutex> lock(estimatesMu_);
  simulatedUs_.emplace(key, c.us);
  return c;
}

}  // namespace gyre::core
