#include "topology/graph.h"

#include <algorithm>
#include <cmath>

namespace gyre::topology {

namespace {

// Usable bytes per second per lane, by PCIe transfer rate: 8b/10b coding up
// to 5 GT/s, 128b/130b from 8 GT/s; gen 6 (64 GT/s, PAM4 + FLIT) taken at
// twice gen 5.
double pciLaneGBps(double gts) {
  if (gts <= 0) return 0;
  if (gts <= 5.0) return gts * 0.8 / 8.0;
  if (gts <= 32.0) return gts * (128.0 / 130.0) / 8.0;
  return 2 * 32.0 * (128.0 / 130.0) / 8.0;
}

// Where the PCI tree says nothing (a loaded file without link speeds): a
// gen-3 x16 link, the slowest one an accelerator is likely to sit on.
constexpr double kUnknownPciGBps = 12.0;
// The same host's memory, for LOC: a figure well above any link, so a
// device's path to itself never limits anything.
constexpr double kLocalGBps = 5000.0;

}  // namespace

const char* kindName(NodeKind k) {
  switch (k) {
    case NodeKind::Cpu:
      return "cpu";
    case NodeKind::PciSwitch:
      return "pci-switch";
    case NodeKind::Gpu:
      return "gpu";
    case NodeKind::Nic:
      return "nic";
    case NodeKind::NvSwitch:
      return "nvswitch";
  }
  return "?";
}

const char* pathClassName(PathClass c) {
  static const char* const kNames[] = {"LOC", "NVL", "NVB", "PIX", "PXB", "PHB", "SYS", "NET"};
  return kNames[static_cast<int>(c)];
}

TopologyError::TopologyError(const std::string& source, int line, const std::string& message)
    : std::runtime_error(source + (line > 0 ? ":" + std::to_string(line) : std::string()) + ": " +
                         message),
      line_(line) {}

double Node::upGBps() const {
  if (kind == NodeKind::Nic && busId.empty()) return speedMbps / 8000.0;
  const double lane = pciLaneGBps(pciGTs);
  if (lane <= 0 || pciWidth <= 0) return kUnknownPciGBps;
  return lane * pciWidth;
}

int Graph::add(Node n) {
  nodes.push_back(std::move(n));
  return static_cast<int>(nodes.size()) - 1;
}

int Graph::findBusId(const std::string& busId) const {
  if (busId.empty()) return -1;
  for (size_t i = 0; i < nodes.size(); ++i)
    if (nodes[i].busId == busId && nodes[i].kind != NodeKind::Nic) return static_cast<int>(i);
  for (size_t i = 0; i < nodes.size(); ++i)
    if (nodes[i].busId == busId) return static_cast<int>(i);
  return -1;
}

int Graph::findNic(const std::string& name) const {
  for (size_t i = 0; i < nodes.size(); ++i)
    if (nodes[i].kind == NodeKind::Nic && (nodes[i].name == name || nodes[i].netdev == name))
      return static_cast<int>(i);
  return -1;
}

int Graph::cpuOfNuma(int numa) const {
  for (size_t i = 0; i < nodes.size(); ++i)
    if (nodes[i].kind == NodeKind::Cpu && nodes[i].numa == numa) return static_cast<int>(i);
  return -1;
}

std::vector<int> Graph::ofKind(NodeKind k) const {
  std::vector<int> out;
  for (size_t i = 0; i < nodes.size(); ++i)
    if (nodes[i].kind == k) out.push_back(static_cast<int>(i));
  return out;
}

std::vector<int> Graph::childrenOf(int node) const {
  std::vector<int> out;
  for (size_t i = 0; i < nodes.size(); ++i)
    if (nodes[i].parent == node) out.push_back(static_cast<int>(i));
  return out;
}

int Graph::rootCpu(int node) const {
  // Bounded by the node count: finish() rejects cycles, but a graph built by
  // hand has not been through it.
  for (size_t hops = 0; node >= 0 && hops <= nodes.size(); ++hops) {
    if (nodes[node].kind == NodeKind::Cpu) return node;
    node = nodes[node].parent;
  }
  return -1;
}

void Graph::finish() {
  for (size_t i = 0; i < nodes.size(); ++i) {
    Node& n = nodes[i];
    if (n.kind == NodeKind::Cpu || n.kind == NodeKind::NvSwitch) continue;
    if (n.parent < 0 || n.parent >= static_cast<int>(i))
      throw TopologyError(source, 0, "node " + n.busId + " has no parent listed before it");
    n.numa = nodes[n.parent].numa;
  }
}

double Graph::interSocketGBps(const Node& cpu) {
  // Rough one-direction figures of the socket links of the last few
  // generations: UPI (Intel) and Infinity Fabric between AMD sockets; other
  // architectures are given the lower one.
  if (cpu.vendor == "AuthenticAMD") return 40.0;
  return 20.0;
}

double Graph::nvLinkLaneGBps(int sm) {
  // One direction of one NVLink lane (brick) by GPU generation: NVLink 1 on
  // sm 6.0, 2 on 7.x, 3 on 8.x, 4 on 9.x, 5 on 10.x.
  if (sm >= 100) return 50.0;
  if (sm >= 90) return 25.0;
  if (sm >= 80) return 25.0;
  if (sm >= 70) return 25.0;
  return 20.0;
}

double Graph::nvSwitchGBps(int gpu) const {
  double total = 0;
  for (const Link& l : links)
    if (l.kind == LinkKind::NvLink && l.a == gpu && nodes[l.b].kind == NodeKind::NvSwitch)
      total += l.gbps;
  return total;
}

double Graph::nvLinkGBps(int a, int b) const {
  double total = 0;
  for (const Link& l : links)
    if (l.kind == LinkKind::NvLink && ((l.a == a && l.b == b) || (l.a == b && l.b == a)))
      total += l.gbps;
  return total;
}

Path Graph::path(int a, int b) const {
  if (a == b) return {PathClass::LOC, kLocalGBps};
  const bool gpus = nodes[a].kind == NodeKind::Gpu && nodes[b].kind == NodeKind::Gpu;
  if (gpus) {
    if (double d = nvLinkGBps(a, b); d > 0) return {PathClass::NVL, d};
    const double sa = nvSwitchGBps(a), sb = nvSwitchGBps(b);
    if (sa > 0 && sb > 0) return {PathClass::NVL, std::min(sa, sb)};
    // Through one intermediate GPU's NVLinks.
    double best = 0;
    for (int k : ofKind(NodeKind::Gpu))
      if (k != a && k != b) best = std::max(best, std::min(nvLinkGBps(a, k), nvLinkGBps(k, b)));
    if (best > 0) return {PathClass::NVB, best};
  }
  // The PCI tree: up from each side to the lowest common ancestor.
  std::vector<int> upA;
  for (int n = a; n >= 0 && upA.size() <= nodes.size(); n = nodes[n].parent) upA.push_back(n);
  int common = -1;
  size_t stepsB = 0;
  double bw = kLocalGBps;
  for (int n = b; n >= 0 && stepsB <= nodes.size(); n = nodes[n].parent, ++stepsB) {
    if (std::find(upA.begin(), upA.end(), n) != upA.end()) {
      common = n;
      break;
    }
    if (nodes[n].kind != NodeKind::Cpu) bw = std::min(bw, nodes[n].upGBps());
  }
  if (common >= 0) {
    for (int n : upA) {
      if (n == common) break;
      bw = std::min(bw, nodes[n].upGBps());
    }
    // a or b is itself the ancestor (a CPU and a device below it, say).
    if (common == a || common == b)
      return {nodes[common].kind == NodeKind::Cpu ? PathClass::PHB : PathClass::PIX, bw};
    if (nodes[common].kind == NodeKind::Cpu) return {PathClass::PHB, bw};
    const bool single = nodes[a].parent == common && nodes[b].parent == common;
    return {single ? PathClass::PIX : PathClass::PXB, bw};
  }
  // Different CPUs: each side up to its CPU, then the socket link.
  for (int n : upA)
    if (nodes[n].kind != NodeKind::Cpu) bw = std::min(bw, nodes[n].upGBps());
  const int ca = rootCpu(a), cb = rootCpu(b);
  if (ca >= 0) bw = std::min(bw, interSocketGBps(nodes[ca]));
  if (cb >= 0) bw = std::min(bw, interSocketGBps(nodes[cb]));
  return {PathClass::SYS, bw};
}

Path netPath(const Graph& a, int nicA, const Graph& b, int nicB) {
  if (nicA < 0 || nicB < 0) return {PathClass::NET, 0};
  return {PathClass::NET, std::min(a.nodes[nicA].speedMbps, b.nodes[nicB].speedMbps) / 8000.0};
}

std::string shortName(const Graph& g, int node) {
  const Node& n = g.nodes[node];
  int index = 0;
  for (int i = 0; i < node; ++i) index += g.nodes[i].kind == n.kind;
  switch (n.kind) {
    case NodeKind::Cpu:
      return "CPU" + std::to_string(n.numa);
    case NodeKind::Gpu:
      return "GPU" + std::to_string(n.dev >= 0 ? n.dev : index);
    case NodeKind::Nic:
      return "NIC" + std::to_string(index);
    case NodeKind::PciSwitch:
      return "SW" + std::to_string(index);
    case NodeKind::NvSwitch:
      return "NVS" + std::to_string(index);
  }
  return "?";
}

}  // namespace gyre::topology
