// A completed receive through a net plugin (net_wire.h): the size the plugin
// reports and the slot's bytes, which the peer wrote, against what the
// caller expects: net_wire::checkArrived, as NetConnection calls it. A
// size past the slot is the plugin's error, never a mismatch of calls.
//
// Input: the slot's payload room (2 bytes; the slot is 32 more), the size
// the plugin reports (8), the size and tag the caller expects (8 + 24),
// then the slot's contents (missing bytes zero).
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "transport/net/net_wire.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gyre::transport;
  uint8_t in[2 + 8 + 8 + 24] = {};
  const size_t fixed = size < sizeof in ? size : sizeof in;
  std::memcpy(in, data, fixed);
  uint16_t room;
  size_t arrived;
  uint64_t wantBytes;
  MessageTag wantTag;
  std::memcpy(&room, in, 2);
  std::memcpy(&arrived, in + 2, 8);
  std::memcpy(&wantBytes, in + 10, 8);
  std::memcpy(&wantTag, in + 18, sizeof wantTag);
  const size_t slotBytes = sizeof(net_wire::Header) + room;
  // The caller never asks for more than a slot's payload (maxMessageBytes).
  if (wantBytes > room) wantBytes %= size_t(room) + 1;
  // Exactly the slot, so that a read past it is the sanitizer's to see.
  std::vector<uint8_t> slot(slotBytes, 0);
  if (size > fixed) std::memcpy(slot.data(), data + fixed, std::min(size - fixed, slotBytes));
  net_wire::Header h;
  try {
    h = net_wire::checkArrived(slot.data(), slotBytes, arrived, wantBytes, wantTag, 1, "rank 1",
                               "plugin test");
  } catch (const MessageMismatch&) {
    // Blames the peer's call: wrong for a size the plugin got wrong.
    if (arrived > slotBytes) std::abort();
    return 0;
  } catch (const gyre::Error&) {
    return 0;  // a named error is the right answer to garbage
  }
  // Accepted: the payload the caller then copies lies inside the slot.
  if (arrived > slotBytes || h.bytes != wantBytes || sizeof h + h.bytes != arrived ||
      !(h.tag == wantTag))
    std::abort();
  volatile uint8_t last = wantBytes ? slot[sizeof h + wantBytes - 1] : 0;
  (void)last;
  return 0;
}
