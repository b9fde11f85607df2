// One peer over TCP. Messages go out in order; each is cut into one part per
// lane (socket), every part preceded by a 40-byte header (size and tag). Output is either a
// staging buffer (trySendBuffer) or the caller's memory (trySendFrom); input
// lands straight in the caller's memory when it asked before the bytes came
// (tryRecvInto), otherwise in a staging buffer.
#pragma once

#include <poll.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "bootstrap/socket.h"
#include "transport/memory_copy.h"
#include "transport/tcp/tcp_wire.h"
#include "transport/transport.h"

namespace gyre::transport {

class TcpTransport;

class TcpConnection final : public Connection {
 public:
  TcpConnection(TcpTransport& transport, int peer, std::string peerName,
                std::vector<bootstrap::Socket> lanes, size_t chunkBytes, int stagingSlots,
                const MemoryCopy& memoryCopy, Capabilities caps);
  ~TcpConnection() override;

  Transport& transport() override;
  int peer() const override { return peer_; }
  size_t maxMessageBytes() const override { return chunkBytes_; }

  void* trySendBuffer(size_t bytes) override;
  void sendCommit(size_t bytes, const MessageTag& tag) override;
  bool trySendFrom(const void* src, size_t bytes, const MessageTag& tag) override;
  const void* tryRecvBuffer(size_t bytes, const MessageTag& tag) override;
  void recvRelease(size_t bytes) override;
  bool tryRecvInto(void* dst, size_t bytes, const MessageTag& tag) override;
  // Several runs of caller memory, each part's written or read with one
  // sendmsg or readv of its runs' slices (kGatherIO).
  bool trySendRunsFrom(std::span<const iovec> runs, size_t bytes, const MessageTag& tag) override;
  bool tryRecvRunsInto(std::span<const iovec> runs, size_t bytes, const MessageTag& tag) override;
  ProgressResult progress(ReadAhead readAhead) override;
  // Bytes in a lane's socket, or a message read ahead into staging.
  bool hasUnreadData() const override;

  // poll() interest: fills (fd, events) pairs for lanes with work.
  void pollInterest(std::vector<pollfd>& fds) const;
  bool hasQueuedOutput() const { return outHead_ != outTail_; }
  void shutdown();

 private:
  using PartHeader = tcp_wire::PartHeader;
  // A message in caller memory is one run (data, dst) or several (runs:
  // the caller's array, which it keeps until the message is done).
  struct OutMsg {
    const uint8_t* data = nullptr;
    size_t bytes = 0;
    int staging = -1;  // -1: caller memory
    MessageTag tag;
    const iovec* runs = nullptr;
    size_t nruns = 0;
  };
  struct InMsg {
    uint8_t* dst = nullptr;
    size_t bytes = 0;
    bool sizeKnown = false;  // asked for (size and tag expected) or announced by a header
    bool asked = false;      // the executor asked for it: a header must match
    int staging = -1;
    int lanesDone = 0;
    MessageTag tag;          // expected when asked, else as received
    const iovec* runs = nullptr;
    size_t nruns = 0;
  };
  struct LaneOut {
    uint64_t msg = 0;
    size_t done = 0;  // header + payload bytes written of the current part
    PartHeader header{};
  };
  struct LaneIn {
    uint64_t msg = 0;
    size_t done = 0;
    PartHeader header{};
  };

  void partRange(size_t total, int lane, size_t& offset, size_t& length) const;
  // Queues a send from caller memory (trySendFrom, trySendRunsFrom) and
  // moves it; true once the kernel has taken all of it.
  bool trySendDirect(const OutMsg& m);
  // Queues a receive into caller memory (tryRecvInto, tryRecvRunsInto) and
  // moves it; true once it has all arrived (copied out of staging if it
  // came before it was asked for).
  bool tryRecvDirect(const InMsg& m);
  bool pumpSend();
  bool pumpRecv();
  bool pumpLaneIn(int lane);
  void assignStaging(bool asked, size_t bytes, const MessageTag& tag);
  void claim(InMsg& m, size_t bytes, const MessageTag& tag);
  int takeStaging(std::vector<int>& freeList);

  TcpTransport& transport_;
  int peer_;
  std::string peerName_;
  std::vector<bootstrap::Socket> lanes_;
  size_t chunkBytes_;
  int queueSlots_;
  MemoryCopy copy_;

  // Output queue: messages [outHead_, outTail_) not fully written yet.
  std::vector<OutMsg> outQ_;
  uint64_t outHead_ = 0, outTail_ = 0;
  std::vector<LaneOut> laneOut_;
  std::vector<std::unique_ptr<uint8_t[]>> outStaging_;
  std::vector<int> outFree_;
  int reservedOut_ = -1;
  bool directSendActive_ = false;
  uint64_t directSendMsg_ = 0;

  // The peer closed between messages while only read-ahead was waiting.
  bool peerEnded_ = false;
  // Input: messages [inHead_, inTail_) have a destination; lanes fill them.
  std::vector<InMsg> inQ_;
  uint64_t inHead_ = 0, inTail_ = 0;
  std::vector<LaneIn> laneIn_;
  std::vector<std::unique_ptr<uint8_t[]>> inStaging_;
  std::vector<int> inFree_;
};

}  // namespace gyre::transport
