#include "bench/gyre_bench/collectives.h"

#include <cmath>
#include <cstdint>

#include "bench/exact_values.h"
#include "bench/gyre_bench/sequence.h"

namespace gyre::bench {

namespace {

using test::countPatternWrong;
using test::countWrong;
using test::dtypeBytes;
using test::ErrorStats;
using test::fillInput;
using test::fillPattern;

size_t esz(const Call& c) { return dtypeBytes(c.opt->dtype); }
unsigned char* elem(unsigned char* base, const Call& c, size_t i) { return base + i * esz(c); }
gyreDataType_t dt(const Call& c) { return c.opt->dtype; }

double one(int) { return 1; }
double allReduceFactor(int n) { return 2.0 * (n - 1) / n; }
double gatherFactor(int n) { return double(n - 1) / n; }

void shapeSame(Call& c, size_t elems) { c.count = c.sendElems = c.recvElems = elems; }
// Gathers: count per rank; the output holds every rank's block.
void shapeGather(Call& c, size_t elems) {
  c.count = elems / c.nranks;
  c.sendElems = c.count;
  c.recvElems = c.count * c.nranks;
}
void shapeScatter(Call& c, size_t elems) {
  c.count = elems / c.nranks;
  c.sendElems = c.count * c.nranks;
  c.recvElems = c.count;
}
void shapeAllToAll(Call& c, size_t elems) {
  c.count = elems / c.nranks;
  c.sendElems = c.recvElems = c.count * c.nranks;
}
// Uneven: each rank sends its next rank `skew` times what it sends the
// others, with the same total as AllToAll of this row.
void shapeAllToAllv(Call& c, size_t elems) {
  const int n = c.nranks, k = c.opt->skew;
  auto weight = [&](int from, int to) { return n > 1 && to == (from + 1) % n ? k : 1; };
  const size_t unit = elems / size_t(n - 1 + k);
  c.sc.assign(n, 0), c.sd.assign(n, 0), c.rc.assign(n, 0), c.rd.assign(n, 0);
  size_t s = 0, r = 0;
  for (int p = 0; p < n; ++p) {
    c.sc[p] = unit * weight(c.rank, p), c.sd[p] = s, s += c.sc[p];
    c.rc[p] = unit * weight(p, c.rank), c.rd[p] = r, r += c.rc[p];
  }
  c.count = s;
  c.sendElems = s, c.recvElems = r;
}

void placeApart(Call& c, unsigned char* a, unsigned char* b) { c.send = a, c.recv = b; }
void placeSame(Call& c, unsigned char* a, unsigned char* b) {
  if (c.inPlace) c.send = c.recv = a;
  else placeApart(c, a, b);
}
void placeInRecv(Call& c, unsigned char* a, unsigned char* b) {  // allgather: send = my block of recv
  placeApart(c, a, b);
  if (c.inPlace) c.send = elem(b, c, c.count * c.rank);
}
void placeInSend(Call& c, unsigned char* a, unsigned char* b) {  // reducescatter
  placeApart(c, a, b);
  if (c.inPlace) c.recv = elem(a, c, c.count * c.rank);
}
void placeGather(Call& c, unsigned char* a, unsigned char* b) {
  placeApart(c, a, b);
  if (c.inPlace && c.rank == c.opt->root) c.send = elem(b, c, c.count * c.rank);
}
void placeScatter(Call& c, unsigned char* a, unsigned char* b) {
  placeApart(c, a, b);
  if (c.inPlace && c.rank == c.opt->root) c.recv = elem(a, c, c.count * c.rank);
}

// Reductions: inputs whose result is exact in every order.
void fillReduce(Call& c) { fillInput(c.send, c.sendElems, dt(c), c.opt->op, c.rank); }
size_t wrongAllReduce(Call& c) { return countWrong(c.recv, c.count, dt(c), c.opt->op, c.nranks, nullptr); }
size_t wrongReduce(Call& c) { return c.rank == c.opt->root ? wrongAllReduce(c) : 0; }
size_t wrongReduceScatter(Call& c) {
  return countWrong(c.recv, c.count, dt(c), c.opt->op, c.nranks, nullptr, c.count * c.rank);
}

void fillBroadcast(Call& c) {
  if (c.rank == c.opt->root) fillPattern(c.send, c.count, dt(c), c.opt->root);
}
size_t wrongBroadcast(Call& c) { return countPatternWrong(c.recv, c.count, dt(c), c.opt->root, nullptr); }
void fillOwn(Call& c) { fillPattern(c.send, c.count, dt(c), c.rank); }
size_t wrongBlocks(Call& c) {
  size_t w = 0;
  for (int q = 0; q < c.nranks; ++q) w += countPatternWrong(elem(c.recv, c, c.count * q), c.count, dt(c), q, nullptr);
  return w;
}
size_t wrongGather(Call& c) { return c.rank == c.opt->root ? wrongBlocks(c) : 0; }
void fillScatter(Call& c) {
  if (c.rank != c.opt->root) return;
  for (int p = 0; p < c.nranks; ++p) fillPattern(elem(c.send, c, c.count * p), c.count, dt(c), p);
}
size_t wrongScatter(Call& c) { return countPatternWrong(c.recv, c.count, dt(c), c.rank, nullptr); }
// AllToAll(v): the block from s to d carries seed s * n + d.
void fillAllToAll(Call& c) {
  for (int p = 0; p < c.nranks; ++p)
    fillPattern(elem(c.send, c, c.count * p), c.count, dt(c), uint64_t(c.rank) * c.nranks + p);
}
size_t wrongAllToAll(Call& c) {
  size_t w = 0;
  for (int q = 0; q < c.nranks; ++q)
    w += countPatternWrong(elem(c.recv, c, c.count * q), c.count, dt(c), uint64_t(q) * c.nranks + c.rank, nullptr);
  return w;
}
void fillAllToAllv(Call& c) {
  for (int p = 0; p < c.nranks; ++p)
    fillPattern(elem(c.send, c, c.sd[p]), c.sc[p], dt(c), uint64_t(c.rank) * c.nranks + p);
}
size_t wrongAllToAllv(Call& c) {
  size_t w = 0;
  for (int q = 0; q < c.nranks; ++q)
    w += countPatternWrong(elem(c.recv, c, c.rd[q]), c.rc[q], dt(c), uint64_t(q) * c.nranks + c.rank, nullptr);
  return w;
}
// SendRecv: a ring, each rank sends to the next and receives from the previous.
void shapeSendRecv(Call& c, size_t elems) { shapeSame(c, elems); }
size_t wrongSendRecv(Call& c) {
  return countPatternWrong(c.recv, c.count, dt(c), (c.rank + c.nranks - 1) % c.nranks, nullptr);
}
void fillNothing(Call&) {}
size_t wrongNothing(Call&) { return 0; }

// ---- compressed forms ----

void fillReduceLossy(Call& c) { test::fillFractionalInput(c.send, c.sendElems, dt(c), c.opt->op, c.rank); }
ErrorStats errorAllReduce(Call& c) { return test::measureError(c.recv, c.count, dt(c), c.opt->op, c.nranks); }
ErrorStats errorReduceScatter(Call& c) {
  return test::measureError(c.recv, c.count, dt(c), c.opt->op, c.nranks, c.count * c.rank);
}
void fillOwnLossy(Call& c) { test::fillFractionalPattern(c.send, c.count, dt(c), c.rank); }
ErrorStats errorBlocks(Call& c) {
  ErrorStats s;
  for (int q = 0; q < c.nranks; ++q)
    s.merge(test::measurePatternError(elem(c.recv, c, c.count * q), c.count, dt(c), q));
  return s;
}

// Bytes sent, by the compressed plan (src/collectives/compressed.h).
// AllReduce: rank r sends each peer q q's block of its input, then its own
// block of the result to every peer; averaged over the ranks that is
// 2(n-1)/n times the messages of every block, and as blocks (and the
// pieces they are sent in) are whole chunks, those add up to one message
// of count values. The uncompressed ring sends the same share of the size.
double wireAllReduce(const Call& c, gyreCodec_t codec) {
  return allReduceFactor(c.nranks) * double(messageBytes(codec, c.count, esz(c)));
}
// ReduceScatter and AllGather: a block of count values to each peer.
double wireBlocks(const Call& c, gyreCodec_t codec) {
  return double(c.nranks - 1) * double(messageBytes(codec, c.count, esz(c)));
}

const Lossy kLossyAllReduce{fillReduceLossy, errorAllReduce, wireAllReduce};
const Lossy kLossyReduceScatter{fillReduceLossy, errorReduceScatter, wireBlocks};
const Lossy kLossyAllGather{fillOwnLossy, errorBlocks, wireBlocks};

gyreResult_t runAllReduce(Call& c) {
  if (c.opt->codec != gyreCodecNone)
    return gyreAllReduceCodec(c.send, c.recv, c.count, dt(c), c.opt->op, c.opt->codec, c.comm, c.stream);
  return gyreAllReduce(c.send, c.recv, c.count, dt(c), c.opt->op, c.comm, c.stream);
}
gyreResult_t runReduce(Call& c) {
  return gyreReduce(c.send, c.recv, c.count, dt(c), c.opt->op, c.opt->root, c.comm, c.stream);
}
gyreResult_t runBroadcast(Call& c) { return gyreBroadcast(c.send, c.recv, c.count, dt(c), c.opt->root, c.comm, c.stream); }
gyreResult_t runAllGather(Call& c) {
  if (c.opt->codec != gyreCodecNone)
    return gyreAllGatherCodec(c.send, c.recv, c.count, dt(c), c.opt->codec, c.comm, c.stream);
  return gyreAllGather(c.send, c.recv, c.count, dt(c), c.comm, c.stream);
}
gyreResult_t runReduceScatter(Call& c) {
  if (c.opt->codec != gyreCodecNone)
    return gyreReduceScatterCodec(c.send, c.recv, c.count, dt(c), c.opt->op, c.opt->codec, c.comm, c.stream);
  return gyreReduceScatter(c.send, c.recv, c.count, dt(c), c.opt->op, c.comm, c.stream);
}
gyreResult_t runAllToAll(Call& c) { return gyreAllToAll(c.send, c.recv, c.count, dt(c), c.comm, c.stream); }
gyreResult_t runAllToAllv(Call& c) {
  return gyreAllToAllv(c.send, c.sc.data(), c.sd.data(), c.recv, c.rc.data(), c.rd.data(), dt(c), c.comm, c.stream);
}
gyreResult_t runGather(Call& c) { return gyreGather(c.send, c.recv, c.count, dt(c), c.opt->root, c.comm, c.stream); }
gyreResult_t runScatter(Call& c) { return gyreScatter(c.send, c.recv, c.count, dt(c), c.opt->root, c.comm, c.stream); }
gyreResult_t runSendRecv(Call& c) {
  if (c.nranks == 1) return gyreSuccess;
  gyreResult_t r = gyreGroupStart();
  if (r != gyreSuccess) return r;
  gyreSend(c.send, c.count, dt(c), (c.rank + 1) % c.nranks, c.comm, c.stream);
  gyreRecv(c.recv, c.count, dt(c), (c.rank + c.nranks - 1) % c.nranks, c.comm, c.stream);
  return gyreGroupEnd();
}
void fillSendRecv(Call& c) {
  fillOwn(c);
  if (c.nranks == 1) fillPattern(c.recv, c.count, dt(c), 0);
}
gyreResult_t runBarrier(Call& c) { return gyreBarrier(c.comm, c.stream); }

// Peer averaging (--peers): rank r's input is r + 1 everywhere. Whoever its
// peers are this step, its output is one value everywhere (the average of
// its group's), and the outputs' sum over ranks is the inputs' (every
// selection is symmetric: averaging keeps the mean), which the check
// confirms without knowing the pairs. Each call is the next step.
void fillPeerAverage(Call& c) {
  test::fillConstant(c.send, c.count, dt(c), double(c.rank + 1));
}
gyreResult_t runPeerAverage(Call& c) {
  return gyrePeerAverage(c.send, c.recv, c.count, dt(c), c.opt->peers, c.step++, c.comm, c.stream);
}
size_t wrongPeerAverage(Call& c) {
  size_t w = 0;
  const double first = c.count ? test::elementAsDouble(c.recv, 0, dt(c)) : 0;
  for (size_t i = 1; i < c.count; ++i) w += test::elementAsDouble(c.recv, i, dt(c)) != first;
  double sum = first;  // every rank's value, summed: n (n + 1) / 2 up to rounding
  if (gyreAllReduce(&first, &sum, 1, gyreFloat64, gyreSum, c.comm, nullptr) != gyreSuccess) return c.count;
  const double want = 0.5 * c.nranks * (c.nranks + 1);
  if (c.count && std::abs(sum - want) > 1e-2 * want) w += 1;
  return w;
}

const Collective kCollectives[] = {
    {"allreduce", true, false, true, allReduceFactor, shapeSame, placeSame, fillReduce, runAllReduce, wrongAllReduce,
     &kLossyAllReduce},
    {"allgather", false, false, true, gatherFactor, shapeGather, placeInRecv, fillOwn, runAllGather, wrongBlocks,
     &kLossyAllGather},
    {"reducescatter", true, false, true, gatherFactor, shapeScatter, placeInSend, fillReduce, runReduceScatter,
     wrongReduceScatter, &kLossyReduceScatter},
    {"alltoall", false, false, true, gatherFactor, shapeAllToAll, placeSame, fillAllToAll, runAllToAll, wrongAllToAll,
     nullptr},
    {"alltoallv", false, false, false, gatherFactor, shapeAllToAllv, placeApart, fillAllToAllv, runAllToAllv,
     wrongAllToAllv, nullptr},
    {"broadcast", false, true, true, one, shapeSame, placeSame, fillBroadcast, runBroadcast, wrongBroadcast, nullptr},
    {"reduce", true, true, true, one, shapeSame, placeSame, fillReduce, runReduce, wrongReduce, nullptr},
    {"gather", false, true, true, gatherFactor, shapeGather, placeGather, fillOwn, runGather, wrongGather, nullptr},
    {"scatter", false, true, true, gatherFactor, shapeScatter, placeScatter, fillScatter, runScatter, wrongScatter,
     nullptr},
    {"sendrecv", false, false, false, one, shapeSendRecv, placeApart, fillSendRecv, runSendRecv, wrongSendRecv,
     nullptr},
    {"barrier", false, false, false, one, shapeSame, placeApart, fillNothing, runBarrier, wrongNothing, nullptr},
    {"peeraverage", false, false, true, one, shapeSame, placeSame, fillPeerAverage, runPeerAverage, wrongPeerAverage,
     nullptr},
    {"seqtoheads", false, false, false, gatherFactor, shapeSeqToHeads, placeApart, fillSeqToHeads, runSeqToHeads,
     wrongSeqToHeads, nullptr},
    {"headstoseq", false, false, false, gatherFactor, shapeHeadsToSeq, placeApart, fillHeadsToSeq, runHeadsToSeq,
     wrongHeadsToSeq, nullptr},
};

}  // namespace

size_t messageBytes(gyreCodec_t codec, size_t n, size_t esz) {
  const size_t chunks = (n + 4095) / 4096;
  switch (codec) {
    case gyreCodecFp16:
    case gyreCodecBf16:
      return 2 * n;
    case gyreCodecInt8:
      return chunks * 2 * sizeof(float) + n;
    case gyreCodecOneBit:
      return chunks * sizeof(float) + (n + 31) / 32 * sizeof(uint32_t);
    default:
      return n * esz;
  }
}

const Collective* findCollective(const std::string& name) {
  for (const Collective& c : kCollectives)
    if (name == c.name) return &c;
  return nullptr;
}

std::string collectiveNames() {
  std::string s;
  for (const Collective& c : kCollectives) s += (s.empty() ? "" : ", ") + std::string(c.name);
  return s;
}

}  // namespace gyre::bench
