#include "transport/ucx/ucx_connection.h"

#include <cstdlib>
#include <cstring>
#include <utility>

#include "base/clock.h"
#include "base/error.h"
#include "transport/ucx/ucx_transport.h"
#include "transport/ucx/ucx_wires.h"

namespace gyre::transport {

namespace {

// UCP tags: the sender's rank above its sequence number toward this peer,
// a bit that marks the payload of a message sent in two parts, and one that
// marks a small message sent without the header's size (its own length
// says it): 64 B with the 24-byte tag is 88 B, within UCX's 93 B short
// protocol over its shared memory, where the whole 32-byte header made it
// 96 B and an eager copy. A receive matches the first part of a message
// either way (kFirstPartMask) and learns which from the tag it got.
constexpr int kSeqBits = 44;
constexpr uint64_t kPayloadBit = uint64_t{1} << (kSeqBits - 1);
constexpr uint64_t kCompactBit = uint64_t{1} << (kSeqBits - 2);
constexpr uint64_t kSeqMask = kCompactBit - 1;
constexpr uint64_t kFullMask = ~uint64_t{0};
constexpr uint64_t kFirstPartMask = ~kCompactBit;
// The top bit marks a registered range's packed rkey (ucx_memory.cc), whose
// tag carries the key's id where a message's carries its sequence number;
// ranks stay below it (UcxTransport::kMaxRanks).
constexpr uint64_t kKeyBit = uint64_t{1} << 63;
static_assert(UcxTransport::kMaxRanks == uint64_t{1} << (63 - kSeqBits));
// Up to this size the payload is copied in behind the header (Send::packed).
constexpr size_t kPackedBytes = 256 - 32;
// Messages a stuck sender's connection reads ahead (as TCP's staging).
constexpr size_t kReadAhead = 4;
// throwIfPeerGone: how often it looks, and how long a peer seen gone may
// still deliver.
constexpr int64_t kDeathLookNs = 1'000'000;
constexpr int64_t kDeathGraceNs = 250'000'000;

void onError(void* arg, ucp_ep_h, ucs_status_t status) { static_cast<UcxConnection*>(arg)->failed(status); }

}  // namespace

UcxConnection::UcxConnection(UcxTransport& transport, int peer, std::string peerName, const void* address)
    : Connection(transport.capabilities()),
      transport_(transport),
      peer_(peer),
      peerName_(std::move(peerName)),
      ep_(nullptr),
      staged_(static_cast<size_t>(transport.options().stagingSlots)) {
  for (size_t i = 0; i < staged_.size(); ++i)
    sendStaging_.emplace_back(new (std::align_val_t(64)) uint8_t[transport.options().maxMessageBytes]);
  ucp_ep_params_t p{};
  p.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                 UCP_EP_PARAM_FIELD_ERR_HANDLER;
  p.address = static_cast<const ucp_address_t*>(address);
  if (transport.peerErrors()) {
    p.err_mode = UCP_ERR_HANDLING_MODE_PEER;
    p.err_handler.cb = onError;
    p.err_handler.arg = this;
  } else {
    // No handler: UCX reports nothing on this endpoint, and its requests
    // end when it is closed by force. The bootstrap's watch of the peer
    // says when it has gone (throwIfPeerGone).
    p.field_mask &= ~(UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER);
  }
  if (ucs_status_t s = ucp_ep_create(transport.worker(), &p, &ep_); s != UCS_OK) {
    // Unreachable at creation is this side's UCX setup, not the peer: no
    // transport UCX may use reaches it (with peer failure handling, none
    // that reports a dead peer: UCX 1.13's shared-memory transports cannot),
    // e.g. UCX_TLS without tcp.
    if (s == UCS_ERR_UNREACHABLE) {
      std::string settings;
      for (const char* name : {"UCX_TLS", "UCX_NET_DEVICES"})
        if (const char* v = std::getenv(name)) settings += (settings.empty() ? "" : ", ") + std::string(name) + "=" + v;
      if (settings.empty()) settings = "UCX's defaults";
      if (transport.peerErrors())
        throw ConnectionError(gyreSystemError, peer_,
                              "ucx: no UCX transport reaches " + peerName_ + " and reports a dead peer (" + settings +
                                  ", GYRE_UCX_ERROR_MODE peer): UCX's shared-memory transports cannot; let UCX_TLS "
                                  "and UCX_NET_DEVICES allow tcp or an RDMA device, set GYRE_UCX_ERROR_MODE=none, or "
                                  "use GYRE_TRANSPORT=shm within a host");
      throw ConnectionError(gyreSystemError, peer_,
                            "ucx: no UCX transport reaches " + peerName_ + " (" + settings +
                                "): let UCX_TLS and UCX_NET_DEVICES allow one that does");
    }
    // Over UCX's shared memory a peer whose worker is gone cannot be
    // reached at all ("Shared memory error"): say what that means.
    if (transport.peerExited(peer_))
      throw ConnectionError(gyreRemoteError, peer_, "ucx: " + peerName_ + " exited before a connection to it was made");
    throwStatus(s, "connect to");
  }
}

UcxConnection::~UcxConnection() { close(); }

Transport& UcxConnection::transport() { return transport_; }
size_t UcxConnection::maxMessageBytes() const { return transport_.options().maxMessageBytes; }

void UcxConnection::throwStatus(ucs_status_t s, const char* what) const {
  throw ConnectionError(s == UCS_ERR_ENDPOINT_TIMEOUT || s == UCS_ERR_CONNECTION_RESET || s == UCS_ERR_UNREACHABLE ||
                                s == UCS_ERR_CANCELED || s == UCS_ERR_IO_ERROR
                            ? gyreRemoteError
                            : gyreSystemError,
                        peer_, std::string("ucx: ") + what + " " + peerName_ + ": " + ucs_status_string(s));
}

void UcxConnection::throwIfFailed() const {
  if (failure_ != UCS_OK) throwStatus(failure_, "the connection to");
  if (!ep_) throw ConnectionError(gyreRemoteError, peer_, "ucx: the connection to " + peerName_ + " is closed");
}

// Without UCX's error handling on the endpoint, the bootstrap's watch of the
// peer (its process on this host, a connection on another) says that it
// has gone, looked at every kDeathLookNs while a receive or a send waits.
// Believed once kDeathGraceNs have passed with nothing more from the peer:
// what it sent before it exited may still be on its way in (a peer that
// finished its calls and left is no failure). Where the watch waited out a
// grace before it said so (a peer on another host), that one counts: the
// next look believes it unless a message has come whole since.
void UcxConnection::throwIfPeerGone() {
  throwIfFailed();
  if (transport_.peerErrors()) return;
  const int64_t now = coarseNowNs();  // every failed look of a waiting receive or send reads it
  if (goneSinceNs_ < 0) {
    if (now - lastDeathLookNs_ < kDeathLookNs) return;
    lastDeathLookNs_ = now;
    if (!transport_.peerExited(peer_)) return;
    goneSinceNs_ = transport_.peerExitHasGrace(peer_) ? now - kDeathGraceNs : now;
  }
  if (now - goneSinceNs_ < kDeathGraceNs) return;
  throw ConnectionError(gyreRemoteError, peer_, "ucx: " + peerName_ + " exited");
}

uint64_t UcxConnection::tagFor(int sender, uint64_t seq) const {
  return (static_cast<uint64_t>(sender) << kSeqBits) | (seq & kSeqMask);
}

uint64_t UcxConnection::keyTag(int sender, uint64_t id) const { return kKeyBit | tagFor(sender, id); }

void UcxConnection::post(Send& s, const void* data, size_t bytes, const MessageTag& tag) {
  const uint64_t utag = tagFor(transport_.rank(), sendSeq_++);
  // Up to onePartBytes a message is one UCP message, header and payload in
  // one iov (eager: it lands whole or is probed whole). Larger ones go as
  // the header alone, then the payload in place (UCX's rendezvous reads it
  // straight from the sender's buffer into the receiver's). The receiver
  // tells them apart by the first part's length, so ranks whose thresholds
  // differ still understand each other.
  const bool onePart = bytes <= transport_.options().onePartBytes;
  void* r;
  if (bytes <= kPackedBytes) {
    // Small: header and payload packed into one contiguous buffer, so UCX
    // sends it inline (its short protocol takes contiguous data only; an iov
    // went by zero-copy, a request to complete later).
    // The size is left out (kCompactBit): the message's length says it.
    std::memcpy(s.packed, &tag, sizeof(MessageTag));
    if (bytes) std::memcpy(s.packed + sizeof(MessageTag), data, bytes);
    ucp_request_param_t c{};
    r = ucp_tag_send_nbx(ep_, s.packed, sizeof(MessageTag) + bytes, utag | kCompactBit, &c);
  } else {
    s.header = Header{bytes, tag};
    s.iov[0] = ucp_dt_iov_t{&s.header, sizeof(Header)};
    s.iov[1] = ucp_dt_iov_t{const_cast<void*>(data), bytes};
    ucp_request_param_t p{};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_DATATYPE;
    p.datatype = ucp_dt_make_iov();
    r = ucp_tag_send_nbx(ep_, s.iov, onePart && bytes ? 2 : 1, utag, &p);
  }
  if (UCS_PTR_IS_ERR(r)) throwStatus(UCS_PTR_STATUS(r), "send to");
  s.request = r;  // null: complete already
  s.payload = nullptr;
  if (!onePart) {
    ucp_request_param_t q{};
    void* pr = ucp_tag_send_nbx(ep_, data, bytes, utag | kPayloadBit, &q);
    if (UCS_PTR_IS_ERR(pr)) throwStatus(UCS_PTR_STATUS(pr), "send to");
    s.payload = pr;
  }
  s.busy = true;
  ++busySends_;
}

ucs_status_t UcxConnection::settle(void*& request) {
  if (!request) return UCS_OK;
  const ucs_status_t st = ucp_request_check_status(request);
  if (st == UCS_INPROGRESS) return st;
  ucp_request_free(request);
  request = nullptr;
  return st;
}

bool UcxConnection::finished(Send& s) {
  if (!s.busy) return true;
  for (void** req : {&s.request, &s.payload}) {
    const ucs_status_t st = settle(*req);
    if (st == UCS_INPROGRESS) return false;
    if (st != UCS_OK) {
      s.busy = false;
      --busySends_;
      throwStatus(st, "send to");
    }
  }
  s.busy = false;
  --busySends_;
  return true;
}

void* UcxConnection::trySendBuffer(size_t bytes) {
  throwIfFailed();
  if (bytes > maxMessageBytes())
    throwError(gyreInternalError, "ucx: a " + std::to_string(bytes) + "-byte message is over the largest");
  if (reserved_ >= 0) return sendStaging_[static_cast<size_t>(reserved_)].get();
  for (size_t i = 0; i < staged_.size(); ++i)
    if (finished(staged_[i])) {
      reserved_ = static_cast<int>(i);
      return sendStaging_[i].get();
    }
  throwIfPeerGone();  // every slot holds a send a dead peer will never take
  return nullptr;
}

void UcxConnection::sendCommit(size_t bytes, const MessageTag& tag) {
  const size_t i = static_cast<size_t>(reserved_);
  reserved_ = -1;
  post(staged_[i], sendStaging_[i].get(), bytes, tag);
}

bool UcxConnection::trySendFrom(const void* src, size_t bytes, const MessageTag& tag) {
  throwIfFailed();
  if (!direct_.busy) post(direct_, src, bytes, tag);
  if (finished(direct_)) return true;
  throwIfPeerGone();  // a rendezvous a dead peer will never take
  return false;
}

// Receiving a message: arrival (probe the next sequence number's first
// part, which says its length), then placement (its header and payload into
// the caller's buffer, or into a staging buffer of its own when it is read
// ahead or received in the buffer form), then the check (size and tag
// against the caller's). Messages are received in order: queue_[i] is
// recvSeq_ + i.
bool UcxConnection::arrive(Recv& r, uint64_t seq) {
  if (r.posted) return true;
  ucp_tag_recv_info_t info{};
  r.message = ucp_tag_probe_nb(transport_.worker(), tagFor(peer_, seq), kFirstPartMask, 1, &info);
  if (!r.message) return false;
  r.posted = true;
  r.seq = seq;
  noteFirstPart(r, info);
  return true;
}

// What a message's first part says of it once its length and tag are
// known: compact (small, its size left out), a header alone (its payload
// comes as a second part), or a header and its payload.
void UcxConnection::noteFirstPart(Recv& r, const ucp_tag_recv_info_t& info) {
  r.length = info.length;
  r.compact = (info.sender_tag & kCompactBit) != 0;
  r.twoPart = !r.compact && r.length == sizeof(Header);
}

// The header of a message from its first bytes: a compact message's tag,
// its size the rest of its length; any other's whole header.
UcxConnection::Header UcxConnection::headerOf(const void* first, size_t length, bool compact) {
  Header h{};
  if (compact) {
    std::memcpy(h.tag.words, first, sizeof h.tag.words);
    h.bytes = length - sizeof(MessageTag);
  } else {
    std::memcpy(static_cast<void*>(&h), first, sizeof h);
  }
  return h;
}

// Posts the receive of message seq's second part (its payload) into dst.
void UcxConnection::postPayload(Recv& r, uint64_t seq, void* dst, size_t bytes) {
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
  void* q = ucp_tag_recv_nbx(transport_.worker(), dst, bytes, tagFor(peer_, seq) | kPayloadBit, kFullMask, &p);
  if (UCS_PTR_IS_ERR(q)) throwStatus(UCS_PTR_STATUS(q), "receive from");
  r.payload = q;
}

// The caller waits for a two-part message of a size it knows (the plan
// says it) that has not come yet: its payload's receive is posted into the
// caller's buffer now, so that UCX matches the payload as it lands instead
// of holding it as unexpected until the header has been probed and received
// (or of the read-ahead taking it into staging, a copy more).
void UcxConnection::postPayloadEarly(Recv& r, void* dst, size_t bytes) {
  postPayload(r, recvSeq_, dst, bytes);
  r.early = true;
  r.dst = dst;
  r.room = bytes;
}

// The caller waits for a message of a size it knows (the plan says it),
// which its sender puts in one UCP message: the receive is posted into the
// caller's buffer now, so that UCX copies the message from the socket
// straight there as it lands. Unposted, it lands in a buffer of UCX's as
// unexpected and is copied again when received (a 4-rank AllToAll of
// 16 MiB spent 17% of its time in those copies). A longer message goes on
// into the overflow past the buffer, whole, and is refused by check(); a
// header alone (a sender that sends this size in two parts) is followed by
// its payload as after a probe.
void UcxConnection::postWhole(Recv& r, void* dst, size_t bytes) {
  r.iov[0] = ucp_dt_iov_t{&r.header, sizeof(Header)};
  r.iov[1] = ucp_dt_iov_t{dst, bytes};
  r.iov[2] = ucp_dt_iov_t{transport_.overflow(), ucx_wires::kTcpOnePartBytes};
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_DATATYPE | UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
  p.datatype = ucp_dt_make_iov();
  void* q = ucp_tag_recv_nbx(transport_.worker(), r.iov, 3, tagFor(peer_, recvSeq_), kFirstPartMask, &p);
  if (UCS_PTR_IS_ERR(q)) throwStatus(UCS_PTR_STATUS(q), "receive from");
  r.request = q;
  r.whole = r.posted = r.placed = true;
  r.seq = recvSeq_;
  r.dst = dst;
  r.room = bytes;
}

// The first part's request: its status, released once it has ended. A
// receive posted whole learns the first part's length only then.
ucs_status_t UcxConnection::settleFirstPart(Recv& r) {
  if (!r.whole) return settle(r.request);
  ucp_tag_recv_info_t info{};
  const ucs_status_t st = ucp_tag_recv_request_test(r.request, &info);
  if (st == UCS_INPROGRESS) return st;
  ucp_request_free(r.request);
  r.request = nullptr;
  noteFirstPart(r, info);
  // A small message, where this rank expected a larger one (the ranks
  // disagree, and check() says so): its tag landed where the header's size
  // and tag go, shifted by the size the message does not carry.
  if (r.compact && st == UCS_OK) r.header = headerOf(&r.header, r.length, true);
  return st;
}

void UcxConnection::place(Recv& r, void* dst, size_t room) {
  if (r.early) {  // the payload goes where it was posted, also when read ahead
    dst = r.dst;
    room = r.room;
  }
  if (!dst && r.compact && r.length <= sizeof r.small) {
    // A small message taken into a buffer of its own (tryRecvBuffer, or
    // read ahead) stays where it lands, in the Recv's buffer (below): no
    // staging buffer taken from the pool and no copy into it.
    dst = r.small + sizeof(MessageTag);
    room = sizeof r.small - sizeof(MessageTag);
  } else if (!dst) {
    // A buffer of the pool: a fresh one per message cost a page fault per
    // 4 KiB of every message read ahead (AllReduce 1.4-1.8x slower at
    // 4-64 MiB, 2 ranks).
    if (freeStaging_.empty()) {
      r.staging.reset(new uint8_t[maxMessageBytes()]);
    } else {
      r.staging = std::move(freeStaging_.back());
      freeStaging_.pop_back();
    }
    dst = r.staging.get();
    room = maxMessageBytes();
  }
  // A compact message is the tag and its payload (the size is its length's
  // rest); any other, the whole header, then its payload or nothing (a
  // header alone: the payload comes as a second part).
  const size_t head = r.compact ? sizeof(MessageTag) : sizeof(Header);
  const size_t inline_ = r.length - std::min(r.length, head);
  r.dst = dst;
  r.room = room;
  if (r.compact) r.header.bytes = inline_;
  if (r.compact && r.length <= sizeof r.small) {
    // A small message is received whole into the Recv and copied out
    // (firstPartDone): UCX's scatter into a tag-and-payload iov cost more
    // instructions than the message has bytes. Immediate completion
    // allowed: one that came whole (eager, the common small case) is copied
    // out here and needs no request of UCX's.
    ucp_request_param_t c{};
    void* q = ucp_tag_msg_recv_nbx(transport_.worker(), r.small, r.length, r.message, &c);
    if (UCS_PTR_IS_ERR(q)) throwStatus(UCS_PTR_STATUS(q), "receive from");
    r.request = q;
    r.placed = r.inSmall = true;
    if (!q) firstPartDone(r);
    return;
  }
  // Immediate completion allowed, as for a small one.
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_DATATYPE;
  p.datatype = ucp_dt_make_iov();
  int parts = inline_ ? 2 : 1;
  r.iov[0] = r.compact ? ucp_dt_iov_t{&r.header.tag, sizeof(MessageTag)} : ucp_dt_iov_t{&r.header, sizeof(Header)};
  r.iov[1] = ucp_dt_iov_t{dst, inline_};
  if (inline_ > room) {
    // A one-part message longer than the room is received whole aside (its
    // header then names it); never past the end of dst.
    r.aside.resize(r.length);
    r.iov[0] = ucp_dt_iov_t{r.aside.data(), r.length};
    parts = 1;
  }
  void* q = ucp_tag_msg_recv_nbx(transport_.worker(), r.iov, parts, r.message, &p);
  if (UCS_PTR_IS_ERR(q)) throwStatus(UCS_PTR_STATUS(q), "receive from");
  r.request = q;
  r.placed = true;
  if (!q) firstPartDone(r);  // it came whole: copied out already
}

// The first part has been received: a message received aside names
// itself from there; a header alone names its payload, whose receive is
// posted into place (unless it was posted early, or the message is empty
// or does not fit: check() says so).
void UcxConnection::firstPartDone(Recv& r) {
  if (r.inSmall) {  // tag and payload, from the Recv's own buffer
    std::memcpy(r.header.tag.words, r.small, sizeof r.header.tag.words);
    if (r.header.bytes <= r.room) {
      const uint8_t* payload = r.small + sizeof(MessageTag);
      if (r.header.bytes && r.dst != payload) std::memcpy(r.dst, payload, r.header.bytes);
    } else {
      r.aside.assign(r.small, r.small + r.length);  // longer than the room: check() refuses it
    }
    return;
  }
  if (!r.aside.empty()) r.header = headerOf(r.aside.data(), r.length, r.compact);
  if (!r.early && r.twoPart && r.aside.empty() && r.header.bytes > 0 && r.header.bytes <= r.room)
    postPayload(r, r.seq, r.dst, r.header.bytes);
}

// Moves a placed message on: its header, then (two parts) its payload into
// place once the header says it fits. True when it has all arrived.
bool UcxConnection::advance(Recv& r) {
  if (r.request) {
    const ucs_status_t st = settleFirstPart(r);
    if (st == UCS_INPROGRESS) return false;
    if (st != UCS_OK) throwStatus(st, "receive from");
    firstPartDone(r);
  }
  // A payload posted early that will not come as posted is not waited for:
  // the header names another size (the ranks disagree: check() says so),
  // or the message came whole in one part (a sender whose one-part
  // threshold is higher). Its receive is cancelled.
  if (r.early && !r.request && (r.header.bytes != r.room || !r.aside.empty() || !r.twoPart)) {
    dropPayload(r);
    return true;
  }
  const ucs_status_t st = settle(r.payload);
  if (st == UCS_INPROGRESS) return false;
  if (st != UCS_OK) throwStatus(st, "receive from");
  return true;
}

UcxConnection::Recv& UcxConnection::front() {
  if (queue_.empty()) queue_.push_back(freshRecv());
  return *queue_.front();
}

// A message's state from the spares (one a message from the heap was a
// malloc and a free of every small call's time).
std::unique_ptr<UcxConnection::Recv> UcxConnection::freshRecv() {
  if (spareRecvs_.empty()) return std::make_unique<Recv>();
  std::unique_ptr<Recv> r = std::move(spareRecvs_.back());
  spareRecvs_.pop_back();
  return r;
}

void UcxConnection::retire(std::unique_ptr<Recv> r) {
  if (r->staging && freeStaging_.size() <= kReadAhead) freeStaging_.push_back(std::move(r->staging));
  if (spareRecvs_.size() > kReadAhead) return;
  r->reset();
  spareRecvs_.push_back(std::move(r));
}

void UcxConnection::pop() {
  ++recvSeq_;
  // The usual case, nothing read ahead: the message's state becomes the
  // next one's where it is (retired to the spares, popped, and taken back
  // by front() it was ~70 instructions of every small receive).
  if (queue_.size() == 1 && !queue_.front()->staging) {
    queue_.front()->reset();
    return;
  }
  retire(std::move(queue_.front()));
  queue_.pop_front();
}

// Nothing may land in the message's buffer any more: its payload's receive,
// if one is still posted, is cancelled and released when the cancel ends it.
void UcxConnection::dropPayload(Recv& r) {
  if (!r.payload) return;
  ucp_request_cancel(transport_.worker(), r.payload);
  ucp_request_free(r.payload);
  r.payload = nullptr;
}

// The arrived message against what the caller expects: a mismatch consumes
// it (the pair is broken anyway) and says what came.
void UcxConnection::check(Recv& r, size_t bytes, const MessageTag& tag) {
  if (r.header.bytes == bytes && r.header.tag == tag && r.aside.empty()) return;
  const Header h = r.header;
  dropPayload(r);
  pop();
  throw MessageMismatch(peer_, h.tag, h.bytes, tag, bytes);
}

// The next message, into dst (null: its own staging): true once it has all
// arrived and is what the caller expects. A peer that sent its last
// message and left: what arrived before it left is still received; only a
// message that cannot come any more is an error.
bool UcxConnection::receive(Recv& r, void* dst, size_t bytes, const MessageTag& tag) {
  // Not here yet: let UCX read its sockets first, as a socket transport's
  // receive would (waiting for a small message 1.1-1.2x faster than
  // leaving it to the waiter's progress call every few looks).
  bool looked = false;
  if (ep_ && !r.posted) {
    if (dst && !r.early) {
      if (bytes > transport_.options().onePartBytes)
        postPayloadEarly(r, dst, bytes);
      else if (bytes > kPackedBytes)
        postWhole(r, dst, bytes);
    }
    transport_.progressWorker();
    looked = true;
  }
  if (!ep_ || !arrive(r, recvSeq_)) {
    throwIfPeerGone();
    return false;
  }
  if (!r.placed) place(r, dst, bytes);
  // A receive under way (posted before its message came, or its fragments
  // still coming) moves only in a look at the worker: one here, where none
  // was made, instead of waiting for the waiter's progress round (with
  // ranks on cores of their own it comes every eighth look at ready(): a
  // 2-rank AllToAll of 32 KiB over UCX's shared memory waited ~1 us a call).
  bool whole = advance(r);
  if (!whole && !looked && ep_) {
    transport_.progressWorker();
    whole = advance(r);
  }
  if (!whole) {
    throwIfPeerGone();
    return false;
  }
  // It came whole: a peer seen gone gets its grace again for the next. (Not
  // on arrival: a receive posted before its message came has "arrived" at
  // once, and a grace begun anew at each look never ended.)
  goneSinceNs_ = -1;
  check(r, bytes, tag);
  return true;
}

const void* UcxConnection::tryRecvBuffer(size_t bytes, const MessageTag& tag) {
  Recv& r = front();
  if (r.done) return r.dst;  // idempotent until release
  if (!receive(r, nullptr, bytes, tag)) return nullptr;
  r.done = true;
  return r.dst;
}

void UcxConnection::recvRelease(size_t) { pop(); }

bool UcxConnection::tryRecvInto(void* dst, size_t bytes, const MessageTag& tag) {
  Recv& r = front();
  if (!receive(r, dst, bytes, tag)) return false;
  if (r.dst != dst && bytes) std::memcpy(dst, r.dst, bytes);  // it came early, into staging
  pop();
  return true;
}

ProgressResult UcxConnection::progress(ReadAhead readAhead) {
  ProgressResult res;
  // The worker is looked at once per round of the connections' progress
  // (or by a receive since): a look for each connection was an epoll_wait
  // each (4 ranks on 2 CPUs, 8 B-4 KiB AllReduce 3-5% faster with one).
  if (lastLook_ == transport_.workerLooks()) transport_.progressWorker();
  lastLook_ = transport_.workerLooks();
  // Moved: the worker took something in or on since this connection last
  // said, also in a look a receive made in between (the waiter's ready()
  // looks first, so this look alone mostly finds nothing new even while a
  // message's fragments are coming in).
  res.moved = transport_.workerEvents() != lastEvents_;
  lastEvents_ = transport_.workerEvents();
  if (!retired_.empty() || !draining_.empty()) sweep();
  // A rendezvous holds a message at its sender until we post its receive:
  // when some send of ours is stuck, take the next ones into staging, so
  // that ranks each waiting on their own sends cannot stall each other.
  // Only for ReadAhead::All: an eager message lies in UCX's own buffers
  // without holding up its sender, and a rendezvous taken early lands in
  // staging where the plan's posted receive has it land in place (a 4-rank
  // AllToAll of 16-64 MiB over UCX's tcp spent 1.3-1.4x the time reading
  // ahead).
  if (readAhead == ReadAhead::All && ep_ && failure_ == UCS_OK) {
    for (size_t i = 0; i < kReadAhead; ++i) {
      if (queue_.size() <= i) queue_.push_back(freshRecv());
      Recv& r = *queue_[i];
      if (r.done) continue;
      if (!arrive(r, recvSeq_ + i)) {
        if (i + 1 == queue_.size() && i > 0) {  // keep the queue to what arrived
          retire(std::move(queue_.back()));
          queue_.pop_back();
        }
        break;
      }
      if (!r.placed) place(r, nullptr, 0);
      advance(r);
    }
  }
  // Staged sends that have completed are settled here, so that sendBlocked
  // says whether output is still under way (a staged send's flag was
  // otherwise cleared only when its buffer was next wanted, and a rank done
  // with its own calls could not tell that a rendezvous still needs it).
  if (busySends_) {
    for (Send& s : staged_) finished(s);
  }
  res.sendBlocked = hasQueuedOutput();
  return res;
}

// Whether the next message has come (or a receive posted for it waits, whose
// wait looks at the peer itself: throwIfPeerGone), so that a peer that sent
// it and left is not taken for one that died with it unsent.
bool UcxConnection::hasUnreadData() const {
  if (!ep_) return false;
  if (!queue_.empty() && queue_.front()->posted) return true;
  ucp_tag_recv_info_t info{};
  return ucp_tag_probe_nb(transport_.worker(), tagFor(peer_, recvSeq_), kFirstPartMask, 0, &info) != nullptr;
}

bool UcxConnection::hasQueuedOutput() const { return busySends_ > 0; }

bool UcxConnection::sendsInFlight() noexcept {
  bool any = false;
  try {
    any |= !finished(direct_);
    for (Send& s : staged_) any |= !finished(s);
  } catch (const Error&) {
    return false;  // it failed: nothing more will complete
  }
  return any;
}

void UcxConnection::close(bool force) {
  if (!ep_) return;
  ucp_worker_h w = transport_.worker();
  releaseMemory();  // unpacked rkeys go before their endpoint
  std::vector<void*> pending;
  for (auto& r : queue_)
    for (void** req : {&r->request, &r->payload})
      if (*req) {
        ucp_request_cancel(w, *req);
        pending.push_back(*req);
        *req = nullptr;
      }
  ucp_request_param_t p{};
  if (force || failure_ != UCS_OK) {
    p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    p.flags = UCP_EP_CLOSE_FLAG_FORCE;
  }
  void* r = ucp_ep_close_nbx(ep_, &p);
  ep_ = nullptr;
  if (UCS_PTR_IS_PTR(r)) pending.push_back(r);
  // The close ends the sends in flight.
  auto ended = [&](Send& s) {
    for (void** req : {&s.request, &s.payload})
      if (*req) pending.push_back(std::exchange(*req, nullptr));
    s.busy = false;
  };
  ended(direct_);
  for (Send& s : staged_) ended(s);
  busySends_ = 0;
  // A receive a peer's rendezvous is already filling is not cancelled at
  // once: UCX may still write into its buffer. Nothing it may touch is
  // freed before its request has ended (a bounded wait; past it, the
  // buffers live until the worker is gone).
  auto open = [&] {
    for (void* q : pending)
      if (ucp_request_check_status(q) == UCS_INPROGRESS) return true;
    return false;
  };
  const Deadline d = Deadline::afterMs(2000);
  while (open() && !d.expired()) ucp_worker_progress(w);
  const bool stuck = open();
  for (void* q : pending) ucp_request_free(q);  // one still open is released when it ends
  if (stuck) {
    for (auto& x : queue_)
      if (x->staging) transport_.deferFree([b = x->staging.release()] { delete[] b; });
    for (auto& x : sendStaging_)
      transport_.deferFree([b = x.release()] { AlignedDelete{}(b); });
  }
  queue_.clear();
}

}  // namespace gyre::transport
