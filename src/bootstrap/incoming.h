// Connections accepted on a rank's listeners that have not yet introduced
// themselves. Every one is read without blocking, side by side, so a process
// that connects and says nothing (or half a hello) holds up nobody: the
// ranks' own connections are filed as soon as their hello is in, and the
// silent ones are dropped after kHandshakeMs, or when more than kMaxOpen are
// open at once (the oldest first). Nothing here trusts what it reads: the
// Bootstrap checks the secret, the rank and the place of each hello.
#pragma once

#include <poll.h>

#include <cstdint>
#include <list>
#include <string>
#include <vector>

#include "bootstrap/conn_protocol.h"
#include "bootstrap/socket.h"

namespace gyre::bootstrap {

// What was turned away, for the messages of a wait that times out.
struct Refusals {
  int silent = 0;        // closed or timed out before a complete hello
  int crowded = 0;       // dropped because too many were open at once
  int badSecret = 0;     // a wrong magic or secret
  int badClaim = 0;      // right secret, impossible rank or wrong listener
  std::string lastFrom;  // the address of the latest refused one
  int total() const { return silent + crowded + badSecret + badClaim; }
  // "refused 20 connections that sent no hello in time, 1 with a wrong
  // secret (latest from 10.0.0.9:41234)", or "" when none.
  std::string describe() const;
};

class IncomingConnections {
 public:
  static constexpr int64_t kHandshakeMs = 5000;
  static constexpr size_t kMaxOpen = 256;

  // A connection whose hello (and, for an abort notice, its notice) is in.
  struct Arrival {
    Socket sock;
    ConnHello hello{};
    bool onDataListener = false;
    bool hasNotice = false;
    AbortNoticeHeader notice{};
    std::string noticeText;
    std::string from;  // peer address, for messages
  };

  explicit IncomingConnections(Refusals& refusals) : refusals_(refusals) {}

  // Accepts what is pending on the listener (never blocks).
  void acceptFrom(const Socket& listener, bool isDataListener);
  // Reads what has arrived on every open handshake; returns those complete.
  std::vector<Arrival> advance();
  // Adds a pollfd per open handshake (POLLIN).
  void addPollFds(std::vector<pollfd>& fds) const;
  size_t open() const { return open_.size(); }

 private:
  struct Pending {
    Arrival a;
    size_t got = 0;  // bytes of hello, then notice header, then text
    int64_t deadlineNs = 0;
  };
  // Reads more into p; true once complete, throws nothing: a failure marks
  // it dead (returns false, sets dead).
  bool step(Pending& p, bool& dead);

  Refusals& refusals_;
  std::list<Pending> open_;
};

}  // namespace gyre::bootstrap
