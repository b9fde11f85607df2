// The 128-byte unique id, as another process hands it over (decodeUniqueId).
// An id that decodes must encode back to one that decodes the same way.
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "base/error.h"
#include "bootstrap/unique_id.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gyre::bootstrap;
  gyreUniqueId id{};
  std::memcpy(&id, data, size < sizeof id ? size : sizeof id);
  UniqueIdContents c;
  try {
    c = decodeUniqueId(id);
  } catch (const gyre::Error&) {
    return 0;  // a named error is the right answer to garbage
  }
  gyreUniqueId again{};
  encodeUniqueId(c, &again);
  const UniqueIdContents d = decodeUniqueId(again);
  if (!secretsEqual(c.secret, d.secret) || c.fromEnvironment != d.fromEnvironment ||
      c.rankZeroHostsRoot != d.rankZeroHostsRoot || c.secretDerived != d.secretDerived)
    std::abort();  // the round trip lost something
  return 0;
}
