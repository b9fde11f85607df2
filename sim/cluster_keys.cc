#include "sim/cluster_keys.h"

namespace gyre::sim {

namespace {

constexpr double kGiga = 1e9, kMicro = 1e-6;

// The words are the topology layer's (host, gpu, nvlink, nic); the units are
// in the names, so a file reads without this table beside it.
const KeyInfo kKeys[] = {
    {"", "name", Kind::Text, "", nullptr, "", nullptr, nullptr},
    {"", "hosts", Kind::Integer, "", nullptr, "hosts must", nullptr,
     [](ClusterSpec& s, double v) { s.hosts = int(v); }},
    {"host", "gpus", Kind::Integer, "", "the ranks per host", "ranks per host", "NICs per host",
     [](ClusterSpec& s, double v) { s.ranksPerHost = int(v); }},
    {"host", "cpu_ranks", Kind::Integer, "", "the ranks per host", "ranks per host",
     "NICs per host", [](ClusterSpec& s, double v) { s.ranksPerHost = int(v); }},
    {"host", "nvlink_gbytes", Kind::Number, "GB/s each way", kIntraBandwidth, kIntraBandwidth,
     nullptr, [](ClusterSpec& s, double v) { s.intraBytesPerSecond = v * kGiga; }},
    {"host", "pcie_gbytes", Kind::Number, "GB/s each way", kIntraBandwidth, kIntraBandwidth,
     nullptr, [](ClusterSpec& s, double v) { s.intraBytesPerSecond = v * kGiga; }},
    {"host", "shm_gbytes", Kind::Number, "GB/s each way", kIntraBandwidth, kIntraBandwidth, nullptr,
     [](ClusterSpec& s, double v) { s.intraBytesPerSecond = v * kGiga; }},
    {"host", "nvlink_latency_us", Kind::Number, "microseconds", kIntraLatency, kIntraLatency,
     nullptr, [](ClusterSpec& s, double v) { s.intraLatency = v * kMicro; }},
    {"host", "pcie_latency_us", Kind::Number, "microseconds", kIntraLatency, kIntraLatency, nullptr,
     [](ClusterSpec& s, double v) { s.intraLatency = v * kMicro; }},
    {"host", "shm_latency_us", Kind::Number, "microseconds", kIntraLatency, kIntraLatency, nullptr,
     [](ClusterSpec& s, double v) { s.intraLatency = v * kMicro; }},
    {"host", "memory_gbytes", Kind::Number, "GB/s", nullptr,
     "the host memory bandwidth", nullptr, [](ClusterSpec& s, double v) { s.hostMemoryBytesPerSecond = v * kGiga; }},
    {"host", "nics", Kind::Integer, "", nullptr, "NICs per host", nullptr,
     [](ClusterSpec& s, double v) { s.nicsPerHost = int(v); }},
    {"host", "nic_gbit", Kind::Number, "Gbit/s", nullptr, "the NIC bandwidth", nullptr,
     [](ClusterSpec& s, double v) { s.nicBytesPerSecond = v * kGiga / 8; }},
    {"host", "nic_latency_us", Kind::Number, "microseconds", nullptr, "the NIC latency", nullptr,
     [](ClusterSpec& s, double v) { s.nicLatency = v * kMicro; }},
    {"host", "copy_gbytes", Kind::Number, "GB/s", nullptr, "the copy rate", nullptr,
     [](ClusterSpec& s, double v) { s.copyBytesPerSecond = v * kGiga; }},
    {"host", "reduce_gbytes", Kind::Number, "GB/s", nullptr, "the reduction rate", nullptr,
     [](ClusterSpec& s, double v) { s.reduceBytesPerSecond = v * kGiga; }},
    {"host", "step_overhead_us", Kind::Number, "microseconds", nullptr, "the step overhead",
     nullptr, [](ClusterSpec& s, double v) { s.stepOverhead = v * kMicro; }},
    {"host", "cache_mbytes", Kind::Number, "MiB", nullptr, "the cache size", nullptr,
     [](ClusterSpec& s, double v) { s.cacheBytes = v * 1024 * 1024; }},
    {"host", "cache_speedup", Kind::Number, "", nullptr, "the cache speedup", nullptr,
     [](ClusterSpec& s, double v) { s.cacheSpeedup = v; }},
    {"host", "cache_rank_kbytes", Kind::Number, "KiB", nullptr, "the cache footprint per rank", nullptr,
     [](ClusterSpec& s, double v) { s.cacheBytesPerRank = v * 1024; }},
    {"host", "shared_core_cache_speedup", Kind::Number, "", nullptr, "the shared core's cache speedup", nullptr,
     [](ClusterSpec& s, double v) { s.sharedCoreCacheSpeedup = v; }},
    {"host", "fifo_slot_kbytes", Kind::Number, "KiB", nullptr, "the FIFO slot size", nullptr,
     [](ClusterSpec& s, double v) { s.fifoSlotBytes = v * 1024; }},
    {"host", "fifo_slots", Kind::Integer, "", nullptr, "the FIFO slots", nullptr,
     [](ClusterSpec& s, double v) { s.fifoSlots = int(v); }},
    {"host", "cores", Kind::Integer, "", nullptr, "the cores per host", nullptr,
     [](ClusterSpec& s, double v) { s.coresPerHost = int(v); }},
    {"host", "core_gbytes", Kind::Number, "GB/s", nullptr, "the core rate", nullptr,
     [](ClusterSpec& s, double v) { s.coreBytesPerSecond = v * kGiga; }},
    {"host", "core_read_gbytes", Kind::Number, "GB/s", nullptr, "the core read rate", nullptr,
     [](ClusterSpec& s, double v) { s.coreReadBytesPerSecond = v * kGiga; }},
    {"host", "core_switch_us", Kind::Number, "microseconds", nullptr, "the core switch cost", nullptr,
     [](ClusterSpec& s, double v) { s.coreSwitchSeconds = v * kMicro; }},
    {"host", "peer_read_gbytes", Kind::Number, "GB/s", nullptr, "the peer read rate", nullptr,
     [](ClusterSpec& s, double v) { s.peerReadBytesPerSecond = v * kGiga; }},
    {"host", "second_write_cost", Kind::Number, "", nullptr, "the second write cost", nullptr,
     [](ClusterSpec& s, double v) { s.secondWriteCost = v; }},
    {"host", "peer_reads", Kind::Boolean, "", nullptr, "", nullptr,
     [](ClusterSpec& s, double v) { s.peerReads = v != 0; }},
    {"network", "hosts_per_leaf", Kind::Integer, "", nullptr, "hosts per leaf switch", nullptr,
     [](ClusterSpec& s, double v) { s.hostsPerLeaf = int(v); }},
    {"network", "oversubscription", Kind::Number, "", nullptr, "oversubscription", nullptr,
     [](ClusterSpec& s, double v) { s.oversubscription = v; }},
    {"network", "switch_latency_us", Kind::Number, "microseconds", nullptr, "the switch latency",
     nullptr, [](ClusterSpec& s, double v) { s.switchLatency = v * kMicro; }},
};

bool startsWith(const std::string& s, const char* head) { return *head && s.rfind(head, 0) == 0; }

}  // namespace

bool isSection(const std::string& name) { return name == "host" || name == "network"; }

std::string sectionNames() { return "host, network"; }

std::string sectionTitle(const std::string& section) {
  return section.empty() ? "the top level" : "\"" + section + "\"";
}

const KeyInfo* findKey(const std::string& section, const std::string& name) {
  for (const KeyInfo& k : kKeys)
    if (section == k.section && name == k.name) return &k;
  return nullptr;
}

std::string keyNames(const std::string& section) {
  std::string out;
  for (const KeyInfo& k : kKeys)
    if (section == k.section) out += (out.empty() ? "" : ", ") + std::string(k.name);
  if (section.empty()) out += ", " + sectionNames();
  return out + ", comment";
}

std::string linkWord(const std::string& key) { return key.substr(0, key.find('_')); }

const KeyInfo* keyOfCheck(const std::string& message,
                          const std::function<bool(const KeyInfo*)>& given) {
  for (const KeyInfo& k : kKeys)
    if (startsWith(message, k.check) && given(&k)) return &k;
  for (const KeyInfo& k : kKeys)
    if (k.alsoCheck && startsWith(message, k.alsoCheck) && given(&k)) return &k;
  return nullptr;
}

}  // namespace gyre::sim
