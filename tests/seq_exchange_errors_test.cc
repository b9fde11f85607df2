// The sequence exchanges' errors: every bad argument refused before
// anything is sent, with a sentence naming it (the communicator stays
// usable); ranks that disagree on the layout (heads, key/value heads,
// parts, one entry of the tokens, the type) or make another call fail in
// the call, every one of them, naming both sides; never a timeout.
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tests/support/disagreement.h"
#include "tests/support/multiprocess.h"

namespace gyre::test {
namespace {

bool contains(const std::string& s, const std::string& what) {
  return s.find(what) != std::string::npos;
}

// ---- bad arguments ----

TEST(SeqExchangeArguments, EachIsNamedAndTheCommunicatorStaysUsable) {
  RunOutcome out = runRanks(2, [](int rank, int n, const gyreUniqueId& id) {
    Checker check(rank);
    gyreComm_t comm = initRank(rank, n, id, "shm");
    if (!comm) return 1;
    std::vector<float> a(4096, 1.0f), b(4096, 0.0f);
    const gyreSeqLayout_t good{4, 2, 8, gyreSeqQKV, 8, nullptr};
    const size_t wide[] = {1, 7}, huge[] = {0, size_t{1} << 31};
    struct Bad {
      const char* says;
      std::function<gyreResult_t()> call;
    };
    auto with = [&](auto change) {
      gyreSeqLayout_t l = good;
      change(l);
      return [&, l] { return gyreSeqToHeads(a.data(), b.data(), &l, gyreFloat32, comm, nullptr); };
    };
    gyreRequest_t req = nullptr;
    const Bad bad[] = {
        {"layout is NULL",
         [&] { return gyreSeqToHeads(a.data(), b.data(), nullptr, gyreFloat32, comm, nullptr); }},
        {"layout->heads 0 is not in [1, 4095]", with([](auto& l) { l.heads = 0; })},
        {"layout->heads 5000 is not in [1, 4095]", with([](auto& l) { l.heads = 5000; })},
        {"layout->kvHeads 3 does not divide heads 4", with([](auto& l) { l.kvHeads = 3; })},
        {"layout->kvHeads -2 does not divide heads 4", with([](auto& l) { l.kvHeads = -2; })},
        {"layout->headDim 0 is not in [1, 1048575]", with([](auto& l) { l.headDim = 0; })},
        {"layout->parts 0 is not a set of gyreSeqQ, gyreSeqK and gyreSeqV",
         with([](auto& l) { l.parts = 0; })},
        {"layout->parts 8 is not a set", with([](auto& l) { l.parts = 8; })},
        {"layout->seqLen 7 is not a multiple of the 2 ranks", with([](auto& l) { l.seqLen = 7; })},
        {"layout->tokens sum to 8 but layout->seqLen is 9", with([&](auto& l) {
           l.tokens = wide;
           l.seqLen = 9;
         })},
        {"layout->tokens[1] 2147483648 is 2^31 or more", with([&](auto& l) {
           l.tokens = huge;
           l.seqLen = huge[1];
         })},
        {"datatype 42 is not a gyreDataType_t",
         [&] {
           return gyreSeqToHeads(a.data(), b.data(), &good, static_cast<gyreDataType_t>(42), comm,
                                 nullptr);
         }},
        {"sendbuff is NULL with",
         [&] { return gyreSeqToHeads(nullptr, b.data(), &good, gyreFloat32, comm, nullptr); }},
        {"recvbuff is NULL with",
         [&] { return gyreHeadsToSeq(a.data(), nullptr, &good, gyreFloat32, comm, nullptr); }},
        {"sendbuff and recvbuff overlap",
         [&] { return gyreSeqToHeads(a.data(), a.data() + 8, &good, gyreFloat32, comm, nullptr); }},
        {"comm is NULL",
         [&] { return gyreHeadsToSeq(a.data(), b.data(), &good, gyreFloat32, nullptr, nullptr); }},
        {"request is NULL",
         [&] { return gyreIseqToHeads(a.data(), b.data(), &good, gyreFloat32, comm, nullptr); }},
        {"layout->heads 0",
         [&] {
           gyreSeqLayout_t l = good;
           l.heads = 0;
           return gyreIheadsToSeq(a.data(), b.data(), &l, gyreFloat32, comm, &req);
         }},
    };
    for (const Bad& x : bad) {
      const gyreResult_t r = x.call();
      const std::string msg = gyreGetLastError(comm);
      check.expect(r == gyreInvalidArgument,
                   std::string(x.says) + ": result " + gyreGetErrorString(r));
      check.expect(contains(msg, x.says),
                   std::string("the error should say '") + x.says + "': " + msg);
    }
    // Nothing was sent: both ranks can still make the call.
    check.expectOk(gyreSeqToHeads(a.data(), b.data(), &good, gyreFloat32, comm, nullptr),
                   "a good call after them");
    gyreCommDestroy(comm);
    return check.failures() ? 1 : 0;
  });
  EXPECT_TRUE(out.allSucceeded()) << out.describe();
}

// ---- ranks that disagree ----


gyreResult_t seqCall(gyreComm_t comm, bool toHeads, gyreSeqLayout_t l,
                     gyreDataType_t t = gyreFloat32) {
  std::vector<double> a(4096, 1.0), b(4096);  // large enough for every case's buffers
  return toHeads ? gyreSeqToHeads(a.data(), b.data(), &l, t, comm, nullptr)
                 : gyreHeadsToSeq(a.data(), b.data(), &l, t, comm, nullptr);
}

const size_t kEven[] = {2, 2, 2}, kOdd[] = {2, 3, 1};

const Disagreement kDisagreements[] = {
    {"heads",
     [](gyreComm_t c, int r) {
       return seqCall(c, true, {r == 2 ? 6 : 3, 0, 2, gyreSeqQ, 6, nullptr});
     },
     {"seqtoheads #1", "6 heads", "3 heads"}},
    {"kv_heads",
     [](gyreComm_t c, int r) {
       return seqCall(c, false, {6, r == 2 ? 1 : 3, 4, gyreSeqQKV, 6, nullptr});
     },
     {"headstoseq #1", "1 kv heads", "3 kv heads"}},
    {"parts",
     [](gyreComm_t c, int r) {
       return seqCall(c, true, {3, 0, 2, r == 0 ? gyreSeqQKV : gyreSeqQ, 6, nullptr});
     },
     {"seqtoheads #1", "q+k+v", "head dim 2, q,"}},
    {"one_tokens_entry",
     [](gyreComm_t c, int r) {
       return seqCall(c, true, {3, 0, 2, gyreSeqQ, 6, r == 1 ? kOdd : kEven});
     },
     {"seqtoheads #1", "tokens", "every rank must pass the same layout"}},
    {"type",
     [](gyreComm_t c, int r) {
       return seqCall(c, true, {3, 0, 2, gyreSeqQ, 6, nullptr}, r == 1 ? gyreInt32 : gyreFloat32);
     },
     {"seqtoheads #1", "int32", "float32"}},
    {"another_call",
     [](gyreComm_t c, int r) {
       if (r != 2) return seqCall(c, true, {3, 0, 2, gyreSeqQ, 6, nullptr});
       std::vector<float> a(12), b(12);
       return gyreAllToAll(a.data(), b.data(), 4, gyreFloat32, c, nullptr);
     },
     {"seqtoheads #1", "alltoall #1"}},
};

class SeqExchangeDisagreement : public testing::TestWithParam<DisagreeCase> {};

TEST_P(SeqExchangeDisagreement, EveryRankFailsInTheCallNamingBothSides) { expectEveryRankFailsByName(GetParam()); }

INSTANTIATE_TEST_SUITE_P(Layouts, SeqExchangeDisagreement, testing::ValuesIn(disagreeCases(kDisagreements)),
                         disagreeCaseName);

}  // namespace
}  // namespace gyre::test
