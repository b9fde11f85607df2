// GYRE_DEBUG=WARN|INFO|TRACE logging to stderr (or GYRE_DEBUG_FILE, where %h
// becomes the host name and %p the pid). Off (errors only) by default.
#pragma once

#include <cstdarg>
#include <string>

namespace gyre::log {

enum class Level { None = 0, Warn = 1, Info = 2, Trace = 3 };

Level level();
inline bool enabled(Level l) { return static_cast<int>(level()) >= static_cast<int>(l); }

// A file name from a pattern (GYRE_DEBUG_FILE, GYRE_TRACE_FILE): %h the
// host name, %p the pid, and with rank >= 0 %r the rank.
std::string expandFilePattern(const char* pattern, const char* host, int rank = -1);

// Reads GYRE_DEBUG and GYRE_DEBUG_FILE again (gyreResetDebugInit, for
// NCCL's ncclResetDebugInit): a program may change them while it runs.
void reload();

// Sets the rank shown in the prefix of this thread's lines (-1: none).
void setThreadRank(int rank);

void write(Level l, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

}  // namespace gyre::log

#define GYRE_WARN(...)                                           \
  do {                                                           \
    if (::gyre::log::enabled(::gyre::log::Level::Warn))          \
      ::gyre::log::write(::gyre::log::Level::Warn, __VA_ARGS__); \
  } while (0)
#define GYRE_INFO(...)                                           \
  do {                                                           \
    if (::gyre::log::enabled(::gyre::log::Level::Info))          \
      ::gyre::log::write(::gyre::log::Level::Info, __VA_ARGS__); \
  } while (0)
#define GYRE_TRACE(...)                                           \
  do {                                                            \
    if (::gyre::log::enabled(::gyre::log::Level::Trace))          \
      ::gyre::log::write(::gyre::log::Level::Trace, __VA_ARGS__); \
  } while (0)
