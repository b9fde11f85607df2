// Cluster description files: a good file gives the spec it spells, the
// shipped examples load, and every kind of fault is an error naming the
// file, the line (and column) and the key.
#include "sim/cluster_file.h"

#include <gtest/gtest.h>

#include <string>

#include "base/error.h"

namespace gyre::sim {
namespace {

const std::string kExamples = GYRE_EXAMPLE_CLUSTERS_DIR;

// The message of the Error that parsing text throws ("" if none).
std::string errorOf(const std::string& text, const std::string& source = "c.json") {
  try {
    parseClusterFile(text, source);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), gyreInvalidArgument);
    return e.what();
  }
  ADD_FAILURE() << "no error for:\n" << text;
  return "";
}

TEST(ClusterFile, EveryKeySetsItsField) {
  const ClusterFile f = parseClusterFile(R"({
  "name": "every key",
  "comment": "ignored",
  "hosts": 6,
  "host": {
    "gpus": 4,
    "pcie_gbytes": 32,
    "pcie_latency_us": 3,
    "nics": 2,
    "nic_gbit": 200,
    "nic_latency_us": 4,
    "copy_gbytes": 100,
    "reduce_gbytes": 50,
    "step_overhead_us": 7,
    "fifo_slot_kbytes": 128,
    "fifo_slots": 4,
    "cores": 3,
    "core_gbytes": 12,
    "core_read_gbytes": 9,
    "core_switch_us": 2.5,
    "peer_read_gbytes": 5,
    "peer_reads": false
  },
  "network": {"hosts_per_leaf": 3, "oversubscription": 2.5, "switch_latency_us": 0.25}
})",
                                         "c.json");
  const ClusterSpec& s = f.spec;
  EXPECT_EQ(f.name, "every key");
  EXPECT_EQ(s.hosts, 6);
  EXPECT_EQ(s.ranksPerHost, 4);
  EXPECT_DOUBLE_EQ(s.intraBytesPerSecond, 32e9);
  EXPECT_DOUBLE_EQ(s.intraLatency, 3e-6);
  EXPECT_EQ(s.nicsPerHost, 2);
  EXPECT_DOUBLE_EQ(s.nicBytesPerSecond, 25e9);
  EXPECT_DOUBLE_EQ(s.nicLatency, 4e-6);
  EXPECT_DOUBLE_EQ(s.copyBytesPerSecond, 100e9);
  EXPECT_DOUBLE_EQ(s.reduceBytesPerSecond, 50e9);
  EXPECT_DOUBLE_EQ(s.stepOverhead, 7e-6);
  EXPECT_DOUBLE_EQ(s.fifoSlotBytes, 128 * 1024);
  EXPECT_EQ(s.fifoSlots, 4);
  EXPECT_EQ(s.coresPerHost, 3);
  EXPECT_DOUBLE_EQ(s.coreBytesPerSecond, 12e9);
  EXPECT_DOUBLE_EQ(s.peerReadBytesPerSecond, 5e9);
  EXPECT_DOUBLE_EQ(s.coreReadBytesPerSecond, 9e9);
  EXPECT_DOUBLE_EQ(s.coreSwitchSeconds, 2.5e-6);
  EXPECT_FALSE(s.peerReads);
  EXPECT_EQ(s.hostsPerLeaf, 3);
  EXPECT_DOUBLE_EQ(s.oversubscription, 2.5);
  EXPECT_DOUBLE_EQ(s.switchLatency, 0.25e-6);
}

TEST(ClusterFile, WhatIsLeftOutKeepsTheDefault) {
  const ClusterFile f = parseClusterFile(R"({"hosts": 2})", "c.json");
  ClusterSpec expected;
  expected.hosts = 2;
  EXPECT_EQ(f.name, "");
  EXPECT_EQ(f.spec.ranksPerHost, expected.ranksPerHost);
  EXPECT_DOUBLE_EQ(f.spec.intraBytesPerSecond, expected.intraBytesPerSecond);
  EXPECT_DOUBLE_EQ(f.spec.nicBytesPerSecond, expected.nicBytesPerSecond);
  EXPECT_EQ(f.spec.hostsPerLeaf, expected.hostsPerLeaf);
  // Fewer ranks than the default NICs: a NIC per rank, as the CLI gives.
  EXPECT_EQ(parseClusterFile(R"({"host": {"cpu_ranks": 2}})", "c.json").spec.nicsPerHost, 2);
}

TEST(ClusterFile, ShippedExamplesLoad) {
  const ClusterFile pod = loadClusterFile(kExamples + "/dgx-h100-superpod.json");
  EXPECT_EQ(pod.spec.nranks(), 1024);
  EXPECT_EQ(pod.spec.ranksPerHost, 8);
  EXPECT_EQ(pod.spec.nicsPerHost, 8);
  EXPECT_DOUBLE_EQ(pod.spec.nicBytesPerSecond, 400e9 / 8);
  EXPECT_DOUBLE_EQ(pod.spec.intraBytesPerSecond, 450e9);
  EXPECT_EQ(pod.spec.hostsPerLeaf, 32);
  EXPECT_DOUBLE_EQ(pod.spec.oversubscription, 1);
  EXPECT_NE(pod.name.find("SuperPOD"), std::string::npos);

  const ClusterFile json = loadClusterFile(kExamples + "/two-hosts.json");
  const ClusterFile xml = loadClusterFile(kExamples + "/two-hosts.xml");
  EXPECT_EQ(json.spec.nranks(), 8);
  EXPECT_EQ(json.name, xml.name);
  for (const ClusterFile* f : {&json, &xml}) {
    EXPECT_EQ(f->spec.hosts, 2);
    EXPECT_EQ(f->spec.ranksPerHost, 4);
    EXPECT_EQ(f->spec.nicsPerHost, 1);
    EXPECT_DOUBLE_EQ(f->spec.intraBytesPerSecond, 20e9);
    EXPECT_DOUBLE_EQ(f->spec.intraLatency, 0.5e-6);
    EXPECT_DOUBLE_EQ(f->spec.nicBytesPerSecond, 100e9 / 8);
    EXPECT_DOUBLE_EQ(f->spec.reduceBytesPerSecond, 10e9);
    EXPECT_DOUBLE_EQ(f->spec.switchLatency, 1e-6);
  }
}

TEST(ClusterFile, BadJsonNamesLineAndColumn) {
  const std::string m = errorOf("{\n  \"hosts\": 2,\n  \"host\": {\"gpus\": ,}\n}");
  EXPECT_EQ(m.rfind("c.json:3:20: bad JSON: ", 0), 0u) << m;
  EXPECT_EQ(errorOf("").rfind("c.json:1:1: bad JSON", 0), 0u);
  EXPECT_EQ(errorOf("[1, 2]").rfind("c.json:1:1: a cluster description is a JSON object", 0), 0u);
  const std::string huge = errorOf("{\n\n  \"hosts\": 1e400\n}");
  EXPECT_EQ(huge.rfind("c.json:3:12: bad JSON", 0), 0u) << huge;
}

TEST(ClusterFile, UnknownKeyNamesTheValidOnes) {
  const std::string m =
      errorOf("{\n  \"host\": {\n    \"gpus\": 8,\n    \"nvlink_gbyte\": 450\n  }\n}");
  EXPECT_EQ(m.rfind("c.json:4:5: \"host.nvlink_gbyte\" is not a key of \"host\" (valid: gpus, "
                    "cpu_ranks, nvlink_gbytes",
                    0),
            0u)
      << m;
  const std::string top = errorOf("{\"hosts\": 1,\n \"nodes\": 4}");
  EXPECT_EQ(
      top.rfind(
          "c.json:2:2: \"nodes\" is not a key of the top level (valid: name, hosts, host, network",
          0),
      0u)
      << top;
}

TEST(ClusterFile, WrongTypesNameTheKey) {
  EXPECT_EQ(errorOf("{\"host\": {\n  \"nic_gbit\": \"400\"}}"),
            "c.json:2:3: \"host.nic_gbit\" must be a number (Gbit/s), not \"400\"");
  EXPECT_EQ(errorOf("{\"hosts\": 2.5}"), "c.json:1:2: \"hosts\" must be a whole number, not 2.5");
  EXPECT_EQ(errorOf("{\"host\": {\"peer_reads\": 1}}"),
            "c.json:1:11: \"host.peer_reads\" must be true or false, not 1");
  EXPECT_EQ(errorOf("{\n\"network\": 32}"),
            "c.json:2:1: \"network\" must be an object ({...}), not number");
  EXPECT_EQ(errorOf("{\"hosts\": 3000000000}"), "c.json:1:2: \"hosts\" is too large (3000000000)");
}

TEST(ClusterFile, OutOfRangeValuesNameTheirKeysLine) {
  struct Case {
    const char* section;
    const char* key;
    const char* value;
    const char* message;  // what ClusterSpec::validate says
  };
  const Case cases[] = {
      {"", "hosts", "0", "hosts must be at least 1"},
      {"host", "gpus", "0", "ranks per host must be at least 1"},
      {"host", "cpu_ranks", "-1", "ranks per host must be at least 1"},
      {"host", "nics", "0", "NICs per host must be at least 1"},
      {"host", "nvlink_gbytes", "0", "the intra-host bandwidth must be positive"},
      {"host", "shm_latency_us", "-1", "the intra-host latency must be zero or more"},
      {"host", "nic_gbit", "0", "the NIC bandwidth must be positive"},
      {"host", "nic_latency_us", "-2", "the NIC latency must be zero or more"},
      {"host", "copy_gbytes", "-1", "the copy rate must be positive"},
      {"host", "reduce_gbytes", "0", "the reduction rate must be positive"},
      {"host", "step_overhead_us", "-1", "the step overhead must be zero or more"},
      {"host", "fifo_slot_kbytes", "-256", "the FIFO slot size must be zero or more"},
      {"host", "fifo_slots", "1", "the FIFO slots must be 2 to 64"},
      {"host", "cores", "-1", "the cores per host must be 0 to 4096"},
      {"host", "core_gbytes", "-2", "the core rate must be zero or more"},
      {"host", "core_read_gbytes", "-2", "the core read rate must be zero or more"},
      {"host", "core_switch_us", "-2", "the core switch cost must be zero or more"},
      {"host", "peer_read_gbytes", "-2", "the peer read rate must be zero or more"},
      {"network", "hosts_per_leaf", "0", "hosts per leaf switch must be at least 1"},
      {"network", "oversubscription", "0.5", "oversubscription must be 1 or more"},
      {"network", "switch_latency_us", "-1", "the switch latency must be zero or more"},
  };
  for (const Case& c : cases) {
    const std::string section = c.section;
    const std::string path = section.empty() ? c.key : section + "." + c.key;
    // The key on line 3, after a line of a good key.
    const std::string text =
        section.empty()
            ? std::string("{\n  \"name\": \"x\",\n  \"") + c.key + "\": " + c.value + "\n}"
            : "{\n  \"" + section + "\": {\n    \"" + c.key + "\": " + c.value + "\n  }\n}";
    const std::string col = section.empty() ? "3" : "5";
    const std::string m = errorOf(text);
    EXPECT_EQ(m.rfind("c.json:3:" + col + ": \"" + path + "\": " + c.message, 0), 0u) << m;
  }
}

TEST(ClusterFile, NicsThatDoNotDivideTheRanks) {
  const std::string m = errorOf("{\"host\": {\n  \"gpus\": 8,\n  \"nics\": 3\n}}");
  EXPECT_EQ(m.rfind("c.json:3:3: \"host.nics\": NICs per host must be at least 1 and divide the "
                    "ranks per host (8)",
                    0),
            0u)
      << m;
  // The default NICs (8) against 12 ranks: the line that gave the ranks.
  const std::string d = errorOf("{\"host\": {\n  \"gpus\": 12\n}}");
  EXPECT_EQ(d.rfind("c.json:2:3: \"host.gpus\": NICs per host", 0), 0u) << d;
}

TEST(ClusterFile, OneKeyPerField) {
  const std::string twice = errorOf("{\"hosts\": 1,\n \"hosts\": 2}");
  EXPECT_EQ(twice, "c.json:2:2: \"hosts\" is given twice (first on line 1)");
  const std::string both = errorOf("{\"host\": {\n \"gpus\": 8,\n \"cpu_ranks\": 8}}");
  EXPECT_EQ(
      both.rfind("c.json:3:2: \"host.cpu_ranks\" and \"host.gpus\" (line 2) set the same thing", 0),
      0u)
      << both;
  const std::string links =
      errorOf("{\"host\": {\n \"nvlink_gbytes\": 450,\n \"shm_latency_us\": 1}}");
  EXPECT_EQ(links,
            "c.json:3:2: \"host.shm_latency_us\" and \"host.nvlink_gbytes\" (line 2) name "
            "different intra-host links");
}

TEST(ClusterFile, XmlFaultsNameTheElementsLine) {
  EXPECT_EQ(
      errorOf("<cluster hosts=\"2\">\n  <host gpus=\"8\" nic_gbits=\"400\"/>\n</cluster>", "c.xml")
          .rfind("c.xml:2: \"host.nic_gbits\" is not a key of \"host\"", 0),
      0u);
  EXPECT_EQ(errorOf("<cluster>\n\n<host gpus=\"eight\"/></cluster>", "c.xml"),
            "c.xml:3: \"host.gpus\" must be a whole number, not \"eight\"");
  EXPECT_EQ(errorOf("<cluster>\n<switch/></cluster>", "c.xml"),
            "c.xml:2: <switch> is not an element of <cluster> (valid: host, network)");
  EXPECT_EQ(errorOf("<system/>", "c.xml"),
            "c.xml:1: the root element must be <cluster>, not <system>");
  EXPECT_EQ(errorOf("<cluster>\n<host nics=\"0\"/></cluster>", "c.xml")
                .rfind("c.xml:2: \"host.nics\": NICs per host", 0),
            0u);
  const std::string bad = errorOf("<cluster>\n<host gpus=8/></cluster>", "c.xml");
  EXPECT_EQ(bad.rfind("c.xml:2: ", 0), 0u) << bad;
}

TEST(ClusterFile, MissingFileIsNamed) {
  try {
    loadClusterFile("/nonexistent/cluster.json");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind(
                  "/nonexistent/cluster.json: cannot open the cluster description", 0),
              0u);
  }
}

}  // namespace
}  // namespace gyre::sim
