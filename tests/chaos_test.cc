// Chaos mode of the soak (issue 24, item 6; docs/reliability.md, "Soak"):
// each trial runs the soak's random operations on 4 ranks, and at a random
// moment (a random operation, then a random delay of up to 2 ms while the
// ranks go on) the parent SIGKILLs or SIGSTOPs a random rank. Every survivor
// must fail with a named error (gyreRemoteError or gyreTimeout) naming the
// victim, none may hang or crash, every result before that must be exact,
// and nothing of the trial's ranks may be left in /dev/shm.
// GYRE_CHAOS_TRIALS sets the trials per transport, GYRE_CHAOS_SEED the seed
// (each trial draws from it and its number, printed on failure);
// GYRE_CHAOS_STOP_TIMEOUT_MS the ranks' GYRE_TIMEOUT_MS in a stop trial.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "base/clock.h"
#include "tests/support/multiprocess.h"
#include "tests/support/random_ops.h"
#include "tests/support/shm_names.h"

namespace gyre::test {
namespace {

int envInt(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : fallback;
}

// What one trial does, all drawn from the seed and the trial's number.
struct Trial {
  uint64_t seed;
  int victim;
  bool stop;    // SIGSTOP (the others time out) rather than SIGKILL
  int atOp;     // the victim tells the parent as it starts this operation
  int delayUs;  // after which the parent waits this long, the ranks going on
  uint64_t opsSeed;

  Trial(uint64_t base, int number) : seed(base * 1000003ull + static_cast<uint64_t>(number)) {
    Rng rng{seed};
    victim = rng.below(4);
    stop = rng.below(2) == 1;
    atOp = rng.below(200);
    delayUs = rng.below(2000);
    opsSeed = rng.next();
  }
  std::string describe() const {
    return "trial seed " + std::to_string(seed) + ": " + (stop ? "SIGSTOP" : "SIGKILL") + " rank " +
           std::to_string(victim) + " at operation " + std::to_string(atOp) + " + " +
           std::to_string(delayUs) + " us";
  }
};

// A survivor's report line, which the parent parses: when it failed, how, why.
constexpr const char* kReport = "chaos-error ";

struct Survivor {
  int64_t atNs = 0;
  int result = -1;
  std::string message;
};

bool parseReport(const std::string& output, Survivor* s) {
  const size_t at = output.find(kReport);
  if (at == std::string::npos) return false;
  const size_t eol = output.find('\n', at);
  std::string line =
      output.substr(at + std::strlen(kReport),
                    eol == std::string::npos ? std::string::npos : eol - at - std::strlen(kReport));
  const size_t sp1 = line.find(' '), sp2 = line.find(' ', sp1 + 1);
  if (sp1 == std::string::npos || sp2 == std::string::npos) return false;
  s->atNs = std::atoll(line.substr(0, sp1).c_str());
  s->result = std::atoi(line.substr(sp1 + 1, sp2 - sp1 - 1).c_str());
  s->message = line.substr(sp2 + 1);
  return true;
}

int rankBody(int rank, int n, const gyreUniqueId& id, const char* transport, const Trial& trial,
             int timeoutMs, int reachedFd, int doneFd) {
  Checker check(rank);
  gyreComm_t world = initRank(rank, n, id, transport, timeoutMs);
  if (!world) return 1;
  gyreComm_t half = nullptr;  // ranks of the same parity
  if (!check.expectOk(gyreCommSplit(world, rank % 2, rank, &half, nullptr), "split")) return 1;
  auto atOp = [&](int i) {
    if (rank == trial.victim && i == trial.atOp) {
      const char b = 1;
      check.expect(write(reachedFd, &b, 1) == 1, "telling the parent the moment came");
    }
  };
  // More operations than run before the victim is gone: every survivor must
  // end in an error.
  const RandomOpsEnd end = runRandomOps(check, world, half, rank, n, INT_MAX, trial.opsSeed, atOp);
  std::printf("%s%lld %d %s\n", kReport, static_cast<long long>(nowNs()),
              static_cast<int>(end.failed), end.error.c_str());
  const char b = 1;
  check.expect(write(doneFd, &b, 1) == 1, "telling the parent this rank is done");
  check.expect(end.failed == gyreRemoteError || end.failed == gyreTimeout,
               std::string("a remote error or a timeout, not ") + gyreGetErrorString(end.failed));
  check.expectOk(gyreCommDestroy(half), "destroy half");
  check.expectOk(gyreCommDestroy(world), "destroy");
  return check.failures();
}

class Chaos : public testing::TestWithParam<const char*> {};

TEST_P(Chaos, EverySurvivorGetsANamedErrorAndNothingIsLeft) {
  const char* transport = GetParam();
  const int trials = envInt("GYRE_CHAOS_TRIALS", 10);
  const uint64_t seed = static_cast<uint64_t>(envInt("GYRE_CHAOS_SEED", 1));
  // Long enough that a live rank descheduled under CI's load is not the one timed out.
  const int stopTimeoutMs = envInt("GYRE_CHAOS_STOP_TIMEOUT_MS", 4000);
  std::vector<double> kills, stops;  // seconds from the signal to each survivor's error
  int passed = 0, directly = 0;      // survivors whose error names the victim itself
  for (int t = 0; t < trials; ++t) {
    const Trial trial(seed, t);
    SCOPED_TRACE(trial.describe());
    int reached[2], done[2];
    ASSERT_EQ(pipe(reached), 0);
    ASSERT_EQ(pipe(done), 0);
    std::vector<pid_t> pids(4, -1);
    int64_t signalledNs = 0;
    std::thread killer;
    RunOptions o;
    o.timeoutSec = 60;
    o.onStarted = [&](int r, pid_t pid) {
      pids[r] = pid;
      if (r != 3) return;
      // After the last fork, so no rank is forked while this thread runs.
      close(reached[1]);
      close(done[1]);
      killer = std::thread([&] {
        char b;
        if (read(reached[0], &b, 1) != 1)
          return;  // the victim never got there: the checks below say why
        const int64_t until = nowNs() + trial.delayUs * 1000ll;
        while (nowNs() < until) {
        }
        signalledNs = nowNs();
        kill(pids[trial.victim], trial.stop ? SIGSTOP : SIGKILL);
        if (!trial.stop) return;
        // The stopped rank goes once every survivor has its error (or the
        // run's bound has killed them all and the pipe reads nothing more).
        for (int got = 0; got < 3 && read(done[0], &b, 1) == 1;) ++got;
        kill(pids[trial.victim], SIGKILL);
      });
    };
    const std::set<std::string> before = shmNames();
    const int timeoutMs = trial.stop ? stopTimeoutMs : 30000;
    RunOutcome out = runRanks(
        4,
        [&](int r, int n, const gyreUniqueId& id) {
          close(reached[0]);
          close(done[0]);
          return rankBody(r, n, id, transport, trial, timeoutMs, reached[1], done[1]);
        },
        o);
    if (killer.joinable()) killer.join();
    close(reached[0]);
    close(done[0]);

    std::vector<std::string> problems;
    auto expect = [&](bool ok, const std::string& what) {
      if (!ok) problems.push_back(what);
    };
    expect(!out.timedOut, "the trial timed out");
    expect(signalledNs != 0, "the victim never reached its moment");
    // A survivor's error names the victim, or a survivor whose own error
    // does (transitively): one that was stuck, on the split's child, behind
    // a survivor that had already failed and left can only name that one.
    std::vector<Survivor> reports(4);
    std::vector<bool> reported(4, false), blamesVictim(4, false);
    for (const RankOutcome& r : out.ranks) {
      const std::string who = "rank " + std::to_string(r.rank);
      if (r.rank == trial.victim) {
        expect(r.signal == SIGKILL, who + ", the victim, did not end by SIGKILL");
        continue;
      }
      expect(r.exitCode == 0, who + " failed");
      Survivor& s = reports[r.rank];
      reported[r.rank] = parseReport(r.output, &s);
      if (!reported[r.rank]) {
        expect(false, who + " reported no error");
        continue;
      }
      expect(s.result == gyreRemoteError || s.result == gyreTimeout,
             who + " failed with " + gyreGetErrorString(static_cast<gyreResult_t>(s.result)) +
                 ", not a remote error or a timeout: " + s.message);
      if (signalledNs) (trial.stop ? stops : kills).push_back((s.atNs - signalledNs) / 1e9);
    }
    auto names = [&](int survivor, int rank) {
      return reports[survivor].message.find("pid " + std::to_string(pids[rank]) + " ") !=
             std::string::npos;
    };
    for (int r = 0; r < 4; ++r) blamesVictim[r] = reported[r] && names(r, trial.victim);
    for (int r = 0; r < 4; ++r) directly += blamesVictim[r];
    for (bool grew = true; grew;) {
      grew = false;
      for (int r = 0; r < 4; ++r)
        for (int other = 0; other < 4 && reported[r] && !blamesVictim[r]; ++other)
          if (other != trial.victim && blamesVictim[other] && names(r, other))
            grew = blamesVictim[r] = true;
    }
    for (int r = 0; r < 4; ++r)
      if (reported[r] && r != trial.victim)
        expect(blamesVictim[r], "rank " + std::to_string(r) +
                                    "'s error names neither the victim (pid " +
                                    std::to_string(pids[trial.victim]) +
                                    ") nor a survivor whose error does: " + reports[r].message);
    for (const std::string& name : shmSegmentsOf(pids, before)) expect(false, "left in /dev/shm: " + name);
    if (problems.empty()) {
      ++passed;
    } else {
      std::string all;
      for (const std::string& p : problems) all += p + "\n";
      ADD_FAILURE() << all << out.describe();
    }
  }
  auto summary = [](std::vector<double> v) {
    if (v.empty()) return std::string("none");
    std::sort(v.begin(), v.end());
    char s[96];
    std::snprintf(s, sizeof(s), "%zu errors, median %.3f s, max %.3f s", v.size(), v[v.size() / 2],
                  v.back());
    return std::string(s);
  };
  std::printf(
      "chaos over %s: %d of %d trials passed; %d of %d survivors' errors name the victim itself; "
      "from SIGKILL to a survivor's error: %s; from SIGSTOP: %s\n",
      transport, passed, trials, directly, 3 * trials, summary(kills).c_str(),
      summary(stops).c_str());
}

INSTANTIATE_TEST_SUITE_P(Transports, Chaos, testing::Values("shm", "tcp"),
                         [](const auto& p) { return std::string(p.param); });

}  // namespace
}  // namespace gyre::test
