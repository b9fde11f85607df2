// The GYRE_ALGO syntax ("ring", "allreduce:ring@0-64K,tree;broadcast:..."),
// parsed by AlgoOverrides; what parses is then asked for every operation at
// a few sizes, as the planner does per call.
#include <cstdint>
#include <string>

#include "base/error.h"
#include "collectives/planner.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gyre::collectives;
  try {
    const AlgoOverrides o(std::string(reinterpret_cast<const char*>(data), size));
    for (int k = static_cast<int>(OpKind::AllReduce); k <= static_cast<int>(OpKind::SendRecv); ++k)
      for (size_t bytes : {size_t{0}, size_t{1}, size_t{65536}, SIZE_MAX})
        (void)o.find(static_cast<OpKind>(k), bytes);
  } catch (const gyre::Error&) {
  }
  return 0;
}
