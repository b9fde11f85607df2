#include "bootstrap/incoming.h"

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>

#include "base/clock.h"
#include "base/error.h"

namespace gyre::bootstrap {

std::string Refusals::describe() const {
  std::string s;
  auto add = [&](int n, const char* what) {
    if (!n) return;
    s += (s.empty() ? "refused " : ", ") + std::to_string(n) +
         (n == 1 ? " connection " : " connections ") + what;
  };
  add(silent, "that sent no complete hello in time");
  add(crowded, "beyond the handshakes open at once");
  add(badSecret, "without this communicator's secret");
  add(badClaim, "that claimed a rank or purpose they cannot have");
  if (!s.empty() && !lastFrom.empty()) s += " (latest from " + lastFrom + ")";
  return s;
}

void IncomingConnections::acceptFrom(const Socket& listener, bool isDataListener) {
  for (;;) {
    Socket s;
    try {
      s = listener.tryAccept();
    } catch (const Error&) {
      return;  // EMFILE and the like: try again on the next pass
    }
    if (!s.valid()) return;
    s.setNonBlocking(true);
    if (open_.size() >= kMaxOpen) {  // the oldest has had the longest to speak
      ++refusals_.crowded;
      refusals_.lastFrom = open_.front().a.from;
      open_.pop_front();
    }
    Pending p;
    p.a.from = s.peerAddr().str();
    p.a.sock = std::move(s);
    p.a.onDataListener = isDataListener;
    p.deadlineNs = nowNs() + kHandshakeMs * 1'000'000;
    open_.push_back(std::move(p));
  }
}

bool IncomingConnections::step(Pending& p, bool& dead) {
  for (;;) {
    uint8_t* dst;
    size_t want;
    const size_t helloEnd = sizeof(ConnHello), headerEnd = helloEnd + sizeof(AbortNoticeHeader);
    if (p.got < helloEnd) {
      dst = reinterpret_cast<uint8_t*>(&p.a.hello) + p.got;
      want = helloEnd - p.got;
    } else if (!carriesMessage(p.a.hello.kind)) {
      return true;
    } else if (p.got < headerEnd) {
      dst = reinterpret_cast<uint8_t*>(&p.a.notice) + (p.got - helloEnd);
      want = headerEnd - p.got;
    } else {
      const size_t textBytes = std::min(p.a.notice.messageBytes, kMaxNoticeBytes);
      if (p.a.noticeText.size() != textBytes) p.a.noticeText.resize(textBytes);
      if (p.got - headerEnd == textBytes) {
        p.a.hasNotice = true;
        return true;
      }
      dst = reinterpret_cast<uint8_t*>(p.a.noticeText.data()) + (p.got - headerEnd);
      want = textBytes - (p.got - headerEnd);
    }
    ssize_t n = ::recv(p.a.sock.fd(), dst, want, MSG_DONTWAIT);
    if (n > 0) {
      p.got += static_cast<size_t>(n);
      // A wrong magic is not worth reading further.
      if (p.got >= sizeof(uint32_t) && p.a.hello.magic != kConnMagic) return true;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return false;
    // Closed or reset. A notice cut short still says its sender failed.
    if (p.got >= headerEnd && p.a.hello.kind == static_cast<uint32_t>(ConnKind::AbortNotice)) {
      p.a.noticeText.resize(p.got - headerEnd);
      p.a.hasNotice = true;
      return true;
    }
    if (p.got >= helloEnd && p.a.hello.kind == static_cast<uint32_t>(ConnKind::AbortNotice)) {
      p.a.hasNotice = false;  // the hello alone: the Bootstrap treats its sender as failed
      return true;
    }
    dead = true;
    return false;
  }
}

std::vector<IncomingConnections::Arrival> IncomingConnections::advance() {
  std::vector<Arrival> done;
  const int64_t now = nowNs();
  for (auto it = open_.begin(); it != open_.end();) {
    bool dead = false;
    if (step(*it, dead)) {
      done.push_back(std::move(it->a));
      it = open_.erase(it);
      continue;
    }
    if (dead || now > it->deadlineNs) {
      ++refusals_.silent;
      refusals_.lastFrom = it->a.from;
      it = open_.erase(it);
      continue;
    }
    ++it;
  }
  for (Arrival& a : done) a.sock.setNonBlocking(false);
  return done;
}

void IncomingConnections::addPollFds(std::vector<pollfd>& fds) const {
  for (const Pending& p : open_) fds.push_back({p.a.sock.fd(), POLLIN, 0});
}

}  // namespace gyre::bootstrap
