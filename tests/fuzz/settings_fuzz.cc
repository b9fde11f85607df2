// The GYRE_* settings as the environment gives them: the first byte picks a
// parameter of the table (or one of the settings parsed outside it, below),
// the rest (to a NUL, as an environment string ends) is its value. Each goes
// through Config::resolve and, where another layer parses it, through that
// parser too.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "base/error.h"
#include "bootstrap/interfaces.h"
#include "bootstrap/launch_env.h"
#include "bootstrap/unique_id.h"
#include "core/config.h"
#include "transport/verbs/ib_device_select.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gyre;
  if (size == 0) return 0;
  const auto table = core::parameterTable();
  // One more than the table: SLURM_NODELIST, which launch_env reads.
  const size_t pick = data[0] % (table.size() + 1);
  const std::string value(reinterpret_cast<const char*>(data + 1), strnlen(reinterpret_cast<const char*>(data + 1), size - 1));
  try {
    if (pick == table.size()) {
      (void)bootstrap::firstSlurmHost(value);
      return 0;
    }
    const char* name = table[pick].env;
    if (std::strcmp(name, "GYRE_SECRET") == 0) (void)bootstrap::parseSecretHex(value);
    if (std::strcmp(name, "GYRE_SOCKET_IFNAME") == 0) (void)bootstrap::interfaceMatches(value, "eth0");
    if (std::strcmp(name, "GYRE_IB_HCA") == 0)
      (void)transport::hcaAllows(transport::parseHcaFilter(value), "mlx5_0", 1);
    setenv(name, value.c_str(), 1);
    try {
      (void)core::Config::resolve(nullptr);
    } catch (const Error&) {
    }
    unsetenv(name);
  } catch (const Error&) {
  }
  return 0;
}
