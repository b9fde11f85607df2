#include "harness/train_log.h"

#include <array>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <stdexcept>
#include <string_view>
#include <utility>

#include "harness/json.h"

namespace gyre::harness {
namespace {

std::string quoted(const std::string& path) { return "'" + path + "'"; }

[[noreturn]] void failFile(const std::string& path, const std::string& what) {
  throw std::runtime_error("train log " + quoted(path) + ": " + what);
}

// ---- Writing ----

// The shortest text that reads back to the same bits (std::to_chars).
void appendNumber(std::string& out, double v) {
  if (std::isnan(v)) {
    out += "NaN";
  } else if (std::isinf(v)) {
    out += v > 0 ? "Infinity" : "-Infinity";
  } else {
    std::array<char, 32> buf;
    out.append(buf.data(), std::to_chars(buf.data(), buf.data() + buf.size(), v).ptr);
  }
}

// ---- Reading ----

// One line as a JSON object (harness/json.h), its problem named without the
// line, which the caller adds with the file.
json::Value objectOf(std::string_view line) {
  json::Value v;
  try {
    v = json::parse(line);
  } catch (const json::ParseError& e) {
    throw std::runtime_error(e.problem());
  }
  if (v.type != json::Value::Type::Object) throw std::runtime_error("expected an object");
  return v;
}

[[noreturn]] void failField(const std::string& key, const std::string& what) {
  throw std::runtime_error("field '" + key + "' " + what);
}

StepRecord stepOf(const json::Value& line) {
  const auto& fields = line.members;
  StepRecord r;
  const std::array<std::pair<const char*, double*>, 7> doubles = {{
      {"loss", &r.loss},
      {"lr", &r.lr},
      {"tokens_per_s", &r.tokensPerSecond},
      {"step_s", &r.stepSeconds},
      {"comm_s", &r.commSeconds},
      {"bubble_s", &r.bubbleSeconds},
      {"grad_norm", &r.gradNorm},
  }};
  for (const auto& [key, v] : fields) {
    const bool integer = v.type == json::Value::Type::Integer;
    if (!integer && v.type != json::Value::Type::Number) failField(key, "is not a number");
    if (key == "step") {
      if (!integer) failField(key, "is not a 64-bit integer");
      r.step = v.integer;
      continue;
    }
    bool known = false;
    for (const auto& [name, target] : doubles) {
      if (key == name) {
        *target = v.number;
        known = true;
      }
    }
    if (!known) failField(key, "is not a step record's");
  }
  if (fields.size() != doubles.size() + 1)
    throw std::runtime_error(
        "a step line needs the 8 fields step, loss, lr, tokens_per_s, "
        "step_s, comm_s, bubble_s and grad_norm; it has " +
        std::to_string(fields.size()));
  return r;
}

}  // namespace

TrainLog::TrainLog(const std::string& path) : TrainLog(path, "w") {}

TrainLog::TrainLog(const std::string& path, const char* mode)
    : path_(path), file_(std::fopen(path.c_str(), mode)) {
  if (!file_) failFile(path_, std::string("cannot open for writing: ") + std::strerror(errno));
}

TrainLog::TrainLog(const std::string& path, const std::string& runName,
                   const std::map<std::string, std::string>& config)
    : TrainLog(path) {
  writeRunLine(runName, config);
}

void TrainLog::writeRunLine(const std::string& runName,
                            const std::map<std::string, std::string>& config) {
  std::string line = "{\"run\":" + json::quote(runName) + ",\"config\":{";
  for (const auto& [key, value] : config) {
    if (line.back() != '{') line += ',';
    line += json::quote(key) + ":" + json::quote(value);
  }
  writeLine(line + "}}");
}

TrainLog TrainLog::continued(const std::string& path, int64_t firstStep,
                             const std::string& runName,
                             const std::map<std::string, std::string>& config) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return TrainLog(path, runName, config);
  // The run line as the first run wrote it (that run's name and settings:
  // the plot and any reader see one run), then its steps the checkpoint
  // covers.
  std::string oldName;
  std::map<std::string, std::string> oldConfig;
  const std::vector<StepRecord> steps = readTrainLog(path, &oldName, &oldConfig);
  const std::string temporary = path + ".tmp";
  {
    TrainLog rewritten(temporary, "w");
    if (!oldName.empty()) rewritten.writeRunLine(oldName, oldConfig);
    for (const StepRecord& r : steps)
      if (r.step < firstStep) rewritten.write(r);
  }
  std::filesystem::rename(temporary, path, ec);
  if (ec) failFile(path, "cannot replace it with " + quoted(temporary) + ": " + ec.message());
  return TrainLog(path, "a");
}

void TrainLog::write(const StepRecord& r) {
  std::string line = "{\"step\":" + std::to_string(r.step);
  for (const auto& [key, v] : {std::pair<const char*, double>{"loss", r.loss},
                               {"lr", r.lr},
                               {"tokens_per_s", r.tokensPerSecond},
                               {"step_s", r.stepSeconds},
                               {"comm_s", r.commSeconds},
                               {"bubble_s", r.bubbleSeconds},
                               {"grad_norm", r.gradNorm}}) {
    line += ",\"";
    line += key;
    line += "\":";
    appendNumber(line, v);
  }
  writeLine(line + "}");
}

void TrainLog::writeLine(const std::string& line) {
  if (std::fputs((line + "\n").c_str(), file_.get()) == EOF || std::fflush(file_.get()) != 0)
    failFile(path_, std::string("cannot write: ") + std::strerror(errno));
}

std::vector<StepRecord> readTrainLog(const std::string& path, std::string* runName,
                                     std::map<std::string, std::string>* config) {
  std::ifstream in(path, std::ios::binary);
  if (!in) failFile(path, std::string("cannot open: ") + std::strerror(errno));
  const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  if (in.bad()) failFile(path, "cannot read");
  if (runName) runName->clear();
  if (config) config->clear();

  std::vector<StepRecord> steps;
  size_t begin = 0;
  for (int lineNo = 1; begin < text.size(); ++lineNo) {
    size_t end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();  // a last line without its newline
    const std::string_view line(text.data() + begin, end - begin);
    begin = end + 1;
    try {
      if (line.find_first_not_of(" \t\r") == std::string_view::npos)
        throw std::runtime_error("empty line");
      const json::Value fields = objectOf(line);
      if (!fields.find("run") && !fields.find("config")) {
        steps.push_back(stepOf(fields));
        continue;
      }
      if (lineNo != 1) throw std::runtime_error("a run line after the first line");
      bool named = false;
      for (const auto& [key, v] : fields.members) {
        if (key == "run" && v.type == json::Value::Type::String) {
          named = true;
          if (runName) *runName = v.string;
        } else if (key == "config" && v.type == json::Value::Type::Object) {
          // Strings, or numbers as their text; nothing nested.
          for (const auto& [name, value] : v.members) {
            std::string shown = value.string;
            if (value.type == json::Value::Type::Integer) {
              shown = std::to_string(value.integer);
            } else if (value.type == json::Value::Type::Number) {
              shown.clear();
              appendNumber(shown, value.number);
            } else if (value.type != json::Value::Type::String) {
              failField("config", "holds '" + name + "', which is not a string (nested)");
            }
            if (config) (*config)[name] = std::move(shown);
          }
        } else {
          failField(key, "is not a run line's (a string 'run' and an object 'config')");
        }
      }
      if (!named) throw std::runtime_error("a run line without its 'run' name");
    } catch (const std::runtime_error& e) {
      failFile(path, "line " + std::to_string(lineNo) + ": " + e.what());
    }
  }
  return steps;
}

}  // namespace gyre::harness
