#include "core/join_handle.h"

#include <cstring>

#include "base/error.h"

namespace gyre::core {

namespace {

constexpr uint32_t kMagic = 0x6a6f696e;  // "join"
constexpr uint32_t kVersion = 1;

struct Wire {
  uint32_t magic;
  uint32_t version;
  uint64_t commTag;
  uint64_t serial;
  int32_t maker;
  int32_t oldNranks;
  gyreUniqueId rendezvous;
};
static_assert(sizeof(Wire) <= sizeof(gyreJoinHandle));

}  // namespace

void encodeJoinHandle(const JoinHandle& h, gyreJoinHandle* out) {
  std::memset(out, 0, sizeof *out);
  Wire w{kMagic, kVersion, h.commTag, h.serial, h.maker, h.oldNranks, h.rendezvous};
  std::memcpy(out->internal, &w, sizeof w);
}

JoinHandle decodeJoinHandle(const gyreJoinHandle& in) {
  Wire w;
  std::memcpy(&w, in.internal, sizeof w);
  if (w.magic != kMagic)
    throwError(gyreInvalidArgument, "the join handle's bytes are not a gyre join handle (from gyreCommGetJoinHandle)");
  if (w.version != kVersion)
    throwError(gyreInvalidArgument, "the join handle is of version " + std::to_string(w.version) +
                                        ", this gyre reads version " + std::to_string(kVersion));
  if (w.oldNranks < 1 || w.oldNranks > GYRE_MAX_RANKS || w.maker < 0 || w.maker >= w.oldNranks || w.serial == 0)
    throwError(gyreInvalidArgument, "the join handle is damaged (maker " + std::to_string(w.maker) + " of " +
                                        std::to_string(w.oldNranks) + " ranks, serial " +
                                        std::to_string(w.serial) + ")");
  JoinHandle h;
  h.commTag = w.commTag;
  h.serial = w.serial;
  h.maker = w.maker;
  h.oldNranks = w.oldNranks;
  h.rendezvous = w.rendezvous;
  return h;
}

}  // namespace gyre::core
