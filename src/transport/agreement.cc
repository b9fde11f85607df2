#include "transport/agreement.h"

#include <cstdio>
#include <cstring>
#include <vector>

namespace gyre::transport {

namespace {
struct Reason {
  char why[248] = {};  // cut to fit: the first rank's words are enough
};
}  // namespace

std::string firstRankUnable(bootstrap::Bootstrap& bs, const std::string& why, Deadline deadline) {
  std::vector<Reason> all(static_cast<size_t>(bs.nranks()));
  std::snprintf(all[static_cast<size_t>(bs.rank())].why, sizeof(Reason::why), "%s", why.c_str());
  bs.allGather(all.data(), sizeof(Reason), deadline);
  for (int r = 0; r < bs.nranks(); ++r) {
    const char* w = all[static_cast<size_t>(r)].why;
    if (w[0]) return bs.describe(r) + ": " + std::string(w, strnlen(w, sizeof(Reason::why)));
  }
  return "";
}

bool reachable(const std::string& unusable, int rank, int nranks, int peer, std::string* whyNot) {
  const std::string why = !unusable.empty() ? unusable
                          : peer == rank || peer < 0 || peer >= nranks ? "not a peer"
                                                                       : std::string();
  if (!why.empty() && whyNot) *whyNot = why;
  return why.empty();
}

}  // namespace gyre::transport
