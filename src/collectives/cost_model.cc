#include "collectives/cost_model.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "base/error.h"
#include "base/hash.h"

namespace gyre::collectives {

namespace {

// The terms every formula is made of (alpha-beta-gamma): a message costs
// alpha plus beta per byte on its link; a local reduction (or copy) costs
// gamma per byte.
struct Terms {
  double alpha, beta, gamma, read, readAlpha;
  size_t chunk;
  double cacheBytes, readCold;  // reads' cost per byte beyond the cache
  // Single-copy reads' cost per byte in a call that touches `footprint`
  // distinct bytes on the host: the share beyond the cache reads cold.
  double readFor(double footprint) const {
    const double cold = footprint > cacheBytes ? 1.0 - cacheBytes / footprint : 0.0;
    return read + cold * (readCold - read);
  }
};

// Flat algorithms run over the slowest link their ranks span. With more
// ranks than cores on a host, a message also waits for its receiver to be
// scheduled (it sleeps instead of spinning), so each step's latency is
// scaled by 12x the oversubscription. On the 2 cores a step of 4 ranks
// costs about ten times one of 2 for the smallest messages, but 20-30 times
// at 32-128 KiB (tuner-sweeps runs 7-9: ring steps of 3-8 us against
// 0.2-0.4), the sizes where fewer steps trade against fewer bytes.
// Replaying runs 5-9 with 5, 8, 12 and 20 times the oversubscription put
// 1338, 1352, 1355 and 1355 of their 1560 sizes within 10% of the best.
bool crowded(const CallShape& s) { return s.cores > 0 && s.perHost > s.cores; }

Terms terms(const CallShape& s, const CostModel& m) {
  const LinkCost& link = s.hosts > 1 ? m.network : m.local;
  const double crowding = crowded(s) ? 12.0 * s.perHost / s.cores : 1.0;
  const double read = 1e-3 / (s.mappedReads ? m.mappedReadGBps : m.readGBps);
  return Terms{link.latencyUs * crowding,
               link.usPerByte(),
               1e-3 / m.reduceGBps,
               read,
               s.mappedReads ? 0.0 : m.readLatencyUs * crowding,
               std::max<size_t>(1, s.hosts > 1 ? s.networkChunk : s.localChunk),
               m.cacheMiB * double(1 << 20),
               s.mappedReads ? read : read * m.readColdSlowdown};
}

double pieces(size_t bytes, size_t chunk) { return std::max(1.0, std::ceil(double(bytes) / double(chunk))); }

int log2Floor(int n) {
  int r = 0;
  while ((2 << r) <= n) ++r;
  return r;
}
int log2Ceil(int n) {
  int r = 0;
  while ((1 << r) < n) ++r;
  return r;
}

// The power-of-two algorithms fold the ranks beyond the largest power of
// two into a partner: two extra messages of the whole vector.
struct PowerOfTwo {
  int p, rounds;
  bool fold;
  explicit PowerOfTwo(int n) : p(1 << log2Floor(n)), rounds(log2Floor(n)), fold(n != (1 << log2Floor(n))) {}
};

double ringAllReduce(int n, double S, const Terms& t) {
  const double msgs = 2.0 * (n - 1) * pieces(size_t(S / n), t.chunk);
  return msgs * t.alpha + 2.0 * (n - 1) / n * S * t.beta + double(n - 1) / n * S * t.gamma;
}

// A pipelined chain of `hops` links carrying S bytes in pieces of c.
double chain(int hops, double S, double c, double perByte, double alpha) {
  if (hops <= 0) return 0;
  if (S <= 0) return hops * alpha;
  const double k = std::ceil(S / c);
  return (hops - 1 + k) * (alpha + c * perByte);
}

// Pipelining trades latency per piece against the pipeline's fill time:
// (hops - 1 + S/c)(alpha + c beta) is least at c = sqrt(S alpha / ((hops - 1) beta)).
double bestPiece(int hops, double S, double perByte, double alpha, size_t chunk) {
  if (hops <= 1 || S <= 0) return std::min<double>(std::max(S, 1.0), double(chunk));
  const double c = std::sqrt(S * alpha / ((hops - 1) * perByte));
  return std::clamp(c, 4096.0, double(chunk));
}

}  // namespace

double costRingAllReduce(const CallShape& s, const CostModel& m) {
  return ringAllReduce(s.nranks, double(s.bytes), terms(s, m));
}

double costRecursiveDoublingAllReduce(const CallShape& s, const CostModel& m) {
  const Terms t = terms(s, m);
  const PowerOfTwo q(s.nranks);
  const double S = double(s.bytes), exchanges = q.rounds + (q.fold ? 2 : 0);
  return exchanges * pieces(s.bytes, t.chunk) * t.alpha + exchanges * S * t.beta +
         (q.rounds + (q.fold ? 1 : 0)) * S * t.gamma;
}

double costRabenseifnerAllReduce(const CallShape& s, const CostModel& m) {
  const Terms t = terms(s, m);
  const PowerOfTwo q(s.nranks);
  const double S = double(s.bytes), f = q.fold ? 1 : 0;
  const double msgs = 2.0 * q.rounds * pieces(s.bytes / 2, t.chunk) + 2 * f * pieces(s.bytes, t.chunk);
  // Works in scratch: the input is copied in before the halving starts and
  // the result out at the end.
  return msgs * t.alpha + (2.0 * (q.p - 1) / q.p + 2 * f) * S * t.beta +
         (double(q.p - 1) / q.p + f + 2) * S * t.gamma;
}

double costDirectAllReduce(const CallShape& s, const CostModel& m) {
  if (!s.canRead) return kNotApplicable;
  const Terms t = terms(s, m);
  const int n = s.nranks;
  const double S = double(s.bytes);
  // Addresses out, reads of every peer's slice, the reduced slices read
  // back by everyone, then "done".
  return 3 * t.alpha + 2.0 * (n - 1) * t.readAlpha + 2.0 * (n - 1) / n * S * t.readFor(2.0 * n * S) +
         double(n - 1) / n * S * t.gamma;
}

double costDoubleTreeAllReduce(const CallShape& s, const CostModel& m) {
  const Terms t = terms(s, m);
  const double S = double(s.bytes), half = S / 2;
  const int depth = log2Ceil(s.nranks + 1) - 1;
  const double k = pieces(size_t(half), t.chunk);
  // Up and down each tree, pipelined: the fill time is the depth; an
  // interior node receives two children's halves and sends one, then the
  // reverse; a node is interior in at most one tree, so it handles S bytes
  // each way and reduces S. Across hosts the pipeline does not hold: a
  // rank's one lane waits for each piece from its children before it sends
  // that piece on, and its send to another host for the link to take it,
  // so each level of the trees over the hosts adds about 2.25 S of link
  // time instead of overlapping the others. Found by gyre-sim (the tree's
  // time grows with log2 of the hosts: 2.1, 4.8, 6.3, 9.0 and 11.1 S/B at
  // 2, 4, 8, 16 and 32 hosts of 2 ranks) and measured on 2 ranks on each of
  // 2 and 4 namespace hosts at 1 Gbit/s, 8 MiB: 2.4 and 4.5 S/B, where
  // this formula said 2 S/B for both (docs/simulator.md, "The tuner at
  // scale"); at 64 MiB the tree reached 85% and 40% of the link, the ring
  // 95% and 91%.
  // A lane also sends and receives each piece's messages one after another
  // (a child's, the other child's, then the parent's), so across hosts
  // every piece at every level costs three messages' fixed costs: on 2 DGX
  // H100-like hosts (NVLink within, a NIC per rank) the chains within the
  // hosts make a large tree 2.9x slower than the ring in the simulation,
  // with the network nowhere near full.
  if (s.hosts > 1)
    return 2 * (depth + k) * 3 * t.alpha + 2.25 * std::max(1, log2Ceil(s.hosts)) * S * t.beta + S * t.gamma;
  return 2 * (depth + k) * t.alpha + 1.5 * S * t.beta + S * t.gamma;
}

double costHierarchicalAllReduce(const CallShape& s, const CostModel& m) {
  if (s.hosts <= 1 || s.perHost <= 1) return kNotApplicable;
  CallShape host = s;  // one host's chain
  host.nranks = s.perHost;
  host.hosts = 1;
  const Terms local = terms(host, m);
  Terms net = terms(s, m);
  const double S = double(s.bytes);
  const double pl = bestPiece(s.perHost - 1, S, local.beta + local.gamma, local.alpha, local.chunk);
  return chain(s.perHost - 1, S, pl, local.beta + local.gamma, local.alpha) + ringAllReduce(s.hosts, S, net) +
         chain(s.perHost - 1, S, pl, local.beta, local.alpha);
}

size_t chainPieceBytes(const CallShape& s, const CostModel& m) {
  const Terms t = terms(s, m);
  const double perByte = t.beta + (s.op == OpKind::Reduce ? t.gamma : 0);
  return static_cast<size_t>(bestPiece(s.nranks - 1, double(s.bytes), perByte, t.alpha, t.chunk));
}

size_t pipelinePieceBytes(const CallShape& s, const CostModel& m) {
  if (s.op == OpKind::Broadcast || s.op == OpKind::Reduce) return chainPieceBytes(s, m);
  if (s.op != OpKind::AllReduce) return 0;
  CallShape local = s;
  local.op = OpKind::Reduce;
  local.nranks = s.perHost;
  local.hosts = 1;
  return chainPieceBytes(local, m);
}

double costChainBroadcast(const CallShape& s, const CostModel& m) {
  const Terms t = terms(s, m);
  // With more ranks on the host than cores, the n-1 hops' copies (two each,
  // where direct's readers make one) share the cores: 4 ranks on 2 cores,
  // 64 KiB-8 MiB, the chain was 1.8-3.1x behind direct in tuner-sweeps runs
  // 5 and 7 and at most 1.36x ahead of it in run 6.
  const double sharing = s.hosts == 1 && crowded(s) ? double(s.nranks - 1) / s.cores : 1.0;
  return chain(s.nranks - 1, double(s.bytes), double(chainPieceBytes(s, m)), sharing * t.beta, t.alpha);
}

double costTreeBroadcast(const CallShape& s, const CostModel& m) {
  const Terms t = terms(s, m);
  // The root sends the whole message once per round.
  return log2Ceil(s.nranks) * (pieces(s.bytes, t.chunk) * t.alpha + double(s.bytes) * t.beta);
}

double costDirectBroadcast(const CallShape& s, const CostModel& m) {
  if (!s.canRead) return kNotApplicable;
  const Terms t = terms(s, m);
  // Every other rank reads the root's buffer at once: n-1 single copies.
  // Crowded ranks share the cores for these too, but the chain's two copies
  // per hop lose more (costChainBroadcast); replaying tuner-sweeps runs 5-7,
  // pricing only the chain's sharing put 59 of the 78 crowded Broadcast
  // sizes within 10% of the best, both 56, only direct's (before) 51. The
  // call touches the root's buffer and n-1 outputs; once that is beyond the
  // cache the reads come cold, and the chain, whose pieces pass through
  // FIFOs in cache, wins: 4 ranks, 64-256 MiB, 1.4-1.8x in runs 7-9.
  return 3 * t.alpha + t.readAlpha + double(s.bytes) * t.readFor(double(s.nranks) * double(s.bytes));
}

double costChainReduce(const CallShape& s, const CostModel& m) {
  const Terms t = terms(s, m);
  return chain(s.nranks - 1, double(s.bytes), double(chainPieceBytes(s, m)), t.beta + t.gamma, t.alpha);
}

double costTreeReduce(const CallShape& s, const CostModel& m) {
  const Terms t = terms(s, m);
  return log2Ceil(s.nranks) * (pieces(s.bytes, t.chunk) * t.alpha + double(s.bytes) * (t.beta + t.gamma));
}

// AllGather, ReduceScatter, AllToAll: s.bytes is one rank's block b.
double costRingAllGather(const CallShape& s, const CostModel& m) {
  const Terms t = terms(s, m);
  const int n = s.nranks;
  return (n - 1) * pieces(s.bytes, t.chunk) * t.alpha + (n - 1) * double(s.bytes) * t.beta;
}

double costBruckAllGather(const CallShape& s, const CostModel& m) {
  const Terms t = terms(s, m);
  const int n = s.nranks;
  const double total = double(s.bytes) * n;
  // log2 n rounds of growing messages, then a rotation copy of the result.
  // A round sends to rank - k and receives from rank + k: each waits on a
  // different rank than it feeds, so a round's latency is a chain through
  // the ranks, about two messages' (gyre-algo-sweep, 4 ranks: recursive
  // doubling's pairwise swaps 1.25-1.45x faster at every latency-bound size).
  return 2 * log2Ceil(n) * t.alpha + (n - 1) * double(s.bytes) * t.beta + total * t.gamma;
}

double costDoublingAllGather(const CallShape& s, const CostModel& m) {
  const Terms t = terms(s, m);
  const PowerOfTwo q(s.nranks);
  const double b = double(s.bytes), f = q.fold ? 1 : 0;
  // log2 p exchanges of everything gathered so far, straight between the
  // outputs (no scratch, no rotation: Bruck's extra copies), each a swap
  // between two ranks. Its bytes are the ring's; they are charged 10% more
  // because its messages double in size instead of staying even, which put
  // the crossover with the ring at 64-128 KiB with 4 ranks on 2 cores in
  // two of three gyre-algo-sweep runs (the third, in the host's other
  // mode, had recursive doubling ahead up to 256 KiB). Other rank counts
  // fold in and out (a block, then the whole output).
  double msgs = 0;
  for (int k = 0; k < q.rounds; ++k) msgs += pieces(size_t(b * (1 << k)), t.chunk);
  return (msgs + 2 * f) * t.alpha + 1.1 * (s.nranks - 1) * b * t.beta + f * (s.nranks + 1) * b * t.beta;
}

double costDirectAllGather(const CallShape& s, const CostModel& m) {
  if (!s.canRead) return kNotApplicable;
  const Terms t = terms(s, m);
  const double n = s.nranks, b = double(s.bytes);
  return 3 * t.alpha + (n - 1) * (t.readAlpha + b * t.readFor(n * (n + 1) * b));
}

double costRingReduceScatter(const CallShape& s, const CostModel& m) {
  const Terms t = terms(s, m);
  const int n = s.nranks;
  return (n - 1) * pieces(s.bytes, t.chunk) * t.alpha + (n - 1) * double(s.bytes) * (t.beta + t.gamma);
}

double costHalvingReduceScatter(const CallShape& s, const CostModel& m) {
  const Terms t = terms(s, m);
  const PowerOfTwo q(s.nranks);
  const double total = double(s.bytes) * s.nranks, f = q.fold ? 1 : 0;
  // The input is copied into scratch first (it is read only).
  return (q.rounds + 2 * f) * t.alpha + (double(q.p - 1) / q.p + f) * total * (t.beta + t.gamma) + total * t.gamma;
}

double costDirectReduceScatter(const CallShape& s, const CostModel& m) {
  if (!s.canRead) return kNotApplicable;
  const Terms t = terms(s, m);
  const double n = s.nranks, b = double(s.bytes);
  return 3 * t.alpha + (n - 1) * (t.readAlpha + b * (t.readFor(n * (n + 1) * b) + t.gamma));
}

double costPairwiseAllToAll(const CallShape& s, const CostModel& m) {
  const Terms t = terms(s, m);
  const int n = s.nranks;
  // The n-1 exchanges run side by side (a lane each), so their latencies
  // overlap: measured, 4 ranks take about twice one exchange, not three
  // times. Over sockets each message is system calls on both sides, CPU
  // time that does not overlap: every one counts (small AllToAll, 64 B to
  // 32 KiB, over TCP and UCX on one host: Bruck's log2 n rounds 1.2-1.6x
  // faster at 4 ranks, 1.6-1.8x at 8; across 2 and 4 namespace hosts 1.1x).
  // Where ranks outnumber cores, one pass of a core's scheduler through its
  // ranks serves several of their exchanges at once, where Bruck's rounds
  // each wait on the last (8 ranks on 2 cores, 64 B to 256 KiB blocks:
  // pairwise 0.65-0.82 of Bruck's time, 13.6 us against 17.7 at 64 B; 4
  // ranks about one exchange's time against Bruck's two rounds).
  const size_t chunk = std::min(t.chunk, s.pairwisePiece);
  const double overlap = s.sockets ? n - 1.0 : crowded(s) ? 1 + (n - 2) / 5.0 : 1 + (n - 2) / 2.0;
  return overlap * pieces(s.bytes, chunk) * t.alpha + (n - 1) * double(s.bytes) * t.beta;
}

size_t pairwisePieceBytes(int perHost, int slots) {
  if (perHost <= 2) return SIZE_MAX;
  constexpr size_t kBudget = size_t{16} << 20, kFloor = size_t{16} << 10;
  const size_t per = size_t(perHost) * size_t(perHost) * size_t(std::max(slots, 1));
  size_t piece = kFloor;
  while (piece * 2 * per <= kBudget) piece *= 2;
  return piece;
}

double costBruckAllToAll(const CallShape& s, const CostModel& m) {
  const Terms t = terms(s, m);
  const int n = s.nranks;
  const double total = double(s.bytes) * n;
  // Each round sends about half the blocks; blocks are packed and unpacked.
  return log2Ceil(n) * (t.alpha + total / 2 * t.beta + total * t.gamma);
}

double costDirectAllToAll(const CallShape& s, const CostModel& m) {
  if (!s.canRead) return kNotApplicable;
  const Terms t = terms(s, m);
  const double n = s.nranks, b = double(s.bytes);
  return 3 * t.alpha + (n - 1) * (t.readAlpha + b * t.readFor(2 * n * n * b));
}

double costOnlyChoice(const CallShape&, const CostModel&) { return 0; }

size_t blockwiseReadThreshold(const CallShape& s, const CostModel& m) {
  if (!s.canRead) return SIZE_MAX;
  CallShape a = s;
  a.op = OpKind::AllToAll;
  for (size_t b = 64; b <= (size_t{1} << 30); b <<= 1) {
    a.bytes = b;
    if (costDirectAllToAll(a, m) <= costPairwiseAllToAll(a, m)) return b;
  }
  return SIZE_MAX;
}

// ---- the model's numbers: file format, parsing, fingerprint ----

namespace {

struct Field {
  const char* key;
  double CostModel::*plain;
  double LinkCost::*inLink;
  LinkCost CostModel::*link;
  const char* help;
};

const Field kFields[] = {
    {"local.latency_us", nullptr, &LinkCost::latencyUs, &CostModel::local, "a message within a host"},
    {"local.bandwidth_gbps", nullptr, &LinkCost::gbps, &CostModel::local, "one stream within a host"},
    {"network.latency_us", nullptr, &LinkCost::latencyUs, &CostModel::network, "a message between hosts"},
    {"network.bandwidth_gbps", nullptr, &LinkCost::gbps, &CostModel::network, "one stream between hosts"},
    {"reduce.bandwidth_gbps", &CostModel::reduceGBps, nullptr, nullptr, "local reduction, per operand"},
    {"read.bandwidth_gbps", &CostModel::readGBps, nullptr, nullptr, "single-copy reads of a peer's memory"},
    {"read.latency_us", &CostModel::readLatencyUs, nullptr, nullptr, "one single-copy read's fixed cost"},
    {"read.mapped_bandwidth_gbps", &CostModel::mappedReadGBps, nullptr, nullptr,
     "copies from a peer's mapped gyreMemAlloc buffer (GYRE_MAPPED_BUFFERS=1)"},
    {"read.cache_mib", &CostModel::cacheMiB, nullptr, nullptr, "what a call may touch on a host with reads in cache"},
    {"read.cold_slowdown", &CostModel::readColdSlowdown, nullptr, nullptr,
     "single-copy reads beyond that cost this many times as much"},
};

double& fieldOf(CostModel& m, const Field& f) { return f.plain ? m.*f.plain : (m.*f.link).*f.inLink; }
double fieldOf(const CostModel& m, const Field& f) { return f.plain ? m.*f.plain : (m.*f.link).*f.inLink; }

}  // namespace

std::string CostModel::format() const {
  std::string out = "# gyre tuner cost model (" + source + ")\n";
  for (const Field& f : kFields) {
    char line[160];
    std::snprintf(line, sizeof line, "%-24s = %.6g   # %s\n", f.key, fieldOf(*this, f), f.help);
    out += line;
  }
  return out;
}

CostModel CostModel::parse(const std::string& text, const std::string& origin) {
  CostModel m;
  m.source = origin;
  std::istringstream in(text);
  std::string line;
  for (int lineNo = 1; std::getline(in, line); ++lineNo) {
    if (size_t hash = line.find('#'); hash != std::string::npos) line.erase(hash);
    const size_t b = line.find_first_not_of(" \t\r");
    if (b == std::string::npos) continue;
    const std::string where = origin + ":" + std::to_string(lineNo) + ": ";
    const size_t eq = line.find('=');
    if (eq == std::string::npos) throwError(gyreInvalidArgument, where + "expected 'key = value', got '" + line + "'");
    std::string key = line.substr(b, eq - b);
    key.erase(key.find_last_not_of(" \t") + 1);
    std::string value = line.substr(eq + 1);
    const Field* field = nullptr;
    for (const Field& f : kFields)
      if (key == f.key) field = &f;
    if (!field) {
      std::string valid;
      for (const Field& f : kFields) valid += (valid.empty() ? "" : ", ") + std::string(f.key);
      throwError(gyreInvalidArgument, where + "unknown key '" + key + "' (valid: " + valid + ")");
    }
    char* end = nullptr;
    const double v = std::strtod(value.c_str(), &end);
    while (end && (*end == ' ' || *end == '\t' || *end == '\r')) ++end;
    if (end == value.c_str() || (end && *end) || !std::isfinite(v) || v <= 0)
      throwError(gyreInvalidArgument, where + key + " must be a positive number, got '" + value + "'");
    fieldOf(m, *field) = v;
  }
  return m;
}

CostModel CostModel::load(const std::string& path) {
  std::ifstream f(path);
  if (!f) throwError(gyreInvalidArgument, "GYRE_TUNER_FILE=" + path + ": cannot open it");
  std::stringstream text;
  text << f.rdbuf();
  return parse(text.str(), path);
}

uint64_t CostModel::fingerprint() const {
  uint64_t h = kFnv1aBasis;
  for (const Field& f : kFields) {
    const double v = fieldOf(*this, f);
    h = fnv1a(&v, sizeof v, h);
  }
  return h;
}

void CostModel::validate(const std::string& origin) const {
  for (const Field& f : kFields) {
    const double v = fieldOf(*this, f);
    if (!std::isfinite(v) || v <= 0)
      throwError(gyreInternalError, origin + ": " + f.key + " came out as " + std::to_string(v));
  }
}

}  // namespace gyre::collectives
