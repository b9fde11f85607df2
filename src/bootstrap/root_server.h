// The rendezvous root: a thread that accepts ranks, checks their secret and
// arguments, and once a round is complete sends everyone the table of all
// ranks' blobs. gyreGetUniqueId runs a one-round root in the caller's process;
// gyrerun runs a persistent one serving successive rounds.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <thread>

#include "bootstrap/socket.h"
#include "bootstrap/unique_id.h"

namespace gyre::bootstrap {

class RootServer {
 public:
  struct Options {
    SockAddr bind;       // where to listen (port 0: any free port)
    SockAddr advertise;  // the address put in ids (port filled in)
    Secret secret{};
    bool persistent = false;       // serve rounds until stopped, else one round
    int64_t lifetimeMs = 0;        // a one-round root gives up after this (0: never)
    uint64_t expectRound = ~0ull;  // one-round roots: the only round accepted
  };

  static std::shared_ptr<RootServer> start(const Options& options);
  ~RootServer();
  RootServer(const RootServer&) = delete;
  RootServer& operator=(const RootServer&) = delete;

  const SockAddr& address() const { return advertise_; }
  const Secret& secret() const { return options_.secret; }
  bool finished() const { return finished_.load(); }
  void stop();

  // gyreGetUniqueId's roots live in a process-wide list until they finish;
  // a forked child closes its copies of their listeners.
  static void keepAlive(std::shared_ptr<RootServer> root);

 private:
  explicit RootServer(const Options& options);
  void run();

  Options options_;
  SockAddr advertise_;
  Socket listener_;
  int wakePipe_[2] = {-1, -1};
  std::thread thread_;
  std::atomic<bool> finished_{false};
  pid_t ownerPid_;
};

}  // namespace gyre::bootstrap
