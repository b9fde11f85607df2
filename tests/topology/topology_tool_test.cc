// gyre-topo from the outside: the matrix, --xml/--json/--dot, --file, and
// clear failures for bad input.
#include <gtest/gtest.h>

#include <fstream>

#include "tests/support/subprocess.h"
#include "topology/topology_io.h"

namespace gyre::topology {
namespace {

const std::string kFixtures = GYRE_TOPO_FIXTURES;

test::Outcome topo(std::vector<std::string> args) {
  args.insert(args.begin(), GYRE_TOPO_TOOL);
  return test::run(test::Proc{args, {}, false}, 30);
}

bool has(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

TEST(GyreTopo, PrintsTheMatrixOfADumpedTopology) {
  const test::Outcome o = topo({"--file", kFixtures + "/dgx_h100.xml"});
  ASSERT_EQ(o.exitCode, 0) << o.describe();
  // Header and rows: 8 GPUs and 8 NICs, with CPU and NUMA affinity.
  EXPECT_TRUE(has(o.out, "GPU7")) << o.out;
  EXPECT_TRUE(has(o.out, "NIC7")) << o.out;
  EXPECT_TRUE(has(o.out, "CPU Affinity")) << o.out;
  // GPU0: NVSwitch to every GPU, its switch's NICs PIX, the other socket's SYS.
  std::string row;
  for (size_t at = o.out.find("\nGPU0 "); at != std::string::npos;) {
    row = o.out.substr(at + 1, o.out.find('\n', at + 1) - at - 1);
    break;
  }
  EXPECT_EQ(row.rfind("GPU0", 0), 0u) << o.out;
  EXPECT_TRUE(has(row, "X       NV18    NV18")) << row;
  EXPECT_TRUE(has(row, "PIX     PIX     PHB     PHB     SYS")) << row;
  EXPECT_TRUE(has(row, "0-31")) << row;
  EXPECT_TRUE(has(o.out, "mlx5_7")) << o.out;
  EXPECT_TRUE(has(o.out, "RDMA")) << o.out;
}

TEST(GyreTopo, XmlAndJsonOutputLoadBack) {
  const Graph g = loadTopologyFile(kFixtures + "/pcie_box.xml");
  const test::Outcome x = topo({"--file", kFixtures + "/pcie_box.xml", "--xml"});
  ASSERT_EQ(x.exitCode, 0) << x.describe();
  EXPECT_EQ(toXml(parseTopology(x.out, "out.xml")), toXml(g));
  const test::Outcome j = topo({"--file", kFixtures + "/pcie_box.xml", "--json"});
  ASSERT_EQ(j.exitCode, 0) << j.describe();
  EXPECT_EQ(j.out.front(), '{');
  EXPECT_EQ(toXml(parseTopology(j.out, "out.json")), toXml(g));
  // A JSON file loads with --file too.
  const std::string path = testing::TempDir() + "/gyre-topo-test.json";
  std::ofstream(path) << j.out;
  const test::Outcome m = topo({"--file", path});
  EXPECT_EQ(m.exitCode, 0) << m.describe();
  EXPECT_TRUE(has(m.out, "GPU3")) << m.out;
  std::remove(path.c_str());
}

TEST(GyreTopo, DotOutputIsAGraph) {
  const test::Outcome o = topo({"--file", kFixtures + "/dgx_h100.xml", "--dot"});
  ASSERT_EQ(o.exitCode, 0) << o.describe();
  EXPECT_EQ(o.out.rfind("graph topology {", 0), 0u) << o.out;
  EXPECT_TRUE(has(o.out, "NVLink x5")) << o.out;
  EXPECT_TRUE(has(o.out, "SMP")) << o.out;
  EXPECT_EQ(o.out.substr(o.out.size() - 2), "}\n");
}

TEST(GyreTopo, DetectsThisMachine) {
  const test::Outcome o = topo({});
  ASSERT_EQ(o.exitCode, 0) << o.describe();
  EXPECT_TRUE(has(o.out, "NUMA 0")) << o.out;
  EXPECT_TRUE(has(o.out, "NICs:")) << o.out;
}

TEST(GyreTopo, BadInputFailsClearly) {
  const std::string path = testing::TempDir() + "/gyre-topo-bad.xml";
  std::ofstream(path) << "<system>\n  <cpu numaid=\"0\">\n    <pci busid=0000:01:00.0/>\n";
  test::Outcome o = topo({"--file", path});
  EXPECT_EQ(o.exitCode, 1) << o.describe();
  EXPECT_TRUE(has(o.err, path + ":3: ")) << o.err;
  EXPECT_TRUE(has(o.err, "must be in quotes")) << o.err;
  std::remove(path.c_str());
  o = topo({"--file", "/nonexistent/topo.xml"});
  EXPECT_EQ(o.exitCode, 1) << o.describe();
  EXPECT_TRUE(has(o.err, "cannot open")) << o.err;
  o = topo({"--no-such-option"});
  EXPECT_NE(o.exitCode, 0) << o.describe();
  EXPECT_EQ(o.signal, 0) << o.describe();
}

}  // namespace
}  // namespace gyre::topology
