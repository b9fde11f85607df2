#include "transport/shm/shm_transport.h"

#include <sys/uio.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

#include "base/error.h"
#include "base/log.h"
#include "transport/shm/futex.h"
#include "transport/shm/shm_checks.h"
#include "transport/shm/shm_connection.h"

namespace gyre::transport {

namespace {
constexpr size_t kNameBytes = 64;
}

std::unique_ptr<ShmTransport> ShmTransport::create(bootstrap::Bootstrap& bs,
                                                   const std::vector<int>& localRanks,
                                                   const Options& options, Deadline deadline) {
  std::unique_ptr<ShmTransport> t(new ShmTransport());
  t->options_ = options;
  t->rank_ = bs.rank();
  t->localRanks_ = localRanks;
  t->localIndexOf_.assign(static_cast<size_t>(bs.nranks()), -1);
  for (size_t i = 0; i < localRanks.size(); ++i)
    t->localIndexOf_[localRanks[i]] = static_cast<int>(i);
  const int nlocal = static_cast<int>(localRanks.size());
  const size_t bytes = shm::segmentBytes(nlocal, options.slotBytes, options.slots);

  // Every rank takes part in the exchange; ranks alone on their host send an
  // empty name.
  std::vector<char> names(size_t(bs.nranks()) * kNameBytes, '\0');
  if (nlocal > 1) {
    t->own_ = ShmSegment::create(bytes);
    auto* h = new (t->own_.data()) shm::SegmentHeader();
    h->magic = shm::kSegmentMagic;
    h->ownerRank = bs.rank();
    t->own_.prefault(0, bytes);  // the FIFOs this rank reads, every peer's
    std::strncpy(&names[size_t(bs.rank()) * kNameBytes], t->own_.name().c_str(), kNameBytes - 1);
  }
  bs.allGather(names.data(), kNameBytes, deadline);

  // Can we read the local peers' memory straight (process_vm_readv)?
  // Security policies (Yama ptrace_scope, different users, containers) may
  // say no; every local rank must be able to, or none uses it. Every rank
  // takes part in the exchange.
  std::vector<uint8_t> canRead(static_cast<size_t>(bs.nranks()), 1);
  const char* cma = std::getenv("GYRE_CMA");
  if (nlocal <= 1 || (cma && std::string(cma) == "0")) canRead[bs.rank()] = 0;
  for (int peer : localRanks) {
    if (peer == bs.rank() || !canRead[bs.rank()]) continue;
    uint64_t probe = 0;
    iovec l{&probe, sizeof(probe)};
    iovec r{reinterpret_cast<void*>(bs.peers()[peer].probeAddress), sizeof(probe)};
    if (process_vm_readv(bs.peers()[peer].pid, &l, 1, &r, 1, 0) != sizeof(probe) ||
        probe != bootstrap::kMemoryProbe)
      canRead[bs.rank()] = 0;
  }
  bs.allGather(canRead.data(), 1, deadline);
  t->canReadPeers_ = nlocal > 1;
  for (int peer : localRanks) t->canReadPeers_ = t->canReadPeers_ && canRead[peer];
  if (nlocal <= 1) {
    // The barrier below is collective: a rank alone on its host still takes
    // part (it used to return here, hanging hosts with several ranks
    // beside a host with one).
    bs.barrier(deadline);
    return t;
  }

  t->peerSegments_.resize(localRanks.size());
  t->connections_.resize(localRanks.size());
  const int me = t->localIndexOf_[bs.rank()];
  for (int i = 0; i < nlocal; ++i) {
    int peer = localRanks[i];
    if (peer == bs.rank()) continue;
    const std::string name = shm::segmentName(&names[size_t(peer) * kNameBytes], kNameBytes, bs.describe(peer));
    if (name.empty())
      throwError(gyreInternalError,
                 bs.describe(peer) + " shares this host but made no shared memory");
    t->peerSegments_[i] = ShmSegment::open(name, bytes);
    auto* peerHeader = static_cast<shm::SegmentHeader*>(t->peerSegments_[i].data());
    shm::checkSegmentHeader(*peerHeader, peer, bs.describe(peer), name);
    // Of a peer's segment, this rank touches its header and the FIFO it
    // writes (the others are its other peers').
    const size_t fifoBytes = shm::fifoBytes(options.slotBytes, options.slots);
    t->peerSegments_[i].prefault(0, shm::headerBytes());
    t->peerSegments_[i].prefault(shm::headerBytes() + size_t(me) * fifoBytes, fifoBytes);
    shm::Fifo out = shm::Fifo::at(t->peerSegments_[i].data(), me, options.slotBytes, options.slots);
    shm::Fifo in = shm::Fifo::at(t->own_.data(), i, options.slotBytes, options.slots);
    t->connections_[i] =
        std::make_unique<ShmConnection>(*t, peer, bs.peers()[peer].pid, peerHeader, out, in,
                                        options.memoryCopy, t->capabilities());
  }
  // Once every peer has mapped our segment its name can go: the memory lives
  // as long as a mapping does, and a killed job leaves nothing behind.
  bs.barrier(deadline);
  t->own_.unlink();
  GYRE_INFO("rank %d: shared memory with %d local peers, %d slots of %zu KiB per peer, %s", bs.rank(),
            nlocal - 1, options.slots, options.slotBytes >> 10,
            t->canReadPeers_ ? "single-copy reads of peers' buffers" : "no cross-process reads");
  return t;
}

ShmTransport::~ShmTransport() = default;

bool ShmTransport::canConnect(int peer, std::string* whyNot) const {
  const bool ok = peer != rank_ && find(peer) != nullptr;
  if (!ok && whyNot) *whyNot = "not on this host";
  return ok;
}

void ShmTransport::connect(std::span<const int> peers, Deadline) {
  for (int p : peers)
    if (p != rank_ && !find(p))
      throwError(gyreInternalError, "shm: asked to connect to rank " + std::to_string(p) + ", which is not on this host");
}

Connection* ShmTransport::connection(int peer) { return find(peer); }

ShmConnection* ShmTransport::find(int peer) const {
  if (peer < 0 || size_t(peer) >= localIndexOf_.size()) return nullptr;
  int i = localIndexOf_[peer];
  return i < 0 || connections_.empty() ? nullptr : connections_[i].get();
}

void ShmTransport::ring(shm::SegmentHeader* header) {
  header->doorbell.fetch_add(1, std::memory_order_seq_cst);
  futexWakeAll(&header->doorbell);
}

bool ShmTransport::block(int64_t timeoutNs, FunctionRef<bool()> ready) {
  if (!own_.data()) return ready();
  auto* h = static_cast<shm::SegmentHeader*>(own_.data());
  // Announce the sleep, then re-check: a peer publishing after our check
  // sees sleepers != 0 and rings; one publishing before is seen by ready().
  h->sleepers.fetch_add(1, std::memory_order_seq_cst);
  uint32_t bell = h->doorbell.load(std::memory_order_seq_cst);
  const bool isReady = ready();
  if (!isReady) futexWait(&h->doorbell, bell, timeoutNs);
  h->sleepers.fetch_sub(1, std::memory_order_seq_cst);
  return isReady;
}

void ShmTransport::report(int originRank, const std::string& message) {
  if (!own_.data()) return;
  auto* h = static_cast<shm::SegmentHeader*>(own_.data());
  uint32_t expected = 0;
  if (h->aborted.load() == 0) {
    h->abortOrigin = originRank;
    std::strncpy(h->abortMessage, message.c_str(), sizeof(h->abortMessage) - 1);
    h->aborted.compare_exchange_strong(expected, 1, std::memory_order_release);
  }
  for (size_t i = 0; i < peerSegments_.size(); ++i)
    if (peerSegments_[i].data()) ring(static_cast<shm::SegmentHeader*>(peerSegments_[i].data()));
}

std::optional<PeerReport> ShmTransport::peerReport() const {
  for (size_t i = 0; i < peerSegments_.size(); ++i) {
    if (!peerSegments_[i].data()) continue;
    auto* h = static_cast<const shm::SegmentHeader*>(peerSegments_[i].data());
    if (h->aborted.load(std::memory_order_acquire))
      return shm::abortReport(h->abortOrigin, h->abortMessage, sizeof(h->abortMessage), localRanks_[i],
                              int(localIndexOf_.size()));
  }
  return std::nullopt;
}

void ShmTransport::interrupt() {
  if (own_.data()) ring(static_cast<shm::SegmentHeader*>(own_.data()));
}

}  // namespace gyre::transport
