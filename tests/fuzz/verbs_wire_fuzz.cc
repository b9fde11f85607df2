// What a verbs peer writes into this rank (verbs_wire.h), with no RDMA
// device: a ring slot's header, checked by ringHeaderValid as the
// connection does before it trusts one, and a receive's immediate, decoded
// by decodeNotice against the connection's counts.
//
// Input: the 64-byte header, the message number expected in its slot (8),
// the slot's room for an eager payload (2 bytes, times 64), the immediate
// (4), then the counts: arrived, peer released, sent, FINs received,
// rendezvous posted (8 each); missing bytes are zero.
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "transport/verbs/verbs_wire.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gyre::transport::verbs_wire;
  uint8_t in[64 + 8 + 2 + 4 + 5 * 8] = {};
  std::memcpy(in, data, size < sizeof in ? size : sizeof in);
  Header h;
  std::memcpy(&h, in, sizeof h);
  uint64_t seq;
  std::memcpy(&seq, in + 64, 8);
  uint16_t room;
  std::memcpy(&room, in + 72, 2);
  const size_t eagerBytes = size_t(room) * 64;
  if (ringHeaderValid(h, seq, eagerBytes)) {
    // What the connection then relies on: the message's own number, and an
    // eager payload inside its slot.
    if (h.seq != seq || (h.kind != kEager && h.kind != kRendezvous)) std::abort();
    if (h.kind == kEager && h.bytes > eagerBytes) std::abort();
  }

  uint32_t imm;
  std::memcpy(&imm, in + 74, 4);
  NoticeCounts c;
  std::memcpy(&c.arrived, in + 78, 8);
  std::memcpy(&c.peerReleased, in + 86, 8);
  std::memcpy(&c.sent, in + 94, 8);
  std::memcpy(&c.finsReceived, in + 102, 8);
  std::memcpy(&c.rendezvousPosted, in + 110, 8);
  const DecodedNotice d = decodeNotice(imm, c);
  switch (d.what) {
    case DecodedNotice::kNextMessage:
      if (noticeKind(imm) != kMessage || d.counter != c.arrived) std::abort();
      break;
    case DecodedNotice::kReleased:
      // Slots released only go forward, and never past what was sent.
      if (noticeKind(imm) != kCredit || d.counter < c.peerReleased || d.counter > c.sent)
        std::abort();
      if ((d.counter & kCounterMask) != (imm & kCounterMask)) std::abort();
      break;
    case DecodedNotice::kNextFin:
      if (noticeKind(imm) != kFin || c.finsReceived >= c.rendezvousPosted) std::abort();
      break;
    case DecodedNotice::kGarbage:
      break;
  }
  // What an honest peer sends next is never garbage.
  if (decodeNotice(notice(kMessage, c.arrived), c).what != DecodedNotice::kNextMessage)
    std::abort();
  if (c.finsReceived < c.rendezvousPosted &&
      decodeNotice(notice(kFin, c.finsReceived), c).what != DecodedNotice::kNextFin)
    std::abort();
  if (c.peerReleased <= c.sent && c.sent - c.peerReleased <= kCounterMask &&
      decodeNotice(notice(kCredit, c.sent), c).what != DecodedNotice::kReleased)
    std::abort();
  return 0;
}
