#include "bootstrap/root_server.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <iterator>
#include <list>
#include <mutex>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/log.h"
#include "bootstrap/incoming.h"
#include "bootstrap/peer_info.h"
#include "bootstrap/rendezvous_protocol.h"

namespace gyre::bootstrap {

namespace {

constexpr int64_t kMs = 1'000'000;
constexpr int64_t kHelloTimeoutNs = 10'000 * kMs;  // a connection must introduce itself
constexpr uint32_t kMaxInfoBytes = 64 * 1024;
constexpr size_t kMaxSilentClients = 1024;    // connections that have not introduced themselves
constexpr int64_t kLingerNs = 600'000 * kMs;  // a failed one-round root without a lifetime
constexpr size_t kMaxRememberedFailures = 64;

struct Client {
  Socket sock;
  Hello hello{};
  size_t headerGot = 0;
  std::vector<uint8_t> info;
  size_t infoGot = 0;
  int64_t acceptedAt = 0;
  int64_t answerBy = 0;  // waiting: answer TimedOut then (0: never)
  bool waiting = false;  // introduced, waiting for the round to fill
  bool closing = false;  // answered before it finished sending: drained, then closed
  std::string from;
};

struct Round {
  int nranks = 0;
  uint32_t infoBytes = 0;
  std::vector<Client*> byRank;
  int arrived = 0;
  std::vector<std::string> notes;  // untrusted claims refused or forgotten
};

struct Outcome {  // a failed round's answer, for latecomers
  ReplyStatus status;
  std::string message;
  int culprit;
};

// "1, 3-5, 9" (at most a few dozen numbers, then "...").
std::string rankList(const std::vector<int>& ranks) {
  std::string s;
  int shown = 0;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (shown++ == 24) return s + ", ...";
    s += (s.empty() ? "" : ", ") + std::to_string(ranks[i]) +
         (j > i ? "-" + std::to_string(ranks[j]) : "");
    i = j + 1;
  }
  return s;
}

// "rank 3 (pid 77 on node2)" when the blob is a PeerInfo, else "rank 3 (from addr)".
std::string describeClient(const Client& c) {
  std::string who = "rank " + std::to_string(c.hello.rank);
  if (c.info.size() == sizeof(PeerInfo)) {
    PeerInfo i;
    std::memcpy(&i, c.info.data(), sizeof(i));
    return who + " (" + describeProcess(i) + ")";
  }
  return who + " (from " + c.from + ")";
}

void sendReply(Client& c, ReplyStatus status, const std::string& message,
               const std::vector<uint8_t>* table = nullptr, uint32_t infoBytes = 0, int nranks = 0,
               int culprit = -1) {
  Reply r{};
  r.magic = kReplyMagic;
  r.status = status;
  r.messageBytes = static_cast<uint32_t>(message.size());
  r.infoBytes = infoBytes;
  r.nranks = nranks;
  r.culprit = culprit;
  try {
    c.sock.setNonBlocking(false);
    Deadline d = Deadline::afterMs(10000);
    c.sock.sendAll(&r, sizeof(r), d, "a rank");
    if (!message.empty()) c.sock.sendAll(message.data(), message.size(), d, "a rank");
    if (table) c.sock.sendAll(table->data(), table->size(), d, "a rank");
  } catch (const Error& e) {
    GYRE_WARN("rendezvous root: could not answer rank %d: %s", c.hello.rank, e.what());
  }
}

std::mutex gRegistryMu;
std::list<std::shared_ptr<RootServer>>& registry() {
  static auto* r = new std::list<std::shared_ptr<RootServer>>();  // never destroyed: see keepAlive
  return *r;
}

// The serving loop's state: the connections, the rounds they fill, and the
// rounds that failed (answered to latecomers).
class RootLoop {
 public:
  RootLoop(const RootServer::Options& o, const SockAddr& advertise, const Socket& listener,
           int wakeFd, std::atomic<bool>& finished, std::atomic<bool>& lingering)
      : o_(o),
        where_(advertise.str()),
        listener_(listener),
        wakeFd_(wakeFd),
        finished_(finished),
        lingering_(lingering) {}
  void run();

 private:
  using ClientIt = std::list<Client>::iterator;
  void acceptNew();
  // Reads what arrived (the client, or others, may be gone after).
  void serve(ClientIt it);
  void introduced(ClientIt it);
  // A waiting rank's connection closed: it left the round.
  void left(ClientIt it);
  // The hello cannot be part of its round (trusted: the round cannot complete).
  void conflict(ClientIt it, Round& round, const std::string& problem);
  void failRound(uint64_t round, ReplyStatus status, const std::string& message, int culprit);
  void completeRound(uint64_t round);
  void answerTimeouts();
  std::string missingOf(const Round& r) const;
  std::string timedOutMessage(const Round& r, uint32_t timeoutMs) const;
  ClientIt drop(ClientIt it);  // forgets a client (and its place in a round)
  void remember(uint64_t round, Outcome o);

  const RootServer::Options& o_;
  const std::string where_;
  const Socket& listener_;
  const int wakeFd_;
  std::atomic<bool>& finished_;
  std::atomic<bool>& lingering_;
  std::list<Client> clients_;
  std::map<uint64_t, Round> rounds_;
  std::map<uint64_t, Outcome> failed_;
  Refusals refused_;
  int64_t lingerUntil_ = 0;  // a one-round root whose round failed
};

void RootLoop::acceptNew() {
  for (;;) {
    Socket s;
    try {
      s = listener_.tryAccept();
    } catch (const Error&) {
      return;
    }
    if (!s.valid()) return;
    s.setNonBlocking(true);
    size_t silent = 0;
    for (const Client& c : clients_) silent += !c.waiting;
    if (silent >= kMaxSilentClients) {
      for (auto it = clients_.begin(); it != clients_.end(); ++it)
        if (!it->waiting) {  // the oldest silent one has had the longest to speak
          ++refused_.crowded;
          refused_.lastFrom = it->from;
          clients_.erase(it);
          break;
        }
    }
    Client c;
    c.from = s.peerAddr().str();
    c.sock = std::move(s);
    c.acceptedAt = nowNs();
    clients_.push_back(std::move(c));
  }
}

RootLoop::ClientIt RootLoop::drop(ClientIt it) {
  if (it->waiting) {
    auto r = rounds_.find(it->hello.round);
    if (r != rounds_.end() && r->second.byRank[it->hello.rank] == &*it) {
      r->second.byRank[it->hello.rank] = nullptr;
      --r->second.arrived;
    }
  }
  return clients_.erase(it);
}

void RootLoop::remember(uint64_t round, Outcome o) {
  if (failed_.size() >= kMaxRememberedFailures) failed_.erase(failed_.begin());
  failed_[round] = std::move(o);
  if (!o_.persistent) {
    lingerUntil_ = nowNs() + (o_.lifetimeMs > 0 ? o_.lifetimeMs * kMs : kLingerNs);
    lingering_.store(true);
  }
}

void RootLoop::failRound(uint64_t round, ReplyStatus status, const std::string& message,
                         int culprit) {
  remember(round, {status, message, culprit});
  GYRE_WARN("rendezvous root at %s: round %llu failed: %s", where_.c_str(),
            static_cast<unsigned long long>(round), message.c_str());
  for (auto it = clients_.begin(); it != clients_.end();) {
    if (it->waiting && it->hello.round == round) {
      sendReply(*it, status, message, nullptr, 0, 0, culprit);
      it = clients_.erase(it);
    } else {
      ++it;
    }
  }
  rounds_.erase(round);
}

std::string RootLoop::missingOf(const Round& r) const {
  std::vector<int> missing;
  for (int k = 0; k < r.nranks; ++k)
    if (!r.byRank[k]) missing.push_back(k);
  return (missing.size() == 1 ? "rank " : "ranks ") + rankList(missing);
}

std::string RootLoop::timedOutMessage(const Round& r, uint32_t timeoutMs) const {
  std::string m = "the rendezvous at " + where_ + " did not complete within " +
                  std::to_string(timeoutMs) + " ms: " + missingOf(r) + " never arrived (" +
                  std::to_string(r.arrived) + " of " + std::to_string(r.nranks) + " did)";
  for (const std::string& n : r.notes) m += "; " + n;
  const std::string refusals = refused_.describe();
  if (!refusals.empty()) m += "; meanwhile the root " + refusals;
  return m;
}

void RootLoop::left(ClientIt it) {
  const uint64_t roundNo = it->hello.round;
  auto r = rounds_.find(roundNo);
  if (r == rounds_.end() || r->second.byRank[it->hello.rank] != &*it) {
    drop(it);
    return;
  }
  const std::string who = describeClient(*it);
  const int rank = it->hello.rank;
  if (!o_.trustClaims) {
    // Maybe a real rank that gave up, maybe a guessed claim: forget it; the
    // real rank may still come.
    r->second.notes.push_back(who + " arrived from " + it->from + " and left");
    drop(it);
    return;
  }
  std::string message =
      who + " left the rendezvous before every rank had arrived (it exited or gave up)";
  if (r->second.arrived < r->second.nranks)  // still registered: not among the missing
    message += "; " + missingOf(r->second) + " had not arrived yet";
  drop(it);
  failRound(roundNo, ReplyStatus::PeerLeft, message, rank);
}

void RootLoop::conflict(ClientIt it, Round& round, const std::string& problem) {
  if (!o_.trustClaims) {
    round.notes.push_back("refused " + problem + " (from " + it->from + ")");
    GYRE_WARN("rendezvous root at %s refused %s (from %s)", where_.c_str(), problem.c_str(),
              it->from.c_str());
    sendReply(*it, ReplyStatus::Refused, problem);
    drop(it);
    return;
  }
  // The round cannot succeed: tell everyone in it, not only the latecomer.
  const uint64_t roundNo = it->hello.round;
  sendReply(*it, ReplyStatus::Failed, problem);
  drop(it);
  failRound(roundNo, ReplyStatus::Failed, problem, -1);
}

void RootLoop::completeRound(uint64_t roundNo) {
  Round& round = rounds_[roundNo];
  std::vector<uint8_t> table(size_t(round.nranks) * round.infoBytes);
  // (A trusted round's first hello may claim 0 bytes: then table.data() may be null.)
  for (int r = 0; r < round.nranks && round.infoBytes > 0; ++r)
    std::memcpy(table.data() + size_t(r) * round.infoBytes, round.byRank[r]->info.data(),
                round.infoBytes);
  for (int r = 0; r < round.nranks; ++r)
    sendReply(*round.byRank[r], ReplyStatus::Ok, "", &table, round.infoBytes, round.nranks);
  for (auto ci = clients_.begin(); ci != clients_.end();)
    ci = (ci->waiting && ci->hello.round == roundNo) ? clients_.erase(ci) : std::next(ci);
  rounds_.erase(roundNo);
  GYRE_INFO("rendezvous root at %s: round %llu complete", where_.c_str(),
            static_cast<unsigned long long>(roundNo));
  if (!o_.persistent) finished_.store(true);
}

void RootLoop::introduced(ClientIt it) {
  Client& c = *it;
  if (o_.expectRound != ~0ull && c.hello.round != o_.expectRound) {
    const bool early = c.hello.round > o_.expectRound;
    sendReply(c, early ? ReplyStatus::Retry : ReplyStatus::Failed,
              early ? "this root serves an earlier round" : "this rendezvous round is over");
    drop(it);
    return;
  }
  // A rank that died and came back (or gave up and retried) finds its old
  // claim still held: the old one's departure is read first.
  if (auto r = rounds_.find(c.hello.round); r != rounds_.end() && c.hello.rank < r->second.nranks)
    if (Client* holder = r->second.byRank[c.hello.rank]; holder && holder->sock.peerClosed())
      for (auto h = clients_.begin(); h != clients_.end(); ++h)
        if (&*h == holder) {
          left(h);
          break;
        }
  if (auto f = failed_.find(c.hello.round); f != failed_.end()) {
    sendReply(c, f->second.status, f->second.message, nullptr, 0, 0, f->second.culprit);
    drop(it);
    return;
  }
  Round& round = rounds_[c.hello.round];
  if (round.nranks == 0) {
    // An unguessable secret lets the first rank set the round's shape; a
    // guessable one must not let a stranger set it for the job.
    round.nranks = o_.expectNranks > 0 ? o_.expectNranks : c.hello.nranks;
    round.infoBytes = o_.trustClaims ? c.hello.infoBytes : static_cast<uint32_t>(sizeof(PeerInfo));
    round.byRank.assign(static_cast<size_t>(round.nranks), nullptr);
  }
  if (c.hello.nranks != round.nranks)
    return conflict(it, round,
                    "rank " + std::to_string(c.hello.rank) +
                        " was started with nranks=" + std::to_string(c.hello.nranks) +
                        " but other ranks use nranks=" + std::to_string(round.nranks));
  if (c.hello.infoBytes != round.infoBytes)
    return conflict(it, round,
                    "rank " + std::to_string(c.hello.rank) + " runs a different gyre version");
  if (round.byRank[c.hello.rank])
    return conflict(it, round,
                    "two processes claim rank " + std::to_string(c.hello.rank) + ": " +
                        describeClient(*round.byRank[c.hello.rank]) + " and one from " + c.from);
  c.waiting = true;
  if (c.hello.timeoutMs) {
    // Answer shortly before the rank gives up on its own, so that it hears who is missing.
    const int64_t ms = c.hello.timeoutMs;
    c.answerBy = c.acceptedAt + (ms - std::clamp<int64_t>(ms / 10, 1, 1000)) * kMs;
  }
  round.byRank[c.hello.rank] = &c;
  ++round.arrived;
  if (round.arrived < round.nranks) return;
  // Full, unless a rank left and its goodbye is still unread: look first.
  const uint64_t roundNo = c.hello.round;
  for (int r = 0; r < round.nranks; ++r) {
    Client* member = rounds_[roundNo].byRank[r];
    if (!member || !member->sock.peerClosed()) continue;
    for (auto m = clients_.begin(); m != clients_.end(); ++m)
      if (&*m == member) {
        left(m);
        break;
      }
    if (!rounds_.count(roundNo)) return;  // it failed the round
  }
  if (rounds_[roundNo].arrived == rounds_[roundNo].nranks) completeRound(roundNo);
}

void RootLoop::serve(ClientIt it) {
  Client& c = *it;
  if (c.closing) {  // read what it still sends, so that closing does not reset the reply away
    char sink[4096];
    ssize_t n = ::recv(c.sock.fd(), sink, sizeof(sink), MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) clients_.erase(it);
    return;
  }
  if (c.waiting) {  // a waiting rank only ever sends EOF (it died or gave up)
    char b;
    ssize_t n = ::recv(c.sock.fd(), &b, 1, MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) left(it);
    return;
  }
  uint8_t* dst;
  size_t want;
  if (c.headerGot < sizeof(Hello)) {
    dst = reinterpret_cast<uint8_t*>(&c.hello) + c.headerGot;
    want = sizeof(Hello) - c.headerGot;
  } else {
    dst = c.info.data() + c.infoGot;
    want = c.info.size() - c.infoGot;
  }
  ssize_t n = ::recv(c.sock.fd(), dst, want, MSG_DONTWAIT);
  if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
    ++refused_.silent;
    refused_.lastFrom = c.from;
    drop(it);
    return;
  }
  if (n < 0) return;
  const bool headerWasIncomplete = c.headerGot < sizeof(Hello);
  if (headerWasIncomplete)
    c.headerGot += static_cast<size_t>(n);
  else
    c.infoGot += static_cast<size_t>(n);
  if (headerWasIncomplete && c.headerGot == sizeof(Hello)) {
    Secret got;
    std::memcpy(got.data(), c.hello.secret, got.size());
    if (c.hello.magic != kHelloMagic || !secretsEqual(got, o_.secret)) {
      ++refused_.badSecret;
      refused_.lastFrom = c.from;
      GYRE_WARN(
          "rendezvous root at %s refused a connection from %s that did not present its secret",
          where_.c_str(), c.from.c_str());
      drop(it);
      return;
    }
    std::string bad;
    if (c.hello.version != kProtocolVersion)
      bad = "it speaks rendezvous protocol " + std::to_string(c.hello.version) + ", this root " +
            std::to_string(kProtocolVersion) + " (a different gyre version)";
    else if (c.hello.nranks < 1 || c.hello.nranks > GYRE_MAX_RANKS)
      bad = "nranks=" + std::to_string(c.hello.nranks) + " is outside 1 to GYRE_MAX_RANKS";
    else if (c.hello.rank < 0 || c.hello.rank >= c.hello.nranks)
      bad = "rank " + std::to_string(c.hello.rank) + " is outside [0, " +
            std::to_string(c.hello.nranks) + ")";
    else if (c.hello.infoBytes > kMaxInfoBytes)
      bad = "its description is " + std::to_string(c.hello.infoBytes) + " bytes";
    if (!bad.empty()) {
      ++refused_.badClaim;
      refused_.lastFrom = c.from;
      sendReply(c, ReplyStatus::Refused, "malformed rendezvous request: " + bad);
      // The rest of its hello may still be on its way: closing now would
      // reset the connection and lose the answer.
      c.sock.setNonBlocking(true);
      ::shutdown(c.sock.fd(), SHUT_WR);
      c.closing = true;
      return;
    }
    c.info.resize(c.hello.infoBytes);
  }
  if (c.headerGot == sizeof(Hello) && c.infoGot == c.info.size()) introduced(it);
}

void RootLoop::answerTimeouts() {
  const int64_t now = nowNs();
  for (auto it = clients_.begin(); it != clients_.end();) {
    if (it->closing && now - it->acceptedAt > kHelloTimeoutNs) {
      it = clients_.erase(it);
      continue;
    }
    if (!it->waiting && !it->closing && now - it->acceptedAt > kHelloTimeoutNs) {
      ++refused_.silent;  // said nothing useful in time
      refused_.lastFrom = it->from;
      it = drop(it);
      continue;
    }
    if (it->waiting && it->answerBy && now >= it->answerBy) {
      auto r = rounds_.find(it->hello.round);
      if (r == rounds_.end()) {
        it = drop(it);
        continue;
      }
      const std::string message = timedOutMessage(r->second, it->hello.timeoutMs);
      if (o_.trustClaims) {
        // Without this rank the round cannot complete: everyone hears it now.
        failRound(it->hello.round, ReplyStatus::TimedOut, message, -1);
        it = clients_.begin();
        continue;
      }
      // A claim's timeout must not end the round for the others.
      r->second.notes.push_back(describeClient(*it) + " gave up after " +
                                std::to_string(it->hello.timeoutMs) + " ms");
      sendReply(*it, ReplyStatus::TimedOut, message);
      it = drop(it);
      continue;
    }
    ++it;
  }
}

void RootLoop::run() {
  const int64_t startedAt = nowNs();
  // Reused so that an idle root allocates nothing: a process that forks its
  // ranks while this thread runs is safest when the thread holds no locks.
  std::vector<pollfd> fds;
  while (!finished_.load()) {
    fds.clear();
    fds.push_back({wakeFd_, POLLIN, 0});
    fds.push_back({listener_.fd(), POLLIN, 0});
    for (Client& c : clients_) fds.push_back({c.sock.fd(), POLLIN, 0});
    ::poll(fds.data(), fds.size(), 50);
    if (fds[0].revents) break;  // stop()
    const int64_t now = nowNs();
    if (lingerUntil_ && now > lingerUntil_) break;
    if (!lingerUntil_ && o_.lifetimeMs > 0 && now - startedAt > o_.lifetimeMs * kMs) {
      GYRE_WARN("rendezvous root at %s gave up: not every rank arrived within %lld ms",
                where_.c_str(), static_cast<long long>(o_.lifetimeMs));
      for (auto& [no, round] : rounds_)
        for (Client* c : round.byRank)
          if (c)
            sendReply(*c, ReplyStatus::TimedOut,
                      timedOutMessage(round, static_cast<uint32_t>(o_.lifetimeMs)));
      break;
    }
    if (fds[1].revents) acceptNew();
    // Serve the clients that were polled (those accepted just now wait for the next pass).
    std::vector<const Client*> ready;
    size_t idx = 2;
    for (Client& c : clients_) {
      if (idx < fds.size() && fds[idx].fd == c.sock.fd() && fds[idx].revents) ready.push_back(&c);
      ++idx;
    }
    for (const Client* want : ready) {
      auto it = std::find_if(clients_.begin(), clients_.end(),
                             [&](const Client& c) { return &c == want; });
      if (it != clients_.end()) serve(it);
      if (finished_.load()) break;
    }
    answerTimeouts();
  }
  finished_.store(true);
}

}  // namespace

RootServer::RootServer(const Options& options) : options_(options), ownerPid_(getpid()) {}

std::shared_ptr<RootServer> RootServer::start(const Options& options) {
  std::shared_ptr<RootServer> root(new RootServer(options));
  root->listener_ = Socket::listenOn(options.bind);
  root->listener_.setNonBlocking(true);
  root->advertise_ = options.advertise;
  root->advertise_.setPort(root->listener_.localAddr().port());
  if (pipe2(root->wakePipe_, O_CLOEXEC | O_NONBLOCK) != 0) throwSystemError("pipe2()", errno);
  root->thread_ = std::thread([r = root.get()] { r->run(); });
  return root;
}

RootServer::~RootServer() {
  if (getpid() == ownerPid_) {
    stop();
    if (thread_.joinable()) thread_.join();
  } else if (thread_.joinable()) {
    thread_.detach();  // a forked child's copy: the thread lives in the parent only
  }
  for (int fd : wakePipe_)
    if (fd >= 0) ::close(fd);
}

void RootServer::stop() {
  char b = 1;
  if (wakePipe_[1] >= 0) [[maybe_unused]]
    auto n = ::write(wakePipe_[1], &b, 1);
}

void RootServer::keepAlive(std::shared_ptr<RootServer> root) {
  static std::once_flag atforkOnce;
  std::call_once(atforkOnce, [] {
    // A forked rank must not keep the parent's root listener open: it would
    // hold the port and accept nothing. The fork happens under the
    // registry's lock, so the child copies the list and each listener whole,
    // not halfway through a root thread's closing of its listener (run) or
    // another thread's change to the list.
    pthread_atfork([] { gRegistryMu.lock(); }, [] { gRegistryMu.unlock(); },
                   [] {
                     for (auto& r : registry()) r->listener_.reset();
                     gRegistryMu.unlock();
                   });
  });
  // Joined outside the lock: run() takes it to close its listener.
  std::list<std::shared_ptr<RootServer>> finished;
  {
    std::lock_guard<std::mutex> lock(gRegistryMu);
    for (auto it = registry().begin(); it != registry().end();) {
      auto next = std::next(it);
      if ((*it)->finished()) finished.splice(finished.end(), registry(), it);
      it = next;
    }
    registry().push_back(std::move(root));
  }
}

void RootServer::releaseAddress(const SockAddr& address) {
  std::list<std::shared_ptr<RootServer>> released;
  {
    std::lock_guard<std::mutex> lock(gRegistryMu);
    for (auto it = registry().begin(); it != registry().end();) {
      if ((*it)->lingering_.load() && (*it)->advertise_.port() == address.port() &&
          (*it)->ownerPid_ == getpid()) {
        (*it)->stop();
        released.push_back(std::move(*it));
        it = registry().erase(it);
      } else {
        ++it;
      }
    }
  }
  // Joined here, outside the lock, as the last references go.
}

void RootServer::run() {
  RootLoop(options_, advertise_, listener_, wakePipe_[0], finished_, lingering_).run();
  finished_.store(true);
  // Under the lock that a fork takes: the child closes its copy (keepAlive).
  std::lock_guard<std::mutex> lock(gRegistryMu);
  listener_.reset();
}

}  // namespace gyre::bootstrap
