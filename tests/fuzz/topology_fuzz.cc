// Topology files, XML (NCCL's vocabulary) and JSON (parseTopology tells them
// apart), as GYRE_TOPO_FILE or gyre-topo reads them; a graph that loads is
// written back in every format, as GYRE_TOPO_DUMP_FILE would.
#include <cstdint>
#include <string>
#include <string_view>

#include "base/error.h"
#include "topology/topology_io.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gyre::topology;
  try {
    const Graph g = parseTopology(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz");
    (void)toXml(g);
    (void)toJson(g);
    (void)toDot(g);
  } catch (const TopologyError&) {
  } catch (const gyre::Error&) {
  }
  return 0;
}
