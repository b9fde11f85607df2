// NCCL's environment variables, honoured as their GYRE_ counterparts: when
// libnccl.so.2 is loaded, each NCCL_ variable that is set gives the GYRE_
// variable its value, unless the GYRE_ one is set already (it wins). gyre
// reads its variables later (at the first log line or communicator), so this
// one place, run once before any entry point, covers every call.
#include <strings.h>

#include <cstdlib>
#include <string>
#include <string_view>

#include "nccl_env.h"

namespace {

// NCCL_DEBUG: VERSION and ABORT have no gyre level of their own; both keep
// gyre's default, warnings only.
std::string debugLevel(const std::string& v) {
  if (!strcasecmp(v.c_str(), "VERSION") || !strcasecmp(v.c_str(), "ABORT")) return "WARN";
  return v;  // WARN, INFO, TRACE (and NONE) are spelled alike
}

// NCCL_ALGO names algorithms NCCL may use, optionally per operation:
// "Ring", "Tree,Ring", "^Tree", "allreduce:tree;allgather:ring". gyre forces
// one algorithm per operation, so a part that names exactly one algorithm
// gyre has becomes that; a list of several or an exclusion leaves the choice
// to gyre's tuner, as NCCL's own would when it allows them all.
std::string gyreAlgoName(std::string_view nccl) {
  std::string s(nccl);
  if (!strcasecmp(s.c_str(), "Ring")) return "ring";
  if (!strcasecmp(s.c_str(), "Tree")) return "double_binary_tree";  // NCCL's Tree is that tree
  return "";  // CollNet, NVLS, PAT: hardware gyre's host path does not have
}

std::string algo(const std::string& v) {
  std::string out;
  size_t start = 0;
  while (start <= v.size()) {
    size_t end = v.find(';', start);
    if (end == std::string::npos) end = v.size();
    std::string_view part(v.data() + start, end - start);
    start = end + 1;
    std::string op;
    if (size_t colon = part.find(':'); colon != std::string_view::npos) {
      for (char c : part.substr(0, colon))
        op += static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
      part.remove_prefix(colon + 1);
    }
    if (part.empty() || part[0] == '^' || part.find(',') != std::string_view::npos) continue;
    std::string name = gyreAlgoName(part);
    if (name.empty()) continue;
    if (!out.empty()) out += ';';
    out += op.empty() ? name : op + ":" + name;
  }
  return out;
}

std::string same(const std::string& v) { return v; }

struct Mapping {
  const char* nccl;
  const char* gyre;
  std::string (*translate)(const std::string&);
};

const Mapping kMappings[] = {
    {"NCCL_DEBUG", "GYRE_DEBUG", debugLevel},
    {"NCCL_DEBUG_FILE", "GYRE_DEBUG_FILE", same},  // same %h/%p syntax
    {"NCCL_ALGO", "GYRE_ALGO", algo},
    {"NCCL_SOCKET_IFNAME", "GYRE_SOCKET_IFNAME", same},  // same prefix/^/= syntax
    {"NCCL_SOCKET_FAMILY", "GYRE_SOCKET_FAMILY", same},  // AF_INET / AF_INET6
    {"NCCL_COMM_ID", "GYRE_COMM_ID", same},              // host:port
};

constexpr size_t kCount = sizeof(kMappings) / sizeof(kMappings[0]);

// The GYRE_ values this file set (a later remap may replace them; one the
// user set wins always). A function's static: the load-time constructor
// below may run before this file's other statics are made.
std::string* setByUs() {
  static std::string values[kCount];
  return values;
}

void mapAll() {
  std::string* g_set = setByUs();
  for (size_t i = 0; i < kCount; ++i) {
    const Mapping& m = kMappings[i];
    const char* v = std::getenv(m.nccl);
    const char* mine = std::getenv(m.gyre);
    const bool ours = mine && !g_set[i].empty() && g_set[i] == mine;
    if (mine && *mine && !ours) continue;
    const std::string value = v && *v ? m.translate(v) : std::string();
    if (!value.empty()) {
      setenv(m.gyre, value.c_str(), 1);
    } else if (ours) {
      unsetenv(m.gyre);  // the NCCL_ variable went away: so does what it gave
    }
    g_set[i] = value;
  }
}

// Runs when the library is loaded, before main and before any thread of
// the program can be reading the environment.
__attribute__((constructor)) void mapNcclEnvironment() { mapAll(); }

}  // namespace

void remapNcclEnvironment() { mapAll(); }
