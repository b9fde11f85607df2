// Wire format between a rank and the rendezvous root. Each rank sends a Hello
// and a blob describing itself (a PeerInfo); when all ranks of the round have
// arrived, the root answers every one with a Reply and all the blobs in rank
// order. A round that cannot complete is answered with why: a rank left, the
// ranks disagree, or the wait ran out (naming who never arrived).
#pragma once

#include <cstdint>

namespace gyre::bootstrap {

constexpr uint32_t kHelloMagic = 0x4759484c;  // "GYHL"
constexpr uint32_t kReplyMagic = 0x47595250;  // "GYRP"
// Also stands for the transports' wire formats, which ranks never
// compare: a change to one bumps it, so that builds that would misread
// each other's messages (and wait for one that never matches) are refused
// at the rendezvous as "a different gyre version". 3: small UCX messages
// without the header's size.
constexpr uint32_t kProtocolVersion = 3;

struct Hello {
  uint32_t magic;
  uint32_t version;
  uint8_t secret[32];
  uint64_t round;  // distinguishes successive rendezvous through one address
  int32_t nranks;
  int32_t rank;
  uint32_t infoBytes;
  // The rank's timeout in ms (0: none): the root answers a round that is
  // still incomplete shortly before it, naming the ranks still missing.
  uint32_t timeoutMs;
};

enum class ReplyStatus : int32_t {
  Ok = 0,
  Retry = 1,     // this root serves an earlier round: try again
  Failed = 2,    // the ranks' arguments disagree (nranks, version): invalid usage
  PeerLeft = 3,  // a rank of the round left before it completed: remote error
  TimedOut = 4,  // the round did not fill in time: timeout, naming the missing
  Refused = 5,   // this hello alone is refused (it cannot be part of the round)
};

struct Reply {
  uint32_t magic;
  ReplyStatus status;
  uint32_t messageBytes;  // an explanation follows when status != Ok
  uint32_t infoBytes;     // then nranks * infoBytes when Ok
  int32_t nranks;
  int32_t culprit;  // PeerLeft: the rank that left (-1: unknown)
};

}  // namespace gyre::bootstrap
