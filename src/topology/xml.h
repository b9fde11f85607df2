// A small XML reader and writer, enough for topology files (gyre's own and
// NCCL's): elements, attributes in single or double quotes, the five
// predefined entities and numeric character references, comments, the
// <?xml ...?> declaration and a DOCTYPE line. Text content is rejected
// (topology files carry everything in attributes), which turns most garbage
// into an error at the line where it starts. Errors are TopologyError with
// the line number; the reader never recurses deeper than kMaxDepth.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gyre::topology {

struct XmlElement {
  std::string name;
  std::vector<std::pair<std::string, std::string>> attrs;
  std::vector<XmlElement> children;
  int line = 0;

  // nullptr when absent.
  const std::string* attr(std::string_view key) const;
  void set(std::string key, std::string value) {
    attrs.emplace_back(std::move(key), std::move(value));
  }
  XmlElement& add(std::string childName) {
    children.push_back(XmlElement{std::move(childName), {}, {}, 0});
    return children.back();
  }
};

constexpr int kMaxXmlDepth = 64;

// The single root element of `text`; `source` names it in errors.
XmlElement parseXml(std::string_view text, const std::string& source);
std::string writeXml(const XmlElement& root);

}  // namespace gyre::topology
