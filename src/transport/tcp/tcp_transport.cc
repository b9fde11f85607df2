#include "transport/tcp/tcp_transport.h"

#include <poll.h>

#include "base/log.h"
#include "transport/tcp/tcp_connection.h"

namespace gyre::transport {

TcpTransport::TcpTransport(bootstrap::Bootstrap& bootstrap, const Options& options)
    : bootstrap_(bootstrap), options_(options) {}

TcpTransport::~TcpTransport() = default;

bool TcpTransport::canConnect(int peer, std::string* whyNot) const {
  const bool ok = peer >= 0 && peer < bootstrap_.nranks() && peer != bootstrap_.rank();
  if (!ok && whyNot) *whyNot = "not a peer";
  return ok;
}

void TcpTransport::connect(std::span<const int> peers, Deadline deadline) {
  std::map<int, std::vector<bootstrap::Socket>> made;
  const int me = bootstrap_.rank();
  // All our connects first (they never wait for the peer's code), then the
  // accepts: two ranks establishing in opposite orders cannot deadlock.
  for (int pass = 0; pass < 2; ++pass) {
    for (int p : peers) {
      if (p == me || connections_.count(p) || made.count(p) == 1) continue;
      bool weConnect = me < p;
      if (weConnect != (pass == 0)) continue;
      std::vector<bootstrap::Socket> lanes;
      for (int k = 0; k < options_.lanes; ++k) {
        bootstrap::Socket s =
            weConnect ? bootstrap_.connectTo(p, bootstrap::ConnKind::Data, uint32_t(k), deadline)
                      : bootstrap_.acceptFrom(p, bootstrap::ConnKind::Data, uint32_t(k), deadline);
        s.setNoDelay();
        // 0 leaves the kernel's autotuning on (setting a size turns it off).
        if (options_.socketBufferBytes) s.setBufferBytes(options_.socketBufferBytes);
        lanes.push_back(std::move(s));
      }
      made[p] = std::move(lanes);
    }
  }
  for (auto& [p, lanes] : made) {
    // The addresses say which interface the bytes take (the bootstrap's, or
    // a data listener's on the rank's own NIC).
    const std::string via = lanes.empty()
                                ? std::string()
                                : lanes[0].localAddr().str() + " -> " + lanes[0].peerAddr().str();
    connections_[p] =
        std::make_unique<TcpConnection>(*this, p, bootstrap_.describe(p), std::move(lanes),
                                        options_.chunkBytes, options_.stagingSlots, options_.memoryCopy,
                                        capabilities());
    GYRE_INFO("rank %d: tcp connection to %s, %d socket(s), %s", me, bootstrap_.describe(p).c_str(),
              options_.lanes, via.c_str());
  }
}

Connection* TcpTransport::connection(int peer) {
  auto it = connections_.find(peer);
  return it == connections_.end() ? nullptr : it->second.get();
}

bool TcpTransport::hasPendingOutput() const {
  for (const auto& [p, c] : connections_)
    if (c->hasQueuedOutput()) return true;
  return false;
}

bool TcpTransport::block(int64_t timeoutNs, FunctionRef<bool()> ready) {
  if (ready()) return true;
  std::vector<pollfd> fds;
  for (const auto& [p, c] : connections_) c->pollInterest(fds);
  int ms = static_cast<int>((timeoutNs + 999'999) / 1'000'000);
  ::poll(fds.data(), fds.size(), ms);
  return false;
}

void TcpTransport::shutdownAll() {
  for (auto& [p, c] : connections_) c->shutdown();
}

}  // namespace gyre::transport
