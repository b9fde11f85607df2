// One peer over a reliable-connected queue pair (verbs_transport.h). The
// protocol (verbs_wire.h):
//
// - Eager, up to a slot's payload (8128 bytes by default): the sender
//   copies the message behind a 64-byte header into its own registered
//   slot and writes both into the peer's ring slot with one RDMA WRITE
//   WITH IMMEDIATE. The receiver checks size and tag against its caller's
//   and copies out (or lends the slot, in the buffer form).
// - Rendezvous, above: the sender registers its buffer and writes only the
//   header, with the buffer's address and rkey. The receiver checks it, then
//   RDMA READs the payload straight into its caller's (registered) memory
//   and answers with a FIN, which completes the send. A mismatched message
//   is never read: nothing lands in the receiver's memory.
// - Credits: the sender has as many messages in flight as the peer has ring
//   slots; the receiver hands released slots back in an immediate once half
//   the ring is free again (or at once when it reads ahead).
// - Read-ahead (progress(ReadAhead::All)), for a sender stuck on a peer
//   that is itself stuck sending: up to four of the next messages are taken
//   out of the ring into staging (rendezvous ones read into it), so their
//   slots and FINs go back; ReadAhead::Arrived takes the eager ones before
//   the first rendezvous.
//
// Every send and read is signalled; a completion with an error fails the
// connection (ibv_wc_status_str names it) and the queue pair goes to the
// error state, so nothing more lands in memory the caller may free. A peer
// on this host that exits is seen through the bootstrap's liveness watch; a
// remote one through the queue pair's retries running out.
#pragma once

#include <infiniband/verbs.h>

#include <deque>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/function_ref.h"
#include "transport/transport.h"
#include "transport/verbs/verbs_wire.h"

namespace gyre::transport {

class VerbsTransport;

struct MrDeleter {
  void operator()(ibv_mr* mr) const { ibv_dereg_mr(mr); }
};
using MrPtr = std::unique_ptr<ibv_mr, MrDeleter>;

class VerbsConnection final : public Connection {
 public:
  // Makes the queue pair (in INIT) and both rings; throws Error on failure.
  VerbsConnection(VerbsTransport& transport, int peer);
  ~VerbsConnection() override;

  // What the peer needs to reach this queue pair and ring.
  // k: which of its queue pairs (0: the one of messages and notices; the
  // others only read, GYRE_IB_QPS_PER_CONNECTION).
  verbs_wire::QpInfo localInfo(int k = 0) const;
  // Connects each queue pair to the peer's of the same index (remote[k])
  // and posts the receives; throws Error (saying which step) on failure.
  void bringUp(const std::vector<verbs_wire::QpInfo>& remote, const verbs_wire::PortAddress& port);
  std::vector<uint32_t> qpNumbers() const;  // every queue pair's, for completions
  // Work requests a queue pair that only reads may have outstanding (a read
  // of each message taken out of the ring, and room to spare).
  static constexpr uint32_t kReadQueueDepth = 8;
  // Creation's check that the peer is heard over this queue pair (a queue
  // pair toward an address that reaches nobody came up, and its packets
  // vanished without an error, under Soft-RoCE): a credit notice that says
  // nothing new. heard(): some notice or message of the peer's arrived.
  void sayHello();
  bool heard() const { return heard_; }
  // Where the peer's queue pair is, for messages ("GID ..." or "LID ...").
  const std::string& peerAddress() const { return peerAddress_; }
  const std::string& failure() const { return failure_; }
  // A completion of this queue pair's (VerbsTransport::poll).
  void onCompletion(const ibv_wc& wc);
  // Posts what is owed; true while signalled work is outstanding or notices
  // are owed: the end of a communicator waits for them, so the peer gets
  // its last messages.
  bool flushing();
  bool failed() const { return !failure_.empty(); }
  // Stops all I/O: the queue pair goes to the error state.
  void close(const std::string& why);

  Transport& transport() override;
  int peer() const override { return peer_; }
  size_t maxMessageBytes() const override;

  void* trySendBuffer(size_t bytes) override;
  void sendCommit(size_t bytes, const MessageTag& tag) override;
  bool trySendFrom(const void* src, size_t bytes, const MessageTag& tag) override;
  const void* tryRecvBuffer(size_t bytes, const MessageTag& tag) override;
  void recvRelease(size_t bytes) override;
  bool tryRecvInto(void* dst, size_t bytes, const MessageTag& tag) override;
  ProgressResult progress(ReadAhead readAhead) override;
  bool hasQueuedOutput() const;

  RemoteKey registerMemory(const void* p, size_t bytes, MemoryType type) override;
  void deregisterMemory(const RemoteKey& key) override;

 protected:
  void getImpl(void* dst, const RemoteKey& key, uint64_t address, size_t bytes) override;
  void putImpl(const RemoteKey& key, uint64_t address, const void* src, size_t bytes) override;

 private:
  using Header = verbs_wire::Header;
  // A message taken out of the ring and not yet handed to the caller:
  // a rendezvous being read (into the caller's memory or staging), or one
  // read ahead.
  struct Incoming {
    Header header{};
    std::unique_ptr<uint8_t[]> staging;
    uint8_t* data = nullptr;  // where its payload lands
    MrPtr mr;                 // data's registration while it is read
    bool intoCaller = false;  // data is the caller's dst (tryRecvInto)
    bool posted = false;      // its READ is posted
    bool ready = false;       // its payload is all there
    uint64_t id = 0;          // its read's number (in its pieces' work ids)
    size_t piecesLeft = 0;    // pieces of its read not yet complete
    bool needsFin = false;    // a rendezvous: the sender waits for a FIN
    bool finCounted = false;  // its FIN is owed or sent
  };
  // A rendezvous send waiting for its FIN.
  struct Rendezvous {
    bool active = false;
    uint64_t index = 0;  // among this connection's rendezvous sends
    MrPtr mr;
  };

  void take(const ibv_wc& wc);
  // Polls the transport's completions and posts what is owed.
  void step();
  void pump();
  [[noreturn]] void fail(const std::string& why, gyreResult_t code = gyreRemoteError);
  void throwIfFailed() const;
  // Nothing to take yet: fails (and throws) if it never can come, because
  // the connection broke or the peer exited; `arrived` says whether it came after all.
  void checkPeer(FunctionRef<bool()> arrived);
  ibv_qp* makeQp(uint32_t sendDepth, uint32_t recvDepth);
  void connectQp(ibv_qp* qp, const verbs_wire::QpInfo& remote, uint32_t psn,
                 const verbs_wire::PortAddress& port);
  // Posts on queue pair q (0: qp_, k: dataQps_[k - 1]).
  bool post(ibv_send_wr& wr, size_t q = 0);
  bool hasRoom(size_t q) const;
  // Posts a notice (an immediate into the peer's ring): a FIN or a credit.
  bool notify(verbs_wire::Notice n, uint64_t counter);

  // Sending.
  bool canSendMessage() const;
  uint8_t* sendSlot(uint64_t seq) const;
  void postMessage(size_t bytes, const MessageTag& tag, verbs_wire::Kind kind, uint64_t address,
                   uint32_t rkey);
  bool finished(Rendezvous& r);
  size_t eagerBytes() const { return slotBytes_ - sizeof(Header); }

  // Receiving.
  bool ringHasMessage() const { return arrived_ > released_; }
  const Header& ringHeader();  // validated: garbage fails the connection
  uint8_t* recvSlot(uint64_t seq) const;
  void releaseSlot();
  void check(const Header& h, size_t bytes, const MessageTag& tag, bool fromRing);
  Incoming takeRendezvous(const Header& h, uint8_t* into);
  MrPtr registerRange(const void* p, size_t bytes, int access, const char* what);
  void oneSided(ibv_wr_opcode op, void* local, uint64_t remote, uint32_t rkey, size_t bytes);

  VerbsTransport& transport_;
  int peer_;
  std::string peerName_;
  size_t slots_;
  size_t slotBytes_;
  uint32_t sendDepth_, recvDepth_;
  ibv_qp* qp_ = nullptr;
  uint32_t psn_ = 0;
  std::vector<ibv_qp*> dataQps_;  // the queue pairs that share the reads
  std::vector<uint32_t> dataPsns_, dataOutstanding_;
  uint64_t readsPosted_ = 0, readsSplit_ = 0;
  uint8_t* sendRing_ = nullptr;
  uint8_t* recvRing_ = nullptr;
  MrPtr sendRingMr_, recvRingMr_;
  verbs_wire::QpInfo remote_{};
  std::string peerAddress_;  // its port's GID or LID, as bringUp was given it
  bool heard_ = false;       // a receive of the peer's has completed
  std::string failure_;            // why the connection broke (empty: it did not)
  uint32_t sendsOutstanding_ = 0;  // signalled work requests not yet completed

  // Sending side.
  uint64_t sendSeq_ = 0;        // messages posted
  uint64_t peerReleased_ = 0;   // of them, slots the peer gave back
  std::vector<bool> slotBusy_;  // our slot's write is in flight
  uint64_t rendezvousPosted_ = 0, finsReceived_ = 0;
  Rendezvous direct_;  // trySendFrom's
  Rendezvous staged_;  // the buffer form's, from largeStaging_
  std::unique_ptr<uint8_t[]> largeStaging_;
  MrPtr largeStagingMr_;
  bool reservedLarge_ = false;  // trySendBuffer handed out largeStaging_

  // Receiving side.
  uint64_t arrived_ = 0;     // messages whose slot the peer wrote
  uint64_t released_ = 0;    // slots taken out of the ring
  uint64_t advertised_ = 0;  // released slots the peer has been told of
  bool creditNow_ = false;   // tell the peer at once (after a read-ahead)
  uint64_t finsOwed_ = 0, finsSent_ = 0;
  bool holdingSlot_ = false;    // tryRecvBuffer lent the ring's front slot
  std::deque<Incoming> queue_;  // messages taken out of the ring, oldest first

  // One-sided accesses and registrations.
  bool oneSidedDone_ = false;
  std::unordered_map<uint32_t, MrPtr> registrations_;  // by rkey
};

}  // namespace gyre::transport
