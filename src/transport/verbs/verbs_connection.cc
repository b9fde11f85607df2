#include "transport/verbs/verbs_connection.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <random>

#include "base/clock.h"
#include "base/error.h"
#include "base/log.h"
#include "transport/verbs/verbs_transport.h"
#include "transport/verbs/verbs_work.h"

namespace gyre::transport {

namespace {

using namespace verbs_wire;
using namespace verbs_work;

// Messages read ahead at most (as the TCP and UCX transports).
constexpr size_t kReadAhead = 4;
// The queue pair's ack timeout, 4.096 us * 2^17 = 0.5 s, tried 7 times:
// generous, because under emulation (Soft-RoCE in a TCG guest) an ack can
// take a while; a dead remote peer is named after about 4 s.
constexpr uint8_t kAckTimeout = 17;
static_assert(VerbsConnection::kReadQueueDepth > kReadAhead, "a read of each message taken out of the ring");
// A rendezvous read is split across the queue pairs in pieces of at least this.
constexpr size_t kMinPieceBytes = 64 << 10;

uint8_t* alignedRing(size_t bytes) {
  void* p = nullptr;
  if (posix_memalign(&p, 4096, bytes) != 0)
    throwError(gyreSystemError, "verbs: out of memory for a ring");
  std::memset(p, 0, bytes);
  return static_cast<uint8_t*>(p);
}

}  // namespace

VerbsConnection::VerbsConnection(VerbsTransport& transport, int peer)
    : Connection(transport.capabilities()),
      transport_(transport),
      peer_(peer),
      peerName_(transport.describePeer(peer)),
      slots_(static_cast<size_t>(transport.options().slots)),
      slotBytes_(transport.options().slotBytes),
      slotBusy_(slots_, false) {
  // Room for every slot's write, the reads of a read-ahead and the
  // caller's, a one-sided access and the notices; receives for every
  // message and notice the peer may have in flight.
  sendDepth_ = static_cast<uint32_t>(slots_ + kReadAhead + 16);
  recvDepth_ = static_cast<uint32_t>(2 * slots_ + 16);
  sendRing_ = alignedRing(slots_ * slotBytes_);
  recvRing_ = alignedRing(slots_ * slotBytes_);
  sendRingMr_ = registerRange(sendRing_, slots_ * slotBytes_, 0, "its send slots");
  recvRingMr_ = registerRange(recvRing_, slots_ * slotBytes_,
                              IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, "its receive ring");
  qp_ = makeQp(sendDepth_, recvDepth_);
  psn_ = std::random_device{}() & 0xffffff;
  // The queue pairs that share the reads (GYRE_IB_QPS_PER_CONNECTION): one
  // read of each message in flight per queue pair at most, nothing received.
  try {
    for (int i = 1; i < transport.options().qpsPerPeer; ++i) {
      dataQps_.push_back(makeQp(kReadQueueDepth, 1));
      dataPsns_.push_back(std::random_device{}() & 0xffffff);
      dataOutstanding_.push_back(0);
    }
  } catch (const Error&) {
    // No destructor runs for a constructor that throws: what is not a
    // member that frees itself goes here.
    for (ibv_qp* q : dataQps_) ibv_destroy_qp(q);
    ibv_destroy_qp(qp_);
    sendRingMr_.reset();
    recvRingMr_.reset();
    std::free(sendRing_);
    std::free(recvRing_);
    throw;
  }
}

ibv_qp* VerbsConnection::makeQp(uint32_t sendDepth, uint32_t recvDepth) {
  const VerbsDevice& dev = transport_.device();
  ibv_qp_init_attr a{};
  a.send_cq = transport_.cq();
  a.recv_cq = transport_.cq();
  a.qp_type = IBV_QPT_RC;
  a.cap.max_send_wr = sendDepth;
  a.cap.max_recv_wr = recvDepth;
  a.cap.max_send_sge = 1;
  a.cap.max_recv_sge = 1;
  ibv_qp* qp = ibv_create_qp(dev.pd(), &a);
  if (!qp)
    throwError(gyreSystemError, "ibv_create_qp failed: " + std::string(std::strerror(errno)));
  ibv_qp_attr q{};
  q.qp_state = IBV_QPS_INIT;
  q.pkey_index = 0;
  q.port_num = static_cast<uint8_t>(dev.port());
  q.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  if (int e = ibv_modify_qp(qp, &q,
                            IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)) {
    ibv_destroy_qp(qp);
    throwError(gyreSystemError,
               "the queue pair would not go to INIT: " + std::string(std::strerror(e)));
  }
  return qp;
}

VerbsConnection::~VerbsConnection() {
  if (!dataQps_.empty())
    GYRE_INFO("verbs: to %s, %llu of %llu reads split across %zu queue pairs", peerName_.c_str(),
              static_cast<unsigned long long>(readsSplit_), static_cast<unsigned long long>(readsPosted_),
              dataQps_.size() + 1);
  queue_.clear();  // their registrations go before the queue pairs
  for (ibv_qp* q : dataQps_) ibv_destroy_qp(q);
  if (qp_) ibv_destroy_qp(qp_);
  direct_.mr.reset();
  staged_.mr.reset();
  largeStagingMr_.reset();
  sendRingMr_.reset();
  recvRingMr_.reset();
  registrations_.clear();
  std::free(sendRing_);
  std::free(recvRing_);
}

QpInfo VerbsConnection::localInfo(int k) const {
  QpInfo i;
  if (k > 0) {  // a queue pair of the reads: no ring
    i.qpn = dataQps_[static_cast<size_t>(k - 1)]->qp_num;
    i.psn = dataPsns_[static_cast<size_t>(k - 1)];
    return i;
  }
  i.qpn = qp_->qp_num;
  i.psn = psn_;
  i.ringAddress = reinterpret_cast<uint64_t>(recvRing_);
  i.ringRkey = recvRingMr_->rkey;
  return i;
}

std::vector<uint32_t> VerbsConnection::qpNumbers() const {
  std::vector<uint32_t> n{qp_->qp_num};
  for (ibv_qp* q : dataQps_) n.push_back(q->qp_num);
  return n;
}

void VerbsConnection::bringUp(const std::vector<QpInfo>& remote, const PortAddress& port) {
  remote_ = remote[0];
  const ibv_gid g = [&] {
    ibv_gid x;
    std::memcpy(x.raw, port.gid, 16);
    return x;
  }();
  peerAddress_ = port.ethernet ? "GID " + gidText(g) : "LID " + std::to_string(port.lid);
  connectQp(qp_, remote[0], psn_, port);
  for (size_t i = 0; i < dataQps_.size(); ++i) connectQp(dataQps_[i], remote[i + 1], dataPsns_[i], port);
  for (uint32_t i = 0; i < recvDepth_; ++i) {
    ibv_recv_wr wr{}, *bad = nullptr;
    wr.wr_id = workId(kRecvWork);
    if (int e = ibv_post_recv(qp_, &wr, &bad))
      throwError(gyreSystemError, "ibv_post_recv failed: " + std::string(std::strerror(e)));
  }
}

void VerbsConnection::connectQp(ibv_qp* qp, const QpInfo& remote, uint32_t psn, const PortAddress& port) {
  const VerbsDevice& dev = transport_.device();
  ibv_qp_attr q{};
  q.qp_state = IBV_QPS_RTR;
  q.path_mtu = std::min(dev.mtu(), static_cast<ibv_mtu>(port.mtu));
  q.dest_qp_num = remote.qpn;
  q.rq_psn = remote.psn;
  q.max_dest_rd_atomic = static_cast<uint8_t>(dev.maxReadsInFlight());
  q.min_rnr_timer = 12;  // 0.64 ms before a sender retries a receive-not-ready
  q.ah_attr.port_num = static_cast<uint8_t>(dev.port());
  q.ah_attr.dlid = port.lid;
  if (dev.ethernet() || port.ethernet) {
    q.ah_attr.is_global = 1;
    std::memcpy(q.ah_attr.grh.dgid.raw, port.gid, 16);
    q.ah_attr.grh.sgid_index = static_cast<uint8_t>(dev.gidIndex());
    q.ah_attr.grh.hop_limit = 255;
  }
  if (int e = ibv_modify_qp(qp, &q,
                            IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                                IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
    throwError(gyreSystemError,
               "its queue pair would not connect to " + peerName_ + " at " + peerAddress_ +
                   " (ready-to-receive: " + std::strerror(e) + "; is that address reachable from " +
                   dev.describe() + "? GYRE_IB_GID_INDEX picks another GID)");
  ibv_qp_attr r{};
  r.qp_state = IBV_QPS_RTS;
  r.timeout = kAckTimeout;
  r.retry_cnt = 7;
  r.rnr_retry = 7;  // receive-not-ready: retry without limit (the peer reposts as it polls)
  r.sq_psn = psn;
  r.max_rd_atomic = static_cast<uint8_t>(dev.maxReadsInFlight());
  if (int e = ibv_modify_qp(qp, &r,
                            IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                                IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
    throwError(gyreSystemError, "its queue pair to " + peerName_ +
                                    " would not go to ready-to-send: " + std::strerror(e));
}

Transport& VerbsConnection::transport() { return transport_; }
size_t VerbsConnection::maxMessageBytes() const { return transport_.options().maxMessageBytes; }

// --- failures ---

void VerbsConnection::close(const std::string& why) {
  if (failure_.empty()) failure_ = why;
  if (!qp_) return;
  ibv_qp_attr q{};
  q.qp_state = IBV_QPS_ERR;
  ibv_modify_qp(qp_, &q, IBV_QP_STATE);  // flushes what is posted: nothing more lands in memory
  for (ibv_qp* d : dataQps_) ibv_modify_qp(d, &q, IBV_QP_STATE);
}

void VerbsConnection::fail(const std::string& why, gyreResult_t code) {
  close(why);
  throw ConnectionError(code, peer_,
                        "verbs: the connection to " + peerName_ + " failed: " + failure_);
}

void VerbsConnection::throwIfFailed() const {
  if (!failure_.empty())
    throw ConnectionError(gyreRemoteError, peer_,
                          "verbs: the connection to " + peerName_ + " failed: " + failure_);
}

void VerbsConnection::checkPeer(FunctionRef<bool()> arrived) {
  throwIfFailed();
  if (!transport_.peerExited(peer_)) return;
  // What it sent before it exited has been acknowledged, so its completion
  // is here by now: look once more.
  transport_.poll();
  if (!arrived()) fail(peerName_ + " exited");
}

// --- completions ---

// What a completion owes (a FIN after a read, a credit, a receive's
// repost) goes out at once, whichever connection's call polled it: the
// peer may be waiting on it while this rank waits on someone else.
void VerbsConnection::onCompletion(const ibv_wc& wc) {
  take(wc);
  pump();
}

void VerbsConnection::take(const ibv_wc& wc) {
  const WorkKind kind = workKind(wc.wr_id);
  if (kind != kRecvWork) {
    if (wc.qp_num == qp_->qp_num) {
      if (sendsOutstanding_ > 0) --sendsOutstanding_;
    } else {
      for (size_t i = 0; i < dataQps_.size(); ++i)
        if (dataQps_[i]->qp_num == wc.qp_num && dataOutstanding_[i] > 0) --dataOutstanding_[i];
    }
  }
  if (wc.status != IBV_WC_SUCCESS) {
    // The first error names the failure; the flushes after it do not.
    if (failure_.empty() || wc.status != IBV_WC_WR_FLUSH_ERR) {
      static const char* const what[] = {"",         "a receive",         "a message",
                                         "a notice", "a rendezvous read", "a one-sided access"};
      std::string s = std::string(what[kind <= kOneSided ? static_cast<size_t>(kind) : 0]) +
                      " completed with " + ibv_wc_status_str(wc.status);
      if (wc.status == IBV_WC_RETRY_EXC_ERR)
        s += " (the peer did not answer: gone, or its address unreachable)";
      if (failure_.empty()) close(s);
    }
    if (kind == kOneSided) oneSidedDone_ = true;
    return;
  }
  switch (kind) {
    case kRecvWork: {
      heard_ = true;
      const uint32_t imm = ntohl(wc.imm_data);
      const DecodedNotice d =
          decodeNotice(imm, {arrived_, peerReleased_, sendSeq_, finsReceived_, rendezvousPosted_});
      if (d.what == DecodedNotice::kNextMessage) {
        ++arrived_;
      } else if (d.what == DecodedNotice::kReleased) {
        peerReleased_ = d.counter;
      } else if (d.what == DecodedNotice::kNextFin) {
        ++finsReceived_;
      } else {
        close("garbage from the peer: an unexpected notice 0x" + [&] {
          char b[16];
          std::snprintf(b, sizeof b, "%08x", imm);
          return std::string(b);
        }());
        return;
      }
      ibv_recv_wr wr{}, *bad = nullptr;
      wr.wr_id = workId(kRecvWork);
      if (int e = ibv_post_recv(qp_, &wr, &bad))
        close(std::string("ibv_post_recv failed: ") + std::strerror(e));
      break;
    }
    case kSlotWrite:
      slotBusy_[workIndex(wc.wr_id)] = false;
      break;
    case kRendezvousRead:
      for (Incoming& in : queue_)
        if (in.posted && !in.ready && in.id == workIndex(wc.wr_id)) {
          if (--in.piecesLeft == 0) {
            in.ready = true;
            in.mr.reset();
          }
          break;
        }
      // FINs go in message order (the sender frees its buffers by their
      // count): one for each read that has all arrived, up to the first
      // that has not. Pieces on different queue pairs end in any order.
      for (Incoming& in : queue_) {
        if (!in.needsFin || in.finCounted) continue;
        if (!in.ready) break;
        in.finCounted = true;
        ++finsOwed_;
      }
      break;
    case kOneSided:
      oneSidedDone_ = true;
      break;
    default:
      break;
  }
}

bool VerbsConnection::post(ibv_send_wr& wr, size_t q) {
  ibv_send_wr* bad = nullptr;
  wr.send_flags |= IBV_SEND_SIGNALED;
  if (int e = ibv_post_send(q == 0 ? qp_ : dataQps_[q - 1], &wr, &bad)) {
    close(std::string("ibv_post_send failed: ") + std::strerror(e));
    return false;
  }
  ++(q == 0 ? sendsOutstanding_ : dataOutstanding_[q - 1]);
  return true;
}

bool VerbsConnection::hasRoom(size_t q) const {
  return q == 0 ? sendsOutstanding_ < sendDepth_ : dataOutstanding_[q - 1] < kReadQueueDepth;
}

// Posts what is owed, as room in the send queue allows: the reads of
// messages taken out of the ring, FINs, and credits.
void VerbsConnection::pump() {
  if (!failure_.empty()) return;
  for (Incoming& in : queue_) {
    if (in.posted || in.ready) continue;  // read already, or eager
    // One piece per queue pair, none under kMinPieceBytes.
    const size_t bytes = in.header.bytes;
    const size_t pieces = std::max<size_t>(1, std::min(1 + dataQps_.size(), bytes / kMinPieceBytes));
    for (size_t q = 0; q < pieces; ++q)
      if (!hasRoom(q)) return;
    in.id = readsPosted_++;
    readsSplit_ += pieces > 1;
    in.piecesLeft = pieces;
    in.posted = true;
    const size_t each = (bytes / pieces + 63) & ~size_t{63};
    for (size_t q = 0, at = 0; q < pieces; ++q, at += each) {
      const size_t len = q + 1 == pieces ? bytes - at : each;
      ibv_sge sge{reinterpret_cast<uint64_t>(in.data + at), static_cast<uint32_t>(len), in.mr->lkey};
      ibv_send_wr wr{};
      wr.wr_id = workId(kRendezvousRead, in.id);
      wr.sg_list = &sge;
      wr.num_sge = 1;
      wr.opcode = IBV_WR_RDMA_READ;
      wr.wr.rdma.remote_addr = in.header.address + at;
      wr.wr.rdma.rkey = in.header.rkey;
      if (!post(wr, q)) return;
    }
  }
  while (finsOwed_ > 0 && sendsOutstanding_ < sendDepth_) {
    if (!notify(kFin, finsSent_)) return;
    ++finsSent_;
    --finsOwed_;
  }
  if (released_ > advertised_ && (creditNow_ || released_ - advertised_ >= slots_ / 2) &&
      sendsOutstanding_ < sendDepth_) {
    if (!notify(kCredit, released_)) return;
    advertised_ = released_;
    creditNow_ = false;
  }
}

bool VerbsConnection::notify(Notice n, uint64_t counter) {
  ibv_send_wr wr{};
  wr.wr_id = workId(kNoticeWrite);
  wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
  wr.imm_data = htonl(notice(n, counter));
  wr.wr.rdma.remote_addr = remote_.ringAddress;
  wr.wr.rdma.rkey = remote_.ringRkey;
  return post(wr);
}

// A credit for no slot: the peer's count of our released slots stays at 0.
void VerbsConnection::sayHello() { notify(kCredit, 0); }

void VerbsConnection::step() {
  transport_.poll();
  pump();
}

bool VerbsConnection::flushing() {
  pump();
  bool reading = false;
  for (uint32_t n : dataOutstanding_) reading |= n > 0;
  return failure_.empty() && (sendsOutstanding_ > 0 || reading || finsOwed_ > 0 ||
                              (released_ > advertised_ && creditNow_));
}

bool VerbsConnection::hasQueuedOutput() const {
  return failure_.empty() && (direct_.active || staged_.active || finsOwed_ > 0);
}

// --- sending ---

uint8_t* VerbsConnection::sendSlot(uint64_t seq) const {
  return sendRing_ + (seq % slots_) * slotBytes_;
}
uint8_t* VerbsConnection::recvSlot(uint64_t seq) const {
  return recvRing_ + (seq % slots_) * slotBytes_;
}

bool VerbsConnection::canSendMessage() const {
  return sendSeq_ - peerReleased_ < slots_ && !slotBusy_[sendSeq_ % slots_] &&
         sendsOutstanding_ < sendDepth_;
}

void VerbsConnection::postMessage(size_t bytes, const MessageTag& tag, Kind kind, uint64_t address,
                                  uint32_t rkey) {
  const size_t slot = sendSeq_ % slots_;
  uint8_t* s = sendSlot(sendSeq_);
  Header h{};
  h.bytes = bytes;
  h.tag = tag;
  h.address = address;
  h.rkey = rkey;
  h.kind = kind;
  h.seq = sendSeq_;
  std::memcpy(s, &h, sizeof h);
  ibv_sge sge{reinterpret_cast<uint64_t>(s),
              static_cast<uint32_t>(sizeof h + (kind == kEager ? bytes : 0)), sendRingMr_->lkey};
  ibv_send_wr wr{};
  wr.wr_id = workId(kSlotWrite, slot);
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
  wr.imm_data = htonl(notice(kMessage, sendSeq_));
  wr.wr.rdma.remote_addr = remote_.ringAddress + slot * slotBytes_;
  wr.wr.rdma.rkey = remote_.ringRkey;
  if (!post(wr)) throwIfFailed();
  slotBusy_[slot] = true;
  ++sendSeq_;
}

bool VerbsConnection::finished(Rendezvous& r) {
  if (!r.active || finsReceived_ <= r.index) return !r.active;
  r.active = false;
  if (&r == &direct_) r.mr.reset();
  return true;
}

void* VerbsConnection::trySendBuffer(size_t bytes) {
  step();
  throwIfFailed();
  if (bytes > maxMessageBytes())
    throwError(gyreInternalError,
               "verbs: a " + std::to_string(bytes) + "-byte message is over the largest");
  if (bytes <= eagerBytes()) {
    if (canSendMessage()) return sendSlot(sendSeq_) + sizeof(Header);
  } else if (finished(staged_) && canSendMessage()) {
    if (!largeStaging_) {
      largeStaging_.reset(new uint8_t[maxMessageBytes()]);
      largeStagingMr_ = registerRange(largeStaging_.get(), maxMessageBytes(),
                                      IBV_ACCESS_REMOTE_READ, "a staging buffer");
    }
    reservedLarge_ = true;
    return largeStaging_.get();
  }
  checkPeer([&] { return canSendMessage(); });
  return nullptr;
}

void VerbsConnection::sendCommit(size_t bytes, const MessageTag& tag) {
  if (!reservedLarge_) {
    postMessage(bytes, tag, kEager, 0, 0);
    return;
  }
  reservedLarge_ = false;
  staged_.active = true;
  staged_.index = rendezvousPosted_++;
  postMessage(bytes, tag, kRendezvous, reinterpret_cast<uint64_t>(largeStaging_.get()),
              largeStagingMr_->rkey);
}

bool VerbsConnection::trySendFrom(const void* src, size_t bytes, const MessageTag& tag) {
  step();
  throwIfFailed();
  if (direct_.active) {
    if (finished(direct_)) return true;
    checkPeer([&] { return finsReceived_ > direct_.index; });
    return false;
  }
  if (!canSendMessage()) {
    checkPeer([&] { return canSendMessage(); });
    return false;
  }
  if (bytes <= eagerBytes()) {
    if (bytes)
      transport_.options().memoryCopy.copy(sendSlot(sendSeq_) + sizeof(Header), src, bytes, false);
    postMessage(bytes, tag, kEager, 0, 0);
    return true;
  }
  if (bytes > maxMessageBytes())
    throwError(gyreInternalError,
               "verbs: a " + std::to_string(bytes) + "-byte message is over the largest");
  direct_.mr = registerRange(src, bytes, IBV_ACCESS_REMOTE_READ, "a message's buffer");
  direct_.active = true;
  direct_.index = rendezvousPosted_++;
  postMessage(bytes, tag, kRendezvous, reinterpret_cast<uint64_t>(src), direct_.mr->rkey);
  return false;
}

// --- receiving ---

const Header& VerbsConnection::ringHeader() {
  const auto& h = *reinterpret_cast<const Header*>(recvSlot(released_));
  if (!ringHeaderValid(h, released_, eagerBytes()))
    fail("garbage from the peer: message " + std::to_string(released_) + "'s header says message " +
         std::to_string(h.seq) + ", kind " + std::to_string(h.kind) + ", " +
         std::to_string(h.bytes) + " bytes");
  return h;
}

void VerbsConnection::releaseSlot() {
  ++released_;
  pump();
}

// The message against what the caller expects: a mismatch consumes it (the
// pair is broken anyway), answering a rendezvous unread so its sender is
// not left waiting, and says what came.
void VerbsConnection::check(const Header& h, size_t bytes, const MessageTag& tag, bool fromRing) {
  if (h.bytes == bytes && h.tag == tag) return;
  const Header got = h;
  if (fromRing) {
    if (got.kind == kRendezvous) ++finsOwed_;
    releaseSlot();
  } else {
    queue_.pop_front();
  }
  pump();
  throw MessageMismatch(peer_, got.tag, got.bytes, tag, bytes);
}

VerbsConnection::Incoming VerbsConnection::takeRendezvous(const Header& h, uint8_t* into) {
  Incoming in;
  in.header = h;
  if (!into) {
    in.staging.reset(new uint8_t[h.bytes]);
    into = in.staging.get();
  }
  in.data = into;
  in.mr = registerRange(into, h.bytes, IBV_ACCESS_LOCAL_WRITE, "a receive buffer");
  in.needsFin = true;
  return in;
}

bool VerbsConnection::tryRecvInto(void* dst, size_t bytes, const MessageTag& tag) {
  step();
  if (queue_.empty()) {
    if (!ringHasMessage()) {
      checkPeer([&] { return ringHasMessage(); });
      return false;
    }
    const Header& h = ringHeader();
    check(h, bytes, tag, true);
    if (h.kind == kEager) {
      if (bytes)
        transport_.options().memoryCopy.copy(dst, recvSlot(released_) + sizeof(Header), bytes,
                                             false);
      releaseSlot();
      return true;
    }
    Incoming in = takeRendezvous(h, static_cast<uint8_t*>(dst));
    in.intoCaller = true;
    queue_.push_back(std::move(in));
    releaseSlot();  // posts the read, too
  }
  Incoming& f = queue_.front();
  if (!f.ready) {
    checkPeer([&] { return f.ready; });
    return false;
  }
  if (!f.intoCaller) {
    check(f.header, bytes, tag, false);
    if (bytes) transport_.options().memoryCopy.copy(dst, f.data, bytes, false);
  }
  queue_.pop_front();
  return true;
}

const void* VerbsConnection::tryRecvBuffer(size_t bytes, const MessageTag& tag) {
  step();
  if (holdingSlot_) return recvSlot(released_) + sizeof(Header);
  if (queue_.empty()) {
    if (!ringHasMessage()) {
      checkPeer([&] { return ringHasMessage(); });
      return nullptr;
    }
    const Header& h = ringHeader();
    check(h, bytes, tag, true);
    if (h.kind == kEager) {
      holdingSlot_ = true;
      return recvSlot(released_) + sizeof(Header);
    }
    queue_.push_back(takeRendezvous(h, nullptr));
    releaseSlot();
  }
  Incoming& f = queue_.front();
  if (!f.ready) {
    checkPeer([&] { return f.ready; });
    return nullptr;
  }
  check(f.header, bytes, tag, false);
  return f.data;
}

void VerbsConnection::recvRelease(size_t) {
  if (holdingSlot_) {
    holdingSlot_ = false;
    releaseSlot();
  } else {
    queue_.pop_front();
  }
}

ProgressResult VerbsConnection::progress(ReadAhead readAhead) {
  ProgressResult res;
  res.moved = transport_.poll();
  if (readAhead != ReadAhead::None && failure_.empty() && !holdingSlot_) {
    bool took = false;
    while (queue_.size() < kReadAhead && ringHasMessage()) {
      const Header& h = ringHeader();
      if (h.kind == kEager) {
        Incoming in;
        in.header = h;
        in.staging.reset(new uint8_t[h.bytes ? h.bytes : 1]);
        in.data = in.staging.get();
        if (h.bytes) std::memcpy(in.data, recvSlot(released_) + sizeof(Header), h.bytes);
        in.ready = true;
        in.posted = true;  // nothing to read
        queue_.push_back(std::move(in));
      } else {
        // A rendezvous waits at its sender until its read is posted: only
        // All takes it, into staging (in order: nothing after it either).
        if (readAhead != ReadAhead::All) break;
        if (h.bytes > maxMessageBytes()) break;  // not ours to stage: the caller's check names it
        queue_.push_back(takeRendezvous(h, nullptr));
      }
      ++released_;
      took = true;
    }
    if (took) {
      creditNow_ = true;
      res.moved = true;
    }
  }
  pump();
  // A staged send whose FIN has come is settled here, so that sendBlocked
  // says whether output is still under way: its flag was otherwise cleared
  // only when the staging buffer was next wanted, and a rank done with its
  // own sends could not tell that nothing of its is still in flight. (A
  // direct send is settled by the caller's next trySendFrom, which must see
  // it finish: it is not touched here.)
  finished(staged_);
  res.sendBlocked = hasQueuedOutput();
  return res;
}

}  // namespace gyre::transport
