#include "base/log.h"

#include <strings.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

namespace gyre::log {

namespace {

// The settings, read from the environment at the first line and again on
// reload(): level is read lock-free on every log macro; file changes only
// under the lines' mutex.
struct Sink {
  std::atomic<Level> level{Level::Warn};
  FILE* file = stderr;
  char host[64] = "?";
};

std::mutex& lineMutex() {
  static std::mutex mu;  // one line at a time from the process's threads
  return mu;
}


// Reads GYRE_DEBUG and GYRE_DEBUG_FILE into s (under the lines' mutex).
void readSettings(Sink& s) {
  Level level = Level::Warn;
  if (const char* v = std::getenv("GYRE_DEBUG")) {
    if (!strcasecmp(v, "NONE") || !strcasecmp(v, "ERROR"))
      level = Level::None;
    else if (!strcasecmp(v, "WARN"))
      level = Level::Warn;
    else if (!strcasecmp(v, "INFO"))
      level = Level::Info;
    else if (!strcasecmp(v, "TRACE"))
      level = Level::Trace;
    else
      std::fprintf(stderr,
                   "gyre: GYRE_DEBUG=%s is not one of NONE, WARN, INFO, TRACE; using WARN\n", v);
  }
  if (s.file != stderr) std::fclose(s.file);
  s.file = stderr;
  if (const char* f = std::getenv("GYRE_DEBUG_FILE")) {
    std::string path = expandFilePattern(f, s.host);
    if (FILE* fp = std::fopen(path.c_str(), "a"))
      s.file = fp;
    else
      std::fprintf(stderr, "gyre: cannot open GYRE_DEBUG_FILE %s; logging to stderr\n",
                   path.c_str());
  }
  s.level.store(level);
}

Sink& sink() {
  static Sink* s = [] {
    auto* init = new Sink;  // never destroyed: threads may log during exit
    gethostname(init->host, sizeof(init->host) - 1);
    if (char* dot = std::strchr(init->host, '.')) *dot = '\0';
    std::lock_guard<std::mutex> lock(lineMutex());
    readSettings(*init);
    return init;
  }();
  return *s;
}

thread_local int tlsRank = -1;

}  // namespace

std::string expandFilePattern(const char* pattern, const char* host, int rank) {
  std::string out;
  for (const char* p = pattern; *p; ++p) {
    if (p[0] == '%' && p[1] == 'h') {
      out += host;
      ++p;
    } else if (p[0] == '%' && p[1] == 'p') {
      out += std::to_string(getpid());
      ++p;
    } else if (p[0] == '%' && p[1] == 'r' && rank >= 0) {
      out += std::to_string(rank);
      ++p;
    } else {
      out += *p;
    }
  }
  return out;
}

Level level() { return sink().level.load(std::memory_order_relaxed); }

void reload() {
  Sink& s = sink();
  std::lock_guard<std::mutex> lock(lineMutex());
  readSettings(s);
}
void setThreadRank(int rank) { tlsRank = rank; }

void write(Level l, const char* fmt, ...) {
  Sink& s = sink();
  char body[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(body, sizeof(body), fmt, ap);
  va_end(ap);
  const char* tag = l == Level::Warn ? "WARN" : l == Level::Info ? "INFO" : "TRACE";
  char rank[16] = "";
  if (tlsRank >= 0) std::snprintf(rank, sizeof(rank), " [%d]", tlsRank);
  std::lock_guard<std::mutex> lock(lineMutex());
  std::fprintf(s.file, "%s:%d:%ld%s GYRE %s %s\n", s.host, getpid(),
               static_cast<long>(syscall(SYS_gettid)), rank, tag, body);
  std::fflush(s.file);
}

}  // namespace gyre::log
