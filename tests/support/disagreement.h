// Ranks that make one call differently (another shape, type or call): every
// rank must fail in that call with an error naming the difference, not hang
// and not time out. The cases are data; this runs them on 3 ranks over shm
// and tcp as value-parameterized tests (moe_exchange_errors_test.cc,
// seq_exchange_errors_test.cc).
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <functional>
#include <ostream>
#include <span>
#include <string>
#include <vector>

#include "gyre/gyre.h"
#include "tests/support/multiprocess.h"

namespace gyre::test {

struct Disagreement {
  const char* name;
  // The rank's call, with its own arguments.
  std::function<gyreResult_t(gyreComm_t, int rank)> call;
  std::vector<std::string> named;  // every rank's error says each of these
};

struct DisagreeCase {
  const Disagreement* d;
  const char* transport;
};

inline void PrintTo(const DisagreeCase& c, std::ostream* os) {
  *os << c.d->name << ", " << c.transport;
}

// Every case over shm and over tcp.
inline std::vector<DisagreeCase> disagreeCases(std::span<const Disagreement> cases) {
  std::vector<DisagreeCase> v;
  for (const Disagreement& d : cases)
    for (const char* t : {"shm", "tcp"}) v.push_back({&d, t});
  return v;
}

inline std::string disagreeCaseName(const testing::TestParamInfo<DisagreeCase>& i) {
  return std::string(i.param.d->name) + "_" + i.param.transport;
}

// Runs the case on 3 ranks (a 60 s bound on the whole run, 20 s on a call).
inline void expectEveryRankFailsByName(const DisagreeCase& c) {
  RunOptions o;
  o.timeoutSec = 60;
  RunOutcome out = runRanks(
      3,
      [&](int rank, int n, const gyreUniqueId& id) {
        Checker check(rank);
        gyreComm_t comm = initRank(rank, n, id, c.transport, 20000);
        if (!comm) return 1;
        const gyreResult_t r = c.d->call(comm, rank);
        const std::string msg = gyreGetLastError(comm);
        std::printf("rank %d: %s: %s\n", rank, gyreGetErrorString(r), msg.c_str());
        check.expect(r != gyreSuccess, "the call succeeded");
        check.expect(r != gyreTimeout, "a timeout: " + msg);
        for (const std::string& s : c.d->named)
          check.expect(msg.find(s) != std::string::npos,
                       "the error should say '" + s + "': " + msg);
        gyreCommDestroy(comm);
        return check.failures() ? 1 : 0;
      },
      o);
  EXPECT_FALSE(out.timedOut) << out.describe();
  EXPECT_TRUE(out.allSucceeded()) << out.describe();
}

}  // namespace gyre::test
