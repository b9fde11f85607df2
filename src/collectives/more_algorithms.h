// Logarithmic algorithms built from pairwise exchanges: Rabenseifner's
// AllReduce, ReduceScatter by recursive halving, AllGather by recursive
// doubling and Bruck's AllToAll. Also the two small helpers they share: the
// fold of a non-power-of-two rank count onto a power of two, and the
// interleaving of one exchange's sends and receives.
#pragma once

#include <algorithm>
#include <cstddef>

#include "collectives/planner.h"

namespace gyre::collectives {

// AllReduce, Rabenseifner: reduce-scatter by recursive halving, then
// all-gather by recursive doubling. Every rank sends about 2(p-1)/p of the
// vector in 2 log2(p) messages: the bandwidth of the ring with the latency
// of recursive doubling. Each element is reduced on one rank only, then
// copied: bitwise-identical results everywhere.
void buildRabenseifnerAllReduce(const CallRequest& req, PlanEnv& env, Plan& plan);
// ReduceScatter by recursive halving: log2(p) exchanges, each of half the
// data still being reduced. Works in scratch (the input is read only).
void buildRecursiveHalvingReduceScatter(const CallRequest& req, PlanEnv& env, Plan& plan);
// AllGather by recursive doubling: log2(p) exchanges, each of twice the
// blocks; straight into the output.
void buildRecursiveDoublingAllGather(const CallRequest& req, PlanEnv& env, Plan& plan);
// AllToAll, Bruck: ceil(log2 n) rounds, each sending the blocks whose index
// has that round's bit set, packed into one message. For small blocks.
void buildBruckAllToAll(const CallRequest& req, PlanEnv& env, Plan& plan);

// n ranks run a power-of-two algorithm over p = the largest power of two
// <= n "virtual" ranks: of the first 2*extra ranks (extra = n - p), each odd
// one hands its data to the even one below it and sits out, getting the
// result back at the end. Virtual ranks keep rank order, so virtual rank v
// stands for the contiguous real ranks [first(v), first(v + 1)).
struct Fold {
  int n = 1, p = 1, extra = 0;
  explicit Fold(int nranks) : n(nranks) {
    while (p * 2 <= n) p *= 2;
    extra = n - p;
  }
  // -1 for a rank that sits out (an odd one of the first 2*extra).
  int virt(int r) const {
    if (r < 2 * extra) return r % 2 == 0 ? r / 2 : -1;
    return r - extra;
  }
  int real(int v) const { return v < extra ? 2 * v : v + extra; }
  int first(int v) const { return v >= p ? n : real(v); }
  bool sitsOut(int r) const { return r < 2 * extra && r % 2 == 1; }
  bool hasHelper(int r) const { return r < 2 * extra && r % 2 == 0; }  // r + 1 folds into r
};

// One exchange with one partner, in pieces of at most chunk elements: we
// send `sendCount` elements while receiving `recvCount` (the partner does
// the mirror image). Each side keeps at most one piece in flight ahead of
// what it receives (every connection has room for two messages), so both
// ends progress together and neither waits for the other's whole message.
// sendPiece(off, len) / recvPiece(off, len) append the steps.
template <class SendPiece, class RecvPiece>
void exchangePieces(size_t sendCount, size_t recvCount, size_t chunk, SendPiece&& sendPiece,
                    RecvPiece&& recvPiece) {
  constexpr size_t kAhead = 1;
  const size_t nsend = (sendCount + chunk - 1) / chunk, nrecv = (recvCount + chunk - 1) / chunk;
  size_t sent = 0;
  auto sendUpTo = [&](size_t limit) {
    for (; sent < std::min(nsend, limit); ++sent)
      sendPiece(sent * chunk, std::min(chunk, sendCount - sent * chunk));
  };
  for (size_t i = 0; i < nrecv; ++i) {
    sendUpTo(i + 1 + kAhead);
    recvPiece(i * chunk, std::min(chunk, recvCount - i * chunk));
  }
  sendUpTo(nsend);
}

}  // namespace gyre::collectives
