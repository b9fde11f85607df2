// The edges of what gyre accepts: the largest rank count, memory that runs
// out, and every setting at the largest value it accepts (each must work as
// documented: GYRE_TIMEOUT_MS=9223372036854 used to time out at once).
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "base/clock.h"
#include "tests/support/multiprocess.h"

namespace gyre::test {
namespace {

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

TEST(Deadline, TheLongestTimeoutIsTheEndOfTimeNotThePast) {
  const int64_t longest = INT64_MAX / 1000000;  // GYRE_TIMEOUT_MS's largest accepted value
  for (int64_t ms : {longest, longest - 1, INT64_MAX, int64_t{1} << 62}) {
    Deadline d = Deadline::afterMs(ms);
    EXPECT_FALSE(d.expired()) << ms;
    EXPECT_GT(d.remainingNs(), int64_t{1} << 62) << ms;
    EXPECT_EQ(d.pollMs(100), 100) << ms;
  }
  EXPECT_TRUE(Deadline::afterMs(0).isNever());
  EXPECT_FALSE(Deadline::afterMs(1000).isNever());
}

TEST(Ranks, MoreThanTheMaximumIsAnInvalidArgumentNamingIt) {
  gyreUniqueId id;
  ASSERT_EQ(gyreGetUniqueId(&id), gyreSuccess);
  gyreComm_t comm = nullptr;
  for (int n : {GYRE_MAX_RANKS + 1, INT_MAX}) {
    EXPECT_EQ(gyreCommInitRank(&comm, n, id, 0), gyreInvalidArgument);
    const std::string msg = gyreGetLastError(nullptr);
    EXPECT_TRUE(contains(msg, "GYRE_MAX_RANKS") && contains(msg, std::to_string(GYRE_MAX_RANKS)))
        << msg;
    EXPECT_EQ(comm, nullptr);
  }
  gyreComm_t comms[2];
  EXPECT_EQ(gyreCommInitAll(comms, INT_MAX, nullptr), gyreInvalidArgument);
  EXPECT_TRUE(contains(gyreGetLastError(nullptr), "GYRE_MAX_RANKS"));
  setenv("GYRE_RANK", "0", 1);
  setenv("GYRE_WORLD_SIZE", std::to_string(GYRE_MAX_RANKS + 1).c_str(), 1);
  setenv("GYRE_COMM_ID", "127.0.0.1:1", 1);
  EXPECT_EQ(gyreCommInitFromEnv(&comm, nullptr), gyreInvalidArgument);
  EXPECT_TRUE(contains(gyreGetLastError(nullptr), "GYRE_WORLD_SIZE")) << gyreGetLastError(nullptr);
  for (const char* v : {"GYRE_RANK", "GYRE_WORLD_SIZE", "GYRE_COMM_ID"}) unsetenv(v);
}

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAddressSanitizer = true;
#else
constexpr bool kAddressSanitizer = false;
#endif

TEST(Ranks, MemoryThatRunsOutIsASystemErrorNotTheOomKiller) {
  // The maximum, in a process whose address space is nearly full: the
  // allocation for the ranks fails, and init says so.
  if (kAddressSanitizer)
    GTEST_SKIP() << "AddressSanitizer reserves address space that RLIMIT_AS would refuse";
  gyreUniqueId id;
  ASSERT_EQ(gyreGetUniqueId(&id), gyreSuccess);
  int out[2];
  ASSERT_EQ(pipe(out), 0);
  pid_t child = fork();
  if (child == 0) {
    close(out[0]);
    std::ifstream statm("/proc/self/statm");
    long pages = 0;
    statm >> pages;
    const rlim_t limit = static_cast<rlim_t>(pages) * sysconf(_SC_PAGESIZE) + (256u << 20);
    rlimit r{limit, limit};
    setrlimit(RLIMIT_AS, &r);
    // Fill the address space with 1 MiB blocks, then give 4 back: small
    // allocations still succeed, the ranks' tables (8 MiB and more) do not.
    std::vector<void*> blocks;
    while (void* p = std::malloc(1 << 20)) blocks.push_back(p);
    for (int i = 0; i < 4 && !blocks.empty(); ++i) {
      std::free(blocks.back());
      blocks.pop_back();
    }
    gyreConfig_t cfg = GYRE_CONFIG_INITIALIZER;
    cfg.timeoutMs = 3000;
    gyreComm_t comm = nullptr;
    gyreResult_t rc = gyreCommInitRankConfig(&comm, GYRE_MAX_RANKS, id, 1, &cfg);
    std::string line = std::to_string(rc) + " " + gyreGetLastError(nullptr);
    if (write(out[1], line.data(), line.size()) < 0) _exit(3);
    _exit(0);
  }
  close(out[1]);
  std::string got;
  char buf[512];
  for (ssize_t n; (n = read(out[0], buf, sizeof(buf))) > 0;)
    got.append(buf, static_cast<size_t>(n));
  close(out[0]);
  int status = 0;
  waitpid(child, &status, 0);
  ASSERT_TRUE(WIFEXITED(status)) << "the child died of signal " << WTERMSIG(status);
  EXPECT_EQ(got.substr(0, 2), std::to_string(gyreSystemError) + " ") << got;
  EXPECT_TRUE(contains(got, "out of memory")) << got;
}

// Each setting at the largest value it accepts: a 2-rank communicator is
// created and runs an AllReduce and a Broadcast.
struct Limit {
  const char* name;
  std::map<std::string, std::string> env;
};

class SettingsAtTheirLimits : public testing::TestWithParam<Limit> {};

TEST_P(SettingsAtTheirLimits, ACommunicatorWorks) {
  const Limit& limit = GetParam();
  RunOutcome out = runRanks(2, [&](int rank, int nranks, const gyreUniqueId& id) {
    for (const auto& [k, v] : limit.env) setenv(k.c_str(), v.c_str(), 1);
    Checker check(rank);
    gyreComm_t comm = nullptr;
    if (!check.expectOk(gyreCommInitRank(&comm, nranks, id, rank), "init")) return 1;
    std::vector<float> v(1000, 1.0f);
    for (int i = 0; i < 3; ++i)
      check.expectOk(
          gyreAllReduce(v.data(), v.data(), v.size(), gyreFloat32, gyreSum, comm, nullptr),
          "allreduce");
    check.expect(v[0] == 8.0f, "allreduce result");
    check.expectOk(gyreBroadcast(v.data(), v.data(), v.size(), gyreFloat32, 1, comm, nullptr),
                   "broadcast");
    check.expectOk(gyreCommDestroy(comm), "destroy");
    return check.failures();
  });
  EXPECT_TRUE(out.allSucceeded()) << limit.name << ":\n" << out.describe();
}

INSTANTIATE_TEST_SUITE_P(
    Largest, SettingsAtTheirLimits,
    testing::Values(
        Limit{"timeout", {{"GYRE_TIMEOUT_MS", "9223372036854"}}},
        Limit{"timeout_tcp", {{"GYRE_TIMEOUT_MS", "9223372036854"}, {"GYRE_TRANSPORT", "tcp"}}},
        Limit{"spin_and_yield",
              {{"GYRE_SPIN_NS", "10000000000"}, {"GYRE_YIELD_NS", "10000000000"}}},
        Limit{"retune", {{"GYRE_TUNER_ONLINE", "1"}, {"GYRE_TUNER_RETUNE", "9223372036854775807"}}},
        Limit{"tcp_buffers",
              {{"GYRE_TRANSPORT", "tcp"},
               {"GYRE_TCP_BUFFER_BYTES", "17179869183G"},
               {"GYRE_TCP_CHUNK_BYTES", "64M"},
               {"GYRE_NSOCKS_PERPEER", "16"}}},
        // Each at its largest alone: both at once ask /dev/shm for 8 GiB per rank.
        Limit{"shm_slots", {{"GYRE_SHM_SLOTS", "64"}, {"GYRE_SHM_SLOT_BYTES", "4K"}}},
        Limit{"shm_slot_bytes", {{"GYRE_SHM_SLOTS", "2"}, {"GYRE_SHM_SLOT_BYTES", "64M"}}},
        Limit{"small_messages", {{"GYRE_SMALL_MSG_BYTES", "17179869183G"}}}),
    [](const auto& p) { return std::string(p.param.name); });

}  // namespace
}  // namespace gyre::test
