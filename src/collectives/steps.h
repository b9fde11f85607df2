// Small helpers shared by the plan builders.
#pragma once

#include <algorithm>

#include "collectives/plan.h"
#include "collectives/planner.h"

namespace gyre::collectives {

// Appends a step; returns it for the rare extra field.
inline Step& add(Plan& plan, Prim prim, BufId src, size_t srcOff, BufId dst, size_t dstOff, size_t count,
                 int sendPeer = -1, int recvPeer = -1) {
  Step s;
  s.prim = prim;
  s.src = src;
  s.srcOffset = srcOff;
  s.dst = dst;
  s.dstOffset = dstOff;
  s.count = count;
  s.sendPeer = sendPeer;
  s.recvPeer = recvPeer;
  plan.steps.push_back(s);
  return plan.steps.back();
}

// A pipelined chain's piece in elements: the tuner's choice (req.pieceBytes)
// where it made one, never more than the link carries, at least one element.
inline size_t chainPieceElems(const CallRequest& req, size_t linkBytes) {
  const size_t bytes = req.pieceBytes ? std::min(req.pieceBytes, linkBytes) : linkBytes;
  return std::max<size_t>(1, bytes / req.elemSize);
}

// Pairwise AllToAll(v)'s and blockwise's piece in elements: the links'
// piece, at most the host's pairwise piece (TuningParams::pairwisePiece),
// at least one element. Both builders take it from here, so both ends of
// every block cut it alike. Connects the peers.
inline size_t pairwisePieceElems(const CallRequest& req, PlanEnv& env, std::span<const int> peers) {
  return std::max<size_t>(1, std::min(env.chunkBytes(peers), env.tuning().pairwisePiece()) / req.elemSize);
}

// Pieces of this many bytes, at least, to and from a peer whose large
// messages land in place (transport::kLargeInPlace: UCX's zero-copy
// rendezvous). A 256 KiB piece goes eager through UCX's buffers, a copy
// more on each side; 1 MiB pieces by rendezvous took a 4-rank AllToAll of
// 16-64 MiB over UCX's tcp from 1.35-1.4x Open MPI's time to 0.96-1.1x, and
// 4 MiB pieces were no faster (docs/PERFORMANCE-transports.md).
inline constexpr size_t kInPlacePieceBytes = size_t{1} << 20;

// The piece toward and from one peer of a pairwise exchange, given the
// exchange's common piece (pairwisePieceElems): larger where that peer's
// large messages land in place. Both ends of a connection see the same
// capability and limit, so both cut the block alike.
inline size_t pairwisePieceElemsFor(const CallRequest& req, PlanEnv& env, size_t commonElems, int peer) {
  const size_t inPlace = env.inPlaceMessageBytes(peer);
  if (!inPlace) return commonElems;
  const size_t bytes = std::min(inPlace, std::max(kInPlacePieceBytes, commonElems * req.elemSize));
  return std::max<size_t>(1, bytes / req.elemSize);
}

// Calls f(offset, length) for each piece of at most chunk elements. A count
// of zero makes one empty piece when `always` (so that a message still
// travels and is checked), none otherwise.
template <class F>
void forPieces(size_t count, size_t chunk, F&& f, bool always = false) {
  if (count == 0 && always) {
    f(size_t{0}, size_t{0});
    return;
  }
  for (size_t off = 0; off < count; off += chunk) f(off, std::min(chunk, count - off));
}

// A ring's pieces with one send ahead. Each piece is first(off, len), a
// Send that needs nothing received (our own block, or the input), then
// middle(off, len), then last(off, len), a receive that sends nothing. The
// next piece's first message leaves before this piece's last receive, so the
// link carries it while we wait, instead of every piece waiting for the one
// before (over TCP, where a send is done only once the kernel has taken it,
// the lock-step ring ran 2x behind an exchange with a send ahead at 2 ranks,
// 2 MiB). What each link carries, and in which order, is unchanged: only a
// receive moves after a send.
template <class First, class Middle, class Last>
void forPiecesSendingAhead(size_t count, size_t chunk, First&& first, Middle&& middle, Last&& last) {
  if (count == 0) return;
  first(size_t{0}, std::min(chunk, count));
  for (size_t off = 0; off < count; off += chunk) {
    const size_t len = std::min(chunk, count - off), nextOff = off + len;
    middle(off, len);
    if (nextOff < count) first(nextOff, std::min(chunk, count - nextOff));
    last(off, len);
  }
}

}  // namespace gyre::collectives
