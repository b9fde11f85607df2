#include "bench/gyre_bench/row_timeout.h"

#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

namespace gyre::bench {

namespace {

// The message is composed when the row starts: the handler may only use
// async-signal-safe calls (write, _exit).
char gMessage[512];
size_t gLength = 0;

void onAlarm(int) {
  if (write(2, gMessage, gLength) < 0) {
  }
  _exit(kTimeoutExit);
}

}  // namespace

void armRowTimeout(int seconds, int rank, const std::string& what) {
  if (seconds <= 0) return;
  static bool installed = false;
  if (!installed) {
    struct sigaction sa;
    std::memset(&sa, 0, sizeof(sa));
    sa.sa_handler = onAlarm;
    sigaction(SIGALRM, &sa, nullptr);
    installed = true;
  }
  // On a terminal, first erase a progress line that may be showing.
  const int n = std::snprintf(gMessage, sizeof(gMessage),
                              "%sgyre-bench: rank %d: timed out: %s took longer than -T %d s; giving up\n",
                              isatty(2) ? "\r\033[K" : "", rank, what.c_str(), seconds);
  gLength = n < 0 ? 0 : static_cast<size_t>(n) < sizeof(gMessage) ? static_cast<size_t>(n) : sizeof(gMessage) - 1;
  alarm(static_cast<unsigned>(seconds));
}

void disarmRowTimeout() { alarm(0); }

}  // namespace gyre::bench
