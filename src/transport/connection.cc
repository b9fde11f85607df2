#include <cstring>
#include <string>

#include "transport/transport.h"

namespace gyre::transport {

RemoteKey Connection::registerMemory(const void* p, size_t bytes, MemoryType type) {
  // A transport that reaches device memory says so by overriding this.
  if (type == MemoryType::Device)
    throw ConnectionError(gyreInvalidArgument, peer(),
                          std::string(transport().name()) + " cannot register device memory");
  RemoteKey k;
  k.address = reinterpret_cast<uint64_t>(p);
  k.bytes = bytes;
  k.type = type;
  return k;
}

void Connection::acceptDeviceMessages(int) {
  throw ConnectionError(gyreInternalError, peer(),
                        std::string(transport().name()) + " cannot carry messages in device memory");
}

void Connection::getImpl(void*, const RemoteKey&, uint64_t, size_t) {
  throw ConnectionError(gyreInternalError, peer(),
                        std::string(transport().name()) + " cannot read a peer's memory");
}

void Connection::putImpl(const RemoteKey&, uint64_t, const void*, size_t) {
  throw ConnectionError(gyreInternalError, peer(),
                        std::string(transport().name()) + " cannot write a peer's memory");
}

void Connection::checkAccess(const RemoteKey& key, uint64_t offset, size_t bytes, const char* what) const {
  if (key.type != MemoryType::None && offset <= key.bytes && bytes <= key.bytes - offset) return;
  throw ConnectionError(
      gyreInvalidUsage, peer(),
      key.type == MemoryType::None
          ? std::string("rank ") + std::to_string(peer()) + " registered no memory for this " + what
          : std::string("a one-sided ") + what + " of " + std::to_string(bytes) + " bytes at offset " +
                std::to_string(offset) + " of rank " + std::to_string(peer()) + "'s buffer is outside the " +
                std::to_string(key.bytes) + " bytes it registered: is its buffer as large as this call needs?");
}

bool Connection::trySendRunsFrom(std::span<const iovec> runs, size_t bytes, const MessageTag& tag) {
  auto* at = static_cast<unsigned char*>(trySendBuffer(bytes));
  if (!at) return false;
  for (const iovec& r : runs) {
    if (r.iov_len) std::memcpy(at, r.iov_base, r.iov_len);
    at += r.iov_len;
  }
  sendCommit(bytes, tag);
  return true;
}

bool Connection::tryRecvRunsInto(std::span<const iovec> runs, size_t bytes, const MessageTag& tag) {
  const auto* at = static_cast<const unsigned char*>(tryRecvBuffer(bytes, tag));
  if (!at) return false;
  for (const iovec& r : runs) {
    if (r.iov_len) std::memcpy(r.iov_base, at, r.iov_len);
    at += r.iov_len;
  }
  recvRelease(bytes);
  return true;
}

Request Connection::isend(const void* src, size_t bytes, const MessageTag& tag) {
  sends_.push_back(Posted{const_cast<void*>(src), bytes, tag});
  return Request{true, sendsPosted_++};
}

Request Connection::irecv(void* dst, size_t bytes, const MessageTag& tag) {
  recvs_.push_back(Posted{dst, bytes, tag});
  return Request{false, recvsPosted_++};
}

bool Connection::test(const Request& r) {
  // Each direction's head first: messages are ordered, so only the oldest
  // request of a direction can move.
  while (!sends_.empty() && trySendFrom(sends_.front().data, sends_.front().bytes, sends_.front().tag)) {
    sends_.pop_front();
    ++sendsDone_;
  }
  if (can(kNeedsProgress)) progress(ReadAhead::None);
  while (!recvs_.empty() && tryRecvInto(recvs_.front().data, recvs_.front().bytes, recvs_.front().tag)) {
    recvs_.pop_front();
    ++recvsDone_;
  }
  return r.seq < (r.send ? sendsDone_ : recvsDone_);
}

}  // namespace gyre::transport
