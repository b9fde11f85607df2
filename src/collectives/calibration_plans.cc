#include "collectives/calibration_plans.h"

#include "collectives/steps.h"

namespace gyre::collectives {

void buildPingPong(Plan& plan, int peer, bool first, size_t bytes, int reps) {
  plan.reset("pingpong");
  plan.addPeer(peer);
  for (int i = 0; i < reps; ++i) {
    if (first) add(plan, Prim::Send, BufId::Input, 0, BufId::Output, 0, bytes, peer);
    add(plan, Prim::Recv, BufId::Output, 0, BufId::Output, 0, bytes, -1, peer);
    if (!first) add(plan, Prim::Send, BufId::Input, 0, BufId::Output, 0, bytes, peer);
  }
}

void buildExchange(Plan& plan, int peer, bool first, size_t bytes, size_t chunk) {
  plan.reset("exchange");
  plan.addPeer(peer);
  // A round trip first (the prologue) so both sides start together.
  if (first) add(plan, Prim::Send, BufId::Input, 0, BufId::Output, 0, 0, peer);
  add(plan, Prim::Recv, BufId::Output, 0, BufId::Output, 0, 0, -1, peer);
  if (!first) add(plan, Prim::Send, BufId::Input, 0, BufId::Output, 0, 0, peer);
  plan.beginLane();
  forPieces(bytes, chunk, [&](size_t off, size_t len) {
    add(plan, Prim::Send, BufId::Input, off, BufId::Output, 0, len, peer);
  });
  plan.beginLane();
  forPieces(bytes, chunk, [&](size_t off, size_t len) {
    add(plan, Prim::Recv, BufId::Output, off, BufId::Output, off, len, -1, peer);
  });
  plan.closeLane();
}

void buildPeerRead(Plan& plan, int peer, size_t bytes) {
  plan.reset("peer_read");
  plan.addPeer(peer);
  plan.inputElems = plan.outputElems = bytes;  // of one-byte elements
  add(plan, Prim::SendAddresses, BufId::Input, 0, BufId::Output, 0, bytes, peer);
  add(plan, Prim::RecvAddresses, BufId::Output, 0, BufId::Output, 0, kAnyCount, -1, peer);
  Step& r = add(plan, Prim::ReadCopy, BufId::Output, 0, BufId::Output, 0, bytes, -1, peer);
  r.remote = BufId::Input;
  // Neither may leave (and free what the other reads) before both are done.
  add(plan, Prim::Send, BufId::Input, 0, BufId::Output, 0, 0, peer);
  add(plan, Prim::Recv, BufId::Output, 0, BufId::Output, 0, 0, -1, peer);
}

void buildLocalReduce(Plan& plan, size_t count) {
  plan.reset("local_reduce");
  add(plan, Prim::Reduce, BufId::Input, 0, BufId::Output, 0, count);
}

}  // namespace gyre::collectives
