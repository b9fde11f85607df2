// gyreCommGetStats and gyreCommPeerTransport: counts that follow the calls
// made, exactly, and bad arguments named.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "tests/support/multiprocess.h"

namespace gyre::test {
namespace {

class CommStats : public testing::TestWithParam<const char*> {};

TEST_P(CommStats, CountTheCallsTheirBytesAndWhatWentToEachPeer) {
  const char* transport = GetParam();
  RunOutcome out = runRanks(3, [&](int rank, int n, const gyreUniqueId& id) {
    Checker check(rank);
    gyreComm_t comm = initRank(rank, n, id, transport);
    if (!comm) return 1;
    gyreCommStats_t s{};
    std::vector<uint64_t> sent(n, 7);
    check.expectOk(gyreCommGetStats(comm, &s, sent.data()), "stats at start");
    check.expect(s.calls == 0 && s.bytes == 0 && sent == std::vector<uint64_t>(n, 0), "nothing yet");
    char name[16] = "x";
    check.expectOk(gyreCommPeerTransport(comm, rank, name, sizeof name), "own transport");
    check.expect(std::string(name).empty(), std::string("this rank's own: '") + name + "'");
    // Rank 0 sends 1000 floats to rank 2; everyone makes one AllReduce of 256.
    std::vector<float> v(1000, 1.0f);
    const auto before = std::chrono::steady_clock::now();
    if (rank == 0) check.expectOk(gyreSend(v.data(), 1000, gyreFloat32, 2, comm, nullptr), "send");
    if (rank == 2) check.expectOk(gyreRecv(v.data(), 1000, gyreFloat32, 0, comm, nullptr), "recv");
    check.expectOk(gyreAllReduce(v.data(), v.data(), 256, gyreFloat32, gyreSum, comm, nullptr), "allreduce");
    const double around = std::chrono::duration<double>(std::chrono::steady_clock::now() - before).count();
    // A refused call runs nothing and counts nothing.
    check.expect(gyreAllReduce(v.data(), v.data(), 1, static_cast<gyreDataType_t>(99), gyreSum, comm, nullptr) ==
                     gyreInvalidArgument,
                 "bad type");
    check.expectOk(gyreCommGetStats(comm, &s, sent.data()), "stats");
    const uint64_t p2p = rank == 1 ? 0 : 1;
    check.expect(s.calls == 1 + p2p && s.failedCalls == 0, "calls " + std::to_string(s.calls));
    check.expect(s.bytes == 1024 + p2p * 4000, "bytes " + std::to_string(s.bytes));
    check.expect(s.seconds > 0, "time inside the calls");
    // In seconds, whatever the library counts in: no more than the time
    // around the calls (a tenth more for the counter's calibration).
    check.expect(s.seconds <= around * 1.1,
                 "time inside the calls " + std::to_string(s.seconds) + " s, around them " + std::to_string(around) + " s");
    // What the AllReduce sent goes to peers; rank 0's send is 4000 to rank 2 on top.
    uint64_t total = 0;
    for (int p = 0; p < n; ++p) total += sent[p];
    check.expect(sent[rank] == 0 && total > 0, "sent to peers, none to itself");
    if (rank == 0) check.expect(sent[2] >= 4000, "rank 0 sent rank 2 " + std::to_string(sent[2]));
    // Every peer it sent to is connected, by the transport asked for
    // (connections are made at first use: one it never talked to reads "").
    int talked = -1;
    for (int p = 0; p < n; ++p) {
      if (sent[p] == 0) continue;
      talked = p;
      check.expectOk(gyreCommPeerTransport(comm, p, name, sizeof name), "peer transport");
      check.expect(std::string(name) == transport, std::string("peer's transport '") + name + "'");
    }
    check.expect(gyreCommPeerTransport(comm, n, name, sizeof name) == gyreInvalidArgument, "peer out of range");
    if (talked >= 0)
      check.expect(gyreCommPeerTransport(comm, talked, name, 2) == gyreInvalidArgument, "too small");
    check.expect(gyreCommGetStats(comm, nullptr, nullptr) == gyreInvalidArgument, "stats NULL");
    check.expectOk(gyreCommDestroy(comm), "destroy");
    return check.failures();
  });
  EXPECT_TRUE(out.allSucceeded()) << out.describe();
}

INSTANTIATE_TEST_SUITE_P(Transports, CommStats, testing::Values("shm", "tcp"));

}  // namespace
}  // namespace gyre::test
