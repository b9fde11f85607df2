#include "harness/train/elastic.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <stdexcept>
#include <thread>

namespace fs = std::filesystem;

namespace gyre::harness::elastic {

namespace {

constexpr const char* kRequest = ".request";
constexpr const char* kTicket = ".ticket";

struct TicketFile {
  int32_t newRanks;
  int32_t rank;
  gyreJoinHandle handle;
};

// Written whole under a temporary name, then renamed into place.
void writeAtomically(const fs::path& path, const void* bytes, size_t size) {
  const fs::path tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(static_cast<const char*>(bytes), static_cast<std::streamsize>(size));
    if (!out) throw std::runtime_error("elastic: cannot write " + tmp.string());
  }
  fs::rename(tmp, path);
}

}  // namespace

fs::path directory(const fs::path& checkpointDir) { return checkpointDir / "elastic"; }

void clearStale(const fs::path& checkpointDir) {
  std::error_code ec;
  fs::remove_all(directory(checkpointDir), ec);
  fs::create_directories(directory(checkpointDir));
}

std::vector<std::string> requests(const fs::path& checkpointDir) {
  std::vector<std::pair<fs::file_time_type, std::string>> found;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(directory(checkpointDir), ec)) {
    const std::string name = entry.path().filename().string();
    if (!name.starts_with("join-") || !name.ends_with(kRequest)) continue;
    found.emplace_back(entry.last_write_time(ec), name.substr(5, name.size() - 5 - std::string(kRequest).size()));
  }
  std::sort(found.begin(), found.end());
  std::vector<std::string> ids;
  for (auto& f : found) ids.push_back(f.second);
  return ids;
}

void admit(const fs::path& checkpointDir, const std::vector<std::string>& ids, int oldRanks, int newRanks,
           const gyreJoinHandle& handle) {
  const fs::path dir = directory(checkpointDir);
  for (size_t i = 0; i < ids.size(); ++i) {
    const TicketFile t{newRanks, oldRanks + static_cast<int32_t>(i), handle};
    writeAtomically(dir / ("join-" + ids[i] + kTicket), &t, sizeof t);
    std::error_code ec;
    fs::remove(dir / ("join-" + ids[i] + kRequest), ec);
  }
}

void markFinished(const fs::path& checkpointDir) {
  const char done = 1;
  writeAtomically(directory(checkpointDir) / "finished", &done, 1);
}

std::string requestJoin(const fs::path& checkpointDir) {
  char host[256] = "host";
  gethostname(host, sizeof host - 1);
  const std::string id = std::string(host) + "-" + std::to_string(getpid());
  fs::create_directories(directory(checkpointDir));
  writeAtomically(directory(checkpointDir) / ("join-" + id + kRequest), id.data(), id.size());
  return id;
}

std::optional<Ticket> waitForTicket(const fs::path& checkpointDir, const std::string& id, double waitSeconds) {
  const fs::path dir = directory(checkpointDir);
  const fs::path ticket = dir / ("join-" + id + kTicket);
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(waitSeconds);
  for (;;) {
    std::ifstream in(ticket, std::ios::binary);
    if (in) {
      TicketFile t;
      in.read(reinterpret_cast<char*>(&t), sizeof t);
      if (in.gcount() != sizeof t) throw std::runtime_error("elastic: " + ticket.string() + " is truncated");
      std::error_code ec;
      fs::remove(ticket, ec);
      return Ticket{t.newRanks, t.rank, t.handle};
    }
    if (fs::exists(dir / "finished")) {
      std::error_code ec;
      fs::remove(dir / ("join-" + id + kRequest), ec);
      return std::nullopt;
    }
    if (std::chrono::steady_clock::now() > until)
      throw std::runtime_error("elastic: no place in the run within " + std::to_string(waitSeconds) +
                               " s (no checkpoint boundary took this process's request " +
                               (dir / ("join-" + id + kRequest)).string() + ")");
    // The running ranks answer at their next checkpoint boundary, seconds
    // or minutes away: a poll a few times a second costs nothing.
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

void event(const std::string& what) {
  const auto now = std::chrono::system_clock::now();
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  gmtime_r(&t, &tm);
  char when[32];
  std::strftime(when, sizeof when, "%H:%M:%S", &tm);
  std::printf("gyre-train: elastic: %s.%03lld: %s\n", when, static_cast<long long>(ms), what.c_str());
  std::fflush(stdout);
}

}  // namespace gyre::harness::elastic
