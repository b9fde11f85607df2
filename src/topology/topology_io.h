// Topology files: the graph as XML (NCCL's vocabulary, so NCCL's own dumps
// load too: system/cpu/pci/gpu/nvlink/nic/net), as JSON (the same tree, one
// object per element), and as a Graphviz picture. GYRE_TOPO_FILE loads one
// instead of detecting; GYRE_TOPO_DUMP_FILE writes the one in use.
#pragma once

#include <string>
#include <string_view>

#include "topology/graph.h"
#include "topology/xml.h"

namespace gyre::topology {

// Throws TopologyError (with the line) for malformed input, unknown
// elements, missing or bad attributes.
Graph graphFromXml(const XmlElement& root, const std::string& source);
XmlElement graphToXml(const Graph& g);

// XML or JSON, told apart by the first character ('{': JSON).
Graph parseTopology(std::string_view text, const std::string& source);
Graph loadTopologyFile(const std::string& path);

std::string toXml(const Graph& g);
std::string toJson(const Graph& g);
std::string toDot(const Graph& g);
// JSON when the name ends in .json, XML otherwise. Throws TopologyError.
void saveTopologyFile(const Graph& g, const std::string& path);

}  // namespace gyre::topology
