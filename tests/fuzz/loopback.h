// What the fuzz targets that talk to a real listener share: sending a
// fuzzed input whole and closing without leaving state behind.
#pragma once

#include <sys/socket.h>

#include <cstddef>
#include <cstdint>

#include "bootstrap/socket.h"

namespace gyre::fuzz {

// Sends as much of the input as the peer takes (it may close first: a
// refusal), then half-closes, so the peer sees the input end.
inline void sendAllAndEnd(bootstrap::Socket& s, const uint8_t* data, size_t size) {
  for (size_t sent = 0; sent < size;) {
    const ssize_t n = ::send(s.fd(), data + sent, size - sent, MSG_NOSIGNAL);
    if (n <= 0) break;
    sent += size_t(n);
  }
  ::shutdown(s.fd(), SHUT_WR);
}

// Closes with a reset, so that thousands of runs leave no TIME_WAIT behind.
inline void closeHard(bootstrap::Socket& s) {
  linger l{1, 0};
  setsockopt(s.fd(), SOL_SOCKET, SO_LINGER, &l, sizeof l);
  s.reset();
}

}  // namespace gyre::fuzz
