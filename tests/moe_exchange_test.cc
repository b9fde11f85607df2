// Expert dispatch and combine (gyreMoe*): real ranks over shared memory and
// TCP, 1 to 8 of them, every data type, top-1 and top-2, uneven tokens per
// rank (one rank with none), slots without an expert, empty experts,
// capacity drops, the default and a custom expert map (several experts on
// a rank, a rank with none), the counts sent ahead of the rows and
// exchanged first, combine per slot and weighted, and the backward uses of
// the route, against a reference that routes every rank's tokens on one
// rank: bit for bit, counts and drops exact, bytes past the outputs
// untouched.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <ostream>
#include <string>
#include <vector>

#include "bench/exact_values.h"
#include "kernels/common/arith.h"
#include "tests/support/multiprocess.h"

namespace gyre::test {
namespace {

constexpr size_t kGuard = 32;
constexpr unsigned char kFill = 0xA5;

// ---- values: small integers, exact in every type ----

double readElem(gyreDataType_t t, const unsigned char* p) {
  switch (t) {
    case gyreInt8: return *reinterpret_cast<const int8_t*>(p);
    case gyreUint8: return *p;
    case gyreInt32: { int32_t v; std::memcpy(&v, p, 4); return v; }
    case gyreUint32: { uint32_t v; std::memcpy(&v, p, 4); return v; }
    case gyreInt64: { int64_t v; std::memcpy(&v, p, 8); return static_cast<double>(v); }
    case gyreUint64: { uint64_t v; std::memcpy(&v, p, 8); return static_cast<double>(v); }
    case gyreFloat16: { uint16_t v; std::memcpy(&v, p, 2); return kernels::arith::halfToFloat(v); }
    case gyreBfloat16: { uint16_t v; std::memcpy(&v, p, 2); return kernels::arith::bfloat16ToFloat(v); }
    case gyreFloat32: { float v; std::memcpy(&v, p, 4); return v; }
    default: { double v; std::memcpy(&v, p, 8); return v; }
  }
}

void writeElem(gyreDataType_t t, unsigned char* p, double x) {
  switch (t) {
    case gyreInt8: { int8_t v = static_cast<int8_t>(x); std::memcpy(p, &v, 1); break; }
    case gyreUint8: { uint8_t v = static_cast<uint8_t>(x); std::memcpy(p, &v, 1); break; }
    case gyreInt32: { int32_t v = static_cast<int32_t>(x); std::memcpy(p, &v, 4); break; }
    case gyreUint32: { uint32_t v = static_cast<uint32_t>(x); std::memcpy(p, &v, 4); break; }
    case gyreInt64: { int64_t v = static_cast<int64_t>(x); std::memcpy(p, &v, 8); break; }
    case gyreUint64: { uint64_t v = static_cast<uint64_t>(x); std::memcpy(p, &v, 8); break; }
    case gyreFloat16: { uint16_t v = kernels::arith::floatToHalf(static_cast<float>(x)); std::memcpy(p, &v, 2); break; }
    case gyreBfloat16: { uint16_t v = kernels::arith::floatToBfloat16(static_cast<float>(x)); std::memcpy(p, &v, 2); break; }
    case gyreFloat32: { float v = static_cast<float>(x); std::memcpy(p, &v, 4); break; }
    default: std::memcpy(p, &x, 8);
  }
}

bool isFloat(gyreDataType_t t) {
  return t == gyreFloat16 || t == gyreBfloat16 || t == gyreFloat32 || t == gyreFloat64;
}

uint64_t mix(uint64_t a, uint64_t b, uint64_t c) {
  uint64_t h = 0x9e3779b97f4a7c15ull ^ (a * 0xff51afd7ed558ccdull) ^ (b * 0xc4ceb9fe1a85ec53ull) ^ (c + 0x632be59bd9b4e019ull);
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  return h ^ (h >> 29);
}

// ---- the cases, and the one-rank reference ----

struct Case {
  std::string name;
  int k;
  int experts;        // per rank (default map) or in all (custom)
  bool customMap;     // experts e % (n - 1) (the last rank has none), several per rank
  size_t capacity;
  size_t hidden;
  bool emptyExpert;   // nobody chooses the last expert
  bool wide = false;  // rows cut into several messages: two types only (the largest and smallest)
};

const Case kCases[] = {
    {"top2_default_map", 2, 2, false, 0, 3, false},
    {"top1_capacity", 1, 1, false, 2, 5, false},
    {"top2_custom_map_capacity_empty_expert", 2, 3, true, 3, 4, true},
    {"top2_wide_rows", 2, 1, false, 5, 70000, false, true},
};

struct World {
  int n, E, k;
  size_t cap, hidden;
  std::vector<int> map;                    // expert -> rank
  std::vector<size_t> tokens;              // by rank
  std::vector<std::vector<int32_t>> choice;  // by rank: tokens x k
};

World worldOf(const Case& c, int n) {
  World w;
  w.n = n;
  w.k = c.k;
  w.cap = c.capacity;
  w.hidden = c.hidden;
  w.E = c.customMap ? c.experts * n + 1 : c.experts * n;
  for (int e = 0; e < w.E; ++e) w.map.push_back(c.customMap ? (n > 1 ? e % (n - 1) : 0) : e / c.experts);
  for (int q = 0; q < n; ++q) {
    const size_t T = (n > 1 && q == 1) ? 0 : 4 + 3 * static_cast<size_t>(q);  // rank 1 has no tokens
    w.tokens.push_back(T);
    std::vector<int32_t> ch(T * static_cast<size_t>(c.k));
    const int choosable = c.emptyExpert ? w.E - 1 : w.E;
    for (size_t i = 0; i < ch.size(); ++i) {
      const uint64_t h = mix(static_cast<uint64_t>(q), i, 77);
      ch[i] = h % 7 == 0 ? -1 : static_cast<int32_t>(h % static_cast<uint64_t>(choosable));
    }
    w.choice.push_back(ch);
  }
  return w;
}

// A kept slot: its source, token and slot, in priority order per expert.
struct Slot {
  int q;
  size_t t;
  int s;
};

struct Reference {
  std::vector<std::vector<std::vector<Slot>>> kept;  // [q][e]: in priority order
  std::vector<std::vector<uint64_t>> dropped;        // [q][e]
};

Reference referenceOf(const World& w) {
  Reference r;
  for (int q = 0; q < w.n; ++q) {
    std::vector<std::vector<Slot>> kept(static_cast<size_t>(w.E));
    std::vector<uint64_t> dropped(static_cast<size_t>(w.E), 0);
    for (int s = 0; s < w.k; ++s)
      for (size_t t = 0; t < w.tokens[q]; ++t) {
        const int e = w.choice[q][t * w.k + s];
        if (e < 0) continue;
        if (w.cap && kept[e].size() >= w.cap) {
          ++dropped[e];
        } else {
          kept[e].push_back({q, t, s});
        }
      }
    r.kept.push_back(kept);
    r.dropped.push_back(dropped);
  }
  return r;
}

// Token t of rank q's row, element h; a per-slot row adds its slot.
double xValue(int q, size_t t, size_t h, int slot = 0) { return static_cast<double>((q * 7 + t * 3 + h * 5 + slot * 11) % 50); }

struct RankRun {
  const char* transport;
  int nranks;
};
void PrintTo(const RankRun& r, std::ostream* os) { *os << r.transport << ", " << r.nranks << " ranks"; }
std::string runName(const testing::TestParamInfo<RankRun>& i) {
  return std::string(i.param.transport) + "_" + std::to_string(i.param.nranks);
}

const gyreDataType_t kTypes[] = {gyreInt8,   gyreUint8,   gyreInt32,   gyreUint32,  gyreInt64,
                                 gyreUint64, gyreFloat16, gyreFloat32, gyreFloat64, gyreBfloat16};

bool guardIntact(const std::vector<unsigned char>& b, size_t used) {
  for (size_t i = used; i < b.size(); ++i)
    if (b[i] != kFill) return false;
  return true;
}

// One case in one type on this rank: dispatch, the experts' work, combine
// (per slot, and weighted for floating types), the backward dispatch.
// ahead: the counts travel with the rows; otherwise they are exchanged first.
void checkCase(gyreComm_t comm, int me, const Case& c, gyreDataType_t t, bool ahead, bool nonblocking,
               Checker& check) {
  const World w = worldOf(c, [&] { int n = 0; gyreCommCount(comm, &n); return n; }());
  const int n = w.n;
  const Reference ref = referenceOf(w);
  const size_t esz = dtypeBytes(t), H = w.hidden, T = w.tokens[me], K = static_cast<size_t>(w.k);
  const std::string what = c.name + " " + dtypeLabel(t) + (ahead ? " (counts ahead)" : " (counts first)") +
                           (nonblocking ? " nonblocking" : "");
  gyreMoeRouting_t routing = nullptr;
  if (!check.expectOk(gyreMoeRoutingCreate(&routing, w.choice[me].data(), T, w.k, w.E,
                                           c.customMap ? w.map.data() : nullptr, w.cap, comm),
                      "routing " + what))
    return;
  // The sending side's counts.
  std::vector<size_t> sent(w.E), dropped(w.E);
  check.expectOk(gyreMoeSendCounts(routing, sent.data(), dropped.data()), "send counts " + what);
  for (int e = 0; e < w.E; ++e) {
    check.expect(sent[e] == ref.kept[me][e].size(), what + ": sent to expert " + std::to_string(e));
    check.expect(dropped[e] == ref.dropped[me][e], what + ": dropped for expert " + std::to_string(e));
  }
  std::vector<int> local;
  for (int e = 0; e < w.E; ++e)
    if (w.map[e] == me) local.push_back(e);
  int nlocal = -1;
  std::vector<int> ids(local.size() + 1);
  gyreMoeLocalExperts(routing, &nlocal, ids.data());
  check.expect(nlocal == static_cast<int>(local.size()) && std::equal(local.begin(), local.end(), ids.begin()),
               what + ": local experts");
  // What arrives: by local expert, by source, in priority order.
  std::vector<Slot> rows;
  std::vector<int> rowExpert;
  for (int e : local)
    for (int q = 0; q < n; ++q)
      for (const Slot& s : ref.kept[q][e]) {
        rows.push_back(s);
        rowExpert.push_back(e);
      }
  size_t bound = 0;
  for (int q = 0; q < n; ++q) bound += w.tokens[q] * K;
  if (!ahead) check.expectOk(gyreMoeExchangeCounts(routing, comm), "exchange counts " + what);
  const size_t recvRows = ahead ? bound : rows.size();

  std::vector<unsigned char> x(T * H * esz);
  for (size_t tk = 0; tk < T; ++tk)
    for (size_t h = 0; h < H; ++h) writeElem(t, &x[(tk * H + h) * esz], xValue(me, tk, h));
  std::vector<unsigned char> got(recvRows * H * esz + kGuard, kFill);
  gyreRequest_t req = nullptr;
  gyreResult_t r = nonblocking ? gyreImoeDispatch(x.data(), got.data(), recvRows, H, t, 0, routing, comm, &req)
                               : gyreMoeDispatch(x.data(), got.data(), recvRows, H, t, 0, routing, comm, nullptr);
  if (r == gyreSuccess && nonblocking) r = gyreWait(req);
  if (!check.expectOk(r, "dispatch " + what)) {
    gyreMoeRoutingDestroy(routing);
    return;
  }
  size_t total = 0;
  std::vector<size_t> perSource(local.size() * n), recvDropped(local.size() + 1);
  check.expectOk(gyreMoeRecvCounts(routing, perSource.data(), recvDropped.data(), &total), "recv counts " + what);
  check.expect(total == rows.size(), what + ": total rows " + std::to_string(total) + ", want " +
                                         std::to_string(rows.size()));
  for (size_t l = 0; l < local.size(); ++l) {
    uint64_t d = 0;
    for (int q = 0; q < n; ++q) {
      d += ref.dropped[q][local[l]];
      check.expect(perSource[l * n + q] == ref.kept[q][local[l]].size(),
                   what + ": rows of expert " + std::to_string(local[l]) + " from rank " + std::to_string(q));
    }
    check.expect(recvDropped[l] == d, what + ": dropped for local expert " + std::to_string(local[l]));
  }
  size_t wrong = 0;
  for (size_t i = 0; i < rows.size(); ++i)
    for (size_t h = 0; h < H; ++h) {
      unsigned char want[8] = {};  // the widest element (a heap vector per element cost minutes under ASan)
      writeElem(t, want, xValue(rows[i].q, rows[i].t, h));
      wrong += std::memcmp(&got[(i * H + h) * esz], want, esz) != 0;
    }
  check.expect(wrong == 0, what + ": " + std::to_string(wrong) + " dispatched elements wrong");
  check.expect(guardIntact(got, recvRows * H * esz), what + ": dispatch wrote past its rows");

  // The experts: expert e's output is its row plus e (exact in every type).
  std::vector<unsigned char> y(rows.size() * H * esz);
  for (size_t i = 0; i < rows.size(); ++i)
    for (size_t h = 0; h < H; ++h)
      writeElem(t, &y[(i * H + h) * esz], readElem(t, &got[(i * H + h) * esz]) + rowExpert[i]);
  auto slotValue = [&](size_t tk, size_t s, size_t h) {  // what a kept slot's row holds, or -1
    const int e = w.choice[me][tk * K + s];
    if (e < 0) return -1.0;
    const auto& kept = ref.kept[me][e];
    for (const Slot& k2 : kept)
      if (k2.t == tk && static_cast<size_t>(k2.s) == s) return xValue(me, tk, h) + e;
    return -1.0;
  };
  // Combine per slot.
  std::vector<unsigned char> out(T * K * H * esz + kGuard, kFill);
  r = nonblocking ? gyreImoeCombine(y.data(), rows.size(), out.data(), nullptr, H, t, routing, comm, &req)
                  : gyreMoeCombine(y.data(), rows.size(), out.data(), nullptr, H, t, routing, comm, nullptr);
  if (r == gyreSuccess && nonblocking) r = gyreWait(req);
  if (check.expectOk(r, "combine per slot " + what)) {
    wrong = 0;
    for (size_t tk = 0; tk < T; ++tk)
      for (size_t s = 0; s < K; ++s)
        for (size_t h = 0; h < H; ++h) {
          const double v = slotValue(tk, s, h);
          unsigned char want[8] = {};
          if (v >= 0) writeElem(t, want, v);
          wrong += std::memcmp(&out[((tk * K + s) * H + h) * esz], want, esz) != 0;
        }
    check.expect(wrong == 0, what + ": " + std::to_string(wrong) + " per-slot combined elements wrong");
    check.expect(guardIntact(out, T * K * H * esz), what + ": combine wrote past its rows");
  }
  if (isFloat(t)) {
    // Weighted: fused multiply-adds in slot order, in float (double for float64).
    std::vector<float> wts(T * K);
    for (size_t i = 0; i < wts.size(); ++i) wts[i] = 0.1f + static_cast<float>(mix(me, i, 5) % 1000) / 997.0f;
    std::vector<unsigned char> sum(T * H * esz + kGuard, kFill);
    check.expectOk(gyreMoeCombine(y.data(), rows.size(), sum.data(), wts.data(), H, t, routing, comm, nullptr),
                   "combine weighted " + what);
    wrong = 0;
    for (size_t tk = 0; tk < T; ++tk)
      for (size_t h = 0; h < H; ++h) {
        double accD = 0;
        float accF = 0;
        for (size_t s = 0; s < K; ++s) {
          const double v = slotValue(tk, s, h);
          if (v < 0) continue;
          accD = std::fma(static_cast<double>(wts[tk * K + s]), v, accD);
          accF = std::fma(wts[tk * K + s], static_cast<float>(v), accF);
        }
        unsigned char want[8] = {};
        writeElem(t, want, t == gyreFloat64 ? accD : static_cast<double>(accF));
        wrong += std::memcmp(&sum[(tk * H + h) * esz], want, esz) != 0;
      }
    check.expect(wrong == 0, what + ": " + std::to_string(wrong) + " weighted combined elements wrong");
    check.expect(guardIntact(sum, T * H * esz), what + ": weighted combine wrote past its rows");
  }
  // Backward of combine: a per-slot dispatch along the same route (each
  // slot's own row, as the gradient w x dy would be).
  std::vector<unsigned char> dy(T * K * H * esz);
  for (size_t tk = 0; tk < T; ++tk)
    for (size_t s = 0; s < K; ++s)
      for (size_t h = 0; h < H; ++h) writeElem(t, &dy[((tk * K + s) * H + h) * esz], xValue(me, tk, h, static_cast<int>(s) + 1));
  std::vector<unsigned char> back(rows.size() * H * esz + kGuard, kFill);
  if (check.expectOk(gyreMoeDispatch(dy.data(), back.data(), rows.size(), H, t, GYRE_MOE_PER_SLOT, routing, comm,
                                     nullptr),
                     "per-slot dispatch " + what)) {
    wrong = 0;
    for (size_t i = 0; i < rows.size(); ++i)
      for (size_t h = 0; h < H; ++h) {
        unsigned char want[8] = {};
        writeElem(t, want, xValue(rows[i].q, rows[i].t, h, rows[i].s + 1));
        wrong += std::memcmp(&back[(i * H + h) * esz], want, esz) != 0;
      }
    check.expect(wrong == 0, what + ": " + std::to_string(wrong) + " per-slot dispatched elements wrong");
    check.expect(guardIntact(back, rows.size() * H * esz), what + ": per-slot dispatch wrote past its rows");
  }
  gyreMoeRoutingDestroy(routing);
}

std::vector<RankRun> runs() {
  std::vector<RankRun> v;
  for (const char* tr : {"shm", "tcp"})
    for (int n : {1, 2, 3, 4, 8}) v.push_back({tr, n});
  return v;
}

class MoeExchange : public testing::TestWithParam<RankRun> {};

TEST_P(MoeExchange, EveryCaseAndTypeMatchesTheOneRankReference) {
  const RankRun run = GetParam();
  RunOptions o;
  o.timeoutSec = 240;
  RunOutcome out = runRanks(
      run.nranks,
      [&](int rank, int n, const gyreUniqueId& id) {
        gyreComm_t comm = initRank(rank, n, id, run.transport);
        if (!comm) return 1;
        Checker check(rank);
        for (const Case& c : kCases)
          for (gyreDataType_t t : kTypes)
            if (!c.wide || t == gyreFloat64 || t == gyreUint8)
              for (bool ahead : {true, false}) checkCase(comm, rank, c, t, ahead, false, check);
        // The nonblocking forms, once per case.
        for (const Case& c : kCases) checkCase(comm, rank, c, gyreFloat32, true, true, check);
        gyreCommDestroy(comm);
        return check.failures() ? 1 : 0;
      },
      o);
  EXPECT_TRUE(out.allSucceeded()) << out.describe();
}

INSTANTIATE_TEST_SUITE_P(Ranks, MoeExchange, testing::ValuesIn(runs()), runName);

}  // namespace
}  // namespace gyre::test
