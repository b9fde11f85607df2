// gyrerun, tested from the outside: real processes, each run under a hard
// deadline (on expiry its whole process group is killed and the test fails),
// no timing asserted and no sleeping: the test reacts to what the ranks print.
// Also the launchers gyre works under without gyrerun: a torchrun-style and an
// Open MPI-style environment set by hand, and mpirun itself when installed.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "tests/support/subprocess.h"

namespace {

// ---- running processes ----

using gyre::test::Outcome;
using gyre::test::Proc;
using gyre::test::run;
using gyre::test::runAll;

// gyrerun with the given options in front of the probe program and its mode.
Proc gyrerun(std::vector<std::string> args) {
  args.insert(args.begin(), GYRERUN_PATH);
  return Proc{args, {}};
}

// ---- reading output ----

std::vector<std::string> linesOf(const std::string& s) {
  std::vector<std::string> lines;
  std::istringstream in(s);
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  return lines;
}

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// The value after "key" on the line of rank r ("[r] ... key VALUE ..."), or "".
std::string valueOnRankLine(const std::string& out, int r, const std::string& key) {
  for (const std::string& l : linesOf(out)) {
    if (l.rfind("[" + std::to_string(r) + "] ", 0) != 0) continue;
    size_t at = l.find(key);
    if (at == std::string::npos) continue;
    std::string v = l.substr(at + key.size());
    return v.substr(0, v.find(' '));
  }
  return "";
}

int countLinesWith(const std::string& out, const std::string& needle) {
  int n = 0;
  for (const std::string& l : linesOf(out)) n += contains(l, needle);
  return n;
}

// ---- environment and arguments ----

TEST(Gyrerun, GivesEveryRankItsEnvironment) {
  Outcome o = run(gyrerun({"-n", "3", "-x", "GYRE_TEST_EXTRA=a=b", LAUNCHER_PROBE_PATH, "env"}));
  ASSERT_EQ(o.exitCode, 0) << o.describe();
  std::string commId, secret;
  for (int r = 0; r < 3; ++r) {
    std::string p = "[" + std::to_string(r) + "] ";
    EXPECT_TRUE(contains(o.out, p + "GYRE_RANK=" + std::to_string(r) + "\n")) << o.describe();
    EXPECT_TRUE(contains(o.out, p + "GYRE_LOCAL_RANK=" + std::to_string(r) + "\n")) << o.describe();
    EXPECT_TRUE(contains(o.out, p + "GYRE_WORLD_SIZE=3\n")) << o.describe();
    EXPECT_TRUE(contains(o.out, p + "GYRE_LOCAL_SIZE=3\n")) << o.describe();
    EXPECT_TRUE(contains(o.out, p + "GYRE_ROOT_EXTERNAL=1\n")) << o.describe();
    EXPECT_TRUE(contains(o.out, p + "GYRE_TEST_EXTRA=a=b\n")) << o.describe();
    std::string id = valueOnRankLine(o.out, r, "GYRE_COMM_ID=");
    std::string s = valueOnRankLine(o.out, r, "GYRE_SECRET=");
    EXPECT_EQ(id.rfind("127.0.0.1:", 0), 0u) << id;
    EXPECT_GT(std::atoi(id.c_str() + std::strlen("127.0.0.1:")), 0) << id;
    EXPECT_EQ(s.size(), 64u) << s;
    EXPECT_EQ(s.find_first_not_of("0123456789abcdef"), std::string::npos) << s;
    if (r == 0) {
      commId = id;
      secret = s;
    }
    EXPECT_EQ(id, commId) << "every rank meets at the same root";
    EXPECT_EQ(s, secret);
  }
}

TEST(Gyrerun, LeavesTheProgramsArgumentsAlone) {
  Outcome o =
      run(gyrerun({"-n", "1", "--", LAUNCHER_PROBE_PATH, "args", "-n", "7", "--bogus", "--"}));
  ASSERT_EQ(o.exitCode, 0) << o.describe();
  EXPECT_EQ(o.out, "[0] arg: -n\n[0] arg: 7\n[0] arg: --bogus\n[0] arg: --\n");
}

// ---- output ----

TEST(Gyrerun, PrefixesEveryLineWithItsRank) {
  const int lines = 300;
  Outcome o = run(gyrerun({"-n", "3", LAUNCHER_PROBE_PATH, "lines", std::to_string(lines)}));
  ASSERT_EQ(o.exitCode, 0) << o.describe();
  std::vector<int> next(3, 0);
  std::vector<bool> tail(3, false);
  for (const std::string& l : linesOf(o.out)) {
    int r = -1, i = -1;
    char rest[64] = "";
    if (std::sscanf(l.c_str(), "[%d] out %*d %d%63s", &r, &i, rest) == 2 && r >= 0 && r < 3) {
      EXPECT_EQ(l,
                "[" + std::to_string(r) + "] out " + std::to_string(r) + " " + std::to_string(i));
      EXPECT_EQ(i, next[r]++) << "rank " << r << "'s lines in order";
      EXPECT_FALSE(tail[r]);
    } else if (std::sscanf(l.c_str(), "[%d] tail", &r) == 1 && r >= 0 && r < 3) {
      EXPECT_EQ(l, "[" + std::to_string(r) + "] tail " + std::to_string(r))
          << "the unfinished last line";
      tail[r] = true;
    } else {
      ADD_FAILURE() << "unexpected line '" << l << "'";
    }
  }
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(next[r], lines) << r;
    EXPECT_TRUE(tail[r]) << r;
    EXPECT_TRUE(contains(o.err, "[" + std::to_string(r) + "] err " + std::to_string(r) + "\n"))
        << o.err;
  }
  EXPECT_EQ(o.out.back(), '\n');
  EXPECT_EQ(linesOf(o.err).size(), 3u) << o.err;
}

TEST(Gyrerun, PassesBytesThroughWithNoPrefix) {
  Outcome one = run(gyrerun({"-n", "1", "--no-prefix", LAUNCHER_PROBE_PATH, "lines", "3"}));
  ASSERT_EQ(one.exitCode, 0) << one.describe();
  EXPECT_EQ(one.out, "out 0 0\nout 0 1\nout 0 2\ntail 0");
  EXPECT_EQ(one.err, "err 0\n");
  Outcome three =
      run(gyrerun({"-n", "3", "--tag-output", "--no-prefix", LAUNCHER_PROBE_PATH, "lines", "50"}));
  ASSERT_EQ(three.exitCode, 0) << three.describe();
  // Unprefixed, the ranks' pieces may interleave anywhere; every byte arrives.
  std::string expected;
  for (int r = 0; r < 3; ++r) {
    for (int i = 0; i < 50; ++i)
      expected += "out " + std::to_string(r) + " " + std::to_string(i) + "\n";
    expected += "tail " + std::to_string(r);
  }
  std::string got = three.out;
  std::sort(expected.begin(), expected.end());
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, expected);
}

TEST(Gyrerun, WritesEachRanksOutputToFilesInOutputDir) {
  std::filesystem::path dir = std::filesystem::temp_directory_path() /
                              ("gyrerun-test-" + std::to_string(getpid())) / "nested";
  Outcome o =
      run(gyrerun({"-n", "3", "--output-dir", dir.string(), LAUNCHER_PROBE_PATH, "lines", "2"}));
  ASSERT_EQ(o.exitCode, 0) << o.describe();
  EXPECT_EQ(o.out, "");
  EXPECT_EQ(o.err, "");
  auto slurp = [](const std::filesystem::path& p) {
    std::ifstream in(p);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  for (int r = 0; r < 3; ++r) {
    std::string k = std::to_string(r);
    EXPECT_EQ(slurp(dir / ("rank-" + k + ".out")), "out " + k + " 0\nout " + k + " 1\ntail " + k);
    EXPECT_EQ(slurp(dir / ("rank-" + k + ".err")), "err " + k + "\n");
  }
  std::filesystem::remove_all(dir.parent_path());
}

// ---- failures ----

TEST(Gyrerun, AFailingRankStopsTheOthersAndItsStatusIsTheExitStatus) {
  // Ranks 0 and 1 would block forever; rank 2 exits 3.
  Outcome o = run(gyrerun({"-n", "3", LAUNCHER_PROBE_PATH, "fail-rank", "2", "3"}));
  EXPECT_EQ(o.exitCode, 3) << o.describe();
  EXPECT_TRUE(contains(o.err, "gyrerun: rank 2 (pid ")) << o.err;
  EXPECT_TRUE(contains(o.err, ") exited with status 3; stopping the other ranks")) << o.err;
}

TEST(Gyrerun, ARankKilledBySignalIsNamedAndExitStatusIs128PlusSignal) {
  // The others ignore SIGTERM, so stopping them takes the SIGKILL.
  bool killed = false;
  std::string victim;
  Outcome o =
      run(gyrerun({"-n", "3", "--grace", "0.2", LAUNCHER_PROBE_PATH, "wait", "ignore-term"}), 60,
          [&](const std::vector<Outcome>& now) {
            if (killed || countLinesWith(now[0].out, "ready pid=") < 3) return;
            victim = valueOnRankLine(now[0].out, 1, "pid=");
            killed = kill(std::atoi(victim.c_str()), SIGKILL) == 0;
          });
  ASSERT_TRUE(killed) << o.describe();
  EXPECT_EQ(o.exitCode, 128 + SIGKILL) << o.describe();
  EXPECT_TRUE(contains(o.err, "rank 1 (pid " + victim + ") was killed by signal 9 (SIGKILL)"))
      << o.err;
  EXPECT_TRUE(contains(o.err, "2 ranks still running 0.2 s after SIGTERM; sending SIGKILL"))
      << o.err;
}

TEST(Gyrerun, TimeoutStopsEverythingWithStatus124) {
  Outcome o = run(gyrerun({"-n", "2", "--timeout", "0.3", LAUNCHER_PROBE_PATH, "wait"}));
  EXPECT_EQ(o.exitCode, 124) << o.describe();
  EXPECT_TRUE(contains(o.err, "did not finish within 0.3 s (--timeout)")) << o.err;
}

TEST(Gyrerun, AProgramThatCannotRunIsAFailureWithStatus127) {
  Outcome o = run(gyrerun({"-n", "2", "/nonexistent/gyre-program"}));
  EXPECT_EQ(o.exitCode, 127) << o.describe();
  EXPECT_TRUE(
      contains(o.err, "gyrerun: cannot run '/nonexistent/gyre-program': No such file or directory"))
      << o.err;
  EXPECT_TRUE(contains(o.err, "exited with status 127")) << o.err;

  Outcome path = run(gyrerun({"-n", "1", "gyre-no-such-program-in-path"}));
  EXPECT_EQ(path.exitCode, 127) << path.describe();
  EXPECT_TRUE(contains(path.err, "cannot run 'gyre-no-such-program-in-path'")) << path.err;
}

// ---- signals ----

TEST(Gyrerun, ForwardsSigtermToEveryRank) {
  pid_t gyrerunPid = -1;
  bool sent = false;
  Outcome o = run(gyrerun({"-n", "3", LAUNCHER_PROBE_PATH, "catch"}), 60,
                  [&](const std::vector<Outcome>& now) {
                    gyrerunPid = now[0].pid;
                    // Each rank has blocked the signal by the time it says ready.
                    if (!sent && countLinesWith(now[0].out, "ready") == 3)
                      sent = kill(gyrerunPid, SIGTERM) == 0;
                  });
  ASSERT_TRUE(sent) << o.describe();
  EXPECT_EQ(o.exitCode, 0) << "every rank handled it and exited 0\n" << o.describe();
  for (int r = 0; r < 3; ++r)
    EXPECT_TRUE(contains(
        o.out, "[" + std::to_string(r) + "] got SIGTERM from pid " + std::to_string(gyrerunPid)))
        << o.describe();
}

TEST(Gyrerun, ACtrlCReachesEachRankOnceThroughGyrerun) {
  // A terminal sends SIGINT to its whole foreground process group. The ranks
  // must not be in gyrerun's group, or they would get it twice.
  bool sent = false;
  pid_t gyrerunPid = -1;
  Outcome o = run(
      gyrerun({"-n", "2", LAUNCHER_PROBE_PATH, "catch"}), 60, [&](const std::vector<Outcome>& now) {
        gyrerunPid = now[0].pid;  // runAll made it a group leader, as a shell does with a job
        if (!sent && countLinesWith(now[0].out, "ready") == 2)
          sent = kill(-gyrerunPid, SIGINT) == 0;
      });
  ASSERT_TRUE(sent) << o.describe();
  EXPECT_EQ(o.exitCode, 0) << o.describe();
  for (int r = 0; r < 2; ++r) {
    std::string pgid = valueOnRankLine(o.out, r, "ready pgid=");
    EXPECT_NE(pgid, std::to_string(gyrerunPid)) << o.describe();
    EXPECT_NE(valueOnRankLine(o.out, r, "parent-pgid="), pgid) << o.describe();
    EXPECT_TRUE(contains(
        o.out, "[" + std::to_string(r) + "] got SIGINT from pid " + std::to_string(gyrerunPid)))
        << o.describe();
  }
}

// ---- binding ----

std::vector<int> ourCpus() {
  cpu_set_t set;
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof(set), &set) == 0)
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set)) cpus.push_back(c);
  return cpus;
}

TEST(Gyrerun, BindCorePinsRankIToTheIthAllowedCpu) {
  std::vector<int> cpus = ourCpus();
  ASSERT_FALSE(cpus.empty());
  Outcome o = run(gyrerun({"-n", "3", "--bind", "core", LAUNCHER_PROBE_PATH, "affinity"}));
  ASSERT_EQ(o.exitCode, 0) << o.describe();
  for (int r = 0; r < 3; ++r)
    EXPECT_EQ(valueOnRankLine(o.out, r, "cpus="), std::to_string(cpus[r % cpus.size()]))
        << o.describe();

  std::string all;
  for (int c : cpus) all += (all.empty() ? "" : ",") + std::to_string(c);
  Outcome unbound = run(gyrerun({"-n", "2", "--bind=none", LAUNCHER_PROBE_PATH, "affinity"}));
  ASSERT_EQ(unbound.exitCode, 0) << unbound.describe();
  for (int r = 0; r < 2; ++r)
    EXPECT_EQ(valueOnRankLine(unbound.out, r, "cpus="), all) << unbound.describe();
}

// ---- the command line ----

class UsageError : public testing::TestWithParam<std::vector<std::string>> {};

TEST_P(UsageError, PrintsUsageAndExits2) {
  Outcome o = run(gyrerun(GetParam()));
  EXPECT_EQ(o.exitCode, 2) << o.describe();
  EXPECT_TRUE(contains(o.err, "usage: gyrerun -n N")) << o.err;
  EXPECT_EQ(o.out, "");
}

INSTANTIATE_TEST_SUITE_P(
    Gyrerun, UsageError,
    testing::Values(std::vector<std::string>{}, std::vector<std::string>{"true"},
                    std::vector<std::string>{"-n", "2"}, std::vector<std::string>{"-n", "2", "--"},
                    std::vector<std::string>{"-n", "0", "true"},
                    std::vector<std::string>{"-n", "4097", "true"},
                    std::vector<std::string>{"-n", "two", "true"}, std::vector<std::string>{"-n"},
                    std::vector<std::string>{"--np=-1", "true"},
                    std::vector<std::string>{"-n", "2", "--bogus", "true"},
                    std::vector<std::string>{"-n", "2", "--bind", "socket", "true"},
                    std::vector<std::string>{"-n", "2", "-x", "NOVALUE", "true"},
                    std::vector<std::string>{"-n", "2", "--env", "=x", "true"},
                    std::vector<std::string>{"-n", "2", "--timeout", "0", "true"},
                    std::vector<std::string>{"-n", "2", "--timeout", "-1", "true"},
                    std::vector<std::string>{"-n", "2", "--grace", "soon", "true"},
                    std::vector<std::string>{"-n", "2", "--no-prefix=yes", "true"}));

TEST(Gyrerun, HelpAndVersion) {
  Outcome help = run(gyrerun({"--help"}));
  EXPECT_EQ(help.exitCode, 0);
  EXPECT_TRUE(contains(help.out, "usage: gyrerun") && contains(help.out, "--output-dir"))
      << help.out;
  Outcome h = run(gyrerun({"-n", "2", "-h"}));
  EXPECT_EQ(h.exitCode, 0);
  Outcome v = run(gyrerun({"--version"}));
  EXPECT_EQ(v.exitCode, 0);
  EXPECT_EQ(v.out.rfind("gyrerun (gyre) ", 0), 0u) << v.out;
}

TEST(Gyrerun, AcceptsEveryOptionSpelling) {
  Outcome o =
      run(gyrerun({"--np=2", "-x", "A=1", "--env=GYRE_TEST_EXTRA=x", "--timeout=100", "--grace=1",
                   "--bind=none", "--tag-output", LAUNCHER_PROBE_PATH, "env"}));
  ASSERT_EQ(o.exitCode, 0) << o.describe();
  EXPECT_TRUE(contains(o.out, "[1] GYRE_TEST_EXTRA=x\n")) << o.out;
  Outcome attached = run(gyrerun({"-n2", "-xGYRE_TEST_EXTRA=y", LAUNCHER_PROBE_PATH, "env"}));
  ASSERT_EQ(attached.exitCode, 0) << attached.describe();
  EXPECT_TRUE(contains(attached.out, "[1] GYRE_TEST_EXTRA=y\n")) << attached.out;
}

// ---- a real gyre program, under gyrerun and under other launchers ----

const std::map<std::string, std::string> kGyreEnv = {{"GYRE_TIMEOUT_MS", "60000"}};

void expectAllRanksOk(const std::string& out, int nranks, const std::string& context) {
  for (int r = 0; r < nranks; ++r)
    EXPECT_TRUE(
        contains(out, "rank " + std::to_string(r) + " of " + std::to_string(nranks) + ": ok"))
        << context;
}

class RealProgram : public testing::TestWithParam<const char*> {};

TEST_P(RealProgram, ThreeRanksAllReduceOnTwoCommunicatorsInSuccession) {
  Outcome o = run(gyrerun({"-n", "3", "-x", "GYRE_TIMEOUT_MS=60000", "-x",
                           std::string("GYRE_TRANSPORT=") + GetParam(), ENV_ALLREDUCE_PATH}),
                  120);
  EXPECT_EQ(o.exitCode, 0) << o.describe();
  expectAllRanksOk(o.out, 3, o.describe());
}

INSTANTIATE_TEST_SUITE_P(Transports, RealProgram, testing::Values("shm", "tcp"));

uint16_t freeLoopbackPort() {
  int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  uint16_t port = 0;
  if (bind(s, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
      getsockname(s, reinterpret_cast<sockaddr*>(&a), &len) == 0)
    port = ntohs(a.sin_port);
  close(s);
  return port;  // free now; a race with another program for it is possible but rare
}

std::string describeAll(const std::vector<Outcome>& all) {
  std::string s;
  for (size_t i = 0; i < all.size(); ++i)
    s += "=== process " + std::to_string(i) + ": " + all[i].describe() + "\n";
  return s;
}

TEST(OtherLaunchers, TorchrunStyleEnvironment) {
  const std::string port = std::to_string(freeLoopbackPort());
  std::vector<Proc> procs;
  for (int r = 0; r < 2; ++r) {
    Proc p{{ENV_ALLREDUCE_PATH}, kGyreEnv};
    p.env["RANK"] = std::to_string(r);
    p.env["LOCAL_RANK"] = std::to_string(r);
    p.env["WORLD_SIZE"] = "2";
    p.env["LOCAL_WORLD_SIZE"] = "2";
    p.env["MASTER_ADDR"] = "127.0.0.1";
    p.env["MASTER_PORT"] = port;
    procs.push_back(p);
  }
  std::vector<Outcome> all = runAll(procs, 120);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(all[r].exitCode, 0) << describeAll(all);
    EXPECT_TRUE(contains(all[r].out, "rank " + std::to_string(r) + " of 2: ok"))
        << describeAll(all);
  }
}

TEST(OtherLaunchers, OpenMpiStyleEnvironment) {
  // Rank 0 hosts the root on loopback at a port derived from the job id: a
  // job id of our own keeps concurrent runs apart.
  const std::string job = "gyre-launcher-test-" + std::to_string(getpid());
  std::vector<Proc> procs;
  for (int r = 0; r < 2; ++r) {
    Proc p{{ENV_ALLREDUCE_PATH}, kGyreEnv};
    p.env["OMPI_COMM_WORLD_RANK"] = std::to_string(r);
    p.env["OMPI_COMM_WORLD_LOCAL_RANK"] = std::to_string(r);
    p.env["OMPI_COMM_WORLD_SIZE"] = "2";
    p.env["OMPI_COMM_WORLD_LOCAL_SIZE"] = "2";
    p.env["OMPI_MCA_ess_base_jobid"] = job;
    procs.push_back(p);
  }
  std::vector<Outcome> all = runAll(procs, 120);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(all[r].exitCode, 0) << describeAll(all);
    EXPECT_TRUE(contains(all[r].out, "rank " + std::to_string(r) + " of 2: ok"))
        << describeAll(all);
  }
}

std::string findInPath(const std::string& prog) {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    std::string candidate = (dir.empty() ? "." : dir) + "/" + prog;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

TEST(OtherLaunchers, Mpirun) {
  std::string mpirun = findInPath("mpirun");
  if (mpirun.empty()) GTEST_SKIP() << "mpirun is not installed";
  Outcome o =
      run(Proc{{mpirun, "--allow-run-as-root", "--oversubscribe", "-n", "2", ENV_ALLREDUCE_PATH},
               kGyreEnv},
          120);
  EXPECT_EQ(o.exitCode, 0) << o.describe();
  expectAllRanksOk(o.out, 2, o.describe());
}

}  // namespace
