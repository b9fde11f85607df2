// The topology graph from fixtures (a DGX-H100-like node, a PCIe box, a
// CPU-only 2-socket host, this machine): path classes, rings, NICs,
// transports; the XML/JSON round trips; NCCL's format; malformed input.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>

#include "topology/affinity.h"
#include "topology/detect.h"
#include "topology/graph.h"
#include "topology/search.h"
#include "topology/topology_io.h"
#include "topology/tree_shape.h"

namespace gyre::topology {
namespace {

const std::string kFixtures = GYRE_TOPO_FIXTURES;

Graph fixture(const char* name) { return loadTopologyFile(kFixtures + "/" + name); }

int gpu(const Graph& g, int dev) {
  for (int i : g.ofKind(NodeKind::Gpu))
    if (g.nodes[i].dev == dev) return i;
  return -1;
}
int nic(const Graph& g, const std::string& name) { return g.findNic(name); }

std::vector<Placement> onGpus(const Graph& g, uint64_t host, std::initializer_list<int> devs) {
  std::vector<Placement> out;
  for (int d : devs) out.push_back(Placement{host, g.nodes[gpu(g, d)].busId, 0});
  return out;
}

TEST(TopologyFixtures, DgxLoadsEveryPart) {
  const Graph g = fixture("dgx_h100.xml");
  EXPECT_EQ(g.ofKind(NodeKind::Cpu).size(), 2u);
  EXPECT_EQ(g.ofKind(NodeKind::Gpu).size(), 8u);
  EXPECT_EQ(g.ofKind(NodeKind::Nic).size(), 8u);
  EXPECT_EQ(g.ofKind(NodeKind::NvSwitch).size(), 4u);
  EXPECT_EQ(g.ofKind(NodeKind::PciSwitch).size(), 4u);
  EXPECT_EQ(g.nodes[gpu(g, 5)].numa, 1);
  EXPECT_EQ(g.nodes[nic(g, "mlx5_3")].numa, 0);
}

TEST(TopologyFixtures, DgxPathClasses) {
  const Graph g = fixture("dgx_h100.xml");
  for (int a = 0; a < 8; ++a)
    for (int b = 0; b < 8; ++b) {
      const Path p = g.path(gpu(g, a), gpu(g, b));
      EXPECT_EQ(p.cls, a == b ? PathClass::LOC : PathClass::NVL) << a << "-" << b;
      if (a != b) {
        EXPECT_DOUBLE_EQ(p.gbps, 18 * 25.0);
      }
    }
  EXPECT_EQ(g.path(gpu(g, 0), nic(g, "mlx5_0")).cls, PathClass::PIX);
  EXPECT_EQ(g.path(gpu(g, 0), nic(g, "mlx5_2")).cls, PathClass::PHB);
  EXPECT_EQ(g.path(gpu(g, 0), nic(g, "mlx5_4")).cls, PathClass::SYS);
  EXPECT_EQ(g.path(nic(g, "mlx5_0"), nic(g, "mlx5_1")).cls, PathClass::PIX);
  // PCIe gen5 x16 is the bottleneck next to the GPU.
  EXPECT_NEAR(g.path(gpu(g, 0), nic(g, "mlx5_0")).gbps, 63.0, 0.1);
  EXPECT_EQ(g.path(gpu(g, 0), g.cpuOfNuma(0)).cls, PathClass::PHB);
  EXPECT_EQ(g.path(gpu(g, 0), g.cpuOfNuma(1)).cls, PathClass::SYS);
  // To another host: through the network at the slower NIC's speed.
  const Graph box = fixture("pcie_box.xml");
  const Path net = netPath(g, nic(g, "mlx5_0"), box, nic(box, "mlx5_0"));
  EXPECT_EQ(net.cls, PathClass::NET);
  EXPECT_DOUBLE_EQ(net.gbps, 12.5);
  EXPECT_DOUBLE_EQ(netPath(g, nic(g, "mlx5_0"), g, nic(g, "mlx5_7")).gbps, 50.0);
}

TEST(TopologySearch, DgxRingIsAllNvLinkAndEachGpuGetsItsOwnNearNic) {
  const Graph g = fixture("dgx_h100.xml");
  const auto ranks = onGpus(g, 7, {0, 1, 2, 3, 4, 5, 6, 7});
  const SearchResult r = search(ranks, [&](uint64_t) { return &g; });
  ASSERT_EQ(r.ring.size(), 8u);
  EXPECT_EQ(r.ringWorst, PathClass::NVL);
  EXPECT_DOUBLE_EQ(r.ringGBps, 450.0);
  std::set<std::string> used;
  for (int rank = 0; rank < 8; ++rank) {
    EXPECT_EQ(g.path(gpu(g, rank), nic(g, r.nic[rank])).cls, PathClass::PIX)
        << rank << " " << r.nic[rank];
    used.insert(r.nic[rank]);
  }
  EXPECT_EQ(used.size(), 8u);
  for (int a = 0; a < 8; ++a)
    for (int b = 0; b < 8; ++b) EXPECT_EQ(r.transport(a, b), TransportKind::Shm);
}

TEST(TopologyFixtures, PcieBoxPathClasses) {
  const Graph g = fixture("pcie_box.xml");
  EXPECT_EQ(g.path(gpu(g, 0), gpu(g, 1)).cls, PathClass::PIX);
  EXPECT_EQ(g.path(gpu(g, 2), gpu(g, 3)).cls, PathClass::PIX);
  EXPECT_EQ(g.path(gpu(g, 0), gpu(g, 2)).cls, PathClass::PHB);
  EXPECT_EQ(g.path(gpu(g, 1), gpu(g, 3)).cls, PathClass::PHB);
  EXPECT_EQ(g.path(gpu(g, 1), nic(g, "mlx5_0")).cls, PathClass::PIX);
  EXPECT_EQ(g.path(gpu(g, 3), nic(g, "mlx5_0")).cls, PathClass::PHB);
  EXPECT_NEAR(g.path(gpu(g, 0), gpu(g, 1)).gbps, 15.75, 0.01);  // gen3 x16
}

TEST(TopologySearch, PcieBoxRingCrossesTheHostBridgeTwice) {
  const Graph g = fixture("pcie_box.xml");
  // Ranks placed so that rank order alternates between the switches: rank
  // order would cross the host bridge four times.
  const auto ranks = onGpus(g, 1, {0, 2, 1, 3});
  const SearchResult r = search(ranks, [&](uint64_t) { return &g; });
  int phb = 0;
  for (size_t i = 0; i < r.ring.size(); ++i) {
    const int a = r.ring[i], b = r.ring[(i + 1) % r.ring.size()];
    const PathClass c = g.path(g.findBusId(ranks[a].gpu), g.findBusId(ranks[b].gpu)).cls;
    EXPECT_TRUE(c == PathClass::PIX || c == PathClass::PHB);
    phb += c == PathClass::PHB;
  }
  EXPECT_EQ(phb, 2) << r.describeRing();
  EXPECT_EQ(r.ringWorst, PathClass::PHB);
  for (const std::string& n : r.nic) EXPECT_EQ(n, "mlx5_0");
}

TEST(TopologySearch, CpuOnlyHostKeepsRankOrderWithinANumaNode) {
  const Graph g = fixture("cpu_2socket.xml");
  EXPECT_EQ(g.path(nic(g, "eth0"), g.cpuOfNuma(0)).cls, PathClass::PHB);
  EXPECT_EQ(g.path(nic(g, "eth0"), g.cpuOfNuma(1)).cls, PathClass::SYS);
  std::vector<Placement> ranks = {{1, "", 0}, {1, "", 0}, {1, "", 1}, {1, "", 1}};
  SearchResult r = search(ranks, [&](uint64_t) { return &g; });
  EXPECT_EQ(r.ring, (std::vector<int>{0, 1, 2, 3}));
  for (const std::string& n : r.nic) EXPECT_EQ(n, "eth0");
  // Ranks alternating between the sockets: each socket's ranks together.
  ranks = {{1, "", 0}, {1, "", 1}, {1, "", 0}, {1, "", 1}};
  r = search(ranks, [&](uint64_t) { return &g; });
  EXPECT_EQ(r.ring, (std::vector<int>{0, 2, 1, 3}));
  EXPECT_EQ(r.ringWorst, PathClass::SYS);
}

TEST(TopologySearch, HostsStayContiguousAndTransportsFollowHosts) {
  const Graph g = fixture("dgx_h100.xml");
  // Ranks alternate between two hosts, two GPUs on each.
  std::vector<Placement> ranks = {{10, g.nodes[gpu(g, 0)].busId, 0},
                                  {20, g.nodes[gpu(g, 0)].busId, 0},
                                  {10, g.nodes[gpu(g, 1)].busId, 0},
                                  {20, g.nodes[gpu(g, 1)].busId, 0}};
  const SearchResult r = search(ranks, [&](uint64_t) { return &g; });
  EXPECT_EQ(r.ring, (std::vector<int>{0, 2, 1, 3})) << r.describeRing();
  EXPECT_EQ(r.transport(0, 2), TransportKind::Shm);
  EXPECT_EQ(r.transport(0, 1), TransportKind::Net);
  EXPECT_EQ(r.transport(3, 1), TransportKind::Shm);
  EXPECT_EQ(r.describeRing(), "0 -> 2 => 1 -> 3");
  // Trees: a double binary tree within each host (ring order 0,2 and 1,3),
  // and one across the hosts' roots; a host's root in one tree is a leaf in
  // the other.
  EXPECT_EQ(r.trees[0].root, 3);
  EXPECT_EQ(r.trees[0].parent, (std::vector<int>{2, 3, 3, -1}));
  EXPECT_EQ(r.trees[0].children[3], (std::vector<int>{1, 2}));
  EXPECT_EQ(r.trees[1].root, 0);
  EXPECT_EQ(r.trees[1].parent, (std::vector<int>{-1, 0, 0, 1}));
  EXPECT_EQ(r.trees[1].children[0], (std::vector<int>{2, 1}));
  // An unknown host keeps rank order; the combined ring agrees with each host's own answer.
  const SearchResult partial = search(ranks, [&](uint64_t h) { return h == 10 ? &g : nullptr; });
  EXPECT_EQ(combine(ranks, partial.positionInHost).ring, r.ring);
  EXPECT_TRUE(partial.nic[1].empty());
  EXPECT_FALSE(partial.nic[0].empty());
}

// The tree shapes' promises (tree_shape.cc), for every slot count to 200.
TEST(TopologyTrees, DoubleBinaryTreesAreValidShallowAndComplementary) {
  for (int n = 1; n <= 200; ++n) {
    int depthLimit = 0;
    while ((2 << depthLimit) <= n) ++depthLimit;  // floor(log2 n)
    std::vector<int> interior[2];
    for (int t = 0; t < 2; ++t) {
      const Tree tree = hostDoubleBinaryTree({[&] {
                                               std::vector<int> all(static_cast<size_t>(n));
                                               for (int i = 0; i < n; ++i) all[i] = i;
                                               return all;
                                             }()},
                                             t, n);
      int roots = 0;
      for (int r = 0; r < n; ++r) {
        const TreeSlot s = doubleBinaryTreeSlot(t, r, n);
        ASSERT_EQ(s.parent, tree.parent[r]) << n << " " << t << " " << r;
        if (s.parent < 0) ++roots;
        for (int c : tree.children[r]) ASSERT_EQ(tree.parent[c], r) << n << " " << t;
        if (s.parent >= 0) {
          const auto& sib = tree.children[s.parent];
          ASSERT_NE(std::find(sib.begin(), sib.end(), r), sib.end()) << n << " " << t << " " << r;
        }
        if (!tree.children[r].empty()) interior[t].push_back(r);
      }
      ASSERT_EQ(roots, 1) << n;
      ASSERT_EQ(tree.depth, depthLimit) << n << " tree " << t;
    }
    for (int r : interior[0])
      ASSERT_EQ(std::find(interior[1].begin(), interior[1].end(), r), interior[1].end())
          << "rank " << r << " interior in both trees of " << n;
  }
}

// Several hosts: each host's ranks summed within it, and only each host's
// root talks to other hosts, to at most three of them per tree.
TEST(TopologyTrees, AcrossHostsOnlyEachHostsRootCrossesTheNetwork) {
  for (int hostsCount : {2, 3, 5, 8})
    for (int perHost : {1, 2, 3, 4, 8}) {
      const int n = hostsCount * perHost;
      std::vector<std::vector<int>> hosts(static_cast<size_t>(hostsCount));
      std::vector<int> hostOf(static_cast<size_t>(n));
      for (int r = 0; r < n; ++r) {  // ranks dealt round-robin, as GYRE_HOSTID by rank % hosts
        hosts[r % hostsCount].push_back(r);
        hostOf[r] = r % hostsCount;
      }
      for (int t = 0; t < 2; ++t) {
        const Tree tree = hostDoubleBinaryTree(hosts, t, n);
        std::vector<int> crossing(static_cast<size_t>(hostsCount), 0);
        std::vector<std::set<int>> crossingRanks(static_cast<size_t>(hostsCount));
        int roots = 0;
        for (int r = 0; r < n; ++r) {
          if (tree.parent[r] < 0) {
            ++roots;
            EXPECT_EQ(tree.root, r);
            continue;
          }
          const int p = tree.parent[r];
          if (hostOf[p] != hostOf[r]) {
            ++crossing[hostOf[r]];
            ++crossing[hostOf[p]];
            crossingRanks[hostOf[r]].insert(r);
            crossingRanks[hostOf[p]].insert(p);
          }
        }
        EXPECT_EQ(roots, 1);
        for (int h = 0; h < hostsCount; ++h) {
          EXPECT_LE(crossing[h], 3) << hostsCount << "x" << perHost << " tree " << t << " host " << h;
          EXPECT_LE(crossingRanks[h].size(), 1u) << hostsCount << "x" << perHost << " tree " << t;
        }
        // Every rank reaches the root.
        for (int r = 0; r < n; ++r) {
          int steps = 0, x = r;
          while (tree.parent[x] >= 0 && steps <= n) x = tree.parent[x], ++steps;
          EXPECT_EQ(x, tree.root);
          EXPECT_LE(steps, tree.depth);
        }
      }
    }
}

TEST(TopologySearch, SameInputSameAnswer) {
  const Graph g = fixture("pcie_box.xml");
  const auto ranks = onGpus(g, 3, {3, 1, 2, 0});
  const SearchResult a = search(ranks, [&](uint64_t) { return &g; });
  const SearchResult b = search(ranks, [&](uint64_t) { return &g; });
  EXPECT_EQ(a.ring, b.ring);
  EXPECT_EQ(a.nic, b.nic);
}

TEST(TopologyIo, FixturesRoundTripThroughXmlAndJson) {
  for (const char* name : {"dgx_h100.xml", "pcie_box.xml", "cpu_2socket.xml", "this_machine.xml"}) {
    SCOPED_TRACE(name);
    const Graph g = fixture(name);
    const std::string xml = toXml(g);
    const Graph fromXml = parseTopology(xml, "dump");
    EXPECT_EQ(toXml(fromXml), xml);
    const Graph fromJson = parseTopology(toJson(g), "dump.json");
    EXPECT_EQ(toXml(fromJson), xml);
    ASSERT_EQ(fromJson.nodes.size(), g.nodes.size());
    for (size_t a = 0; a < g.nodes.size(); ++a)
      for (size_t b = 0; b < g.nodes.size(); ++b)
        EXPECT_EQ(fromJson.path(static_cast<int>(a), static_cast<int>(b)).cls,
                  g.path(static_cast<int>(a), static_cast<int>(b)).cls);
  }
}

TEST(TopologyIo, ReadsNcclTopologyXml) {
  // As NCCL dumps it (NCCL_TOPO_DUMP_FILE): extra attributes, GPU-to-GPU
  // NVLinks, a NIC straight under a CPU, addresses in upper case.
  const char* xml = R"(<system version="1">
  <cpu numaid="0" affinity="0000ffff" arch="x86_64" vendor="GenuineIntel" familyid="6" modelid="85">
    <pci busid="0000:1A:00.0" class="0x030200" vendor="0x10de" device="0x1db5" subsystem_vendor="0x10de" subsystem_device="0x1249" link_speed="8.0 GT/s PCIe" link_width="16">
      <gpu dev="0" sm="70" rank="0" gdr="1">
        <nvlink target="0000:1c:00.0" count="2" tclass="0x030200"/>
      </gpu>
    </pci>
    <pci busid="0000:1c:00.0" class="0x030200" link_speed="8.0 GT/s PCIe" link_width="16">
      <gpu dev="1" sm="70" rank="1" gdr="1">
        <nvlink target="0000:1a:00.0" count="2" tclass="0x030200"/>
        <nvlink target="0000:1d:00.0" count="1" tclass="0x030200"/>
      </gpu>
    </pci>
    <pci busid="0000:1d:00.0" class="0x030200" link_speed="8.0 GT/s PCIe" link_width="16">
      <gpu dev="2" sm="70" rank="2" gdr="1">
        <nvlink target="0000:1c:00.0" count="1" tclass="0x030200"/>
      </gpu>
    </pci>
    <nic>
      <net name="eth0" dev="0" speed="10000" port="0" latency="0.000000" guid="0x0" maxconn="65536" gdr="0"/>
    </nic>
  </cpu>
</system>
)";
  const Graph g = parseTopology(xml, "nccl.xml");
  EXPECT_EQ(g.links.size(), 2u);
  const Path p01 = g.path(gpu(g, 0), gpu(g, 1));
  EXPECT_EQ(p01.cls, PathClass::NVL);
  EXPECT_DOUBLE_EQ(p01.gbps, 50.0);
  const Path p02 = g.path(gpu(g, 0), gpu(g, 2));
  EXPECT_EQ(p02.cls, PathClass::NVB);
  EXPECT_DOUBLE_EQ(p02.gbps, 25.0);
  EXPECT_EQ(g.path(gpu(g, 0), nic(g, "eth0")).cls, PathClass::PHB);
  EXPECT_FALSE(g.nodes[nic(g, "eth0")].rdma);
}

struct Malformed {
  const char* what;
  const char* text;
  int line;
  const char* says;
};

TEST(TopologyIo, MalformedInputGivesTheLine) {
  const Malformed cases[] = {
      {"unclosed tag", "<system>\n  <cpu numaid=\"0\">\n</system>\n", 3, "closes <cpu>"},
      {"unquoted attribute", "<system>\n<cpu numaid=0/>\n</system>", 2, "must be in quotes"},
      {"attribute without value", "<system>\n\n<cpu numaid/>\n</system>", 3, "has no '='"},
      {"bad attribute value", "<system>\n<cpu numaid=\"zero\"/>\n</system>", 2, "not an integer"},
      {"missing attribute",
       "<system>\n<cpu numaid=\"0\">\n<pci class=\"0x0604\"/>\n</cpu>\n</system>", 3,
       "'busid' is missing"},
      {"unknown element", "<system>\n<cpu numaid=\"0\">\n\n<gadget/>\n</cpu>\n</system>", 4,
       "unknown element"},
      {"wrong root", "<?xml version=\"1.0\"?>\n<topology/>", 2, "must be <system>"},
      {"truncated", "<system>\n<cpu numaid=\"0\">\n<pci busid=\"0000:01:00.0\" link_wi", 3,
       "file ends"},
      {"truncated after a tag", "<system>\n<cpu numaid=\"0\">\n", 2, "never closed"},
      {"garbage",
       "\x7f"
       "ELF\x02\x01\x01\x00\x00",
       1, "text outside"},
      {"text inside", "<system>\n<cpu numaid=\"0\">\nhello\n</cpu></system>", 3, "unexpected text"},
      {"empty file", "  \n", 2, "no root element"},
      {"two roots", "<system/>\n<system/>", 2, "second root"},
      {"unknown entity", "<system host=\"a&b;\"/>", 1, "unknown entity"},
      {"unclosed comment", "<system>\n<!-- a comment\n", 2, "comment is never closed"},
      {"nvlink to nowhere",
       "<system><cpu numaid=\"0\"><pci busid=\"0000:01:00.0\"><gpu dev=\"0\">\n"
       "<nvlink target=\"0000:02:00.0\" count=\"2\" "
       "tclass=\"0x030200\"/></gpu></pci></cpu></system>",
       2, "not a GPU"},
      {"bad JSON", "{\n  \"element\": \"system\",\n  \"children\": [\n}", 4, "bad JSON"},
  };
  for (const Malformed& c : cases) {
    SCOPED_TRACE(c.what);
    try {
      parseTopology(c.text, "t.xml");
      ADD_FAILURE() << "no error";
    } catch (const TopologyError& e) {
      EXPECT_EQ(e.line(), c.line) << e.what();
      EXPECT_NE(std::string(e.what()).find("t.xml:" + std::to_string(c.line) + ":"),
                std::string::npos)
          << e.what();
      EXPECT_NE(std::string(e.what()).find(c.says), std::string::npos) << e.what();
    }
  }
}

TEST(TopologyIo, DeepNestingAndEveryTruncationFailCleanly) {
  std::string deep;
  for (int i = 0; i < 10000; ++i) deep += "<pci busid=\"0000:00:00.0\">";
  EXPECT_THROW(parseTopology(deep, "deep.xml"), TopologyError);
  std::ifstream f(kFixtures + "/dgx_h100.xml");
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string whole = ss.str();
  // Every cut before the root's closing '>' is an error with a line.
  const size_t complete = whole.rfind('>') + 1;
  for (size_t cut = 0; cut < complete; cut += 37) {
    try {
      parseTopology(std::string_view(whole).substr(0, cut), "cut.xml");
      ADD_FAILURE() << "a file cut at byte " << cut << " loaded";
    } catch (const TopologyError& e) {
      EXPECT_GT(e.line(), 0) << e.what();
    }
  }
}

TEST(TopologyIo, MissingFileIsAClearError) {
  try {
    loadTopologyFile("/nonexistent/topo.xml");
    ADD_FAILURE();
  } catch (const TopologyError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/topo.xml: cannot open"), std::string::npos)
        << e.what();
  }
}

TEST(TopologyDetect, ThisMachineIsDetectedAndRoundTrips) {
  const Graph g = detectTopology();
  ASSERT_FALSE(g.ofKind(NodeKind::Cpu).empty());
  EXPECT_FALSE(g.source.empty());
  int cpus = 0;
  for (int c : g.ofKind(NodeKind::Cpu))
    cpus += static_cast<int>(cpusOfAffinity(g.nodes[c].affinity).size());
  EXPECT_GE(cpus, 1);
  const std::string xml = toXml(g);
  EXPECT_EQ(toXml(parseTopology(xml, "live")), xml);
  // Detected twice, the same answer.
  EXPECT_EQ(toXml(detectTopology()), xml);
  // The checked-in dump of this machine loads and has this machine's shape.
  const Graph saved = fixture("this_machine.xml");
  EXPECT_EQ(saved.ofKind(NodeKind::Cpu).size(), g.ofKind(NodeKind::Cpu).size());
}

// A made-up sysfs: a PCIe switch (upstream port and two downstream ports of
// one part) with a GPU and an RDMA NIC below it, a second GPU on its own
// root port, and a virtual interface that must be skipped.
class FakeSysfs {
 public:
  FakeSysfs() : root_(testing::TempDir() + "/gyre-fake-sys-" + std::to_string(getpid())) {
    const std::string rc = "/devices/pci0000:00";
    device(rc + "/0000:00:01.0", "0x060400", "0x1022", "0x1483");
    device(rc + "/0000:00:01.0/0000:01:00.0", "0x060400", "0x1000", "0xc010");  // switch upstream
    device(rc + "/0000:00:01.0/0000:01:00.0/0000:02:00.0", "0x060400", "0x1000", "0xc010");
    device(rc + "/0000:00:01.0/0000:01:00.0/0000:02:01.0", "0x060400", "0x1000", "0xc010");
    device(rc + "/0000:00:01.0/0000:01:00.0/0000:02:00.0/0000:03:00.0", "0x030200", "0x10de",
           "0x2330");
    device(rc + "/0000:00:01.0/0000:01:00.0/0000:02:01.0/0000:04:00.0", "0x020700", "0x15b3",
           "0x1021");
    device(rc + "/0000:00:02.0", "0x060400", "0x1022", "0x1483");
    device(rc + "/0000:00:02.0/0000:05:00.0", "0x030200", "0x10de", "0x2330");
    const std::string nic = root_ + rc + "/0000:00:01.0/0000:01:00.0/0000:02:01.0/0000:04:00.0";
    mkdirs(root_ + "/class/infiniband/mlx5_0/ports/1");
    write(root_ + "/class/infiniband/mlx5_0/ports/1/rate", "200 Gb/sec (4X HDR)");
    link(nic, root_ + "/class/infiniband/mlx5_0/device");
    mkdirs(nic + "/net/ib0");
    mkdirs(root_ + "/class/net/ib0");
    link(nic, root_ + "/class/net/ib0/device");
    mkdirs(root_ + "/class/net/lo");  // no device: virtual
  }
  ~FakeSysfs() { (void)!std::system(("rm -rf '" + root_ + "'").c_str()); }
  const std::string& root() const { return root_; }

 private:
  static void mkdirs(const std::string& p) { (void)!std::system(("mkdir -p '" + p + "'").c_str()); }
  static void write(const std::string& p, const std::string& v) { std::ofstream(p) << v << "\n"; }
  static void link(const std::string& target, const std::string& at) {
    (void)!symlink(target.c_str(), at.c_str());
  }
  void device(const std::string& path, const char* cls, const char* vendor, const char* dev) {
    const std::string d = root_ + path;
    mkdirs(d);
    write(d + "/class", cls);
    write(d + "/vendor", vendor);
    write(d + "/device", dev);
    write(d + "/numa_node", "-1");
    write(d + "/current_link_speed", "16.0 GT/s PCIe");
    write(d + "/current_link_width", "16");
    mkdirs(root_ + "/bus/pci/devices");
    link(d, root_ + "/bus/pci/devices/" + path.substr(path.rfind('/') + 1));
  }
  std::string root_;
};

TEST(TopologyDetect, PciTreeAndNicsFromSysfs) {
  FakeSysfs sys;
  const Graph g = detectTopology(sys.root());
  ASSERT_EQ(g.ofKind(NodeKind::Gpu).size(), 2u) << toXml(g);
  const int gpuA = g.findBusId("0000:03:00.0"), gpuB = g.findBusId("0000:05:00.0");
  const int ib = g.findNic("mlx5_0");
  ASSERT_GE(ib, 0) << toXml(g);
  EXPECT_TRUE(g.nodes[ib].rdma);
  EXPECT_EQ(g.nodes[ib].netdev, "ib0");
  EXPECT_DOUBLE_EQ(g.nodes[ib].speedMbps, 200000.0);
  EXPECT_EQ(g.ofKind(NodeKind::Nic).size(), 1u) << "ib0 belongs to mlx5_0; lo is virtual\n"
                                                << toXml(g);
  // The switch's ports are one switch: GPU and NIC are one bridge apart.
  EXPECT_EQ(g.path(gpuA, ib).cls, PathClass::PIX) << toXml(g);
  EXPECT_EQ(g.path(gpuA, gpuB).cls, PathClass::PHB);
  EXPECT_NEAR(g.path(gpuA, ib).gbps, 31.5, 0.1);  // gen4 x16
  // CUDA numbering falls back to bus order.
  EXPECT_EQ(g.nodes[gpuA].dev, 0);
  EXPECT_EQ(g.nodes[gpuB].dev, 1);
  EXPECT_EQ(toXml(parseTopology(toXml(g), "fake")), toXml(g));
}

TEST(TopologyDetect, DumpFileIsWrittenAndLoadable) {
  const std::string path = testing::TempDir() + "/gyre-topo-dump.json";
  const Graph g = fixture("pcie_box.xml");
  saveTopologyFile(g, path);
  EXPECT_EQ(toXml(loadTopologyFile(path)), toXml(g));
  std::remove(path.c_str());
  EXPECT_THROW(saveTopologyFile(g, "/nonexistent/dir/x.xml"), TopologyError);
}

TEST(TopologyAffinity, ParsesNcclAffinityStrings) {
  EXPECT_EQ(cpusOfAffinity("00000003"), (std::vector<int>{0, 1}));
  EXPECT_EQ(cpusOfAffinity("00000001,80000000"), (std::vector<int>{31, 32}));
  EXPECT_TRUE(cpusOfAffinity("").empty());
  // No preference: binding does nothing and says so.
  setPreferredNuma(-1, {});
  EXPECT_FALSE(bindCurrentThreadToPreferredNuma());
  { ScopedNumaMemoryPolicy none; }
}

}  // namespace
}  // namespace gyre::topology
