// Which RDMA devices and ports a rank may use, in NCCL_IB_HCA's syntax
// (GYRE_IB_HCA): a comma-separated list of device names, each optionally
// with ":port"; a leading "^" turns the list into one of exclusions, and a
// "=" (after the "^", if any) makes names match exactly instead of as
// prefixes. "mlx5_0:1,mlx5_1" allows port 1 of mlx5_0 and every port of
// mlx5_1 (and of mlx5_10: a prefix); "^=mlx5_1" allows all but mlx5_1.
// No libibverbs here: the parser is tested on hosts without RDMA.
#pragma once

#include <string>
#include <vector>

namespace gyre::transport {

struct HcaFilter {
  struct Entry {
    std::string device;
    int port = -1;  // -1: every port
  };
  bool exclude = false;        // "^": the entries name what must not be used
  bool exact = false;          // "=": names match whole, not as prefixes
  std::vector<Entry> entries;  // empty: every device
  std::string spec;            // as the user wrote it, for messages
};

// Throws Error(gyreInvalidArgument) naming `setting` for a port that is
// not a number from 1 to 255 or an entry without a name.
HcaFilter parseHcaFilter(const std::string& spec, const char* setting = "GYRE_IB_HCA");

// Whether `port` of `device` may be used.
bool hcaAllows(const HcaFilter& filter, const std::string& device, int port);

}  // namespace gyre::transport
