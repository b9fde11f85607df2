// The system graph of one host: CPUs (one node per NUMA node), the PCI tree
// under them (switches, GPUs, NICs), NVLink links and NVSwitches, and the
// path class with an estimated bandwidth between any two devices. Detection
// (detect.cc) and loading (topology_io.cc) produce it; the search
// (search.cc) and gyre-topo read it.
//
// The tree mirrors NCCL's topology XML: every PCI node has one parent (a
// switch or a CPU), so the path between two PCI devices is the walk up to
// their lowest common ancestor; NVLink adds edges outside the tree.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

namespace gyre::topology {

enum class NodeKind { Cpu, PciSwitch, Gpu, Nic, NvSwitch };
enum class LinkKind { NvLink, Pci, InterSocket, Net };
// Best first: the order is the preference of the search.
enum class PathClass { LOC, NVL, NVB, PIX, PXB, PHB, SYS, NET };

const char* kindName(NodeKind k);
const char* pathClassName(PathClass c);

// Errors of loading or detection, with the line of the input where known
// (0: none); what() already carries "source:line: ".
class TopologyError : public std::runtime_error {
 public:
  TopologyError(const std::string& source, int line, const std::string& message);
  int line() const { return line_; }

 private:
  int line_;
};

struct Node {
  NodeKind kind = NodeKind::Cpu;
  std::string
      busId;  // PCI address (lower case, domain included); NVSwitch: its address; CPU: empty
  int parent =
      -1;         // the node above in the PCI tree (a switch or a CPU); -1 for CPUs and NVSwitches
  int numa = -1;  // CPU: its NUMA node; others: the NUMA node of the CPU above them

  // CPU (one NUMA node): what hwloc (or sysfs) said about it.
  int socket = -1;
  int cores = 0;
  long long l3Bytes = 0;
  std::string affinity;  // cpuset as hex words, NCCL's format ("ffffffff,0000ffff")
  std::string arch, vendor;
  int familyId = 0, modelId = 0;

  // PCI devices and switches: the link to the parent.
  std::string pciClass;  // "0x060400"
  double pciGTs = 0;     // per lane (8, 16, 32 ...); 0: unknown
  int pciWidth = 0;      // lanes; 0: unknown

  // GPU
  int dev = -1;   // CUDA device index (-1: unknown)
  int sm = 0;     // compute capability x10
  int rank = -1;  // NCCL XML's rank attribute, kept for round trips
  bool gdr = false;

  // NIC (one node per port)
  std::string name;    // mlx5_0, eth0
  std::string netdev;  // its Ethernet interface, when it has one
  double speedMbps = 0;
  int port = 1;
  bool rdma = false;
  std::string guid;

  // Bandwidth of the link to the parent, GB/s (PCIe from gen x width).
  double upGBps() const;
};

struct Link {
  int a = -1, b = -1;  // nodes; NVLink: a is the GPU, b a GPU or an NVSwitch
  LinkKind kind = LinkKind::NvLink;
  int count = 1;    // NVLink lanes
  double gbps = 0;  // total, one direction
};

struct Path {
  PathClass cls = PathClass::SYS;
  double gbps = 0;  // estimated bottleneck bandwidth, one direction
};

class Graph {
 public:
  std::string host;    // host name it was detected on (informative)
  std::string source;  // hwloc, sysfs, or the file it was loaded from
  std::vector<Node> nodes;
  std::vector<Link> links;  // NVLink only: PCI links are the tree, inter-socket ones implied

  int add(Node n);
  // -1 when absent.
  int findBusId(const std::string& busId) const;
  int findNic(const std::string& name) const;
  int cpuOfNuma(int numa) const;
  std::vector<int> ofKind(NodeKind k) const;
  // Nodes listed before their children (as loaded and detected).
  std::vector<int> childrenOf(int node) const;
  // The CPU node at the top of a node's PCI branch (-1 for NVSwitches).
  int rootCpu(int node) const;

  // Path class and bandwidth between two nodes of this host.
  Path path(int a, int b) const;
  // Total NVLink bandwidth of a GPU to NVSwitches (0: none).
  double nvSwitchGBps(int gpu) const;
  // Direct NVLink between two GPUs (gbps 0: none).
  double nvLinkGBps(int a, int b) const;

  // Fills each node's numa from its CPU and checks that parents come first;
  // called after building.
  void finish();

  // Estimates used by path(): inter-socket link and NVLink per lane.
  static double interSocketGBps(const Node& cpu);
  static double nvLinkLaneGBps(int sm);
};

// Between devices of two hosts: NET, at the slower NIC's speed (either
// NIC -1: unknown, taken as 0 GB/s).
Path netPath(const Graph& a, int nicA, const Graph& b, int nicB);

// Short names for the matrix: GPU0.., NIC0.. (in node order), CPU0 = NUMA 0.
std::string shortName(const Graph& g, int node);

}  // namespace gyre::topology
