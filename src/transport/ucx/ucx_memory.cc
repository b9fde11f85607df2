// The memory layer over UCX: a registration is a ucp_mem_map of the range,
// and its packed rkey travels to the peer in a tagged message of its own
// (the key's id in the tag), since a packed rkey's size is UCX's to choose
// and a RemoteKey's handle is 32 bytes. The peer takes that message on its
// first access through the key, unpacks it, and then reads (ucp_get_nbx)
// or writes (ucp_put_nbx) in one copy, over whichever of UCX's wires
// reaches the owner (cma or tcp here; RDMA read and write on a cluster).
//
// Every rkey message is received, even for a key never read through: a key
// released first is drained (its receive posted and, once it ends,
// dropped), so nothing piles up in UCX's queue of unexpected messages.
#include <cstring>
#include <string>
#include <utility>

#include "base/clock.h"
#include "base/error.h"
#include "transport/ucx/ucx_connection.h"
#include "transport/ucx/ucx_transport.h"

namespace gyre::transport {

namespace {
// How long one access, or the wait for a key's rkey, may take before it is
// named a failure (a 64 MiB read at tens of Mbit/s fits).
constexpr int64_t kOneSidedMs = 60'000;
// A packed rkey is some hundreds of bytes; a key that claims more is not one.
constexpr uint64_t kMaxPackedBytes = 64 << 10;
}  // namespace

RemoteKey UcxConnection::registerMemory(const void* p, size_t bytes, MemoryType type) {
  if (type != MemoryType::Host)
    throw ConnectionError(gyreInvalidArgument, peer_,
                          std::string("ucx cannot register ") + memoryTypeName(type) + " memory");
  RemoteKey k = Connection::registerMemory(p, bytes, type);
  if (bytes == 0) return k;
  throwIfFailed();
  sweep();
  ucp_mem_map_params_t mp{};
  mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
  mp.address = const_cast<void*>(p);
  mp.length = bytes;
  Registration r;
  if (ucs_status_t s = ucp_mem_map(transport_.context(), &mp, &r.memory); s != UCS_OK)
    throwStatus(s, ("registering " + std::to_string(bytes) + " bytes for").c_str());
  size_t packedBytes = 0;
  if (ucs_status_t s = ucp_rkey_pack(transport_.context(), r.memory, &r.packed, &packedBytes); s != UCS_OK) {
    ucp_mem_unmap(transport_.context(), r.memory);
    throwStatus(s, "packing the key of a registration for");
  }
  const uint64_t id = ++nextKeyId_;
  ucp_request_param_t q{};
  void* send = ucp_tag_send_nbx(ep_, r.packed, packedBytes, keyTag(transport_.rank(), id), &q);
  if (UCS_PTR_IS_ERR(send)) {
    ucp_rkey_buffer_release(r.packed);
    ucp_mem_unmap(transport_.context(), r.memory);
    throwStatus(UCS_PTR_STATUS(send), "sending a registration's key to");
  }
  r.send = send;
  registrations_.emplace(id, r);
  k.handle[0] = id;
  k.handle[1] = packedBytes;
  return k;
}

void UcxConnection::deregisterMemory(const RemoteKey& key) {
  auto it = registrations_.find(key.handle[0]);
  if (key.bytes == 0 || it == registrations_.end()) return;
  Registration r = it->second;
  registrations_.erase(it);
  ucp_mem_unmap(transport_.context(), r.memory);
  r.memory = nullptr;
  if (settle(r.send) == UCS_INPROGRESS) {
    retired_.push_back(r);  // its packed rkey is still being sent
    return;
  }
  ucp_rkey_buffer_release(r.packed);
}

void UcxConnection::releaseRemoteKey(const RemoteKey& key) noexcept {
  auto it = remotes_.find(key.handle[0]);
  if (it == remotes_.end()) {
    // Never read through: its rkey's message still comes (or came), and is
    // received and dropped.
    if (key.bytes == 0 || !namesRegistration(key) || !ep_) return;
    Remote r;
    if (UCS_PTR_IS_ERR(receiveKey(r, key))) return;  // a failing worker: its close ends everything
    draining_.push_back(std::move(r));
    return;
  }
  Remote& r = it->second;
  if (r.rkey) ucp_rkey_destroy(r.rkey);
  if (r.request) draining_.push_back(std::move(r));  // a wait for it that failed
  remotes_.erase(it);
}

// A key's handle: the id of the owner's registration and its packed rkey's size.
bool UcxConnection::namesRegistration(const RemoteKey& key) {
  return key.handle[0] != 0 && key.handle[1] != 0 && key.handle[1] <= kMaxPackedBytes;
}

void* UcxConnection::receiveKey(Remote& r, const RemoteKey& key) {
  r.packed.resize(key.handle[1]);
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
  void* q = ucp_tag_recv_nbx(transport_.worker(), r.packed.data(), r.packed.size(), keyTag(peer_, key.handle[0]),
                             ~uint64_t{0}, &p);
  if (!UCS_PTR_IS_ERR(q)) r.request = q;
  return q;
}

ucp_rkey_h UcxConnection::rkeyFor(const RemoteKey& key) {
  if (!namesRegistration(key))
    throw ConnectionError(gyreInvalidUsage, peer_,
                          "ucx: a key from " + peerName_ + " names no registration (id " +
                              std::to_string(key.handle[0]) + ", " + std::to_string(key.handle[1]) + "-byte rkey)");
  auto [it, fresh] = remotes_.try_emplace(key.handle[0]);
  Remote& r = it->second;
  if (r.rkey) return r.rkey;
  if (fresh)
    if (void* q = receiveKey(r, key); UCS_PTR_IS_ERR(q)) {
      remotes_.erase(it);  // nothing is on its way into it
      throwStatus(UCS_PTR_STATUS(q), "receiving a registration's key from");
    }
  waitFor(r.request, "the key of a range registered by");
  if (ucs_status_t s = ucp_ep_rkey_unpack(ep_, r.packed.data(), &r.rkey); s != UCS_OK) {
    r.rkey = nullptr;
    throwStatus(s, "unpacking the key of a range registered by");
  }
  r.packed = {};
  return r.rkey;
}

void UcxConnection::waitFor(void*& request, const std::string& what) {
  const Deadline d = Deadline::afterMs(kOneSidedMs);
  for (;;) {
    const ucs_status_t st = settle(request);
    if (st == UCS_OK) return;
    if (st != UCS_INPROGRESS) throwStatus(st, what.c_str());
    if (failure_ != UCS_OK || !ep_ || d.expired()) {
      // The access may still write into memory we are about to give back:
      // a receive is cancelled, the endpoint is closed (which ends what runs
      // on it), and only then does the error go up. UCX frees the request
      // itself once it has ended.
      const std::string why = failure_ != UCS_OK || !ep_
                                  ? ""
                                  : " did not complete in " + std::to_string(kOneSidedMs / 1000) + " s";
      void* pending = std::exchange(request, nullptr);
      ucp_request_cancel(transport_.worker(), pending);
      close(/*force=*/true);
      ucp_request_free(pending);
      if (!why.empty())
        throw ConnectionError(gyreRemoteError, peer_, "ucx: " + what + " " + peerName_ + why);
      throwIfFailed();
    }
    transport_.block(1'000'000, [&] { return ucp_request_check_status(request) != UCS_INPROGRESS; });
  }
}

void UcxConnection::getImpl(void* dst, const RemoteKey& key, uint64_t address, size_t bytes) {
  throwIfFailed();
  if (bytes == 0) return;
  ucp_rkey_h rkey = rkeyFor(key);
  ucp_request_param_t p{};
  void* r = ucp_get_nbx(ep_, dst, bytes, address, rkey, &p);
  if (UCS_PTR_IS_ERR(r)) throwStatus(UCS_PTR_STATUS(r), "reading from");
  waitFor(r, "a read of " + std::to_string(bytes) + " bytes from");
}

void UcxConnection::putImpl(const RemoteKey& key, uint64_t address, const void* src, size_t bytes) {
  throwIfFailed();
  if (bytes == 0) return;
  ucp_rkey_h rkey = rkeyFor(key);
  ucp_request_param_t p{};
  void* r = ucp_put_nbx(ep_, src, bytes, address, rkey, &p);
  if (UCS_PTR_IS_ERR(r)) throwStatus(UCS_PTR_STATUS(r), "writing to");
  waitFor(r, "a write of " + std::to_string(bytes) + " bytes to");
  // A put's completion frees only our buffer; the flush says it has landed
  // in the peer's memory, before any message of ours that follows.
  void* f = ucp_ep_flush_nbx(ep_, &p);
  if (UCS_PTR_IS_ERR(f)) throwStatus(UCS_PTR_STATUS(f), "flushing a write to");
  waitFor(f, "the flush of a write to");
}

void UcxConnection::sweep() noexcept {
  for (size_t i = 0; i < retired_.size();) {
    if (settle(retired_[i].send) == UCS_INPROGRESS) {
      ++i;
      continue;
    }
    ucp_rkey_buffer_release(retired_[i].packed);
    retired_[i] = retired_.back();
    retired_.pop_back();
  }
  for (size_t i = 0; i < draining_.size();) {
    if (settle(draining_[i].request) == UCS_INPROGRESS) {
      ++i;
      continue;
    }
    draining_[i] = std::move(draining_.back());
    draining_.pop_back();
  }
}

void UcxConnection::releaseMemory() noexcept {
  ucp_worker_h w = transport_.worker();
  for (auto& [id, r] : remotes_) {
    if (r.rkey) ucp_rkey_destroy(r.rkey);
    if (r.request) draining_.push_back(std::move(r));
  }
  remotes_.clear();
  // Receives of rkeys that never came are cancelled; their buffers stay
  // until the cancel has ended them (the worker's progress does it).
  for (Remote& r : draining_)
    if (r.request) ucp_request_cancel(w, r.request);
  const Deadline d = Deadline::afterMs(1000);
  while (!draining_.empty() && !d.expired()) {
    ucp_worker_progress(w);
    sweep();
  }
  for (Remote& r : draining_) {
    ucp_request_free(r.request);  // released by UCX when it ends
    transport_.deferFree([b = std::make_shared<std::vector<uint8_t>>(std::move(r.packed))] {});
  }
  draining_.clear();
  for (auto& [id, r] : registrations_) {
    ucp_mem_unmap(transport_.context(), r.memory);
    retired_.push_back(r);
  }
  registrations_.clear();
  // A packed rkey still being sent: the endpoint's close ends the send;
  // the buffer lives until the worker is gone.
  sweep();
  for (Registration& r : retired_) {
    if (r.send) ucp_request_free(r.send);
    transport_.deferFree([b = r.packed] { ucp_rkey_buffer_release(b); });
  }
  retired_.clear();
}

}  // namespace gyre::transport
