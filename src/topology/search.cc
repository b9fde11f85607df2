#include "topology/search.h"

#include <algorithm>
#include <map>

namespace gyre::topology {

namespace {

// Exhaustive ring search up to this many distinct locations on a host
// (8! / 8 orders); larger hosts use nearest-neighbour order.
constexpr int kExhaustiveLocations = 9;

struct Score {
  double gbps = 0;   // slowest hop
  int classSum = 0;  // sum of hop classes: fewer slow hops is better
  bool betterThan(const Score& o) const {
    if (gbps != o.gbps) return gbps > o.gbps;
    return classSum < o.classSum;
  }
};

// Order of `locs` (graph nodes) as a ring; returns indices into locs.
std::vector<int> bestCycle(const Graph& g, const std::vector<int>& locs, Score* best) {
  const int n = static_cast<int>(locs.size());
  std::vector<int> order(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) order[i] = i;
  if (n <= 1) return order;
  std::vector<std::vector<Path>> p(static_cast<size_t>(n),
                                   std::vector<Path>(static_cast<size_t>(n)));
  for (int a = 0; a < n; ++a)
    for (int b = 0; b < n; ++b) p[a][b] = g.path(locs[a], locs[b]);
  auto score = [&](const std::vector<int>& o) {
    Score s{1e300, 0};
    for (int i = 0; i < n; ++i) {
      const Path& hop = p[o[i]][o[(i + 1) % n]];
      s.gbps = std::min(s.gbps, hop.gbps);
      s.classSum += static_cast<int>(hop.cls);
    }
    return s;
  };
  if (n <= kExhaustiveLocations) {
    // The first location stays first (a ring has no start); the first best
    // order in lexicographic order wins, so the answer is deterministic.
    std::vector<int> cur = order;
    *best = score(cur);
    while (std::next_permutation(cur.begin() + 1, cur.end())) {
      const Score s = score(cur);
      if (s.betterThan(*best)) {
        *best = s;
        order = cur;
      }
    }
    return order;
  }
  std::vector<bool> used(static_cast<size_t>(n), false);
  order.assign(1, 0);
  used[0] = true;
  while (static_cast<int>(order.size()) < n) {
    const int last = order.back();
    int pick = -1;
    for (int c = 0; c < n; ++c) {
      if (used[c]) continue;
      if (pick < 0 || p[last][c].gbps > p[last][pick].gbps ||
          (p[last][c].gbps == p[last][pick].gbps && p[last][c].cls < p[last][pick].cls))
        pick = c;
    }
    used[pick] = true;
    order.push_back(pick);
  }
  *best = score(order);
  return order;
}

}  // namespace

const char* transportKindName(TransportKind t) { return t == TransportKind::Shm ? "shm" : "net"; }

int locationNode(const Graph& g, const Placement& p) {
  if (!p.gpu.empty()) {
    const int gpu = g.findBusId(p.gpu);
    if (gpu >= 0) return gpu;
  }
  int cpu = g.cpuOfNuma(p.numa);
  if (cpu < 0) {
    const std::vector<int> cpus = g.ofKind(NodeKind::Cpu);
    cpu = cpus.empty() ? -1 : cpus.front();
  }
  return cpu;
}

SearchResult combine(const std::vector<Placement>& ranks, const std::vector<int>& positionInHost) {
  SearchResult r;
  const int n = static_cast<int>(ranks.size());
  r.positionInHost = positionInHost;
  r.nic.assign(ranks.size(), std::string());
  for (const Placement& p : ranks) r.hosts.push_back(p.host);
  // Hosts in order of their first rank; within one, by position (then rank).
  std::map<uint64_t, int> hostOrder;
  for (const Placement& p : ranks) hostOrder.emplace(p.host, static_cast<int>(hostOrder.size()));
  r.ring.resize(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) r.ring[i] = i;
  std::stable_sort(r.ring.begin(), r.ring.end(), [&](int a, int b) {
    const int ha = hostOrder[ranks[a].host], hb = hostOrder[ranks[b].host];
    if (ha != hb) return ha < hb;
    return positionInHost[a] < positionInHost[b];
  });
  std::vector<std::vector<int>> hosts;  // in ring order
  for (int rank : r.ring) {
    if (hosts.empty() || ranks[static_cast<size_t>(rank)].host != ranks[static_cast<size_t>(hosts.back().front())].host)
      hosts.push_back({});
    hosts.back().push_back(rank);
  }
  for (int t = 0; t < 2; ++t) r.trees[t] = hostDoubleBinaryTree(hosts, t, n);
  return r;
}

SearchResult search(const std::vector<Placement>& ranks, const GraphOf& graphOf) {
  const int n = static_cast<int>(ranks.size());
  std::vector<int> position(static_cast<size_t>(n), 0);
  std::vector<std::string> nics(static_cast<size_t>(n));
  double worstGBps = 0;
  PathClass worstClass = PathClass::LOC;
  std::map<uint64_t, std::vector<int>> byHost;
  for (int i = 0; i < n; ++i) byHost[ranks[i].host].push_back(i);
  for (const auto& [host, members] : byHost) {
    const Graph* g = graphOf(host);
    if (!g) {
      for (size_t i = 0; i < members.size(); ++i) position[members[i]] = static_cast<int>(i);
      continue;
    }
    // Distinct locations in order of their first rank.
    std::vector<int> locs, locOf;
    for (int r : members) {
      const int node = locationNode(*g, ranks[r]);
      auto it = std::find(locs.begin(), locs.end(), node);
      locOf.push_back(static_cast<int>(it - locs.begin()));
      if (it == locs.end()) locs.push_back(node);
    }
    Score s;
    const std::vector<int> order = bestCycle(*g, locs, &s);
    int next = 0;
    for (int l : order)
      for (size_t i = 0; i < members.size(); ++i)
        if (locOf[i] == l) position[members[i]] = next++;
    if (locs.size() > 1) {
      if (worstGBps == 0 || s.gbps < worstGBps) worstGBps = s.gbps;
      for (size_t i = 0; i < order.size(); ++i) {
        const PathClass c = g->path(locs[order[i]], locs[order[(i + 1) % order.size()]]).cls;
        worstClass = std::max(worstClass, c);
      }
    }
    // NICs: the nearest one, spreading ranks over equally near NICs, in ring order.
    const std::vector<int> nicNodes = g->ofKind(NodeKind::Nic);
    std::vector<int> load(nicNodes.size(), 0);
    std::vector<int> inRing(members);
    std::sort(inRing.begin(), inRing.end(),
              [&](int a, int b) { return position[a] < position[b]; });
    std::map<int, int> nicOfLoc;  // ranks sharing a device share its NIC
    for (int r : inRing) {
      const int loc = locationNode(*g, ranks[r]);
      if (nicNodes.empty() || loc < 0) continue;
      if (auto it = nicOfLoc.find(loc); it != nicOfLoc.end()) {
        nics[r] = g->nodes[nicNodes[it->second]].name;
        continue;
      }
      int best = -1;
      Path bestPath;
      for (size_t k = 0; k < nicNodes.size(); ++k) {
        const Path p = g->path(loc, nicNodes[k]);
        const bool better =
            best < 0 || p.cls < bestPath.cls ||
            (p.cls == bestPath.cls &&
             (p.gbps > bestPath.gbps || (p.gbps == bestPath.gbps && load[k] < load[best])));
        if (better) {
          best = static_cast<int>(k);
          bestPath = p;
        }
      }
      ++load[best];
      nicOfLoc[loc] = best;
      nics[r] = g->nodes[nicNodes[best]].name;
    }
  }
  SearchResult r = combine(ranks, position);
  r.nic = std::move(nics);
  r.ringGBps = worstGBps;
  r.ringWorst = worstClass;
  return r;
}

std::string SearchResult::describeRing() const {
  std::string s;
  for (size_t i = 0; i < ring.size(); ++i) {
    if (i) s += hosts[ring[i]] == hosts[ring[i - 1]] ? " -> " : " => ";
    s += std::to_string(ring[i]);
  }
  return s;
}

std::string SearchResult::describeTree(int t) const {
  const Tree& tree = trees[t];
  std::string s = "root " + std::to_string(tree.root) + ";";
  for (size_t r = 0; r < tree.parent.size(); ++r)
    if (tree.parent[r] >= 0) s += " " + std::to_string(r) + "<-" + std::to_string(tree.parent[r]);
  return s;
}

}  // namespace gyre::topology
