#include "bench/gyre_bench/report.h"

#include <cstdio>

namespace gyre::bench {

std::string formatNumber(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.9g", v);
  return buf;
}

namespace {

using json::quote;

std::string num(double v) { return formatNumber(v); }
std::string optNum(double v) { return v < 0 ? "null" : num(v); }
std::string boolean(bool b) { return b ? "true" : "false"; }

// --codec: the compressed calls' fields join the document (without it, it
// stays as it always was).
bool lossy(const RunSettings& s) { return s.codec != "none"; }

std::string cellJson(const Cell& c, bool codec) {
  if (!c.present) return "null";
  std::string j = "{\"time_us\": " + num(c.timeUs) + ", \"algbw\": " + num(c.algbw) + ", \"busbw\": " +
                  num(c.busbw) + ", \"wrong\": " + (c.wrong < 0 ? "null" : std::to_string(c.wrong));
  if (codec) j += ", \"maxerr\": " + optNum(c.maxErr) + ", \"rmserr\": " + optNum(c.rmsErr);
  return j + ", \"p50_us\": " + optNum(c.p50Us) + ", \"p99_us\": " + optNum(c.p99Us) + "}";
}

std::string settingsJson(const RunSettings& s) {
  std::string j = "{\n";
  auto add = [&](const char* k, const std::string& v, bool last = false) {
    j += std::string("    ") + quote(k) + ": " + v + (last ? "\n" : ",\n");
  };
  add("library", quote(s.library));
  add("version", quote(s.version));
  add("collective", quote(s.collective));
  add("label", quote(s.label));
  add("nranks", std::to_string(s.nranks));
  add("nhosts", std::to_string(s.nhosts));
  add("transport", quote(s.transport));
  add("transports", quote(s.transports));
  add("algorithm", quote(s.algorithm));
  add("minBytes", std::to_string(s.minBytes));
  add("maxBytes", std::to_string(s.maxBytes));
  add("stepFactor", num(s.stepFactor));
  add("stepBytes", std::to_string(s.stepBytes));
  add("iters", std::to_string(s.iters));
  add("warmup", std::to_string(s.warmup));
  add("check", boolean(s.check));
  add("dtype", quote(s.dtype));
  add("op", quote(s.op));
  add("root", std::to_string(s.root));
  add("average", std::to_string(s.average));
  add("averageName", quote(s.averageName));
  add("timeout", std::to_string(s.timeout));
  add("percentiles", boolean(s.percentiles));
  add("skew", std::to_string(s.skew), !lossy(s) && s.seqLayout.empty());
  if (lossy(s)) add("codec", quote(s.codec), true);
  if (!s.seqLayout.empty()) add("seqLayout", quote(s.seqLayout), true);
  return j + "  }";
}

// RFC 4180: quote a field holding a comma, quote or line break.
std::string csvField(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

std::string optCsv(double v) { return v < 0 ? "" : num(v); }

std::string cellCsv(const Cell& c) {
  if (!c.present) return ",,,,,";
  return num(c.timeUs) + "," + num(c.algbw) + "," + num(c.busbw) + "," + (c.wrong < 0 ? "" : std::to_string(c.wrong)) +
         "," + optCsv(c.p50Us) + "," + optCsv(c.p99Us);
}

// kCsvCodecColumns' fields of a row.
std::string codecCsv(const RunSettings& s, const Row& w) {
  auto errors = [](const Cell& c) { return c.present ? optCsv(c.maxErr) + "," + optCsv(c.rmsErr) : ","; };
  return "," + csvField(s.codec) + "," + optCsv(w.wireBytes) + "," + optCsv(w.plainBytes) + "," +
         errors(w.outOfPlace) + "," + errors(w.inPlace);
}

bool readCell(const json::Value& v, Cell& c) {
  if (v.isNull()) return true;
  if (v.kind != json::Value::Object) return false;
  c.present = true;
  c.timeUs = v["time_us"].num();
  c.busbw = v["busbw"].num();
  c.algbw = v["algbw"].num(c.busbw);
  c.wrong = static_cast<long long>(v["wrong"].num(-1));
  c.p50Us = v["p50_us"].num(-1);
  c.p99Us = v["p99_us"].num(-1);
  c.maxErr = v["maxerr"].num(-1);
  c.rmsErr = v["rmserr"].num(-1);
  return true;
}

}  // namespace

const char* const kCsvColumns =
    "collective,label,library,nranks,nhosts,transports,algorithm,iters,warmup,average,"
    "size,count,type,redop,root,"
    "oop_time_us,oop_algbw,oop_busbw,oop_wrong,oop_p50_us,oop_p99_us,"
    "ip_time_us,ip_algbw,ip_busbw,ip_wrong,ip_p50_us,ip_p99_us";

const char* const kCsvCodecColumns = ",codec,wire_bytes,plain_bytes,oop_maxerr,oop_rmserr,ip_maxerr,ip_rmserr";

std::string toJson(const Report& r) {
  std::string j = "{\n  \"schema\": \"gyre-bench/1\",\n  \"settings\": " + settingsJson(r.settings) + ",\n  \"rows\": [";
  const bool codec = lossy(r.settings);
  for (size_t i = 0; i < r.rows.size(); ++i) {
    const Row& w = r.rows[i];
    j += std::string(i ? "," : "") + "\n    {\"size\": " + std::to_string(w.bytes) +
         ", \"count\": " + std::to_string(w.count) + ", \"type\": " + quote(w.type) + ", \"redop\": " + quote(w.redop) +
         ", \"root\": " + std::to_string(w.root);
    if (codec) j += ", \"wireBytes\": " + optNum(w.wireBytes) + ", \"plainBytes\": " + optNum(w.plainBytes);
    j += ",\n     \"outOfPlace\": " + cellJson(w.outOfPlace, codec) + ",\n     \"inPlace\": " +
         cellJson(w.inPlace, codec) + "}";
  }
  j += r.rows.empty() ? "],\n" : "\n  ],\n";
  j += "  \"outOfBounds\": " + std::to_string(r.outOfBounds) + ",\n  \"avgBusBw\": " + num(r.avgBusBw) + "\n}\n";
  return j;
}

std::string toCsv(const Report& r) {
  const RunSettings& s = r.settings;
  const std::string prefix = csvField(s.collective) + "," + csvField(s.label) + "," + csvField(s.library) + "," +
                             std::to_string(s.nranks) + "," + std::to_string(s.nhosts) + "," +
                             csvField(s.transports) + "," + csvField(s.algorithm) + "," + std::to_string(s.iters) +
                             "," + std::to_string(s.warmup) + "," + csvField(s.averageName) + ",";
  const bool codec = lossy(s);
  std::string out = std::string(kCsvColumns) + (codec ? kCsvCodecColumns : "") + "\n";
  for (const Row& w : r.rows)
    out += prefix + std::to_string(w.bytes) + "," + std::to_string(w.count) + "," + csvField(w.type) + "," +
           csvField(w.redop) + "," + std::to_string(w.root) + "," + cellCsv(w.outOfPlace) + "," +
           cellCsv(w.inPlace) + (codec ? codecCsv(s, w) : "") + "\n";
  return out;
}

bool fromJson(const std::string& text, Report& out, std::string& error) {
  json::Value doc;
  if (!json::parse(text, doc, error)) return false;
  const json::Value& s = doc["settings"];
  const json::Value& rows = doc["rows"];
  if (rows.kind != json::Value::Array) return error = "no \"rows\" array", false;
  out = Report();
  RunSettings& t = out.settings;
  t.library = s["library"].str("gyre");
  t.version = s["version"].str();
  t.collective = s["collective"].str();
  t.label = s["label"].str();
  t.nranks = static_cast<int>(s["nranks"].num());
  t.nhosts = static_cast<int>(s["nhosts"].num());
  t.transport = s["transport"].str("auto");
  t.transports = s["transports"].str();
  t.algorithm = s["algorithm"].str("auto");
  t.minBytes = static_cast<size_t>(s["minBytes"].num());
  t.maxBytes = static_cast<size_t>(s["maxBytes"].num());
  t.stepFactor = s["stepFactor"].num();
  t.stepBytes = static_cast<size_t>(s["stepBytes"].num());
  t.iters = static_cast<int>(s["iters"].num());
  t.warmup = static_cast<int>(s["warmup"].num());
  t.check = s["check"].kind != json::Value::Bool || s["check"].boolean;
  t.dtype = s["dtype"].str();
  t.op = s["op"].str();
  t.root = static_cast<int>(s["root"].num());
  t.average = static_cast<int>(s["average"].num(1));
  t.averageName = s["averageName"].str("avg");
  t.timeout = static_cast<int>(s["timeout"].num());
  t.percentiles = s["percentiles"].kind == json::Value::Bool && s["percentiles"].boolean;
  t.skew = static_cast<int>(s["skew"].num(1));
  t.codec = s["codec"].str("none");
  t.seqLayout = s["seqLayout"].str();
  for (const json::Value& v : rows.array) {
    Row w;
    if (v["size"].kind != json::Value::Number) return error = "a row without \"size\"", false;
    w.bytes = static_cast<size_t>(v["size"].num());
    w.count = static_cast<size_t>(v["count"].num());
    w.type = v["type"].str();
    w.redop = v["redop"].str();
    w.root = static_cast<int>(v["root"].num(-1));
    w.wireBytes = v["wireBytes"].num(-1);
    w.plainBytes = v["plainBytes"].num(-1);
    if (!readCell(v["outOfPlace"], w.outOfPlace) || !readCell(v["inPlace"], w.inPlace))
      return error = "a row's outOfPlace/inPlace is not an object", false;
    out.rows.push_back(w);
  }
  out.outOfBounds = static_cast<long long>(doc["outOfBounds"].num());
  out.avgBusBw = doc["avgBusBw"].num();
  return true;
}

}  // namespace gyre::bench
