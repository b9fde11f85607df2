// The keys of a cluster description file (cluster_file.h): the section each
// belongs to, its kind and unit, the ClusterSpec field it sets, and how
// ClusterSpec::validate names that field, so that a value out of range is
// reported at the line of the key that gave it.
#pragma once

#include <functional>
#include <string>

#include "sim/cluster.h"

namespace gyre::sim {

struct Where {
  int line = 0, column = 0;  // 0: not known
};

enum class Kind { Integer, Number, Boolean, Text };

struct KeyInfo {
  const char* section;  // "" (the top level), "host" or "network"
  const char* name;
  Kind kind;
  const char* unit;   // how a number is read ("" for none)
  const char* group;  // keys that set one field share a group; nullptr: the key alone
  const char* check;  // how ClusterSpec::validate's message about the field starts
  // A check this key answers for when the field's own key is not in the file
  // (the ranks per host, when the default NIC count does not divide them).
  const char* alsoCheck;
  void (*set)(ClusterSpec&, double);  // a boolean comes as 0 or 1
};

constexpr const char* kIntraBandwidth = "the intra-host bandwidth";
constexpr const char* kIntraLatency = "the intra-host latency";

bool isSection(const std::string& name);
std::string sectionNames();                            // "host, network"
std::string sectionTitle(const std::string& section);  // "the top level", "\"host\""
const KeyInfo* findKey(const std::string& section, const std::string& name);
std::string keyNames(const std::string& section);  // the valid keys, for messages
// "nvlink" for "nvlink_gbytes" and "nvlink_latency_us".
std::string linkWord(const std::string& key);
// The key that validate's message (without "cluster: ") is about, among those
// the file gave (given); nullptr when none.
const KeyInfo* keyOfCheck(const std::string& message,
                          const std::function<bool(const KeyInfo*)>& given);

}  // namespace gyre::sim
