// A cluster description file: a ClusterSpec written down, in JSON or as the
// same keys in XML attributes (docs/simulator.md, "Cluster files"), with the
// topology layer's words (host, gpu, nvlink, nic) and the units in the keys
// (nic_gbit, nvlink_gbytes, *_latency_us). What a file leaves out keeps
// ClusterSpec's default. Every fault in a file (bad JSON or XML, an unknown
// key, a wrong type, a value out of range, two keys for one field) is an
// Error (gyreInvalidArgument) that names the file, the line (and the column
// where known) and the key, so a 100-line description is fixed in one look.
#pragma once

#include <string>
#include <string_view>

#include "sim/cluster.h"

namespace gyre::sim {

struct ClusterFile {
  ClusterSpec spec;  // validated
  std::string name;  // the file's "name" ("" when it has none)
};

// JSON when the text starts with '{' (after blanks), XML when with '<'.
// source names the text in errors.
ClusterFile parseClusterFile(std::string_view text, const std::string& source);
ClusterFile loadClusterFile(const std::string& path);

}  // namespace gyre::sim
