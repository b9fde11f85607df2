#include "transport/verbs/ib_device_select.h"

#include "base/error.h"
#include "base/parse.h"

namespace gyre::transport {

HcaFilter parseHcaFilter(const std::string& spec, const char* setting) {
  HcaFilter f;
  f.spec = spec;
  size_t at = 0;
  if (at < spec.size() && spec[at] == '^') {
    f.exclude = true;
    ++at;
  }
  if (at < spec.size() && spec[at] == '=') {
    f.exact = true;
    ++at;
  }
  const std::string list = spec.substr(at);
  if (list.empty()) {
    if (f.exclude || f.exact)
      throwError(gyreInvalidArgument, std::string(setting) + "=" + spec + " names no device");
    return f;
  }
  size_t start = 0;
  while (start <= list.size()) {
    size_t comma = list.find(',', start);
    if (comma == std::string::npos) comma = list.size();
    const std::string item = list.substr(start, comma - start);
    start = comma + 1;
    HcaFilter::Entry e;
    const size_t colon = item.find(':');
    e.device = item.substr(0, colon);
    if (e.device.empty())
      throwError(gyreInvalidArgument,
                 std::string(setting) + "=" + spec + ": an entry without a device name");
    if (colon != std::string::npos) {
      const std::string what = std::string(setting) + " port of " + e.device;
      e.port = static_cast<int>(parseInt(item.substr(colon + 1), what.c_str(), 1, 255));
    }
    f.entries.push_back(std::move(e));
  }
  return f;
}

bool hcaAllows(const HcaFilter& f, const std::string& device, int port) {
  if (f.entries.empty()) return true;
  bool listed = false;
  for (const auto& e : f.entries) {
    const bool nameMatches =
        f.exact ? device == e.device : device.compare(0, e.device.size(), e.device) == 0;
    if (nameMatches && (e.port < 0 || e.port == port)) listed = true;
  }
  return listed != f.exclude;
}

}  // namespace gyre::transport
