// Wire format of connections between ranks (after the rendezvous): every
// connection opens with a ConnHello; an abort notice follows its hello with
// an AbortNoticeHeader and the message, and so does a status (the message
// is then the layer above's, opaque here: a stall report's query or answer).
// A watch carries nothing after its hello: its end is the news (a peer on
// another host whose process ended, PeerLiveness::watchConnection).
#pragma once

#include <cstdint>

namespace gyre::bootstrap {

constexpr uint32_t kConnMagic = 0x4759434e;  // "GYCN"

enum class ConnKind : uint32_t { Ring = 1, Data = 2, AbortNotice = 3, Shrink = 4, Status = 5, Watch = 6 };

// Kinds whose hello is followed by an AbortNoticeHeader and its message.
inline bool carriesMessage(uint32_t kind) {
  return kind == static_cast<uint32_t>(ConnKind::AbortNotice) || kind == static_cast<uint32_t>(ConnKind::Status);
}

struct ConnHello {
  uint32_t magic;
  uint32_t kind;  // ConnKind
  int32_t fromRank;
  uint32_t tag;
  uint8_t secret[32];  // the session secret (PeerInfo::sessionKey)
};

struct AbortNoticeHeader {
  int32_t originRank;     // the rank where the failure began
  uint32_t messageBytes;  // at most kMaxNoticeBytes are kept
  int32_t waitingOn;      // a timeout: the rank the reporter's wait was stuck on (-1: none)
  // A finding every rank shares (their settings differ): the result code
  // the origin failed with, which its peers fail with too. 0: a failure of
  // the origin alone, which its peers see as gyreRemoteError.
  int32_t sharedCode;
};

constexpr uint32_t kMaxNoticeBytes = 4096;

}  // namespace gyre::bootstrap
