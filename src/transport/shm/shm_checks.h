// Checks of what a local peer writes for this rank to read: its segment's
// name (through the bootstrap), its segment's header, the slot headers of
// the FIFO it fills, and the abort report it raises. A peer that is broken,
// or not gyre, must make an error here, never an access out of bounds. Kept
// apart from the transport so that a fuzz target
// (tests/fuzz/shm_headers_fuzz.cc) can feed them any bytes.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

#include "base/error.h"
#include "transport/shm/shm_layout.h"
#include "transport/transport.h"

namespace gyre::transport::shm {

constexpr char kSegmentPrefix[] = "/gyre-";  // every name ShmSegment::create makes

// The segment name a peer published in its fieldBytes-byte field: "" if it
// made none (alone on its host), else a name ShmSegment::create could have
// made. Throws Error (gyreRemoteError) for a field without its terminating
// NUL (the old code read on into the next rank's field) or a name that is
// not gyre's (shm_open would open whatever it names).
inline std::string segmentName(const char* field, size_t fieldBytes, const std::string& who) {
  const size_t n = strnlen(field, fieldBytes);
  if (n == fieldBytes)
    throwError(gyreRemoteError, who + " published a shared-memory name without its end");
  std::string name(field, n);
  const size_t prefix = sizeof kSegmentPrefix - 1;
  if (!name.empty() && (name.compare(0, prefix, kSegmentPrefix) != 0 ||
                        name.find('/', 1) != std::string::npos || name.size() == prefix))
    throwError(gyreRemoteError,
               who + " published \"" + name + "\", which is not a gyre shared-memory name");
  return name;
}

// A mapped peer segment must say it is that peer's.
inline void checkSegmentHeader(const SegmentHeader& h, int peer, const std::string& who,
                               const std::string& name) {
  if (h.magic != kSegmentMagic || h.ownerRank != peer)
    throwError(gyreRemoteError, "shared memory " + name + " is not " + who + "'s");
}

// Where message `message`'s slot stands, from its seq word: published
// (message + 1), still the previous lap's (message + 1 - nslots, or 0 on
// the first lap: the sender has not got there), or anything else, which no
// sender writes (the slot is corrupt and waiting on it would hang).
enum class SlotState { Waiting, Published, Corrupt };
inline SlotState slotState(uint64_t seq, uint64_t message, int nslots) {
  if (seq == message + 1) return SlotState::Published;
  const uint64_t laps = uint64_t(nslots);
  const uint64_t previous = message >= laps ? message + 1 - laps : 0;
  return seq == previous ? SlotState::Waiting : SlotState::Corrupt;
}

// A published slot must hold the message the caller expects; its size is
// then no larger than the slot (the caller asks for no more).
inline void checkSlotMessage(uint64_t gotBytes, const MessageTag& gotTag, size_t bytes,
                             const MessageTag& tag, int peer) {
  if (gotBytes != bytes || !(gotTag == tag))
    throw MessageMismatch(peer, gotTag, gotBytes, tag, bytes);
}

// The failure a local peer (owner) raised in its segment. The rank it names
// as the failure's origin indexes this rank's peer list above (to describe
// it), so one outside [0, nranks) is not passed on: the report is the
// owner's, saying what it named.
inline PeerReport abortReport(int origin, const char* message, size_t messageBytes, int owner,
                              int nranks) {
  std::string text(message, strnlen(message, messageBytes));
  if (origin >= 0 && origin < nranks) return PeerReport{origin, std::move(text)};
  return PeerReport{owner, "rank " + std::to_string(owner) +
                               " reported a failure that began at rank " + std::to_string(origin) +
                               ", which is not a rank of this communicator of " +
                               std::to_string(nranks) + ": " + text};
}

}  // namespace gyre::transport::shm
