// The sequence-parallel exchanges (gyre.h, docs/sequence-parallel.md):
// the layout checked field by field, the buffers sized from it, and the
// call handed on as an operation of its own (collectives/seq_exchange.h).
#include <string>
#include <utility>

#include "collectives/call.h"
#include "collectives/seq_layout.h"
#include "core/api_ops.h"
#include "core/api_support.h"

namespace {

using gyre::throwError;
using gyre::collectives::SeqLayout;
using gyre::core::Communicator;
using gyre::core::Operation;

static_assert(int{gyreSeqQ} == gyre::collectives::kSeqQ &&
              int{gyreSeqK} == gyre::collectives::kSeqK &&
              int{gyreSeqV} == gyre::collectives::kSeqV &&
              int{gyreSeqQKV} == gyre::collectives::kSeqAll);

[[noreturn]] void bad(const std::string& what) { throwError(gyreInvalidArgument, what); }

// The layout's heads, key/value heads, head size and parts, checked.
SeqLayout checkedShape(const gyreSeqLayout_t* layout) {
  if (!layout) bad("layout is NULL");
  const gyreSeqLayout_t& g = *layout;
  const auto maxHeads = static_cast<int>(gyre::collectives::kMaxSeqHeads);
  if (g.heads < 1 || g.heads > maxHeads)
    bad("layout->heads " + std::to_string(g.heads) + " is not in [1, " + std::to_string(maxHeads) +
        "]");
  const int kv = g.kvHeads ? g.kvHeads : g.heads;
  if (kv < 1 || kv > g.heads || g.heads % kv)
    bad("layout->kvHeads " + std::to_string(g.kvHeads) + " does not divide heads " +
        std::to_string(g.heads) +
        " (grouped-query attention: heads / kvHeads query heads share each key/value head; 0 means "
        "as many "
        "as heads)");
  if (g.headDim < 1 || g.headDim > gyre::collectives::kMaxSeqHeadDim)
    bad("layout->headDim " + std::to_string(g.headDim) + " is not in [1, " +
        std::to_string(gyre::collectives::kMaxSeqHeadDim) + "]");
  if (g.parts < 1 || g.parts > gyreSeqQKV)
    bad("layout->parts " + std::to_string(g.parts) +
        " is not a set of gyreSeqQ, gyreSeqK and gyreSeqV (1 to 7)");
  SeqLayout l;
  l.heads = static_cast<uint32_t>(g.heads);
  l.kvHeads = static_cast<uint32_t>(kv);
  l.headDim = g.headDim;
  l.parts = static_cast<uint8_t>(g.parts);
  return l;
}

// ... and its tokens, for nranks.
SeqLayout checkedLayout(const gyreSeqLayout_t* layout, int nranks) {
  SeqLayout l = checkedShape(layout);
  const size_t n = static_cast<size_t>(nranks), seqLen = layout->seqLen;
  if (!layout->tokens) {
    if (seqLen % n)
      bad("layout->seqLen " + std::to_string(seqLen) + " is not a multiple of the " +
          std::to_string(n) + " ranks (pass layout->tokens for shares that differ)");
    l.tokens.assign(n, seqLen / n);
  } else {
    l.tokens.assign(layout->tokens, layout->tokens + n);
  }
  size_t sum = 0;
  for (size_t r = 0; r < n; ++r) {
    // The tag carries a block's tokens in 31 bits (call.h).
    if (l.tokens[r] > INT32_MAX)
      bad("layout->tokens[" + std::to_string(r) + "] " + std::to_string(l.tokens[r]) +
          " is 2^31 or more");
    sum += l.tokens[r];
  }
  if (sum != seqLen)
    bad("layout->tokens sum to " + std::to_string(sum) + " but layout->seqLen is " +
        std::to_string(seqLen));
  return l;
}

// tokens x heads x headDim elements of t, in bytes; throws naming `what` on overflow.
size_t bytesOfTokens(size_t tokens, size_t heads, size_t dim, gyreDataType_t t, const char* what) {
  size_t rows = 0;
  if (__builtin_mul_overflow(tokens, heads, &rows))
    bad(std::string(what) + " overflows the address space");
  return gyre::api::bytesOf(rows, dim, t, what);
}

Operation seqOp(Communicator& c, bool toHeads, const void* s, void* r,
                const gyreSeqLayout_t* layout, gyreDataType_t t) {
  gyre::api::checkDataType(t);
  SeqLayout l = checkedLayout(layout, c.nranks());
  const auto share = gyre::collectives::headShare(l, c.nranks(), c.rank());
  const size_t seqSide = bytesOfTokens(l.tokens[c.rank()], gyre::collectives::tokenHeads(l),
                                       l.headDim, t, "this rank's tokens x width x headDim");
  const size_t headSide =
      bytesOfTokens(layout->seqLen, gyre::collectives::shareHeads(l, share), l.headDim, t,
                    "seqLen x this rank's share of the heads x headDim");
  const size_t sendBytes = toHeads ? seqSide : headSide, recvBytes = toHeads ? headSide : seqSide;
  gyre::api::requireBuffer(s, sendBytes, "sendbuff");
  gyre::api::requireBuffer(r, recvBytes, "recvbuff");
  const auto ps = reinterpret_cast<uintptr_t>(s), pr = reinterpret_cast<uintptr_t>(r);
  if (s && r && sendBytes && recvBytes && ps < pr + recvBytes && pr < ps + sendBytes)
    bad("sendbuff and recvbuff overlap: the sequence exchanges need separate buffers");
  Operation o;
  o.kind = toHeads ? gyre::collectives::OpKind::SeqToHeads : gyre::collectives::OpKind::HeadsToSeq;
  o.sendbuff = s;
  o.recvbuff = r;
  o.dtype = t;
  o.count = gyre::collectives::seqLayoutCode(l);
  o.seq = std::move(l);
  o.sendBytes = sendBytes;
  o.recvBytes = recvBytes;
  return o;
}

}  // namespace

extern "C" {

gyreResult_t gyreSeqHeads(const gyreSeqLayout_t* layout, int nranks, int rank, int* qFirst,
                          int* qCount, int* kvFirst, int* kvCount) {
  return gyre::api::guarded("gyreSeqHeads", [&] {
    const SeqLayout l = checkedShape(layout);
    if (nranks < 1 || nranks > GYRE_MAX_RANKS)
      bad("nranks " + std::to_string(nranks) + " is not in [1, GYRE_MAX_RANKS]");
    gyre::api::checkRank(rank, nranks, "rank");
    const auto s = gyre::collectives::headShare(l, nranks, rank);
    for (const auto& [out, v] : {std::pair{qFirst, s.qFirst},
                                 {qCount, s.qCount},
                                 {kvFirst, s.kvFirst},
                                 {kvCount, s.kvCount}})
      if (out) *out = static_cast<int>(v);
  });
}

gyreResult_t gyreSeqToHeads(const void* sendbuff, void* recvbuff, const gyreSeqLayout_t* layout,
                            gyreDataType_t datatype, gyreComm_t comm, gyreStream_t stream) {
  return gyre::api::guarded("gyreSeqToHeads", [&] {
    Communicator& c = gyre::api::impl(comm);
    gyre::api::dispatch(c, seqOp(c, true, sendbuff, recvbuff, layout, datatype), stream);
  });
}

gyreResult_t gyreHeadsToSeq(const void* sendbuff, void* recvbuff, const gyreSeqLayout_t* layout,
                            gyreDataType_t datatype, gyreComm_t comm, gyreStream_t stream) {
  return gyre::api::guarded("gyreHeadsToSeq", [&] {
    Communicator& c = gyre::api::impl(comm);
    gyre::api::dispatch(c, seqOp(c, false, sendbuff, recvbuff, layout, datatype), stream);
  });
}

gyreResult_t gyreIseqToHeads(const void* sendbuff, void* recvbuff, const gyreSeqLayout_t* layout,
                             gyreDataType_t datatype, gyreComm_t comm, gyreRequest_t* request) {
  return gyre::api::guarded("gyreIseqToHeads", [&] {
    Communicator& c = gyre::api::impl(comm);
    gyre::api::dispatchNonblocking(c, seqOp(c, true, sendbuff, recvbuff, layout, datatype),
                                   request);
  });
}

gyreResult_t gyreIheadsToSeq(const void* sendbuff, void* recvbuff, const gyreSeqLayout_t* layout,
                             gyreDataType_t datatype, gyreComm_t comm, gyreRequest_t* request) {
  return gyre::api::guarded("gyreIheadsToSeq", [&] {
    Communicator& c = gyre::api::impl(comm);
    gyre::api::dispatchNonblocking(c, seqOp(c, false, sendbuff, recvbuff, layout, datatype),
                                   request);
  });
}

}  // extern "C"
