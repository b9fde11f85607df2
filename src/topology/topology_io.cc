#include "topology/topology_io.h"

#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

namespace gyre::topology {

namespace {

constexpr const char* kGpuClass = "0x030200";
constexpr const char* kNvSwitchClass = "0x068000";

struct Loader {
  const std::string& source;
  Graph g;
  struct PendingLink {
    int gpu;
    std::string target, tclass;
    int count;
    int line;
  };
  std::vector<PendingLink> nvlinks;

  [[noreturn]] void fail(const XmlElement& el, const std::string& what) const {
    throw TopologyError(source, el.line, "<" + el.name + ">: " + what);
  }

  const std::string& required(const XmlElement& el, const char* key) const {
    const std::string* v = el.attr(key);
    if (!v || v->empty()) fail(el, std::string("attribute '") + key + "' is missing");
    return *v;
  }

  long long integer(const XmlElement& el, const char* key, long long fallback,
                    bool hexOk = false) const {
    const std::string* v = el.attr(key);
    if (!v || v->empty()) return fallback;
    errno = 0;
    char* end = nullptr;
    const long long x = std::strtoll(v->c_str(), &end, hexOk ? 0 : 10);
    if (errno || end == v->c_str() || *end != '\0')
      fail(el, std::string("attribute ") + key + "=\"" + *v + "\" is not an integer");
    return x;
  }

  double number(const XmlElement& el, const char* key) const {
    const std::string* v = el.attr(key);
    if (!v || v->empty()) return 0;
    char* end = nullptr;
    const double x = std::strtod(v->c_str(), &end);
    if (end == v->c_str() || x < 0)
      fail(el, std::string("attribute ") + key + "=\"" + *v + "\" is not a number");
    return x;
  }

  static std::string lowerBusId(std::string s) {
    for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    // NCCL writes some addresses without the domain.
    if (s.size() == 7 && s[2] == ':') s = "0000:" + s;
    return s;
  }

  void system(const XmlElement& root) {
    if (root.name != "system") fail(root, "the root element must be <system>");
    if (const std::string* h = root.attr("host")) g.host = *h;
    for (const XmlElement& c : root.children) {
      if (c.name != "cpu") fail(c, "unknown element under <system> (expected <cpu>)");
      cpu(c);
    }
    for (const PendingLink& l : nvlinks) resolve(l);
  }

  void cpu(const XmlElement& el) {
    Node n;
    n.kind = NodeKind::Cpu;
    n.numa = static_cast<int>(integer(el, "numaid", -1));
    if (n.numa < 0) n.numa = static_cast<int>(g.ofKind(NodeKind::Cpu).size());
    if (g.cpuOfNuma(n.numa) >= 0)
      fail(el, "NUMA node " + std::to_string(n.numa) + " appears twice");
    n.socket = static_cast<int>(integer(el, "socket", -1));
    n.cores = static_cast<int>(integer(el, "cores", 0));
    n.l3Bytes = integer(el, "l3", 0);
    if (const std::string* v = el.attr("affinity")) n.affinity = *v;
    if (const std::string* v = el.attr("arch")) n.arch = *v;
    if (const std::string* v = el.attr("vendor")) n.vendor = *v;
    n.familyId = static_cast<int>(integer(el, "familyid", 0));
    n.modelId = static_cast<int>(integer(el, "modelid", 0));
    const int self = g.add(n);
    for (const XmlElement& c : el.children) {
      if (c.name == "pci")
        pci(c, self);
      else if (c.name == "nic")
        nic(c, self, nullptr);
      else if (c.name == "c2c")
        continue;  // NCCL: CPU-GPU chip links, not modelled
      else
        fail(c, "unknown element under <cpu> (expected <pci> or <nic>)");
    }
  }

  void pci(const XmlElement& el, int parent) {
    Node n;
    n.busId = lowerBusId(required(el, "busid"));
    if (g.findBusId(n.busId) >= 0) fail(el, "PCI address " + n.busId + " appears twice");
    n.parent = parent;
    if (const std::string* v = el.attr("class")) n.pciClass = *v;
    n.pciGTs = number(el, "link_speed");
    n.pciWidth = static_cast<int>(integer(el, "link_width", 0));
    const XmlElement* gpuEl = nullptr;
    const XmlElement* nicEl = nullptr;
    for (const XmlElement& c : el.children) {
      if (c.name == "gpu")
        gpuEl = &c;
      else if (c.name == "nic")
        nicEl = &c;
      else if (c.name != "pci" && c.name != "pcilink")
        fail(c, "unknown element under <pci> (expected <pci>, <gpu> or <nic>)");
    }
    if (gpuEl && nicEl) fail(el, "holds both a <gpu> and a <nic>");
    if (nicEl) {
      nic(*nicEl, parent, &n);
      return;
    }
    n.kind = gpuEl ? NodeKind::Gpu : NodeKind::PciSwitch;
    if (gpuEl) {
      n.dev = static_cast<int>(integer(*gpuEl, "dev", -1));
      n.sm = static_cast<int>(integer(*gpuEl, "sm", 0));
      n.rank = static_cast<int>(integer(*gpuEl, "rank", -1));
      n.gdr = integer(*gpuEl, "gdr", 0) != 0;
    }
    const int self = g.add(n);
    for (const XmlElement& c : el.children) {
      if (c.name == "pci") {
        if (gpuEl) fail(c, "a GPU cannot have PCI devices below it");
        pci(c, self);
      }
    }
    if (!gpuEl) return;
    for (const XmlElement& c : gpuEl->children) {
      if (c.name != "nvlink") fail(c, "unknown element under <gpu> (expected <nvlink>)");
      const long long count = integer(c, "count", 1);
      if (count < 1 || count > 64)
        fail(c, "count=\"" + std::to_string(count) + "\" is out of range (1-64)");
      const std::string* tc = c.attr("tclass");
      nvlinks.push_back({self, lowerBusId(required(c, "target")), tc ? *tc : std::string(),
                         static_cast<int>(count), c.line});
    }
  }

  // A <nic> with one <net> per port; `device` is its PCI element, or null
  // for a NIC NCCL lists straight under a CPU.
  void nic(const XmlElement& el, int parent, const Node* device) {
    if (el.children.empty()) fail(el, "has no <net> element");
    for (const XmlElement& c : el.children) {
      if (c.name != "net") fail(c, "unknown element under <nic> (expected <net>)");
      Node n = device ? *device : Node();
      n.kind = NodeKind::Nic;
      n.parent = parent;
      n.name = required(c, "name");
      if (g.findNic(n.name) >= 0) fail(c, "NIC " + n.name + " appears twice");
      n.speedMbps = number(c, "speed");
      n.port = static_cast<int>(integer(c, "port", 1));
      n.dev = static_cast<int>(integer(c, "dev", -1));
      n.gdr = integer(c, "gdr", 0) != 0;
      // NCCL lists only NICs it can use for RDMA or sockets; "rdma" is
      // gyre's: without it, IB-style names are taken as RDMA-capable.
      n.rdma = c.attr("rdma") ? integer(c, "rdma", 0) != 0
                              : n.name.rfind("mlx", 0) == 0 || n.name.rfind("ib", 0) == 0;
      if (const std::string* v = c.attr("netdev")) n.netdev = *v;
      if (const std::string* v = c.attr("guid")) n.guid = *v;
      g.add(n);
    }
  }

  void resolve(const PendingLink& l) {
    int target = g.findBusId(l.target);
    const bool toSwitch = l.tclass == kNvSwitchClass;
    if (target >= 0 && g.nodes[target].kind != NodeKind::Gpu &&
        g.nodes[target].kind != NodeKind::NvSwitch)
      throw TopologyError(source, l.line, "<nvlink>: target " + l.target + " is not a GPU");
    if (target < 0 && !toSwitch) {
      if (l.tclass.empty() || l.tclass == kGpuClass)
        throw TopologyError(source, l.line,
                            "<nvlink>: target " + l.target + " is not a GPU in this file");
      return;  // NVLink to a CPU (POWER): not modelled
    }
    if (target < 0) {
      Node s;
      s.kind = NodeKind::NvSwitch;
      s.busId = l.target;
      s.pciClass = kNvSwitchClass;
      target = g.add(s);
    }
    // GPU pairs list each other: keep one link per pair.
    for (const Link& k : g.links)
      if (k.a == target && k.b == l.gpu) return;
    Link link;
    link.a = l.gpu;
    link.b = target;
    link.kind = LinkKind::NvLink;
    link.count = l.count;
    link.gbps = l.count * Graph::nvLinkLaneGBps(g.nodes[l.gpu].sm);
    g.links.push_back(link);
  }
};

std::string fmt(double x) {
  char buf[32];
  snprintf(buf, sizeof(buf), "%g", x);
  return buf;
}

void writePci(const Graph& g, int i, XmlElement& parent, std::vector<bool>& done);

// One network port, as NCCL's <net> element (under a <nic>).
void writeNet(XmlElement& nic, const Node& port) {
  XmlElement& net = nic.add("net");
  net.set("name", port.name);
  net.set("dev", std::to_string(port.dev));
  net.set("speed", fmt(port.speedMbps));
  net.set("port", std::to_string(port.port));
  net.set("gdr", port.gdr ? "1" : "0");
  net.set("rdma", port.rdma ? "1" : "0");
  if (!port.netdev.empty()) net.set("netdev", port.netdev);
  if (!port.guid.empty()) net.set("guid", port.guid);
}

void writeChildren(const Graph& g, int node, XmlElement& el, std::vector<bool>& done) {
  for (int c : g.childrenOf(node)) {
    if (done[c]) continue;
    const Node& n = g.nodes[c];
    if (n.kind == NodeKind::Nic && n.busId.empty()) {
      writeNet(el.add("nic"), n);
      done[c] = true;
      continue;
    }
    writePci(g, c, el, done);
  }
}

void writePci(const Graph& g, int i, XmlElement& parent, std::vector<bool>& done) {
  const Node& n = g.nodes[i];
  XmlElement& pci = parent.add("pci");
  pci.set("busid", n.busId);
  if (!n.pciClass.empty()) pci.set("class", n.pciClass);
  if (n.pciGTs > 0) pci.set("link_speed", fmt(n.pciGTs) + " GT/s PCIe");
  if (n.pciWidth > 0) pci.set("link_width", std::to_string(n.pciWidth));
  done[i] = true;
  if (n.kind == NodeKind::Gpu) {
    XmlElement& gpu = pci.add("gpu");
    gpu.set("dev", std::to_string(n.dev));
    gpu.set("sm", std::to_string(n.sm));
    if (n.rank >= 0) gpu.set("rank", std::to_string(n.rank));
    gpu.set("gdr", n.gdr ? "1" : "0");
    for (const Link& l : g.links) {
      if (l.kind != LinkKind::NvLink || (l.a != i && l.b != i)) continue;
      const int other = l.a == i ? l.b : l.a;
      XmlElement& nv = gpu.add("nvlink");
      nv.set("target", g.nodes[other].busId);
      nv.set("count", std::to_string(l.count));
      nv.set("tclass", g.nodes[other].kind == NodeKind::NvSwitch ? kNvSwitchClass : kGpuClass);
    }
  } else if (n.kind == NodeKind::Nic) {
    XmlElement& nic = pci.add("nic");
    // Every port of this device.
    for (size_t p = static_cast<size_t>(i); p < g.nodes.size(); ++p) {
      const Node& port = g.nodes[p];
      if (port.kind != NodeKind::Nic || port.busId != n.busId) continue;
      writeNet(nic, port);
      done[p] = true;
    }
  } else {
    writeChildren(g, i, pci, done);
  }
}

nlohmann::ordered_json toJsonTree(const XmlElement& el) {
  nlohmann::ordered_json j;
  j["element"] = el.name;
  for (const auto& [k, v] : el.attrs) j[k] = v;
  if (!el.children.empty()) {
    j["children"] = nlohmann::ordered_json::array();
    for (const XmlElement& c : el.children) j["children"].push_back(toJsonTree(c));
  }
  return j;
}

XmlElement fromJsonTree(const nlohmann::json& j, const std::string& source, int depth) {
  if (depth >= kMaxXmlDepth) throw TopologyError(source, 0, "objects nested too deep");
  if (!j.is_object() || !j.contains("element") || !j["element"].is_string())
    throw TopologyError(source, 0,
                        "every object needs a string \"element\": " + j.dump().substr(0, 80));
  XmlElement el;
  el.name = j["element"].get<std::string>();
  for (const auto& [k, v] : j.items()) {
    if (k == "element") continue;
    if (k == "children") {
      if (!v.is_array())
        throw TopologyError(source, 0, "\"children\" of " + el.name + " must be an array");
      for (const auto& c : v) el.children.push_back(fromJsonTree(c, source, depth + 1));
      continue;
    }
    if (v.is_string())
      el.set(k, v.get<std::string>());
    else if (v.is_number() || v.is_boolean())
      el.set(k, v.dump());
    else
      throw TopologyError(source, 0,
                          "attribute \"" + k + "\" of " + el.name + " must be a string or number");
  }
  return el;
}

}  // namespace

Graph graphFromXml(const XmlElement& root, const std::string& source) {
  Loader l{source, {}, {}};
  l.g.source = source;
  l.system(root);
  l.g.finish();
  return std::move(l.g);
}

XmlElement graphToXml(const Graph& g) {
  XmlElement root{"system", {}, {}, 0};
  root.set("version", "1");
  if (!g.host.empty()) root.set("host", g.host);
  std::vector<bool> done(g.nodes.size(), false);
  for (int c : g.ofKind(NodeKind::Cpu)) {
    const Node& n = g.nodes[c];
    XmlElement& cpu = root.add("cpu");
    cpu.set("numaid", std::to_string(n.numa));
    if (n.socket >= 0) cpu.set("socket", std::to_string(n.socket));
    if (n.cores > 0) cpu.set("cores", std::to_string(n.cores));
    if (n.l3Bytes > 0) cpu.set("l3", std::to_string(n.l3Bytes));
    if (!n.affinity.empty()) cpu.set("affinity", n.affinity);
    if (!n.arch.empty()) cpu.set("arch", n.arch);
    if (!n.vendor.empty()) cpu.set("vendor", n.vendor);
    if (n.familyId) cpu.set("familyid", std::to_string(n.familyId));
    if (n.modelId) cpu.set("modelid", std::to_string(n.modelId));
    writeChildren(g, c, cpu, done);
  }
  return root;
}

Graph parseTopology(std::string_view text, const std::string& source) {
  size_t first = 0;
  while (first < text.size() && std::isspace(static_cast<unsigned char>(text[first]))) ++first;
  if (first < text.size() && text[first] == '{') {
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(text);
    } catch (const nlohmann::json::parse_error& e) {
      int line = 1;
      for (size_t i = 0; i < e.byte && i < text.size(); ++i) line += text[i] == '\n';
      throw TopologyError(source, line, std::string("bad JSON: ") + e.what());
    } catch (const nlohmann::json::exception& e) {  // a number too large for a double, ...
      throw TopologyError(source, 0, std::string("bad JSON: ") + e.what());
    }
    return graphFromXml(fromJsonTree(j, source, 0), source);
  }
  return graphFromXml(parseXml(text, source), source);
}

Graph loadTopologyFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw TopologyError(path, 0, std::string("cannot open: ") + std::strerror(errno));
  std::stringstream ss;
  ss << f.rdbuf();
  Graph g = parseTopology(ss.str(), path);
  return g;
}

std::string toXml(const Graph& g) { return "<?xml version=\"1.0\"?>\n" + writeXml(graphToXml(g)); }

std::string toJson(const Graph& g) {
  // XML takes any bytes in an attribute; JSON strings must be UTF-8.
  try {
    return toJsonTree(graphToXml(g)).dump(2) + "\n";
  } catch (const nlohmann::json::type_error& e) {
    throw TopologyError(g.source, 0, std::string("cannot be written as JSON: an attribute is not UTF-8 (") +
                                         e.what() + ")");
  }
}

void saveTopologyFile(const Graph& g, const std::string& path) {
  const bool json = path.size() >= 5 && path.compare(path.size() - 5, 5, ".json") == 0;
  // Through a temporary and a rename: ranks of one host may all dump at once.
  const std::string tmp = path + ".tmp" + std::to_string(getpid());
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) throw TopologyError(path, 0, std::string("cannot write: ") + std::strerror(errno));
    f << (json ? toJson(g) : toXml(g));
    if (!f.flush()) throw TopologyError(path, 0, "write failed");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    std::remove(tmp.c_str());
    throw TopologyError(path, 0, std::string("cannot write: ") + std::strerror(err));
  }
}

std::string toDot(const Graph& g) {
  std::string out = "graph topology {\n  node [shape=box];\n";
  auto id = [&](int i) { return "n" + std::to_string(i); };
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    std::string label = shortName(g, static_cast<int>(i));
    if (n.kind == NodeKind::Nic)
      label += "\\n" + n.name + " " + fmt(n.speedMbps / 1000) + " Gb/s";
    else if (!n.busId.empty())
      label += "\\n" + n.busId;
    const char* shape = n.kind == NodeKind::Cpu   ? "box3d"
                        : n.kind == NodeKind::Gpu ? "box"
                        : n.kind == NodeKind::Nic ? "ellipse"
                                                  : "diamond";
    out += "  " + id(static_cast<int>(i)) + " [label=\"" + label + "\" shape=" + shape + "];\n";
  }
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    if (n.parent < 0) continue;
    std::string label = "PCIe";
    if (n.pciGTs > 0) label += " " + fmt(n.pciGTs) + "GT/s";
    if (n.pciWidth > 0) label += " x" + std::to_string(n.pciWidth);
    out += "  " + id(n.parent) + " -- " + id(static_cast<int>(i)) + " [label=\"" + label + "\"];\n";
  }
  const std::vector<int> cpus = g.ofKind(NodeKind::Cpu);
  for (size_t a = 0; a < cpus.size(); ++a)
    for (size_t b = a + 1; b < cpus.size(); ++b)
      out += "  " + id(cpus[a]) + " -- " + id(cpus[b]) + " [label=\"SMP\" style=dashed];\n";
  for (const Link& l : g.links)
    out += "  " + id(l.a) + " -- " + id(l.b) + " [label=\"NVLink x" + std::to_string(l.count) +
           "\" color=green penwidth=2];\n";
  return out + "}\n";
}

}  // namespace gyre::topology
