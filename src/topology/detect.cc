#include "topology/detect.h"

#include <dirent.h>
#include <sched.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>

#include "topology/affinity.h"
#include "topology/detect_gpu.h"
#include "topology/host_identity.h"
#include "topology/topology_io.h"

#ifdef GYRE_HAVE_HWLOC
#include <hwloc.h>
#endif

namespace gyre::topology {

namespace {

std::string readLine(const std::string& path) {
  std::ifstream f(path);
  std::string s;
  std::getline(f, s);
  return s;
}

std::vector<std::string> listDir(const std::string& path) {
  std::vector<std::string> out;
  if (DIR* d = opendir(path.c_str())) {
    while (dirent* e = readdir(d))
      if (e->d_name[0] != '.') out.emplace_back(e->d_name);
    closedir(d);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string realPath(const std::string& path) {
  char buf[PATH_MAX];
  return realpath(path.c_str(), buf) ? std::string(buf) : std::string();
}

bool isBusId(const std::string& s) {
  // dddd:bb:dd.f
  return s.size() == 12 && s[4] == ':' && s[7] == ':' && s[10] == '.';
}

// The PCI addresses on the way from the root complex down to a device, from
// its resolved sysfs path (/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0).
std::vector<std::string> pciChain(const std::string& devicePath) {
  std::vector<std::string> chain;
  size_t start = 0;
  while (start < devicePath.size()) {
    size_t end = devicePath.find('/', start);
    if (end == std::string::npos) end = devicePath.size();
    std::string part = devicePath.substr(start, end - start);
    if (isBusId(part)) chain.push_back(part);
    start = end + 1;
  }
  return chain;
}

std::string cpusetHex(const std::vector<int>& cpus) {
  int maxCpu = 0;
  for (int c : cpus) maxCpu = std::max(maxCpu, c);
  std::vector<uint32_t> words(static_cast<size_t>(maxCpu / 32 + 1), 0);
  for (int c : cpus) words[static_cast<size_t>(c / 32)] |= 1u << (c % 32);
  std::string out;
  for (size_t i = words.size(); i-- > 0;) {
    char buf[16];
    snprintf(buf, sizeof(buf), "%08x", words[i]);
    if (!out.empty()) out += ',';
    out += buf;
  }
  return out;
}

std::vector<int> parseCpuList(const std::string& s) {
  std::vector<int> out;
  size_t i = 0;
  while (i < s.size()) {
    char* end = nullptr;
    const long a = std::strtol(s.c_str() + i, &end, 10);
    if (end == s.c_str() + i) break;
    long b = a;
    i = static_cast<size_t>(end - s.c_str());
    if (i < s.size() && s[i] == '-') {
      b = std::strtol(s.c_str() + i + 1, &end, 10);
      i = static_cast<size_t>(end - s.c_str());
    }
    for (long c = a; c <= b && c < 65536; ++c) out.push_back(static_cast<int>(c));
    if (i < s.size() && s[i] == ',')
      ++i;
    else
      break;
  }
  return out;
}

void cpuIdentity(Node& n) {
  utsname u{};
  if (uname(&u) == 0) n.arch = u.machine;
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line)) {
    auto value = [&] { return line.substr(line.find(':') + 2); };
    if (line.rfind("vendor_id", 0) == 0 && n.vendor.empty())
      n.vendor = value();
    else if (line.rfind("cpu family", 0) == 0 && !n.familyId)
      n.familyId = std::atoi(value().c_str());
    else if (line.rfind("model\t", 0) == 0 && !n.modelId)
      n.modelId = std::atoi(value().c_str());
    if (line.empty()) break;  // the first processor says it all
  }
}

// One Cpu node per NUMA node. hwloc knows packages, cores and caches; the
// sysfs reading gives the same from /sys/devices/system.
void detectCpus(Graph& g, const std::string& sys) {
  Node proto;
  proto.kind = NodeKind::Cpu;
  cpuIdentity(proto);
#ifdef GYRE_HAVE_HWLOC
  hwloc_topology_t topo;
  if (hwloc_topology_init(&topo) == 0) {
    if (hwloc_topology_load(topo) == 0) {
      const int nnuma = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE);
      for (int i = 0; i < nnuma; ++i) {
        hwloc_obj_t numa =
            hwloc_get_obj_by_type(topo, HWLOC_OBJ_NUMANODE, static_cast<unsigned>(i));
        Node n = proto;
        n.numa = static_cast<int>(numa->os_index);
        std::vector<int> cpus;
        for (int c = hwloc_bitmap_first(numa->cpuset); c >= 0;
             c = hwloc_bitmap_next(numa->cpuset, c))
          cpus.push_back(c);
        n.affinity = cpusetHex(cpus);
        if (hwloc_obj_t pkg = hwloc_get_ancestor_obj_by_type(topo, HWLOC_OBJ_PACKAGE, numa))
          n.socket = static_cast<int>(pkg->os_index);
        n.cores = hwloc_get_nbobjs_inside_cpuset_by_type(topo, numa->cpuset, HWLOC_OBJ_CORE);
        if (hwloc_obj_t l3 = hwloc_get_next_obj_inside_cpuset_by_type(topo, numa->cpuset,
                                                                      HWLOC_OBJ_L3CACHE, nullptr))
          n.l3Bytes = static_cast<long long>(l3->attr->cache.size);
        if (g.cpuOfNuma(n.numa) < 0) g.add(n);
      }
      g.source = "hwloc";
    }
    hwloc_topology_destroy(topo);
  }
  if (!g.nodes.empty()) return;
#endif
  g.source = "sysfs";
  std::vector<std::pair<int, std::vector<int>>> nodes;
  for (const std::string& d : listDir(sys + "/devices/system/node"))
    if (d.rfind("node", 0) == 0 && d.size() > 4 && std::isdigit(static_cast<unsigned char>(d[4])))
      nodes.emplace_back(std::atoi(d.c_str() + 4),
                         parseCpuList(readLine(sys + "/devices/system/node/" + d + "/cpulist")));
  if (nodes.empty())
    nodes.emplace_back(0, parseCpuList(readLine(sys + "/devices/system/cpu/online")));
  std::sort(nodes.begin(), nodes.end());
  for (auto& [numa, cpus] : nodes) {
    Node n = proto;
    n.numa = numa;
    n.affinity = cpusetHex(cpus);
    std::set<std::string> cores;
    for (int c : cpus) {
      const std::string base = sys + "/devices/system/cpu/cpu" + std::to_string(c);
      cores.insert(readLine(base + "/topology/physical_package_id") + "/" +
                   readLine(base + "/topology/core_id"));
      if (n.socket < 0)
        n.socket = std::atoi(readLine(base + "/topology/physical_package_id").c_str());
      if (!n.l3Bytes) {
        const std::string size = readLine(base + "/cache/index3/size");  // "32768K"
        n.l3Bytes = std::atoll(size.c_str()) * (size.find('K') != std::string::npos   ? 1024
                                                : size.find('M') != std::string::npos ? 1 << 20
                                                                                      : 1);
      }
    }
    n.cores = static_cast<int>(cores.size());
    g.add(n);
  }
}

// A PCI device and the bridges above it into the graph; returns its node.
// The two ports of a PCIe switch (upstream, then downstream ports of the
// same part) are merged into one switch node, so that devices under one
// switch are one bridge apart (PIX), as the hardware is.
int addPciDevice(Graph& g, const std::string& sys, const std::string& busId, NodeKind kind) {
  const std::string path = realPath(sys + "/bus/pci/devices/" + busId);
  std::vector<std::string> chain = pciChain(path);
  if (chain.empty() || chain.back() != busId) chain = {busId};
  int numa = std::atoi(readLine(sys + "/bus/pci/devices/" + busId + "/numa_node").c_str());
  int parent = g.cpuOfNuma(numa);
  if (parent < 0) parent = g.ofKind(NodeKind::Cpu).front();
  std::string parentId;  // vendor:device of the bridge above
  for (size_t i = 0; i + 1 < chain.size(); ++i) {
    const std::string dir = sys + "/bus/pci/devices/" + chain[i];
    const std::string id = readLine(dir + "/vendor") + ":" + readLine(dir + "/device");
    if (i > 0 && id == parentId) continue;  // a downstream port of the switch above
    parentId = id;
    const int existing = g.findBusId(chain[i]);
    if (existing >= 0) {
      parent = existing;
      continue;
    }
    Node sw;
    sw.kind = NodeKind::PciSwitch;
    sw.busId = chain[i];
    sw.parent = parent;
    sw.pciClass = readLine(dir + "/class").substr(0, 8);
    sw.pciGTs = std::atof(readLine(dir + "/current_link_speed").c_str());
    sw.pciWidth = std::atoi(readLine(dir + "/current_link_width").c_str());
    parent = g.add(sw);
  }
  Node n;
  n.kind = kind;
  n.busId = busId;
  n.parent = parent;
  const std::string dir = sys + "/bus/pci/devices/" + busId;
  n.pciClass = readLine(dir + "/class").substr(0, 8);
  n.pciGTs = std::atof(readLine(dir + "/current_link_speed").c_str());
  n.pciWidth = std::atoi(readLine(dir + "/current_link_width").c_str());
  return g.add(n);
}

void detectGpusFromPci(Graph& g, const std::string& sys) {
  for (const std::string& dev : listDir(sys + "/bus/pci/devices")) {
    const std::string dir = sys + "/bus/pci/devices/" + dev;
    const std::string cls = readLine(dir + "/class"), vendor = readLine(dir + "/vendor");
    // 3D controllers, and NVIDIA's VGA-class boards.
    const bool gpu =
        cls.rfind("0x0302", 0) == 0 || (cls.rfind("0x0300", 0) == 0 && vendor == "0x10de");
    if (gpu && g.findBusId(dev) < 0) addPciDevice(g, sys, dev, NodeKind::Gpu);
  }
}

// A NIC node: with its PCI device where it has one.
void addNic(Graph& g, const std::string& sys, const std::string& devicePath, Node nic) {
  const std::vector<std::string> chain = pciChain(realPath(devicePath));
  if (chain.empty()) {
    nic.parent = g.ofKind(NodeKind::Cpu).front();
    g.add(nic);
    return;
  }
  const std::string& bus = chain.back();
  int at = -1;
  for (int i : g.ofKind(NodeKind::Nic))
    if (g.nodes[i].busId == bus) at = i;  // another port of the same device
  if (at < 0) {
    at = addPciDevice(g, sys, bus, NodeKind::Nic);
    const Node pci = g.nodes[at];
    nic.busId = pci.busId;
    nic.parent = pci.parent;
    nic.pciClass = pci.pciClass;
    nic.pciGTs = pci.pciGTs;
    nic.pciWidth = pci.pciWidth;
    g.nodes[at] = nic;
    return;
  }
  const Node& other = g.nodes[at];
  nic.busId = other.busId;
  nic.parent = other.parent;
  nic.pciClass = other.pciClass;
  nic.pciGTs = other.pciGTs;
  nic.pciWidth = other.pciWidth;
  g.add(nic);
}

void detectNics(Graph& g, const std::string& sys) {
  std::set<std::string> covered;  // Ethernet interfaces of RDMA devices
  for (const std::string& ib : listDir(sys + "/class/infiniband")) {
    const std::string dir = sys + "/class/infiniband/" + ib;
    for (const std::string& port : listDir(dir + "/ports")) {
      Node n;
      n.kind = NodeKind::Nic;
      n.name = ib;
      n.port = std::atoi(port.c_str());
      n.rdma = true;
      n.gdr = true;
      // "100 Gb/sec (4X EDR)"
      n.speedMbps = std::atof(readLine(dir + "/ports/" + port + "/rate").c_str()) * 1000;
      for (const std::string& net : listDir(dir + "/device/net")) {
        n.netdev = net;
        covered.insert(net);
        break;
      }
      if (port != listDir(dir + "/ports").front()) n.name += ":" + port;
      addNic(g, sys, dir + "/device", n);
    }
  }
  for (const std::string& ifname : listDir(sys + "/class/net")) {
    const std::string dir = sys + "/class/net/" + ifname;
    // Virtual interfaces (lo, bridges, veth, ifb) have no device.
    if (covered.count(ifname) || realPath(dir + "/device").empty()) continue;
    Node n;
    n.kind = NodeKind::Nic;
    n.name = ifname;
    n.netdev = ifname;
    const long speed = std::atol(readLine(dir + "/speed").c_str());
    n.speedMbps = speed > 0 ? static_cast<double>(speed) : 0;
    addNic(g, sys, dir + "/device", n);
  }
}

}  // namespace

Graph detectTopology(const std::string& sysRoot) {
  Graph g;
  g.host = hostName();
  detectCpus(g, sysRoot);
  if (g.nodes.empty()) {
    Node n;
    n.kind = NodeKind::Cpu;
    n.numa = 0;
    n.cores = availableCpus();
    cpuIdentity(n);
    g.add(n);
  }
  detectGpusFromPci(g, sysRoot);
  addNvmlInformation(g, sysRoot);
  detectNics(g, sysRoot);
  // Parents must come before children: addPciDevice adds them in that order.
  g.finish();
  return g;
}

Graph systemTopology(bool dump) {
  Graph g;
  const char* file = getenv("GYRE_TOPO_FILE");
  if (file && *file) {
    g = loadTopologyFile(file);
  } else {
    try {
      g = detectTopology();
    } catch (const std::exception&) {
      // Detection is best effort: an odd sysfs must not stop a communicator.
      // One CPU node holding every CPU keeps the search's answers neutral.
      g = Graph();
      g.host = hostName();
      g.source = "fallback";
      Node n;
      n.kind = NodeKind::Cpu;
      n.numa = 0;
      n.cores = availableCpus();
      g.add(n);
    }
  }
  const char* out = getenv("GYRE_TOPO_DUMP_FILE");
  if (dump && out && *out) saveTopologyFile(g, out);
  return g;
}

int currentNuma(const Graph& g) {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return 0;
  int best = 0, bestCount = -1;
  for (int c : g.ofKind(NodeKind::Cpu)) {
    int count = 0;
    for (int cpu : cpusOfAffinity(g.nodes[c].affinity))
      if (cpu < CPU_SETSIZE && CPU_ISSET(cpu, &set)) ++count;
    if (count > bestCount) {
      bestCount = count;
      best = g.nodes[c].numa;
    }
  }
  return best;
}

}  // namespace gyre::topology
