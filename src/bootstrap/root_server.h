// The rendezvous root: a thread that accepts ranks, checks their secret and
// arguments, and once a round is complete sends everyone the table of all
// ranks' blobs. gyreGetUniqueId runs a one-round root in the caller's process;
// gyrerun runs a persistent one serving successive rounds; init from a
// launcher's environment runs one in rank 0.
//
// A round that cannot complete is answered, never left to the ranks'
// timeouts: a rank that leaves it, ranks that disagree, and (shortly before
// each waiting rank's own timeout) the ranks that never arrived, are named to
// every rank of the round, and to any that arrives later.
//
// How much a hello is believed depends on the secret. A random secret
// (gyreGetUniqueId, gyrerun, GYRE_SECRET) is known only to the job: a hello
// that conflicts with the round is a real rank's mistake, and the round fails
// at once for everyone. A secret derived from public facts (torchrun, Slurm
// without GYRE_SECRET) can be guessed: then a conflicting or departing claim
// is refused or forgotten on its own, the round goes on, and what was refused
// is named only if the round times out.
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
    bool trustClaims = true;       // the secret is unguessable (see above)
    int expectNranks = 0;          // the job's size when known (0: the first hello's)
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
  // Stops (and waits for) kept roots lingering at this address's port: a
  // failed round's root stays there until a new init needs the address.
  static void releaseAddress(const SockAddr& address);

 private:
  explicit RootServer(const Options& options);
  void run();

  Options options_;
  SockAddr advertise_;
  Socket listener_;
  int wakePipe_[2] = {-1, -1};
  std::thread thread_;
  std::atomic<bool> finished_{false};
  std::atomic<bool> lingering_{false};  // its round failed; it stays to tell latecomers
  pid_t ownerPid_;
};

}  // namespace gyre::bootstrap
