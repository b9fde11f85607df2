#include "core/trace.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <set>
#include <utility>

#include "base/log.h"

namespace gyre::core::trace {

namespace {

// The open file. Events go out as they come (flushed), each a line after a
// comma, so a trace cut short by a crash still reads: the format lets the
// closing bracket go missing, and the file is closed properly at exit.
struct Sink {
  std::mutex mu;
  FILE* file = nullptr;
  bool opened = false;  // tried
  int rows = 0;
  int pid = 0;  // the trace's "pid": the first communicator's rank
  bool first = true;
  std::set<std::pair<int, uint32_t>> laneRows;  // (row, lane) rows named so far

  ~Sink() {
    if (file) {
      std::fputs("\n]\n", file);
      std::fclose(file);
    }
  }
};

Sink& sink() {
  static Sink s;
  return s;
}

const char* setting() {
  static const char* path = [] {
    const char* v = std::getenv("GYRE_TRACE_FILE");
    return v && *v ? v : nullptr;
  }();
  return path;
}


// JSON string contents: quotes, backslashes and control characters escaped.
std::string escaped(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  return out;
}

void emit(Sink& s, const std::string& event) {
  std::fputs(s.first ? "[\n" : ",\n", s.file);
  s.first = false;
  std::fputs(event.c_str(), s.file);
  std::fflush(s.file);
}

}  // namespace

bool enabled() { return setting() != nullptr; }

int addCommunicator(int rank, int nranks, const std::string& name) {
  if (!enabled()) return 0;
  Sink& s = sink();
  std::lock_guard<std::mutex> lock(s.mu);
  if (!s.opened) {
    s.opened = true;
    s.pid = rank;
    char host[64] = "?";
    gethostname(host, sizeof host - 1);
    // %r: the first communicator's rank.
    const std::string path = log::expandFilePattern(setting(), host, rank);
    s.file = std::fopen(path.c_str(), "w");
    if (!s.file) GYRE_WARN("cannot write GYRE_TRACE_FILE %s; no trace", path.c_str());
  }
  const int row = ++s.rows;
  if (!s.file) return row;
  std::string label = "comm " + std::to_string(row) + ": rank " + std::to_string(rank) + " of " +
                      std::to_string(nranks) + (name.empty() ? "" : " (" + name + ")");
  emit(s, "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":" + std::to_string(s.pid) +
              ",\"tid\":" + std::to_string(row) + ",\"args\":{\"name\":\"" + escaped(label) + "\"}}");
  if (row == 1)
    emit(s, "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":" + std::to_string(s.pid) +
                ",\"args\":{\"name\":\"rank " + std::to_string(rank) + " (pid " +
                std::to_string(getpid()) + ")\"}}");
  return row;
}

void record(int row, const Call& c) {
  if (row <= 0) return;
  Sink& s = sink();
  std::lock_guard<std::mutex> lock(s.mu);
  if (!s.file) return;
  char times[96];
  std::snprintf(times, sizeof times, "\"ts\":%.3f,\"dur\":%.3f", c.startNs / 1e3,
                (c.endNs - c.startNs) / 1e3);
  emit(s, std::string("{\"name\":\"") + escaped(c.name) + "\",\"cat\":\"gyre\",\"ph\":\"X\"," +
              times + ",\"pid\":" + std::to_string(s.pid) + ",\"tid\":" + std::to_string(row) +
              ",\"args\":{\"seq\":" + std::to_string(c.seq) + ",\"bytes\":" +
              std::to_string(c.bytes) + ",\"dtype\":\"" + escaped(c.dtype) +
              "\",\"algorithm\":\"" + escaped(c.algorithm) + "\",\"transports\":\"" +
              escaped(c.transports) + "\",\"result\":\"" + escaped(c.result) + "\"}}");
}

namespace {

// A lane's row below its communicator's: tids the communicators' rows
// (numbered from 1) never reach.
int laneTid(int row, uint32_t lane) { return lane == 0 ? row : row * 1000 + static_cast<int>(lane); }

}  // namespace

void recordSteps(int row, const std::vector<Step>& steps) {
  if (row <= 0 || steps.empty()) return;
  Sink& s = sink();
  std::lock_guard<std::mutex> lock(s.mu);
  if (!s.file) return;
  // One write and one flush for the call's steps, not one per step.
  std::string out;
  auto add = [&](const std::string& event) {
    out += s.first ? "[\n" : ",\n";
    s.first = false;
    out += event;
  };
  for (const Step& st : steps) {
    const int tid = laneTid(row, st.lane);
    if (st.lane != 0 && s.laneRows.insert({row, st.lane}).second)
      add("{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":" + std::to_string(s.pid) + ",\"tid\":" +
          std::to_string(tid) + ",\"args\":{\"name\":\"comm " + std::to_string(row) + " lane " +
          std::to_string(st.lane) + "\"}}");
    char times[96];
    std::snprintf(times, sizeof times, "\"ts\":%.3f,\"dur\":%.3f", st.startNs / 1e3, (st.endNs - st.startNs) / 1e3);
    std::string peers;
    if (st.from >= 0) peers += ",\"from\":" + std::to_string(st.from);
    if (st.to >= 0) peers += ",\"to\":" + std::to_string(st.to);
    add(std::string("{\"name\":\"") + st.name + "\",\"cat\":\"step\",\"ph\":\"X\"," + times +
        ",\"pid\":" + std::to_string(s.pid) + ",\"tid\":" + std::to_string(tid) + ",\"args\":{\"step\":" +
        std::to_string(st.index) + ",\"lane\":" + std::to_string(st.lane) + peers + ",\"bytes\":" +
        std::to_string(st.bytes) + "}}");
  }
  std::fputs(out.c_str(), s.file);
  std::fflush(s.file);
}

}  // namespace gyre::core::trace
