#include "bootstrap/root_server.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <list>
#include <mutex>
#include <vector>

#include "bootstrap/rendezvous_protocol.h"
#include "core/error.h"
#include "core/log.h"

namespace gyre::bootstrap {

namespace {

constexpr int64_t kHelloTimeoutNs = 10'000'000'000;  // a connection must introduce itself
constexpr uint32_t kMaxInfoBytes = 64 * 1024;

struct Client {
  Socket sock;
  Hello hello{};
  size_t headerGot = 0;
  std::vector<uint8_t> info;
  size_t infoGot = 0;
  int64_t acceptedAt = 0;
  bool waiting = false;  // introduced, waiting for the round to fill
};

struct Round {
  int nranks = 0;
  uint32_t infoBytes = 0;
  std::vector<Client*> byRank;
  int arrived = 0;
};

void sendReply(Client& c, ReplyStatus status, const std::string& message,
               const std::vector<uint8_t>* table, uint32_t infoBytes, int nranks) {
  Reply r{};
  r.magic = kReplyMagic;
  r.status = status;
  r.messageBytes = static_cast<uint32_t>(message.size());
  r.infoBytes = infoBytes;
  r.nranks = nranks;
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
    // hold the port and accept nothing.
    pthread_atfork(nullptr, nullptr, [] {
      for (auto& r : registry()) r->listener_.reset();
    });
  });
  std::lock_guard<std::mutex> lock(gRegistryMu);
  registry().remove_if([](const std::shared_ptr<RootServer>& r) { return r->finished(); });
  registry().push_back(std::move(root));
}

void RootServer::run() {
  std::list<Client> clients;
  std::map<uint64_t, Round> rounds;
  const int64_t startedAt = nowNs();
  auto dropClient = [&](std::list<Client>::iterator it) {
    if (it->waiting) {
      auto r = rounds.find(it->hello.round);
      if (r != rounds.end() && r->second.byRank[it->hello.rank] == &*it) {
        r->second.byRank[it->hello.rank] = nullptr;
        --r->second.arrived;
      }
    }
    return clients.erase(it);
  };

  // Reused so that an idle root allocates nothing: a process that forks its
  // ranks while this thread runs is safest when the thread holds no locks.
  std::vector<pollfd> fds;
  while (!finished_.load()) {
    fds.clear();
    fds.push_back({wakePipe_[0], POLLIN, 0});
    fds.push_back({listener_.fd(), POLLIN, 0});
    for (Client& c : clients) fds.push_back({c.sock.fd(), POLLIN, 0});
    ::poll(fds.data(), fds.size(), 200);
    if (fds[0].revents) break;  // stop()
    if (options_.lifetimeMs > 0 && nowNs() - startedAt > options_.lifetimeMs * 1'000'000) {
      GYRE_WARN("rendezvous root at %s gave up: not every rank arrived within %lld ms",
                advertise_.str().c_str(), static_cast<long long>(options_.lifetimeMs));
      break;
    }
    if (fds[1].revents) {
      for (;;) {
        Socket s;
        try {
          s = listener_.tryAccept();
        } catch (const Error&) {
          break;
        }
        if (!s.valid()) break;
        s.setNonBlocking(true);
        clients.push_back(Client{std::move(s), {}, 0, {}, 0, nowNs(), false});
      }
    }
    size_t idx = 2;
    for (auto it = clients.begin(); it != clients.end(); ++idx) {
      Client& c = *it;
      bool readable = idx < fds.size() && fds[idx].fd == c.sock.fd() && fds[idx].revents;
      if (!readable) {
        if (!c.waiting && nowNs() - c.acceptedAt > kHelloTimeoutNs) {
          it = dropClient(it);  // said nothing useful in time
          continue;
        }
        ++it;
        continue;
      }
      if (c.waiting) {  // a waiting rank only ever sends EOF (it died or gave up)
        char b;
        if (::recv(c.sock.fd(), &b, 1, MSG_DONTWAIT) != -1 || errno != EAGAIN) {
          it = dropClient(it);
          continue;
        }
        ++it;
        continue;
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
        it = dropClient(it);
        continue;
      }
      if (n < 0) {
        ++it;
        continue;
      }
      bool headerWasIncomplete = c.headerGot < sizeof(Hello);
      if (headerWasIncomplete)
        c.headerGot += static_cast<size_t>(n);
      else
        c.infoGot += static_cast<size_t>(n);
      if (headerWasIncomplete && c.headerGot == sizeof(Hello)) {
        Secret got;
        std::memcpy(got.data(), c.hello.secret, got.size());
        if (c.hello.magic != kHelloMagic || !secretsEqual(got, options_.secret)) {
          GYRE_WARN("rendezvous root at %s refused a connection that did not present its secret",
                    advertise_.str().c_str());
          it = dropClient(it);
          continue;
        }
        if (c.hello.version != kProtocolVersion || c.hello.nranks < 1 || c.hello.rank < 0 ||
            c.hello.rank >= c.hello.nranks || c.hello.infoBytes > kMaxInfoBytes) {
          sendReply(c, ReplyStatus::Failed, "malformed rendezvous request (version, rank or size)",
                    nullptr, 0, 0);
          it = dropClient(it);
          continue;
        }
        c.info.resize(c.hello.infoBytes);
      }
      if (c.headerGot < sizeof(Hello) || c.infoGot < c.info.size()) {
        ++it;
        continue;
      }
      // Introduced completely: file it under its round.
      if (options_.expectRound != ~0ull && c.hello.round != options_.expectRound) {
        bool early = c.hello.round > options_.expectRound;
        sendReply(c, early ? ReplyStatus::Retry : ReplyStatus::Failed,
                  early ? "this root serves an earlier round" : "this rendezvous round is over",
                  nullptr, 0, 0);
        it = dropClient(it);
        continue;
      }
      Round& round = rounds[c.hello.round];
      if (round.nranks == 0) {
        round.nranks = c.hello.nranks;
        round.infoBytes = c.hello.infoBytes;
        round.byRank.assign(static_cast<size_t>(round.nranks), nullptr);
      }
      std::string problem;
      if (c.hello.nranks != round.nranks)
        problem = "rank " + std::to_string(c.hello.rank) +
                  " was started with nranks=" + std::to_string(c.hello.nranks) +
                  " but other ranks use nranks=" + std::to_string(round.nranks);
      else if (c.hello.infoBytes != round.infoBytes)
        problem = "rank " + std::to_string(c.hello.rank) + " runs a different gyre version";
      else if (round.byRank[c.hello.rank])
        problem = "two processes claim rank " + std::to_string(c.hello.rank);
      if (!problem.empty()) {
        // The round cannot succeed: tell everyone in it, not only the latecomer.
        sendReply(c, ReplyStatus::Failed, problem, nullptr, 0, 0);
        uint64_t bad = c.hello.round;
        for (Client* waiting : round.byRank)
          if (waiting) sendReply(*waiting, ReplyStatus::Failed, problem, nullptr, 0, 0);
        for (auto ci = clients.begin(); ci != clients.end();)
          ci = (ci->waiting && ci->hello.round == bad) || &*ci == &c ? clients.erase(ci)
                                                                     : std::next(ci);
        rounds.erase(bad);
        if (!options_.persistent) finished_.store(true);
        break;  // the client list changed under the iterator; poll again
      }
      c.waiting = true;
      round.byRank[c.hello.rank] = &c;
      ++round.arrived;
      ++it;
      if (round.arrived < round.nranks) continue;

      std::vector<uint8_t> table(size_t(round.nranks) * round.infoBytes);
      for (int r = 0; r < round.nranks; ++r)
        std::memcpy(table.data() + size_t(r) * round.infoBytes, round.byRank[r]->info.data(),
                    round.infoBytes);
      uint64_t done = c.hello.round;
      for (int r = 0; r < round.nranks; ++r)
        sendReply(*round.byRank[r], ReplyStatus::Ok, "", &table, round.infoBytes, round.nranks);
      for (auto ci = clients.begin(); ci != clients.end();)
        ci = (ci->waiting && ci->hello.round == done) ? clients.erase(ci) : std::next(ci);
      rounds.erase(done);
      GYRE_INFO("rendezvous root at %s: round %llu complete", advertise_.str().c_str(),
                static_cast<unsigned long long>(done));
      if (!options_.persistent) finished_.store(true);
      break;  // the client list changed under the iterator; poll again
    }
  }
  finished_.store(true);
  listener_.reset();
}

}  // namespace gyre::bootstrap
