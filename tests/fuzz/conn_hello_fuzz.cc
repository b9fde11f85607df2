// What a connection to a rank's listener says first (IncomingConnections):
// a ConnHello and, for an abort notice, its header and text, over a real
// loopback connection that sends the input and closes its side. What
// arrives complete is what the Bootstrap then checks.
#include <poll.h>
#include <sys/socket.h>

#include <cstdint>
#include <vector>

#include "base/clock.h"
#include "base/error.h"
#include "bootstrap/incoming.h"
#include "tests/fuzz/loopback.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gyre::bootstrap;
  static Socket listener = [] {
    Socket l = Socket::listenOn(SockAddr::loopback(AF_INET, 0));
    l.setNonBlocking(true);  // as the Bootstrap's listeners: acceptFrom never waits
    return l;
  }();
  static const SockAddr where = [] {
    SockAddr a;
    socklen_t len = sizeof a.storage;
    getsockname(listener.fd(), a.sa(), &len);
    a.len = len;
    return a;
  }();
  if (size > 16384) size = 16384;  // within what the socket buffers hold: the sends never block
  Refusals refusals;
  IncomingConnections incoming(refusals);
  Socket client = Socket::connectTo(where, gyre::Deadline::afterMs(5000), "the fuzzed listener");
  gyre::fuzz::sendAllAndEnd(client, data, size);
  const int64_t until = gyre::nowNs() + 5'000'000'000;
  while (incoming.open() == 0 && gyre::nowNs() < until) {
    incoming.acceptFrom(listener, size > 0 && data[0] & 1);
    if (incoming.open() == 0) {
      pollfd p{listener.fd(), POLLIN, 0};
      ::poll(&p, 1, 100);
    }
  }
  std::vector<IncomingConnections::Arrival> arrived;
  while (incoming.open() > 0 && gyre::nowNs() < until) {
    for (auto& a : incoming.advance()) arrived.push_back(std::move(a));
    std::vector<pollfd> fds;
    incoming.addPollFds(fds);
    if (!fds.empty()) ::poll(fds.data(), fds.size(), 100);
  }
  (void)refusals.describe();
  arrived.clear();
  gyre::fuzz::closeHard(client);
  return 0;
}
