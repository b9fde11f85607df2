// What travels between two verbs connections (verbs_connection.h).
//
// Each side owns a ring of `slots` fixed-size slots that the peer writes
// into with RDMA WRITE WITH IMMEDIATE, message i into slot i % slots; the
// immediate wakes the owner's receive queue and says what came. A slot
// holds a header and, for an eager message, its payload; a larger message's
// slot holds the header alone (a rendezvous request), naming the sender's
// registered buffer, which the receiver reads with RDMA READ straight into
// its caller's memory and then answers with a FIN. Slots come back to the
// sender as credits, in immediates too.
#pragma once

#include <cstdint>

#include "transport/transport.h"

namespace gyre::transport::verbs_wire {

enum Kind : uint32_t {
  kEager = 1,       // the payload follows the header in the slot
  kRendezvous = 2,  // the payload waits in the sender's memory: address and rkey
};

struct Header {
  uint64_t bytes;    // the message's size
  MessageTag tag;    // opaque, compared with what the receiver expects
  uint64_t address;  // rendezvous: where the payload is, in the sender
  uint32_t rkey;     // rendezvous: its registration's key
  uint32_t kind;     // Kind
  uint64_t seq;      // the message's number on this connection: a check against garbage
  uint64_t reserved;
};
static_assert(sizeof(Header) == 64);

// The immediate: what kind of notice (top two bits) and a counter modulo
// 2^30 (the message's number, the receiver's slots released so far, or the
// FINs sent so far), which the receiver widens against its own count.
enum Notice : uint32_t { kMessage = 0, kCredit = 1, kFin = 2 };
constexpr uint32_t kCounterBits = 30;
constexpr uint32_t kCounterMask = (1u << kCounterBits) - 1;
inline uint32_t notice(Notice n, uint64_t counter) {
  return (static_cast<uint32_t>(n) << kCounterBits) |
         (static_cast<uint32_t>(counter) & kCounterMask);
}
inline Notice noticeKind(uint32_t imm) { return static_cast<Notice>(imm >> kCounterBits); }
// The full counter that `imm`'s low bits abbreviate, at or after `known`.
inline uint64_t widen(uint32_t imm, uint64_t known) {
  return known + ((imm - static_cast<uint32_t>(known)) & kCounterMask);
}

// Whether the header in the ring slot of message `seq` can be that
// message's: its number, and a known kind (an eager one no larger than the
// slot's room). The rest (size and tag against what the caller expects)
// is checked when the caller asks for it.
inline bool ringHeaderValid(const Header& h, uint64_t seq, size_t eagerBytes) {
  return h.seq == seq && ((h.kind == kEager && h.bytes <= eagerBytes) || h.kind == kRendezvous);
}

// What a receive completion's immediate means to a connection, given its
// counts: the next message arrived, the peer released slots up to a count
// (never past what was sent), a FIN answers the oldest rendezvous still
// unanswered, or garbage (a counter that is not the next, or a kind that
// does not exist), which fails the connection.
struct NoticeCounts {
  uint64_t arrived = 0;           // messages whose immediate came
  uint64_t peerReleased = 0;      // slots the peer said it released
  uint64_t sent = 0;              // messages sent
  uint64_t finsReceived = 0;      // FINs that came
  uint64_t rendezvousPosted = 0;  // rendezvous messages sent (each wants a FIN)
};
struct DecodedNotice {
  enum What { kNextMessage, kReleased, kNextFin, kGarbage } what = kGarbage;
  uint64_t counter = 0;  // kReleased: the peer's new count of released slots
};
inline DecodedNotice decodeNotice(uint32_t imm, const NoticeCounts& c) {
  const Notice n = noticeKind(imm);
  if (n == kMessage && widen(imm, c.arrived) == c.arrived) return {DecodedNotice::kNextMessage, c.arrived};
  // widen wraps within 2^30 of 2^64 (fuzzing found it): a count that went
  // backwards is garbage too, however far off such counts are.
  const uint64_t released = widen(imm, c.peerReleased);
  if (n == kCredit && released >= c.peerReleased && released <= c.sent) return {DecodedNotice::kReleased, released};
  if (n == kFin && widen(imm, c.finsReceived) == c.finsReceived && c.finsReceived < c.rendezvousPosted)
    return {DecodedNotice::kNextFin, c.finsReceived};
  return {};
}

// What a rank tells each peer about the queue pair it made for it.
struct QpInfo {
  uint32_t qpn = 0;
  uint32_t psn = 0;  // its first packet sequence number
  uint64_t ringAddress = 0;
  uint32_t ringRkey = 0;
  uint32_t reserved = 0;
};
static_assert(sizeof(QpInfo) == 24);

// How a rank's port is addressed: by GID on RoCE, by LID on InfiniBand.
struct PortAddress {
  uint8_t gid[16] = {};
  uint16_t lid = 0;
  uint8_t mtu = 0;  // ibv_mtu
  uint8_t ethernet = 0;
  uint32_t reserved = 0;
};
static_assert(sizeof(PortAddress) == 24);

}  // namespace gyre::transport::verbs_wire
