// The communicator: rank, peers, transports, and the machinery every call
// shares: validation state, the waiting policy, failure detection (dead
// peers, aborts, timeouts) and its propagation to the other ranks.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "collectives/executor.h"
#include "collectives/plan.h"
#include "core/config.h"
#include "core/error.h"
#include "core/peer_liveness.h"
#include "gyre/gyre.h"

namespace gyre::transport {
class ShmTransport;
class TcpTransport;
}  // namespace gyre::transport

namespace gyre::core {

struct InitArgs {
  bootstrap::UniqueIdContents id;
  uint64_t round = 0;
  int rank = 0;
  int nranks = 1;
  Config config;
};

class Communicator final : public collectives::ExecContext {
 public:
  static std::unique_ptr<Communicator> create(const InitArgs& args);
  ~Communicator();

  int rank() const { return rank_; }
  int nranks() const { return nranks_; }
  const Config& config() const { return config_; }

  void allReduce(const void* sendbuff, void* recvbuff, size_t count, gyreDataType_t dtype,
                 gyreRedOp_t op);

  // From any thread: ends the blocked call (if any) with an error, tells the
  // peers, and waits until no call is inside the communicator.
  void abort();
  gyreResult_t asyncError() const { return failedCode_.load(); }

  // Throws Error(gyreInvalidUsage) if an earlier failure broke the communicator.
  void checkUsable() const;

  // ExecContext
  transport::Connection& connection(int peer) override;
  void waitUntil(transport::Connection& conn, Waiting what, FunctionRef<bool()> ready) override;

 private:
  Communicator() = default;
  void setUpTransports(Deadline deadline);
  void ensureConnected(const std::vector<int>& peers);
  void progressAll();
  // Throws if this rank was aborted, a peer reported a failure, or the peer
  // we wait on (-1: none) has died.
  void checkHealth(int awaitedPeer);
  // Records a failure that breaks the communicator and tells the peers;
  // returns the error to throw, its message naming the origin. failedPeer:
  // the peer whose connection broke, if known.
  Error fail(const Error& cause, int failedPeer = -1);
  std::string describeWait(const transport::Connection& conn, Waiting what) const;

  int rank_ = 0;
  int nranks_ = 1;
  Config config_;
  std::unique_ptr<bootstrap::Bootstrap> bootstrap_;
  std::unique_ptr<transport::ShmTransport> shm_;
  std::unique_ptr<transport::TcpTransport> tcp_;
  std::vector<transport::Connection*> connections_;  // by peer; null until made
  std::vector<bool> useShm_;                         // by peer
  PeerLiveness liveness_;
  collectives::Plan plan_;
  struct AlgoSetup {
    bool ready = false;
    size_t chunkBytes = 0;
  };
  AlgoSetup algoSetup_[2];  // by collectives::AllReduceAlgo

  // The current call, for error messages.
  const char* opName_ = "";
  uint64_t opSeq_ = 0;

  std::atomic<bool> abortRequested_{false};
  std::atomic<int> activeCalls_{0};
  std::atomic<gyreResult_t> failedCode_{gyreSuccess};
  mutable std::mutex failMu_;
  std::string failedMessage_;
  bool peersNotified_ = false;
  int64_t lastHealthCheckNs_ = 0;
  int64_t yieldNs_ = 0;  // after spinning, yield the core this long before sleeping

  friend class ActiveCall;
};

}  // namespace gyre::core
