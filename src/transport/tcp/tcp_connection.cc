#include "transport/tcp/tcp_connection.h"

#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <cerrno>
#include <cstring>

#include "base/error.h"
#include "transport/tcp/tcp_transport.h"

namespace gyre::transport {

namespace {

using tcp_wire::kPartMagic;

// One non-blocking vectored write or read. Returns bytes moved, 0 on EAGAIN;
// throws when the peer is gone, except that a read given `ended` reports the
// peer's orderly close there (and returns 0) instead.
size_t vectoredIo(int fd, bool writing, iovec* iov, int n, int peerRank, const std::string& peer,
                  bool* ended = nullptr) {
  for (;;) {
    ssize_t r;
    if (writing) {
      msghdr m{};
      m.msg_iov = iov;
      m.msg_iovlen = static_cast<size_t>(n);
      r = ::sendmsg(fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
    } else {
      r = ::readv(fd, iov, n);
    }
    if (r > 0) return static_cast<size_t>(r);
    if (r == 0 && !writing && ended) return *ended = true, 0;
    if (r == 0 && !writing)
      throw ConnectionError(gyreRemoteError, peerRank, peer + " closed its connection");
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
    if (r < 0 && (errno == ECONNRESET || errno == EPIPE || errno == ETIMEDOUT))
      throw ConnectionError(gyreRemoteError, peerRank, peer + " reset its connection");
    throw ConnectionError(
        gyreSystemError, peerRank,
        std::string(writing ? "send to " : "receive from ") + peer + ": " + std::strerror(errno));
  }
}

// The most iovec entries of a message's payload one sendmsg or readv takes
// (the rest goes in the next): far below IOV_MAX, and a strided slice's runs
// are rarely smaller than a few hundred bytes.
constexpr int kMaxRunsPerCall = 128;

// The iovecs of bytes [from, from + len) of a message in caller memory or
// staging: one for a single run (data), else the slices of the runs that
// cover them, at most `max` (the call then moves fewer bytes). Returns how
// many it wrote into out.
int payloadSlices(uint8_t* data, const iovec* runs, size_t nruns, size_t from, size_t len,
                  iovec* out, int max) {
  if (!runs) {
    out[0] = {data + from, len};
    return 1;
  }
  int n = 0;
  size_t at = 0;  // where run i starts in the message
  for (size_t i = 0; i < nruns && len && n < max; at += runs[i].iov_len, ++i) {
    if (from >= at + runs[i].iov_len) continue;
    const size_t within = from - at, take = std::min(runs[i].iov_len - within, len);
    out[n++] = {static_cast<uint8_t*>(runs[i].iov_base) + within, take};
    from += take;
    len -= take;
  }
  return n;
}

size_t bytesIn(const iovec* iov, int n) {
  size_t b = 0;
  for (int i = 0; i < n; ++i) b += iov[i].iov_len;
  return b;
}

}  // namespace

TcpConnection::TcpConnection(TcpTransport& transport, int peer, std::string peerName,
                             std::vector<bootstrap::Socket> lanes, size_t chunkBytes,
                             int stagingSlots, const MemoryCopy& memoryCopy, Capabilities caps)
    : Connection(caps),
      transport_(transport),
      peer_(peer),
      peerName_(std::move(peerName)),
      lanes_(std::move(lanes)),
      chunkBytes_(chunkBytes),
      queueSlots_(stagingSlots + 1),
      copy_(memoryCopy) {
  outQ_.resize(static_cast<size_t>(queueSlots_));
  inQ_.resize(static_cast<size_t>(queueSlots_));
  laneOut_.resize(lanes_.size());
  laneIn_.resize(lanes_.size());
  for (int i = 0; i < stagingSlots; ++i) {
    outStaging_.emplace_back(new (std::align_val_t(64)) uint8_t[chunkBytes]);
    inStaging_.emplace_back(new (std::align_val_t(64)) uint8_t[chunkBytes]);
    outFree_.push_back(i);
    inFree_.push_back(i);
  }
  for (bootstrap::Socket& s : lanes_) s.setNonBlocking(true);
}

TcpConnection::~TcpConnection() {
  // Memory from aligned new[] must go back through aligned delete[].
  for (auto& p : outStaging_) ::operator delete[](p.release(), std::align_val_t(64));
  for (auto& p : inStaging_) ::operator delete[](p.release(), std::align_val_t(64));
}

Transport& TcpConnection::transport() { return transport_; }

void TcpConnection::partRange(size_t total, int lane, size_t& offset, size_t& length) const {
  tcp_wire::partRange(total, lanes_.size(), size_t(lane), offset, length);
}

int TcpConnection::takeStaging(std::vector<int>& freeList) {
  if (freeList.empty()) return -1;
  int i = freeList.back();
  freeList.pop_back();
  return i;
}

// ---- sending ----

void* TcpConnection::trySendBuffer(size_t bytes) {
  if (reservedOut_ < 0) {
    if (outTail_ - outHead_ >= uint64_t(queueSlots_)) {
      pumpSend();
      if (outTail_ - outHead_ >= uint64_t(queueSlots_)) return nullptr;
    }
    reservedOut_ = takeStaging(outFree_);
    if (reservedOut_ < 0) {
      pumpSend();
      reservedOut_ = takeStaging(outFree_);
      if (reservedOut_ < 0) return nullptr;
    }
  }
  return outStaging_[reservedOut_].get();
}

void TcpConnection::sendCommit(size_t bytes, const MessageTag& tag) {
  outQ_[outTail_ % queueSlots_] = OutMsg{outStaging_[reservedOut_].get(), bytes, reservedOut_, tag};
  ++outTail_;
  reservedOut_ = -1;
  pumpSend();
}

bool TcpConnection::trySendFrom(const void* src, size_t bytes, const MessageTag& tag) {
  return trySendDirect(OutMsg{static_cast<const uint8_t*>(src), bytes, -1, tag});
}

bool TcpConnection::trySendRunsFrom(std::span<const iovec> runs, size_t bytes,
                                    const MessageTag& tag) {
  return trySendDirect(OutMsg{nullptr, bytes, -1, tag, runs.data(), runs.size()});
}

bool TcpConnection::trySendDirect(const OutMsg& msg) {
  if (!directSendActive_) {
    if (outTail_ - outHead_ >= uint64_t(queueSlots_)) {
      pumpSend();
      if (outTail_ - outHead_ >= uint64_t(queueSlots_)) return false;
    }
    outQ_[outTail_ % queueSlots_] = msg;
    directSendMsg_ = outTail_++;
    directSendActive_ = true;
  }
  pumpSend();
  if (outHead_ <= directSendMsg_) return false;
  directSendActive_ = false;
  return true;
}

bool TcpConnection::pumpSend() {
  bool moved = false;
  const int nlanes = static_cast<int>(lanes_.size());
  for (int k = 0; k < nlanes; ++k) {
    LaneOut& lane = laneOut_[k];
    while (lane.msg < outTail_) {
      const OutMsg& m = outQ_[lane.msg % queueSlots_];
      size_t off, len;
      partRange(m.bytes, k, off, len);
      if (lane.done == 0) lane.header = PartHeader{kPartMagic, uint32_t(k), m.bytes, m.tag};
      iovec iov[1 + kMaxRunsPerCall];
      int n = 0;
      if (lane.done < sizeof(PartHeader))
        iov[n++] = {reinterpret_cast<uint8_t*>(&lane.header) + lane.done,
                    sizeof(PartHeader) - lane.done};
      size_t payloadDone = lane.done > sizeof(PartHeader) ? lane.done - sizeof(PartHeader) : 0;
      if (len > payloadDone)
        n += payloadSlices(const_cast<uint8_t*>(m.data), m.runs, m.nruns, off + payloadDone,
                           len - payloadDone, iov + n, kMaxRunsPerCall);
      const size_t asked = bytesIn(iov, n);
      size_t w = vectoredIo(lanes_[k].fd(), true, iov, n, peer_, peerName_);
      if (w == 0) break;
      moved = true;
      lane.done += w;
      if (lane.done < sizeof(PartHeader) + len) {
        if (w < asked) break;  // the kernel took part of it
        continue;              // it took every run offered: the next ones
      }
      lane.done = 0;
      ++lane.msg;
    }
  }
  // Messages every lane has finished are complete.
  while (outHead_ < outTail_) {
    bool done = true;
    for (const LaneOut& l : laneOut_) done = done && l.msg > outHead_;
    if (!done) break;
    OutMsg& m = outQ_[outHead_ % queueSlots_];
    if (m.staging >= 0) outFree_.push_back(m.staging);
    ++outHead_;
  }
  return moved;
}

// ---- receiving ----

void TcpConnection::assignStaging(bool asked, size_t bytes, const MessageTag& tag) {
  int s = takeStaging(inFree_);
  if (s < 0) throwError(gyreInternalError, "tcp: no free staging buffer");
  inQ_[inTail_ % queueSlots_] = InMsg{inStaging_[s].get(), bytes, asked, asked, s, 0, tag};
  ++inTail_;
}

// A message read ahead into staging carries what its headers announced;
// the executor's expectation is checked when it asks for it.
void TcpConnection::claim(InMsg& m, size_t bytes, const MessageTag& tag) {
  if (m.asked) return;
  if (m.sizeKnown && (m.bytes != bytes || !(m.tag == tag)))
    throw MessageMismatch(peer_, m.tag, m.bytes, tag, bytes);
  m.asked = true;
  m.sizeKnown = true;
  m.bytes = bytes;
  m.tag = tag;
}

const void* TcpConnection::tryRecvBuffer(size_t bytes, const MessageTag& tag) {
  if (inTail_ == inHead_) assignStaging(true, bytes, tag);
  InMsg& m = inQ_[inHead_ % queueSlots_];
  claim(m, bytes, tag);
  if (m.lanesDone < int(lanes_.size())) pumpRecv();
  if (m.lanesDone < int(lanes_.size())) return nullptr;
  if (m.staging < 0) throwError(gyreInternalError, "tcp: buffer requested for a direct receive");
  return m.dst;
}

void TcpConnection::recvRelease(size_t) {
  InMsg& m = inQ_[inHead_ % queueSlots_];
  if (m.staging >= 0) inFree_.push_back(m.staging);
  ++inHead_;
}

bool TcpConnection::tryRecvInto(void* dst, size_t bytes, const MessageTag& tag) {
  return tryRecvDirect(InMsg{static_cast<uint8_t*>(dst), bytes, true, true, -1, 0, tag});
}

bool TcpConnection::tryRecvRunsInto(std::span<const iovec> runs, size_t bytes,
                                    const MessageTag& tag) {
  return tryRecvDirect(InMsg{nullptr, bytes, true, true, -1, 0, tag, runs.data(), runs.size()});
}

bool TcpConnection::tryRecvDirect(const InMsg& want) {
  // Nobody has read this message yet: it can land in place.
  if (inTail_ == inHead_) inQ_[inTail_++ % queueSlots_] = want;
  InMsg& m = inQ_[inHead_ % queueSlots_];
  claim(m, want.bytes, want.tag);
  if (m.lanesDone < int(lanes_.size())) pumpRecv();
  if (m.lanesDone < int(lanes_.size())) return false;
  if (m.staging >= 0) {  // it came early, into staging
    if (!want.runs) {
      copy_.copy(want.dst, m.dst, want.bytes, false);
    } else {
      const uint8_t* from = m.dst;
      for (size_t i = 0; i < want.nruns; from += want.runs[i++].iov_len)
        if (want.runs[i].iov_len)
          copy_.copy(want.runs[i].iov_base, from, want.runs[i].iov_len, false);
    }
    inFree_.push_back(m.staging);
  } else if (m.dst != want.dst || m.runs != want.runs) {
    throwError(gyreInternalError, "tcp: resumed receive with a different buffer");
  }
  ++inHead_;
  return true;
}

bool TcpConnection::pumpLaneIn(int k) {
  LaneIn& lane = laneIn_[k];
  bool moved = false;
  while (lane.msg < inTail_) {
    InMsg& m = inQ_[lane.msg % queueSlots_];
    if (lane.done < sizeof(PartHeader)) {
      iovec iov[1 + kMaxRunsPerCall];
      int n = 0;
      iov[n++] = {reinterpret_cast<uint8_t*>(&lane.header) + lane.done,
                  sizeof(PartHeader) - lane.done};
      size_t off = 0, len = 0;
      if (m.sizeKnown) {  // read the header and the payload in one call
        partRange(m.bytes, k, off, len);
        if (len) n += payloadSlices(m.dst, m.runs, m.nruns, off, len, iov + n, kMaxRunsPerCall);
      }
      // A peer that has sent all it will send may close, and exit, while
      // this rank still works with others and reads ahead here only to
      // unblock its own sends: the end of the stream between messages is
      // no failure until this rank asks for a message that would follow.
      bool ended = false;
      size_t r = vectoredIo(lanes_[k].fd(), false, iov, n, peer_, peerName_,
                            lane.done == 0 && !m.asked ? &ended : nullptr);
      if (ended) peerEnded_ = true;
      if (r == 0) break;
      moved = true;
      lane.done += r;
      if (lane.done < sizeof(PartHeader)) break;
      tcp_wire::checkPartHeader(lane.header, {uint32_t(k), m.sizeKnown, m.bytes, m.tag, chunkBytes_}, peer_,
                                peerName_);
      if (!m.sizeKnown) {  // read ahead: learn what the peer sent
        m.bytes = lane.header.totalBytes;
        m.tag = lane.header.tag;
        m.sizeKnown = true;
      }
    } else {
      size_t off, len;
      partRange(m.bytes, k, off, len);
      size_t got = lane.done - sizeof(PartHeader);
      if (got < len) {
        iovec iov[kMaxRunsPerCall];
        const int n =
            payloadSlices(m.dst, m.runs, m.nruns, off + got, len - got, iov, kMaxRunsPerCall);
        size_t r = vectoredIo(lanes_[k].fd(), false, iov, n, peer_, peerName_);
        if (r == 0) break;
        moved = true;
        lane.done += r;
      }
    }
    size_t off, len;
    partRange(m.bytes, k, off, len);
    if (lane.done < sizeof(PartHeader) + len) continue;  // more may be readable
    ++m.lanesDone;
    lane.done = 0;
    ++lane.msg;
  }
  return moved;
}

bool TcpConnection::pumpRecv() {
  bool moved = false;
  for (int k = 0; k < int(lanes_.size()); ++k) moved |= pumpLaneIn(k);
  return moved;
}

bool TcpConnection::hasUnreadData() const {
  for (uint64_t m = inHead_; m < inTail_; ++m)
    if (!inQ_[m % queueSlots_].asked) return true;  // read ahead, waiting to be asked for
  for (const bootstrap::Socket& lane : lanes_) {
    int bytes = 0;  // not poll(): a closed socket is readable with nothing in it
    if (lane.valid() && ::ioctl(lane.fd(), FIONREAD, &bytes) == 0 && bytes > 0) return true;
  }
  return false;
}

ProgressResult TcpConnection::progress(ReadAhead readAhead) {
  ProgressResult r;
  r.moved = pumpSend();
  r.sendBlocked = hasQueuedOutput();
  if (readAhead != ReadAhead::None) {
    // Make room for what the peer is pushing at us, so its sends complete
    // (its bytes have arrived: ReadAhead::Arrived takes them too).
    while (inTail_ - inHead_ < uint64_t(queueSlots_ - 1) && !inFree_.empty())
      assignStaging(false, 0, MessageTag{});
  }
  r.moved |= pumpRecv();
  return r;
}

void TcpConnection::pollInterest(std::vector<pollfd>& fds) const {
  for (size_t k = 0; k < lanes_.size(); ++k) {
    short ev = 0;
    if (laneOut_[k].msg < outTail_) ev |= POLLOUT;
    if (laneIn_[k].msg < inTail_ && !peerEnded_)
      ev |= POLLIN;  // an ended stream is always readable
    if (ev) fds.push_back(pollfd{lanes_[k].fd(), ev, 0});
  }
}

void TcpConnection::shutdown() {
  for (bootstrap::Socket& s : lanes_)
    if (s.valid()) ::shutdown(s.fd(), SHUT_RDWR);
}

}  // namespace gyre::transport
