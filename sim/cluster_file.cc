#include "sim/cluster_file.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <vector>

#include "base/error.h"
#include "sim/cluster_keys.h"
#include "topology/graph.h"
#include "topology/xml.h"

namespace gyre::sim {

namespace {

using Json = nlohmann::ordered_json;  // ordered: faults are met in the file's order

std::string located(const std::string& source, Where w) {
  std::string s = source;
  if (w.line > 0) s += ":" + std::to_string(w.line);
  if (w.line > 0 && w.column > 0) s += ":" + std::to_string(w.column);
  return s;
}

[[noreturn]] void fail(const std::string& source, Where w, const std::string& message) {
  throwError(gyreInvalidArgument, located(source, w) + ": " + message);
}

Where whereOfOffset(std::string_view text, size_t offset) {
  offset = std::min(offset, text.size());
  Where w{1, 1};
  for (size_t i = 0; i < offset; ++i) {
    if (text[i] == '\n') {
      ++w.line;
      w.column = 1;
    } else {
      ++w.column;
    }
  }
  return w;
}

// Where each key of a well-formed JSON text starts, by its path
// ("host.nic_gbit"). nlohmann's tree keeps no positions, and this format is
// small enough to find them again in one pass. A key given twice is a fault
// here, where nlohmann would quietly keep the last.
std::map<std::string, Where> keyPositions(std::string_view text, const std::string& source) {
  struct Frame {
    bool object;
    std::string path;
    bool expectKey;
    std::string lastKey;
  };
  std::map<std::string, Where> at;
  std::vector<Frame> stack;
  Where here{1, 1};
  auto step = [&](size_t i) {
    if (text[i] == '\n')
      here = {here.line + 1, 1};
    else
      ++here.column;
  };
  auto childPath = [&]() -> std::string {
    if (stack.empty()) return "";
    const Frame& f = stack.back();
    const std::string name = f.object ? f.lastKey : "[]";
    return f.path.empty() ? name : f.path + (f.object ? "." : "") + name;
  };
  for (size_t i = 0; i < text.size(); step(i), ++i) {
    const char c = text[i];
    if (c == '"') {
      const Where start = here;
      std::string s;
      for (step(i), ++i; i < text.size() && text[i] != '"'; step(i), ++i) {
        if (text[i] == '\\' && i + 1 < text.size()) {
          s += text[i];
          step(i), ++i;
        }
        s += text[i];
      }
      if (!stack.empty() && stack.back().object && stack.back().expectKey) {
        Frame& f = stack.back();
        f.lastKey = s;
        const std::string path = f.path.empty() ? s : f.path + "." + s;
        if (const auto seen = at.find(path); seen != at.end())
          fail(source, start,
               "\"" + path + "\" is given twice (first on line " +
                   std::to_string(seen->second.line) + ")");
        at[path] = start;
      }
    } else if (c == '{' || c == '[') {
      stack.push_back({c == '{', childPath(), c == '{', ""});
    } else if (c == '}' || c == ']') {
      if (!stack.empty()) stack.pop_back();
    } else if (c == ':' && !stack.empty()) {
      stack.back().expectKey = false;
    } else if (c == ',' && !stack.empty()) {
      stack.back().expectKey = stack.back().object;
    }
  }
  return at;
}

// nlohmann's message without its own prefix ("[json.exception.parse_error.101]
// parse error at line 1, column 2: "): the position is given ours.
std::string bareMessage(const std::string& what) {
  std::string s = what;
  if (const size_t p = s.find("] "); p != std::string::npos) s = s.substr(p + 2);
  if (s.rfind("parse error", 0) == 0)
    if (const size_t p = s.find(": "); p != std::string::npos) s = s.substr(p + 2);
  return s;
}

// A key of the file as read: its value as JSON (XML attributes are text,
// typed when the key's kind is known), where it stands.
struct Entry {
  std::string section, key;
  Json value;
  Where where;
  bool fromText = false;
  std::string path() const { return section.empty() ? key : section + "." + key; }
};

std::vector<Entry> entriesOfJson(std::string_view text, const std::string& source) {
  Json root;
  try {
    root = Json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    fail(source, whereOfOffset(text, e.byte > 0 ? e.byte - 1 : 0),
         "bad JSON: " + bareMessage(e.what()));
  } catch (const nlohmann::json::exception& e) {
    // A number too large for a double: nlohmann names the literal, not where.
    const std::string m = bareMessage(e.what());
    Where w;
    if (const size_t q = m.find('\''), r = m.rfind('\''); q != std::string::npos && r > q)
      if (const size_t at = text.find(m.substr(q + 1, r - q - 1)); at != std::string_view::npos)
        w = whereOfOffset(text, at);
    fail(source, w, "bad JSON: " + m);
  }
  if (!root.is_object())
    fail(source, Where{1, 1},
         "a cluster description is a JSON object ({...}), not " + std::string(root.type_name()));
  const std::map<std::string, Where> at = keyPositions(text, source);
  auto whereOf = [&](const std::string& path) {
    const auto it = at.find(path);
    return it == at.end() ? Where{} : it->second;
  };
  std::vector<Entry> out;
  for (const auto& [key, value] : root.items()) {
    if (isSection(key)) {
      if (!value.is_object())
        fail(source, whereOf(key),
             "\"" + key + "\" must be an object ({...}), not " + std::string(value.type_name()));
      for (const auto& [k, v] : value.items()) out.push_back({key, k, v, whereOf(key + "." + k)});
    } else {
      out.push_back({"", key, value, whereOf(key)});
    }
  }
  return out;
}

std::vector<Entry> entriesOfXml(std::string_view text, const std::string& source) {
  topology::XmlElement root;
  try {
    root = topology::parseXml(text, source);
  } catch (const topology::TopologyError& e) {
    throwError(gyreInvalidArgument, std::string(e.what()) + " (bad XML)");
  }
  if (root.name != "cluster")
    fail(source, Where{root.line, 0},
         "the root element must be <cluster>, not <" + root.name + ">");
  std::vector<Entry> out;
  auto attrs = [&](const topology::XmlElement& el, const std::string& section) {
    for (const auto& [k, v] : el.attrs)
      out.push_back({section, k, Json(v), Where{el.line, 0}, true});
  };
  attrs(root, "");
  std::set<std::string> seen;
  for (const topology::XmlElement& c : root.children) {
    if (!isSection(c.name))
      fail(source, Where{c.line, 0},
           "<" + c.name + "> is not an element of <cluster> (valid: " + sectionNames() + ")");
    if (!seen.insert(c.name).second)
      fail(source, Where{c.line, 0}, "<" + c.name + "> is given twice");
    if (!c.children.empty())
      fail(source, Where{c.children.front().line, 0}, "<" + c.name + "> has no elements inside it");
    attrs(c, c.name);
  }
  return out;
}

bool hasKind(const Json& v, Kind kind) {
  switch (kind) {
    case Kind::Integer:
      return v.is_number_integer();
    case Kind::Number:
      return v.is_number();
    case Kind::Boolean:
      return v.is_boolean();
    case Kind::Text:
      return v.is_string();
  }
  return false;
}

std::string kindWords(const KeyInfo& k) {
  switch (k.kind) {
    case Kind::Integer:
      return "a whole number";
    case Kind::Number:
      return *k.unit ? std::string("a number (") + k.unit + ")" : "a number";
    case Kind::Boolean:
      return "true or false";
    case Kind::Text:
      return "a string";
  }
  return "";
}

// An XML attribute's text as the JSON value it spells.
Json typed(const std::string& s) {
  if (s == "true") return true;
  if (s == "false") return false;
  if (!s.empty() && !std::isspace(static_cast<unsigned char>(s[0]))) {
    errno = 0;
    char* end = nullptr;
    const long long i = std::strtoll(s.c_str(), &end, 10);
    if (*end == '\0' && errno == 0) return i;
    const double d = std::strtod(s.c_str(), &end);
    if (*end == '\0') return d;
  }
  return s;
}

ClusterFile specOf(const std::vector<Entry>& entries, const std::string& source) {
  ClusterFile out;
  std::map<std::string, const Entry*> byGroup;  // a field's one key
  std::map<const KeyInfo*, Where> given;
  std::set<std::string> seen;
  for (const Entry& e : entries) {
    const std::string path = "\"" + e.path() + "\"";
    if (!seen.insert(e.path()).second) fail(source, e.where, path + " is given twice");
    if (e.key == "comment") continue;  // a note for readers, any value
    const KeyInfo* k = findKey(e.section, e.key);
    if (!k)
      fail(source, e.where,
           path + " is not a key of " + sectionTitle(e.section) +
               " (valid: " + keyNames(e.section) + ")");
    const Json v =
        e.fromText && k->kind != Kind::Text ? typed(e.value.get<std::string>()) : e.value;
    if (!hasKind(v, k->kind))
      fail(source, e.where,
           path + " must be " + kindWords(*k) + ", not " +
               (v.is_string() ? "\"" + v.get<std::string>() + "\"" : v.dump()));
    const std::string group = k->group ? k->group : k->name;
    if (const auto other = byGroup.find(group); other != byGroup.end())
      fail(source, e.where,
           path + " and \"" + other->second->path() + "\" (line " +
               std::to_string(other->second->where.line) + ") set the same thing (" + group +
               "): give one");
    byGroup[group] = &e;
    given[k] = e.where;
    if (k->kind == Kind::Text) {
      out.name = v.get<std::string>();
      continue;
    }
    if (k->kind == Kind::Integer &&
        (v.is_number_unsigned() ? v.get<unsigned long long>() > INT_MAX
                                : v.get<long long>() > INT_MAX || v.get<long long>() < INT_MIN))
      fail(source, e.where, path + " is too large (" + v.dump() + ")");
    k->set(out.spec, v.is_boolean() ? double(v.get<bool>()) : v.get<double>());
  }
  // The intra-host link's bandwidth and latency keys must name one link.
  const auto bw = byGroup.find(kIntraBandwidth), lat = byGroup.find(kIntraLatency);
  if (bw != byGroup.end() && lat != byGroup.end() &&
      linkWord(bw->second->key) != linkWord(lat->second->key))
    fail(source, lat->second->where,
         "\"" + lat->second->path() + "\" and \"" + bw->second->path() + "\" (line " +
             std::to_string(bw->second->where.line) + ") name different intra-host links");
  // As the CLI does: no more NICs than ranks unless the file says so.
  if (!byGroup.count("nics") && out.spec.nicsPerHost > out.spec.ranksPerHost)
    out.spec.nicsPerHost = out.spec.ranksPerHost;
  try {
    out.spec.validate();
  } catch (const Error& e) {
    // ClusterSpec::validate names the field; the file names its key and line.
    std::string m = e.what();
    if (m.rfind("cluster: ", 0) == 0) m = m.substr(9);
    const KeyInfo* k = keyOfCheck(m, [&](const KeyInfo* c) { return given.count(c) > 0; });
    if (!k) fail(source, Where{}, m);
    fail(
        source, given[k],
        "\"" + std::string(k->section).append(*k->section ? "." : "").append(k->name) + "\": " + m);
  }
  return out;
}

}  // namespace

ClusterFile parseClusterFile(std::string_view text, const std::string& source) {
  size_t first = 0;
  while (first < text.size() && std::isspace(static_cast<unsigned char>(text[first]))) ++first;
  if (first < text.size() && text[first] == '<') return specOf(entriesOfXml(text, source), source);
  return specOf(entriesOfJson(text, source), source);
}

ClusterFile loadClusterFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f)
    throwError(gyreInvalidArgument,
               path + ": cannot open the cluster description: " + std::strerror(errno));
  std::stringstream ss;
  ss << f.rdbuf();
  return parseClusterFile(ss.str(), path);
}

}  // namespace gyre::sim
