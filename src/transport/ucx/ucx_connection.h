// One peer over UCX (ucx_transport.h): the try forms over tagged sends and
// receives, each message a 32-byte header and its payload in one iov (a
// small one its 24-byte tag and payload in one piece).
#pragma once

#include <ucp/api/ucp.h>

#include <deque>
#include <memory>
#include <new>
#include <string>
#include <unordered_map>
#include <vector>

#include "transport/memory_copy.h"
#include "transport/transport.h"

namespace gyre::transport {

class UcxTransport;

class UcxConnection final : public Connection {
 public:
  // Makes the endpoint to the worker at `address` (no handshake).
  UcxConnection(UcxTransport& transport, int peer, std::string peerName, const void* address);
  ~UcxConnection() override;

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

  // The memory layer (ucx_memory.cc): a registration maps the range with
  // UCX and sends its packed rkey to the peer in a message of its own; the
  // key names that message, which the peer takes on its first access.
  RemoteKey registerMemory(const void* p, size_t bytes, MemoryType type) override;
  void deregisterMemory(const RemoteKey& key) override;
  void releaseRemoteKey(const RemoteKey& key) noexcept override;

  bool hasUnreadData() const override;
  bool hasQueuedOutput() const;
  // Releases the sends that completed; true while some are still in flight.
  // Never throws (a failed send is the failure the next call reports).
  bool sendsInFlight() noexcept;
  // Closes the endpoint: flushing what is in flight first (the end of a
  // communicator), or at once (after a failure, force).
  void close(bool force = true);
  // UCX's error handler: the peer is gone or the wire broke.
  void failed(ucs_status_t status) { failure_ = status; }

 protected:
  void getImpl(void* dst, const RemoteKey& key, uint64_t address, size_t bytes) override;
  void putImpl(const RemoteKey& key, uint64_t address, const void* src, size_t bytes) override;

 private:
  // A range of ours mapped for the peer, and its packed rkey's message.
  struct Registration {
    ucp_mem_h memory = nullptr;
    void* packed = nullptr;  // what ucp_rkey_pack made; lives until its send ends
    void* send = nullptr;
  };
  // A key the peer sent: its rkey's message on its way, then unpacked.
  struct Remote {
    std::vector<uint8_t> packed;
    void* request = nullptr;
    ucp_rkey_h rkey = nullptr;
  };
  static bool namesRegistration(const RemoteKey& key);
  // Posts the receive of key's packed rkey into r; the request, or UCX's error.
  void* receiveKey(Remote& r, const RemoteKey& key);
  ucp_rkey_h rkeyFor(const RemoteKey& key);
  // Waits, bounded, for a request of a one-sided access or of a key.
  void waitFor(void*& request, const std::string& what);
  // Frees the retired registrations and drained keys whose messages ended.
  void sweep() noexcept;
  // At close: every registration and key, whatever state it is in.
  void releaseMemory() noexcept;
  struct Header {
    uint64_t bytes;
    MessageTag tag;
  };
  // A send in flight: its header and iov must live until UCX is done.
  struct Send {
    void* request = nullptr;  // the header (with the payload, up to the one-part size)
    void* payload = nullptr;  // the payload of a larger message
    Header header{};
    ucp_dt_iov_t iov[2]{};
    int staging = -1;  // the staging slot it sends from (-1: caller memory)
    uint8_t packed[256];  // a small message: header and payload in one piece
    bool busy = false;
  };
  struct Recv {
    ucp_tag_message_h message = nullptr;  // arrived (probed), not yet received
    uint64_t seq = 0;
    size_t length = 0;     // of its first part
    bool posted = false;   // it has arrived
    bool placed = false;   // its receive is posted, into dst
    bool twoPart = false;  // its payload may come as a second UCP message
    bool done = false;     // buffer form: complete, until recvRelease
    bool early = false;    // its payload's receive was posted into dst before it came
    bool whole = false;    // its receive was posted into dst before it came (one part)
    bool compact = false;  // small, sent without the header's size (its length says it)
    bool inSmall = false;  // received whole into small, copied out when it ended
    void* request = nullptr;  // the first part's receive
    void* payload = nullptr;  // the second part's
    Header header{};
    ucp_dt_iov_t iov[3]{};
    void* dst = nullptr;
    size_t room = 0;
    std::unique_ptr<uint8_t[]> staging;  // when read ahead or in the buffer form
    std::vector<uint8_t> aside;          // a one-part message longer than the room
    // A compact message, whole (tag and payload); its payload is read in
    // place by a receive without a buffer of its own, so it is aligned for
    // any element type (8 bytes: after the 24-byte tag).
    alignas(8) uint8_t small[256];

    // For a spare's next message: every field above but the scratch ones
    // (iov, small), which each message sets before use. (Assigning a fresh
    // Recv zeroed and copied the scratch too: a small message's receive
    // spent more instructions there than on the copy the buffer saved.)
    void reset() {
      message = nullptr;
      seq = 0;
      length = 0;
      posted = placed = twoPart = done = early = whole = compact = inSmall = false;
      request = payload = nullptr;
      header = Header{};
      dst = nullptr;
      room = 0;
      staging.reset();
      aside.clear();
    }
  };

  void throwIfFailed() const;
  // Without UCX's error handling: throws once the bootstrap has seen the
  // peer's process gone for a grace in which nothing more came from it.
  void throwIfPeerGone();
  [[noreturn]] void throwStatus(ucs_status_t s, const char* what) const;
  uint64_t tagFor(int sender, uint64_t seq) const;
  uint64_t keyTag(int sender, uint64_t id) const;  // a registration's packed rkey
  // Posts a send of header + [data, + bytes) into slot s.
  void post(Send& s, const void* data, size_t bytes, const MessageTag& tag);
  // True once s completed (its request is released then).
  bool finished(Send& s);
  // A request's status; once it has ended (anything but UCS_INPROGRESS) it
  // is released and set to null. A null request has ended well.
  static ucs_status_t settle(void*& request);
  // The receive of a message, in steps (ucx_connection.cc).
  bool arrive(Recv& r, uint64_t seq);
  static void noteFirstPart(Recv& r, const ucp_tag_recv_info_t& info);
  static Header headerOf(const void* first, size_t length, bool compact);
  void place(Recv& r, void* dst, size_t room);  // dst null: its own staging
  void firstPartDone(Recv& r);
  void postPayload(Recv& r, uint64_t seq, void* dst, size_t bytes);
  void postPayloadEarly(Recv& r, void* dst, size_t bytes);
  void postWhole(Recv& r, void* dst, size_t bytes);
  ucs_status_t settleFirstPart(Recv& r);
  void dropPayload(Recv& r);
  bool advance(Recv& r);
  void check(Recv& r, size_t bytes, const MessageTag& tag);
  bool receive(Recv& r, void* dst, size_t bytes, const MessageTag& tag);
  Recv& front();  // the next message's (made on first use)
  void pop();
  std::unique_ptr<Recv> freshRecv();
  void retire(std::unique_ptr<Recv> r);  // back to the spares, its staging to the pool

  UcxTransport& transport_;
  int peer_;
  std::string peerName_;
  ucp_ep_h ep_;
  ucs_status_t failure_ = UCS_OK;
  int64_t lastDeathLookNs_ = 0;  // throwIfPeerGone's last look at the bootstrap's watch
  int64_t goneSinceNs_ = -1;     // when it first saw the peer gone (-1: not yet)
  uint64_t sendSeq_ = 0, recvSeq_ = 0;
  uint64_t lastLook_ = ~uint64_t{0};  // the transport's workerLooks() after this connection's progress()
  uint64_t lastEvents_ = 0;           // and its workerEvents()
  Send direct_;               // a caller-memory send (trySendFrom), resumed
  std::vector<Send> staged_;  // buffer-form sends, one per staging slot
  // Sends posted and not yet seen finished (direct_'s and staged_'s): every
  // progress round asked each slot (a cache line or two apiece, cold after
  // the core's other rank ran) whether it was busy.
  int busySends_ = 0;
  // Memory from aligned new[] goes back through aligned delete[], also when
  // the constructor throws (no destructor then).
  struct AlignedDelete {
    void operator()(uint8_t* p) const { ::operator delete[](p, std::align_val_t(64)); }
  };
  std::vector<std::unique_ptr<uint8_t[], AlignedDelete>> sendStaging_;
  int reserved_ = -1;  // the slot trySendBuffer handed out
  std::deque<std::unique_ptr<Recv>> queue_;  // queue_[i]: message recvSeq_ + i
  std::vector<std::unique_ptr<Recv>> spareRecvs_;
  std::vector<std::unique_ptr<uint8_t[]>> freeStaging_;  // receive staging, for reuse
  uint64_t nextKeyId_ = 0;
  std::unordered_map<uint64_t, Registration> registrations_;  // by key id
  std::unordered_map<uint64_t, Remote> remotes_;               // the peer's keys, by its key id
  std::vector<Registration> retired_;  // deregistered while its rkey's send was still in flight
  std::vector<Remote> draining_;       // released before its rkey came: received, then dropped
};

}  // namespace gyre::transport
