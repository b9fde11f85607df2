// gyre-topo: what gyre sees of this host (or of a dumped topology): the
// matrix of path classes between devices, as `nvidia-smi topo -m` prints
// it, with each device's CPU and NUMA affinity, the NIC list, and the graph
// as XML, JSON or a Graphviz picture.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <string>

#include "topology/affinity.h"
#include "topology/detect.h"
#include "topology/graph.h"
#include "topology/topology_io.h"

namespace {

using namespace gyre::topology;

std::string cpuList(const std::string& affinity) {
  const std::vector<int> cpus = cpusOfAffinity(affinity);
  std::string out;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(cpus[i]);
    if (j > i) out += "-" + std::to_string(cpus[j]);
    i = j + 1;
  }
  return out.empty() ? "N/A" : out;
}

void printMatrix(const Graph& g) {
  std::vector<int> devs = g.ofKind(NodeKind::Gpu);
  for (int n : g.ofKind(NodeKind::Nic)) devs.push_back(n);
  std::printf("topology of %s (%s)\n\n", g.host.empty() ? "?" : g.host.c_str(), g.source.c_str());
  if (!devs.empty()) {
    std::printf("%-8s", "");
    for (int d : devs) std::printf("%-8s", shortName(g, d).c_str());
    std::printf("%-16s%s\n", "CPU Affinity", "NUMA Affinity");
    for (int a : devs) {
      std::printf("%-8s", shortName(g, a).c_str());
      for (int b : devs) {
        const Path p = g.path(a, b);
        std::string cell = a == b ? "X" : pathClassName(p.cls);
        if (p.cls == PathClass::NVL) {
          int lanes = 0;
          for (const Link& l : g.links)
            if ((l.a == a && l.b == b) || (l.a == b && l.b == a)) lanes += l.count;
          // Through NVSwitches: the lanes of the GPU with fewer.
          int la = 0, lb = 0;
          for (const Link& l : g.links) {
            if (g.nodes[l.b].kind != NodeKind::NvSwitch) continue;
            la += l.a == a ? l.count : 0;
            lb += l.a == b ? l.count : 0;
          }
          if (!lanes) lanes = std::min(la, lb);
          if (lanes) cell = "NV" + std::to_string(lanes);
        }
        std::printf("%-8s", cell.c_str());
      }
      const int cpu = g.rootCpu(a);
      std::printf("%-16s%s\n", cpu >= 0 ? cpuList(g.nodes[cpu].affinity).c_str() : "N/A",
                  g.nodes[a].numa >= 0 ? std::to_string(g.nodes[a].numa).c_str() : "N/A");
    }
    std::printf("\nEstimated bandwidth (GB/s, one direction):\n%-8s", "");
    for (int d : devs) std::printf("%-8s", shortName(g, d).c_str());
    std::printf("\n");
    for (int a : devs) {
      std::printf("%-8s", shortName(g, a).c_str());
      for (int b : devs) {
        if (a == b)
          std::printf("%-8s", "X");
        else
          std::printf("%-8.1f", g.path(a, b).gbps);
      }
      std::printf("\n");
    }
  } else {
    std::printf("no GPUs or NICs\n");
  }
  std::printf("\nCPUs:\n");
  for (int c : g.ofKind(NodeKind::Cpu)) {
    const Node& n = g.nodes[c];
    std::printf("  NUMA %d: socket %d, %d cores, CPUs %s%s\n", n.numa, n.socket, n.cores,
                cpuList(n.affinity).c_str(),
                n.l3Bytes ? (", L3 " + std::to_string(n.l3Bytes >> 20) + " MiB").c_str() : "");
  }
  std::printf("\nNICs:\n");
  if (g.ofKind(NodeKind::Nic).empty()) std::printf("  none\n");
  for (int i : g.ofKind(NodeKind::Nic)) {
    const Node& n = g.nodes[i];
    std::printf("  %-6s %-10s %8.0f Gb/s  PCI %-12s  NUMA %d  %s%s\n", shortName(g, i).c_str(),
                n.name.c_str(), n.speedMbps / 1000, n.busId.empty() ? "-" : n.busId.c_str(), n.numa,
                n.rdma ? "RDMA" : "sockets",
                n.netdev.empty() || n.netdev == n.name ? "" : (" (" + n.netdev + ")").c_str());
  }
  std::printf(
      "\nLegend:\n"
      "  X    = self\n"
      "  SYS  = through PCIe and the link between NUMA nodes (socket interconnect)\n"
      "  PHB  = through PCIe and a PCIe host bridge (a CPU)\n"
      "  PXB  = through several PCIe bridges, without a host bridge\n"
      "  PIX  = through at most one PCIe bridge\n"
      "  NVB  = through NVLink via another GPU\n"
      "  NV#  = through # NVLink lanes (NVL through NVSwitches)\n");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "gyre-topo: the topology gyre detects (or loads) and the path classes between devices"};
  std::string file;
  bool xml = false, json = false, dot = false;
  app.add_option("--file,-f", file,
                 "load this topology (gyre or NCCL XML, or gyre JSON) instead of detecting");
  app.add_flag("--xml", xml, "print the topology as XML (GYRE_TOPO_FILE format)");
  app.add_flag("--json", json, "print the topology as JSON");
  app.add_flag("--dot", dot, "print a Graphviz picture (dot -Tsvg)");
  CLI11_PARSE(app, argc, argv);
  try {
    const Graph g = file.empty() ? systemTopology(false) : loadTopologyFile(file);
    if (xml)
      std::cout << toXml(g);
    else if (json)
      std::cout << toJson(g);
    else if (dot)
      std::cout << toDot(g);
    else
      printMatrix(g);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gyre-topo: %s\n", e.what());
    return 1;
  }
  return 0;
}
