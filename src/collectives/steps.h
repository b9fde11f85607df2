// Small helpers shared by the plan builders.
#pragma once

#include <algorithm>

#include "collectives/plan.h"

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

}  // namespace gyre::collectives
