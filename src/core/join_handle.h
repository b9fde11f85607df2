// The bytes of a gyreJoinHandle (gyreCommGrow): the rendezvous the larger
// communicator is made at, and what lets the running ranks tell their own
// handle, unused, from another communicator's or a spent one.
#pragma once

#include <cstdint>

#include "gyre/gyre.h"

namespace gyre::core {

struct JoinHandle {
  // The maker's communicator: a fingerprint of its bootstrap secret, which
  // only its ranks share (a split's, shrink's or grow's child has its own).
  uint64_t commTag = 0;
  uint64_t serial = 0;    // among the handles its maker made, from 1
  int32_t maker = -1;     // the rank that made it (it alone knows if it is spent)
  int32_t oldNranks = 0;  // the communicator's size: new ranks number from here
  gyreUniqueId rendezvous{};
};

void encodeJoinHandle(const JoinHandle& h, gyreJoinHandle* out);
// Throws Error(gyreInvalidArgument) when the bytes are not a join handle.
JoinHandle decodeJoinHandle(const gyreJoinHandle& in);

}  // namespace gyre::core
