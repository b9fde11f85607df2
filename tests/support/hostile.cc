#include "tests/support/hostile.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

namespace gyre::test {

namespace {

std::set<unsigned long> socketInodes(pid_t pid) {
  std::set<unsigned long> inodes;
  const std::string dir = "/proc/" + std::to_string(pid) + "/fd";
  DIR* d = opendir(dir.c_str());
  if (!d) return inodes;
  while (dirent* e = readdir(d)) {
    char target[128];
    ssize_t n = readlink((dir + "/" + e->d_name).c_str(), target, sizeof(target) - 1);
    if (n <= 0) continue;
    target[n] = '\0';
    unsigned long inode = 0;
    if (std::sscanf(target, "socket:[%lu]", &inode) == 1) inodes.insert(inode);
  }
  closedir(d);
  return inodes;
}

// /proc/net/tcp{,6} lines: "sl local_address rem_address st ... inode".
void scan(pid_t pid, bool v6, const std::set<unsigned long>& inodes,
          std::vector<bootstrap::SockAddr>& out) {
  std::ifstream f("/proc/" + std::to_string(pid) + (v6 ? "/net/tcp6" : "/net/tcp"));
  std::string line;
  std::getline(f, line);  // header
  while (std::getline(f, line)) {
    std::istringstream in(line);
    std::string sl, local, remote, state, skip;
    unsigned long inode = 0;
    in >> sl >> local >> remote >> state;
    for (int i = 0; i < 5; ++i) in >> skip;  // tx:rx tr:when retrnsmt uid timeout
    in >> inode;
    if (state != "0A" || !inodes.count(inode)) continue;  // 0A: LISTEN
    const size_t colon = local.find(':');
    const std::string hex = local.substr(0, colon);
    const unsigned port = static_cast<unsigned>(std::stoul(local.substr(colon + 1), nullptr, 16));
    bootstrap::SockAddr a;
    if (!v6) {
      auto* s = reinterpret_cast<sockaddr_in*>(&a.storage);
      s->sin_family = AF_INET;
      s->sin_addr.s_addr =
          static_cast<in_addr_t>(std::stoul(hex, nullptr, 16));  // already network order
      a.len = sizeof(sockaddr_in);
    } else {
      auto* s = reinterpret_cast<sockaddr_in6*>(&a.storage);
      s->sin6_family = AF_INET6;
      for (int w = 0; w < 4; ++w) {
        uint32_t word =
            static_cast<uint32_t>(std::stoul(hex.substr(size_t(w) * 8, 8), nullptr, 16));
        std::memcpy(&s->sin6_addr.s6_addr[w * 4], &word, 4);
      }
      a.len = sizeof(sockaddr_in6);
    }
    a.setPort(static_cast<uint16_t>(port));
    out.push_back(a);
  }
}

}  // namespace

std::vector<bootstrap::SockAddr> listeningSockets(pid_t pid) {
  std::vector<bootstrap::SockAddr> out;
  const std::set<unsigned long> inodes = socketInodes(pid);
  if (inodes.empty()) return out;
  scan(pid, false, inodes, out);
  scan(pid, true, inodes, out);
  return out;
}

std::vector<bootstrap::SockAddr> awaitListeners(pid_t pid, size_t count, int timeoutMs) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeoutMs);
  for (;;) {
    std::vector<bootstrap::SockAddr> found = listeningSockets(pid);
    if (found.size() >= count || std::chrono::steady_clock::now() > end) return found;
    if (kill(pid, 0) != 0) return found;
    // Polling /proc: the process gives no other sign that it listens.
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

std::vector<bootstrap::Socket> openNoise(const bootstrap::SockAddr& at, int silent, int partial) {
  std::vector<bootstrap::Socket> out;
  bootstrap::SockAddr to = at;
  if (to.family() == AF_INET &&
      reinterpret_cast<sockaddr_in*>(&to.storage)->sin_addr.s_addr == htonl(INADDR_ANY))
    to = bootstrap::SockAddr::loopback(AF_INET, at.port());
  for (int i = 0; i < silent + partial; ++i) {
    bootstrap::Socket s = bootstrap::Socket::connectTo(to, Deadline::afterMs(5000), "a listener");
    if (i >= silent) {
      const uint8_t half[6] = {0x4e, 0x43, 0x59,
                               0x47, 0x02, 0x00};  // a magic and the start of a kind
      s.sendAll(half, sizeof(half), Deadline::afterMs(5000), "a listener");
    }
    out.push_back(std::move(s));
  }
  return out;
}

bootstrap::Socket sendClaim(const bootstrap::SockAddr& root, const Claim& c) {
  bootstrap::Socket s = bootstrap::Socket::connectTo(root, Deadline::afterMs(5000), "the root");
  bootstrap::Hello h{};
  h.magic = bootstrap::kHelloMagic;
  h.version = c.version;
  std::memcpy(h.secret, c.secret.data(), sizeof(h.secret));
  h.round = c.round;
  h.nranks = c.nranks;
  h.rank = c.rank;
  h.infoBytes = c.infoBytes;
  h.timeoutMs = c.timeoutMs;
  std::vector<uint8_t> info(c.infoBytes, 0);
  std::memcpy(info.data(), &c.info, std::min<size_t>(info.size(), sizeof(c.info)));
  s.sendAll(&h, sizeof(h), Deadline::afterMs(5000), "the root");
  s.sendAll(info.data(), info.size(), Deadline::afterMs(5000), "the root");
  return s;
}

RootAnswer readAnswer(bootstrap::Socket& s, int timeoutMs) {
  RootAnswer a;
  const Deadline d = Deadline::afterMs(timeoutMs);
  try {
    s.recvAll(&a.reply, sizeof(a.reply), d, "the root");
    a.message.resize(a.reply.messageBytes);
    if (!a.message.empty()) s.recvAll(a.message.data(), a.message.size(), d, "the root");
    if (a.reply.status == bootstrap::ReplyStatus::Ok &&
        a.reply.infoBytes == sizeof(bootstrap::PeerInfo)) {
      a.table.resize(static_cast<size_t>(a.reply.nranks));
      s.recvAll(a.table.data(), a.table.size() * sizeof(bootstrap::PeerInfo), d, "the root");
    }
  } catch (const Error& e) {
    if (e.code() == gyreTimeout) throw;
    a.closed = true;
  }
  return a;
}

}  // namespace gyre::test
