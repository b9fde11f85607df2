// The topology in a communicator: ranks of one host stay together in the
// ring (here with hosts interleaved by rank, as a launcher may place them),
// the results stay exact, GYRE_DEBUG=INFO shows the ring and trees, and
// GYRE_TOPO_FILE / GYRE_TOPO_DUMP_FILE work or fail clearly.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <vector>

#include "collectives/cost_model.h"
#include "tests/support/multiprocess.h"
#include "topology/topology_io.h"

namespace gyre::test {
namespace {

const std::string kFixtures = GYRE_TOPO_FIXTURES;

// One rank's part of a communicator that must work: create it, AllReduce
// rank + 1 to 1 + 2 + ... + n, destroy it; the exit status.
int sumOfRanks(int rank, int nranks, const gyreUniqueId& id) {
  Checker check(rank);
  gyreComm_t comm = initRank(rank, nranks, id);
  if (!comm) return 1;
  int value = rank + 1, sum = 0;
  check.expectOk(gyreAllReduce(&value, &sum, 1, gyreInt32, gyreSum, comm, nullptr), "allreduce");
  check.expect(sum == nranks * (nranks + 1) / 2, "sum " + std::to_string(sum));
  gyreCommDestroy(comm);
  return check.failures() ? 1 : 0;
}

TEST(TopologyComm, RingKeepsEachHostsRanksTogether) {
  // Read once per process by the logger: set before any gyre call.
  setenv("GYRE_DEBUG", "INFO", 1);
  const RunOutcome out = runRanks(4, [](int rank, int nranks, const gyreUniqueId& id) {
    setenv("GYRE_HOSTID", rank % 2 ? "hostB" : "hostA", 1);
    setenv("GYRE_ALGO", "allreduce:ring", 1);
    Checker check(rank);
    gyreComm_t comm = initRank(rank, nranks, id);
    if (!comm) return 1;
    for (size_t count : {size_t{1}, size_t{1000}, size_t{100003}}) {
      std::vector<float> in(count), got(count);
      for (size_t i = 0; i < count; ++i) in[i] = static_cast<float>(rank + static_cast<int>(i % 7));
      check.expectOk(
          gyreAllReduce(in.data(), got.data(), count, gyreFloat32, gyreSum, comm, nullptr),
          "allreduce");
      for (size_t i = 0; i < count; ++i)
        if (!check.expect(got[i] == static_cast<float>(6 + 4 * static_cast<int>(i % 7)),
                          "element " + std::to_string(i) + " of " + std::to_string(count)))
          break;
    }
    gyreCommDestroy(comm);
    return check.failures() ? 1 : 0;
  });
  unsetenv("GYRE_DEBUG");
  ASSERT_TRUE(out.allSucceeded()) << out.describe();
  const std::string& log0 = out.ranks[0].output;
  EXPECT_NE(log0.find("ring 0 -> 2 => 1 -> 3"), std::string::npos) << log0;
  EXPECT_NE(log0.find("tree 0: root 3; 0<-2 1<-3 2<-3"), std::string::npos) << log0;
  EXPECT_NE(log0.find("topology from "), std::string::npos) << log0;
}

TEST(TopologyComm, BadTopologyFileFailsCreationWithTheLine) {
  const std::string path = testing::TempDir() + "/gyre-comm-bad-topo.xml";
  std::ofstream(path) << "<system>\n  <cpu numaid=\"0\">\n    <gadget/>\n  </cpu>\n</system>\n";
  const RunOutcome out = runRanks(2, [&](int rank, int nranks, const gyreUniqueId& id) {
    setenv("GYRE_TOPO_FILE", path.c_str(), 1);
    gyreComm_t comm = initRank(rank, nranks, id, nullptr, 20000);
    if (comm) {
      gyreCommDestroy(comm);
      return 0;
    }
    return 3;
  });
  std::remove(path.c_str());
  ASSERT_FALSE(out.timedOut) << out.describe();
  for (const RankOutcome& r : out.ranks) {
    EXPECT_EQ(r.exitCode, 3) << out.describe();
    EXPECT_NE(r.output.find(path + ":3: <gadget>: unknown element"), std::string::npos) << r.output;
  }
}

TEST(TopologyComm, LoadsAFileAndDumpsWhatItUses) {
  const std::string dump = testing::TempDir() + "/gyre-comm-dump.json";
  std::remove(dump.c_str());
  const std::string file = kFixtures + "/cpu_2socket.xml";
  const RunOutcome out = runRanks(2, [&](int rank, int nranks, const gyreUniqueId& id) {
    setenv("GYRE_TOPO_FILE", file.c_str(), 1);
    setenv("GYRE_TOPO_DUMP_FILE", dump.c_str(), 1);
    return sumOfRanks(rank, nranks, id);
  });
  ASSERT_TRUE(out.allSucceeded()) << out.describe();
  EXPECT_EQ(topology::toXml(topology::loadTopologyFile(dump)),
            topology::toXml(topology::loadTopologyFile(file)));
  std::remove(dump.c_str());
}

// The tuner takes the graph's NIC speed as a ceiling for its built-in
// network numbers: two "hosts" whose NIC runs at 1 Gb/s get 0.125 GB/s;
// with an unknown speed (this machine's fixture: 0) the built-in 1.0 stays.
TEST(TopologyComm, TunerTakesTheNicSpeedAsTheNetworkCeiling) {
  const std::string slowNic = testing::TempDir() + "/gyre-slow-nic.xml";
  {
    std::ifstream in(kFixtures + "/this_machine.xml");
    std::string xml((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const std::string from = "speed=\"0\"";
    ASSERT_NE(xml.find(from), std::string::npos);
    xml.replace(xml.find(from), from.size(), "speed=\"1000\"");
    std::ofstream(slowNic) << xml;
  }
  for (const std::string& file : {slowNic, kFixtures + "/this_machine.xml"}) {
    const std::string dump = testing::TempDir() + "/gyre-nic-model.txt";
    std::remove(dump.c_str());
    const RunOutcome out = runRanks(4, [&](int rank, int nranks, const gyreUniqueId& id) {
      setenv("GYRE_TOPO_FILE", file.c_str(), 1);
      setenv("GYRE_HOSTID", rank % 2 ? "hostB" : "hostA", 1);
      setenv("GYRE_TUNER_DUMP_FILE", dump.c_str(), 1);
      return sumOfRanks(rank, nranks, id);
    });
    ASSERT_TRUE(out.allSucceeded()) << out.describe();
    std::ifstream in(dump);
    const std::string model((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const bool slow = file == slowNic;
    EXPECT_EQ(collectives::CostModel::parse(model, dump).network.gbps, slow ? 0.125 : 1.0) << file << ":\n" << model;
    EXPECT_EQ(model.find("topology-capped network") != std::string::npos, slow) << model;
    std::remove(dump.c_str());
  }
  std::remove(slowNic.c_str());
}

}  // namespace
}  // namespace gyre::test
