// Wire format between a rank and the rendezvous root. Each rank sends a Hello
// and a blob describing itself; when all ranks of the round have arrived, the
// root answers every one with a Reply and all the blobs in rank order.
#pragma once

#include <cstdint>

namespace gyre::bootstrap {

constexpr uint32_t kHelloMagic = 0x4759484c;  // "GYHL"
constexpr uint32_t kReplyMagic = 0x47595250;  // "GYRP"
constexpr uint32_t kProtocolVersion = 1;

struct Hello {
  uint32_t magic;
  uint32_t version;
  uint8_t secret[32];
  uint64_t round;  // distinguishes successive rendezvous through one address
  int32_t nranks;
  int32_t rank;
  uint32_t infoBytes;
  uint32_t reserved;
};

enum class ReplyStatus : int32_t { Ok = 0, Retry = 1, Failed = 2 };

struct Reply {
  uint32_t magic;
  ReplyStatus status;
  uint32_t messageBytes;  // an explanation follows when status != Ok
  uint32_t infoBytes;     // then nranks * infoBytes when Ok
  int32_t nranks;
  uint32_t reserved;
};

}  // namespace gyre::bootstrap
