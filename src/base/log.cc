#include "base/log.h"

#include <strings.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

namespace gyre::log {

namespace {

struct Sink {
  Level level = Level::Warn;
  FILE* file = stderr;
  char host[64] = "?";
};

std::string expandPath(const char* pattern, const char* host) {
  std::string out;
  for (const char* p = pattern; *p; ++p) {
    if (p[0] == '%' && p[1] == 'h') {
      out += host;
      ++p;
    } else if (p[0] == '%' && p[1] == 'p') {
      out += std::to_string(getpid());
      ++p;
    } else {
      out += *p;
    }
  }
  return out;
}

Sink& sink() {
  static Sink s = [] {
    Sink init;
    gethostname(init.host, sizeof(init.host) - 1);
    if (char* dot = std::strchr(init.host, '.')) *dot = '\0';
    if (const char* v = std::getenv("GYRE_DEBUG")) {
      if (!strcasecmp(v, "NONE") || !strcasecmp(v, "ERROR"))
        init.level = Level::None;
      else if (!strcasecmp(v, "WARN"))
        init.level = Level::Warn;
      else if (!strcasecmp(v, "INFO"))
        init.level = Level::Info;
      else if (!strcasecmp(v, "TRACE"))
        init.level = Level::Trace;
      else
        std::fprintf(stderr,
                     "gyre: GYRE_DEBUG=%s is not one of NONE, WARN, INFO, TRACE; using WARN\n", v);
    }
    if (const char* f = std::getenv("GYRE_DEBUG_FILE")) {
      std::string path = expandPath(f, init.host);
      if (FILE* fp = std::fopen(path.c_str(), "a"))
        init.file = fp;
      else
        std::fprintf(stderr, "gyre: cannot open GYRE_DEBUG_FILE %s; logging to stderr\n",
                     path.c_str());
    }
    return init;
  }();
  return s;
}

thread_local int tlsRank = -1;

}  // namespace

Level level() { return sink().level; }
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
  static std::mutex mu;  // one line at a time from the process's threads
  std::lock_guard<std::mutex> lock(mu);
  std::fprintf(s.file, "%s:%d:%ld%s GYRE %s %s\n", s.host, getpid(),
               static_cast<long>(syscall(SYS_gettid)), rank, tag, body);
  std::fflush(s.file);
}

}  // namespace gyre::log
