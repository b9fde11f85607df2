// What a net connection (net_connection.h) reads out of a receive slot: the
// size the plugin says arrived, then a 32-byte header (the payload's size
// and the MessageTag) and the payload, all written by the peer through a
// plugin gyre does not control. The check lives here, apart from the
// connection and the plugin, so that a fuzz target
// (tests/fuzz/net_message_fuzz.cc) can feed it any bytes and sizes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "transport/transport.h"

namespace gyre::transport::net_wire {

struct Header {
  uint64_t bytes;  // the payload's, after the header
  MessageTag tag;
};
static_assert(sizeof(Header) == 32);

// Checks a completed receive into a slot of slotBytes (header included)
// that the plugin says took `arrived` bytes, against the message the caller
// expects; returns the header. Throws ConnectionError: gyreSystemError when
// the plugin reports more than the slot holds (the old check trusted it, and
// a header agreeing with that size was blamed on the peer's call as a
// mismatch), gyreRemoteError for a message whose header disagrees with its
// size; MessageMismatch for another call's message.
inline Header checkArrived(const uint8_t* slot, size_t slotBytes, size_t arrived, size_t bytes,
                           const MessageTag& tag, int peer, const std::string& peerName,
                           const std::string& pluginName) {
  if (arrived > slotBytes)
    throw ConnectionError(gyreSystemError, peer,  // this rank's plugin is wrong, not the peer
                          "net: " + pluginName + " reported " + std::to_string(arrived) +
                              " bytes received from " + peerName + " into a slot of " +
                              std::to_string(slotBytes));
  Header h;
  if (arrived < sizeof(Header))
    throw ConnectionError(
        gyreRemoteError, peer,
        "net: " + peerName + " sent a malformed message (" + std::to_string(arrived) + " bytes)");
  std::memcpy(&h, slot, sizeof h);
  if (h.bytes != arrived - sizeof(Header))
    throw ConnectionError(gyreRemoteError, peer,
                          "net: " + peerName + " sent a malformed message (" +
                              std::to_string(arrived) + " bytes, its header says " +
                              std::to_string(h.bytes) + " after it)");
  if (h.bytes != bytes || !(h.tag == tag)) throw MessageMismatch(peer, h.tag, h.bytes, tag, bytes);
  return h;
}

}  // namespace gyre::transport::net_wire
