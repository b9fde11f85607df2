#include "sim/simulate.h"

#include <algorithm>

#include "base/error.h"
#include "sim/symmetry.h"
#include "topology/tree_shape.h"

namespace gyre::sim {

namespace {

// A rank of the simulated cluster as the planner sees a communicator. The
// world group is shared by every rank's (only `me` differs, set here): a
// copy per rank would be n copies of its n-rank trees.
class SimPlanEnv final : public collectives::PlanEnv {
 public:
  SimPlanEnv(const ClusterSpec& spec, const collectives::TuningParams& tuning, collectives::Group& world, int rank)
      : spec_(spec), tuning_(tuning), world_(world), rank_(rank) {
    world_.me = rank;
  }
  const collectives::TuningParams& tuning() const override { return tuning_; }
  int rank() const override { return rank_; }
  int nranks() const override { return spec_.nranks(); }
  const collectives::Group& world() const override { return world_; }
  bool sameHost(int peer) const override { return hostIndex(peer) == hostIndex(rank_); }
  int hostIndex(int r) const override { return r / spec_.ranksPerHost; }
  // One size for every rank of the call, as a communicator's
  // (Communicator::chunkBytes): a rank whose ring neighbours are all on
  // its host must cut the vector as the one with a neighbour across the
  // network does, or their pieces differ and the plans deadlock (they did,
  // with a FIFO slot other than the network's chunk).
  size_t chunkBytes(std::span<const int>) override {
    size_t chunk = SIZE_MAX;
    if (spec_.ranksPerHost > 1) chunk = std::min(chunk, tuning_.localChunk);
    if (spec_.hosts > 1) chunk = std::min(chunk, tuning_.networkChunk);
    return chunk == SIZE_MAX ? tuning_.localChunk : chunk;
  }
  bool canReadPeerMemory() const override { return spec_.peerReads && spec_.hosts == 1; }

 private:
  const ClusterSpec& spec_;
  const collectives::TuningParams& tuning_;
  collectives::Group& world_;
  const int rank_;
};

// Up to this many ranks every rank's plan is checked against its
// representative's; above, a sample.
constexpr int kCheckEveryRank = 512;

// Every rank's plan, built when first asked for.
class Plans {
 public:
  Plans(const ClusterSpec& spec, const collectives::TuningParams& tuning, collectives::Group& world,
        const collectives::CallRequest& req, const collectives::AlgoOverrides& overrides)
      : spec_(spec), tuning_(tuning), world_(world), req_(req), overrides_(overrides),
        plans_(static_cast<size_t>(spec.nranks())), built_(plans_.size(), 0) {}
  // Built into one whole plan (its capacity kept from rank to rank), kept
  // compacted.
  const SimPlan& of(int r) {
    if (!built_[static_cast<size_t>(r)]) {
      SimPlanEnv env(spec_, tuning_, world_, r);
      collectives::CallRequest mine = req_;
      const char* name = collectives::planCall(mine, env, overrides_, scratch_);
      if (r == 0) name0_ = name;
      plans_[static_cast<size_t>(r)] = compact(scratch_, &arena_);
      built_[static_cast<size_t>(r)] = 1;
    }
    return plans_[static_cast<size_t>(r)];
  }
  // Frees a plan that was only checked.
  void drop(int r) {
    plans_[static_cast<size_t>(r)] = SimPlan{};
    built_[static_cast<size_t>(r)] = 0;
  }
  std::vector<SimPlan>& all() { return plans_; }
  // The algorithm as planCall named it for rank 0.
  const char* name0() {
    of(0);
    return name0_;
  }

 private:
  const ClusterSpec& spec_;
  const collectives::TuningParams& tuning_;
  collectives::Group& world_;
  const collectives::CallRequest& req_;
  const collectives::AlgoOverrides& overrides_;
  collectives::Plan scratch_;
  // The plans' steps, side by side in huge pages (sim/huge_pages.h): a
  // 16,384-rank tree's 1.2 GB, each rank's next step a TLB miss as well as
  // a cache miss in 4 KiB pages. Before plans_: it outlives them.
  HugeArena arena_;
  std::vector<SimPlan> plans_;
  std::vector<char> built_;
  const char* name0_ = "";
};

// Whether every plan is its representative's image under sym: every rank
// checked up to kCheckEveryRank ranks; above, the images of the first, a
// middle and the last representative under a spread of elements (each
// factor's first step, the last, the middle, pseudo-random others), and
// pseudo-random ranks. Plans of ranks that are not representatives are
// dropped once checked.
bool plansKeep(const Symmetry& sym, Plans& plans) {
  const int n = sym.nranks();
  std::vector<int> ranks;
  if (n <= kCheckEveryRank) {
    for (int r = 0; r < n; ++r) ranks.push_back(r);
  } else {
    std::vector<int> reps;
    for (int r = 0; r < n; ++r)
      if (sym.representative(r) == r) reps.push_back(r);
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    auto next = [&](int below) {
      seed = seed * 6364136223846793005ull + 1442695040888963407ull;
      return static_cast<int>((seed >> 33) % static_cast<uint64_t>(below));
    };
    std::vector<int> elements{1, sym.order() - 1, sym.order() / 2};
    if (sym.innerOrder() < sym.order()) elements.push_back(sym.innerOrder());  // the blocks' first step
    for (int i = 0; i < 5; ++i) elements.push_back(next(sym.order()));
    for (int r : {reps.front(), reps[reps.size() / 2], reps.back()})
      for (int e : elements) ranks.push_back(sym.apply(e, r));
    for (int i = 0; i < 16; ++i) ranks.push_back(next(n));
  }
  for (int x : ranks) {
    const int r = sym.representative(x);
    if (x == r) continue;
    const bool same = planIsImage(plans.of(x), plans.of(r), sym, sym.elementOf(x));
    plans.drop(x);
    if (!same) return false;
  }
  return true;
}

// A host's working set in a call: what each of its ranks reads and writes
// of its own buffers. In place, the smaller buffer lies within the larger.
// A Broadcast's ranks but its root only write their output, and a Reduce's
// only read their input: the root's other buffer counts where host 0 (which
// stands for every host) has it. Counting both buffers of every rank there
// gave an 8-rank Broadcast of 16 MiB 256 MiB where its ranks touch 144.
double hostWorkingSet(const ClusterSpec& spec, const collectives::CallRequest& req) {
  const double n = spec.nranks(), count = static_cast<double>(req.desc.count);
  const double rootHere = req.desc.root >= 0 && req.desc.root < spec.ranksPerHost ? count : 0;
  double in = count, out = count, extra = 0;
  switch (req.desc.kind) {
    case collectives::OpKind::AllGather: out = n * count; break;
    case collectives::OpKind::ReduceScatter: in = n * count; break;
    case collectives::OpKind::AllToAll: in = out = n * count; break;
    case collectives::OpKind::Broadcast: in = 0, extra = req.inPlace ? 0 : rootHere; break;
    case collectives::OpKind::Reduce: out = 0, extra = req.inPlace ? 0 : rootHere; break;
    default: break;
  }
  const double perRank = req.inPlace ? std::max(in, out) : in + out;
  return (spec.ranksPerHost * perRank + extra) * static_cast<double>(req.elemSize);
}

// The FIFO slots a host's ranks write in a call, where the cache is
// modelled: per pair of the host that carries messages, what it sent, up
// to the FIFO's size (its slots are used in turn, so a long exchange
// touches every one). Host 0's ranks stand for every host's; their plans
// are built here if the run would not build them, and dropped again. An
// 8-rank ring AllReduce of 2 MiB adds 16 MiB to its ranks' 32 MiB, a
// 4-rank pairwise AllToAll of 2 MiB 24 MiB to 16.
double hostFifoWorkingSet(const ClusterSpec& spec, Plans& plans, const Symmetry* kept, size_t elemSize) {
  if (spec.fifoSlotBytes <= 0 || spec.cacheBytes <= 0) return 0;
  const double fifo = spec.fifoSlotBytes * spec.fifoSlots;
  double total = 0;
  for (int r = 0; r < spec.ranksPerHost; ++r) {
    for (const auto& [peer, bytes] : bytesSentByPeer(plans.of(r), elemSize))
      if (peer / spec.ranksPerHost == 0) total += std::min(bytes, fifo);
    if (kept && kept->representative(r) != r) plans.drop(r);
  }
  return total;
}

}  // namespace

collectives::TuningParams tuningFor(const ClusterSpec& spec) {
  collectives::TuningParams t;
  t.hosts = spec.hosts;
  t.perHost = spec.ranksPerHost;
  // The CPUs a host's ranks run on, where modelled, as a communicator
  // counts them: with fewer than ranks the tuner prices crowded steps.
  t.cores = spec.coresPerHost;
  // One message's fixed cost end to end, and a stream's bandwidth, in the
  // cost model's units (microseconds, GB/s).
  t.model.local = {1e6 * (2 * spec.intraLatency + spec.stepOverhead), spec.intraBytesPerSecond / 1e9};
  const double netLatency = 2 * spec.nicLatency + spec.switchLatency + (spec.hosts > spec.hostsPerLeaf ? 2 * spec.switchLatency : 0);
  const double perRankNic = spec.nicBytesPerSecond * spec.nicsPerHost / spec.ranksPerHost;
  t.model.network = {1e6 * (netLatency + spec.stepOverhead), perRankNic / 1e9};
  t.model.reduceGBps = spec.reduceBytesPerSecond / 1e9;
  t.model.readGBps = spec.intraBytesPerSecond / 1e9;
  t.model.mappedReadGBps = spec.intraBytesPerSecond / 1e9;
  t.model.readLatencyUs = 1e6 * spec.intraLatency;
  t.model.source = "the simulated cluster";
  if (spec.fifoSlotBytes > 0) {
    // The transport's cuts: a message is at most a slot, and pairwise
    // AllToAll's pieces keep every FIFO of a host within its budget.
    t.localChunk = static_cast<size_t>(spec.fifoSlotBytes);
    t.localFifoSlots = spec.fifoSlots;
  }
  return t;
}

void useCostModel(const collectives::CostModel& m, ClusterSpec& spec) {
  spec.intraBytesPerSecond = m.local.gbps * 1e9;
  spec.intraLatency = m.local.latencyUs * 1e-6;  // the path's whole latency: the way down has none
  spec.nicsPerHost = spec.ranksPerHost;
  spec.nicBytesPerSecond = m.network.gbps * 1e9;
  spec.nicLatency = m.network.latencyUs * 1e-6 / 2;  // paid at each end
  spec.switchLatency = 0;
  spec.copyBytesPerSecond = m.reduceGBps * 1e9;
  spec.reduceBytesPerSecond = m.reduceGBps * 1e9;
  spec.stepOverhead = 0;
}

CallResult simulateCall(const ClusterSpec& spec, const collectives::CallRequest& req, const std::string& algo,
                        const collectives::CostModel* model, bool record, bool aggregate) {
  spec.validate();
  const int n = spec.nranks();
  collectives::TuningParams tuning = tuningFor(spec);
  if (model) tuning.model = *model;
  collectives::Group world = collectives::Group::all(0, n);
  std::vector<std::vector<int>> hosts(static_cast<size_t>(spec.hosts));
  for (int r = 0; r < n; ++r) hosts[static_cast<size_t>(r / spec.ranksPerHost)].push_back(r);
  world.trees[0] = topology::hostDoubleBinaryTree(hosts, 0, n);
  world.trees[1] = topology::hostDoubleBinaryTree(hosts, 1, n);
  const collectives::AlgoOverrides overrides(algo);

  Plans plans(spec, tuning, world, req, overrides);
  CallResult out;
  out.algorithm = plans.name0();
  const Symmetry* kept = nullptr;
  std::vector<Symmetry> symmetries;
  if (aggregate && !record) symmetries = clusterSymmetries(spec);
  for (const Symmetry& sym : symmetries)  // the largest group first
    if (plansKeep(sym, plans)) {
      kept = &sym;
      break;
    }
  for (int r = 0; r < n; ++r)
    if (!kept || kept->representative(r) == r) plans.of(r);
  EventLoop loop;
  FlowNetwork net(loop);
  // The tuner prices memory's rates, as gyre's cost model does; the run gets
  // the caches' (ClusterSpec::cacheBytes).
  Cluster cluster(inCache(spec, hostWorkingSet(spec, req) + hostFifoWorkingSet(spec, plans, kept, req.elemSize) +
                                    spec.ranksPerHost * spec.cacheBytesPerRank),
                  net);
  if (!kept) {
    out.run = runPlans(plans.all(), req.elemSize, cluster, net, loop, record);
    for (size_t l = 0; l < net.links(); ++l) out.linkBytes.push_back(net.link(static_cast<int>(l)).carried);
    return out;
  }
  LinkOrbits orbits(*kept, cluster, net.links());
  out.run = runPlans(plans.all(), req.elemSize, cluster, net, loop, record, &orbits);
  for (int canonical : orbits.all()) out.linkBytes.push_back(net.link(canonical).carried);
  return out;
}

}  // namespace gyre::sim
