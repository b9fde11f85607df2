// The memory layer over verbs: registrations are memory regions (the key
// carries the rkey), get and put are RDMA READ and WRITE from a buffer
// registered for the access, waited for with a bound.
#include <cerrno>
#include <cstring>

#include "base/clock.h"
#include "transport/verbs/verbs_connection.h"
#include "transport/verbs/verbs_transport.h"
#include "transport/verbs/verbs_work.h"

namespace gyre::transport {

namespace {
// How long a one-sided access may take before it is named a failure.
constexpr int64_t kOneSidedMs = 60'000;
}  // namespace

using namespace verbs_work;

MrPtr VerbsConnection::registerRange(const void* p, size_t bytes, int access, const char* what) {
  ibv_mr* mr =
      ibv_reg_mr(transport_.device().pd(), const_cast<void*>(p), bytes ? bytes : 1, access);
  if (!mr)
    throw ConnectionError(
        gyreSystemError, peer_,
        std::string("verbs: registering ") + what + " of " + std::to_string(bytes) + " bytes for " +
            peerName_ + " failed: " + std::strerror(errno) +
            (errno == ENOMEM ? " (is the locked-memory limit, ulimit -l, too low?)" : ""));
  return MrPtr(mr);
}

RemoteKey VerbsConnection::registerMemory(const void* p, size_t bytes, MemoryType type) {
  if (type != MemoryType::Host)
    throw ConnectionError(gyreInvalidUsage, peer_,
                          std::string("verbs registers host memory only, not ") + memoryTypeName(type) + " memory");
  RemoteKey k = Connection::registerMemory(p, bytes, type);
  if (bytes == 0) return k;
  MrPtr mr = registerRange(
      p, bytes, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE,
      "memory");
  k.handle[0] = mr->rkey;
  registrations_[mr->rkey] = std::move(mr);
  return k;
}

void VerbsConnection::deregisterMemory(const RemoteKey& key) {
  if (key.bytes) registrations_.erase(static_cast<uint32_t>(key.handle[0]));
}

void VerbsConnection::oneSided(ibv_wr_opcode op, void* local, uint64_t remote, uint32_t rkey,
                               size_t bytes) {
  step();
  throwIfFailed();
  if (bytes == 0) return;
  MrPtr mr = registerRange(local, bytes, op == IBV_WR_RDMA_READ ? IBV_ACCESS_LOCAL_WRITE : 0,
                           "a local buffer");
  ibv_sge sge{reinterpret_cast<uint64_t>(local), static_cast<uint32_t>(bytes), mr->lkey};
  ibv_send_wr wr{};
  wr.wr_id = workId(kOneSided);
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = op;
  wr.wr.rdma.remote_addr = remote;
  wr.wr.rdma.rkey = rkey;
  oneSidedDone_ = false;
  const Deadline d = Deadline::afterMs(kOneSidedMs);
  // Waits for `done`, bounded; a peer that exits or a deadline that passes
  // fails the connection, whose queue pair goes to the error state first,
  // so the access cannot land in `local` once this throws.
  auto waitFor = [&](auto done, const char* what) {
    while (!done() && failure_.empty()) {
      if (transport_.block(1'000'000, [&] { return done(); })) break;
      if (done() || !failure_.empty()) break;
      if (transport_.peerExited(peer_)) {
        transport_.poll();
        if (!done()) fail(peerName_ + " exited during " + what);
      }
      if (d.expired())
        fail(std::string(what) + " did not complete in " + std::to_string(kOneSidedMs / 1000) +
             " s");
    }
    throwIfFailed();
  };
  waitFor([&] { return sendsOutstanding_ < sendDepth_; }, "a wait for room in the send queue");
  if (!post(wr)) throwIfFailed();
  waitFor([&] { return oneSidedDone_; }, "a one-sided access");
  throwIfFailed();
}

void VerbsConnection::getImpl(void* dst, const RemoteKey& key, uint64_t address, size_t bytes) {
  oneSided(IBV_WR_RDMA_READ, dst, address, static_cast<uint32_t>(key.handle[0]), bytes);
}

void VerbsConnection::putImpl(const RemoteKey& key, uint64_t address, const void* src,
                              size_t bytes) {
  oneSided(IBV_WR_RDMA_WRITE, const_cast<void*>(src), address, static_cast<uint32_t>(key.handle[0]),
           bytes);
}

}  // namespace gyre::transport
