// What a TCP connection (tcp_connection.h) reads from its peer: each lane's
// part of a message opens with a PartHeader, then that part's payload.
// The checks live here, apart from the connection and its sockets, so that
// a fuzz target (tests/fuzz/tcp_part_header_fuzz.cc) can feed them any
// bytes a peer could send.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>

#include "transport/transport.h"

namespace gyre::transport::tcp_wire {

constexpr uint32_t kPartMagic = 0x47595450;  // "GYTP"

struct PartHeader {
  uint32_t magic;
  uint32_t lane;
  uint64_t totalBytes;  // the whole message's, the same in every lane's header
  MessageTag tag;
};
static_assert(sizeof(PartHeader) == 40);

// Where lane `lane` of `lanes` carries a message of `total` bytes: parts of
// a 64-byte multiple, the last ones short or empty, together exactly the
// message.
inline void partRange(size_t total, size_t lanes, size_t lane, size_t& offset, size_t& length) {
  const size_t part = ((total + lanes - 1) / lanes + 63) & ~size_t(63);
  offset = std::min(lane * part, total);
  length = std::min(part, total - offset);
}

// What the receiving side knows when a part header has arrived on `lane`.
// `sizeKnown`: the caller asked for the message, or another lane's header
// announced it, so its size and tag are `bytes` and `tag`; otherwise it is
// being read ahead and the header says what it is, up to `chunkBytes` (the
// staging buffer it lands in).
struct PartExpectation {
  uint32_t lane = 0;
  bool sizeKnown = false;
  uint64_t bytes = 0;
  MessageTag tag;
  size_t chunkBytes = 0;
};

// Returns normally when the header may open the message: right magic and
// lane, and the expected size and tag (a read-ahead one: no more than
// chunkBytes). Throws ConnectionError (gyreRemoteError) for a corrupt or
// oversized header, MessageMismatch for another call's message.
inline void checkPartHeader(const PartHeader& h, const PartExpectation& want, int peer,
                            const std::string& peerName) {
  if (h.magic != kPartMagic || h.lane != want.lane)
    throw ConnectionError(gyreRemoteError, peer, peerName + " sent a corrupt message header");
  if (!want.sizeKnown) {
    if (h.totalBytes > want.chunkBytes)
      throw ConnectionError(gyreRemoteError, peer,
                            peerName + " sent a message larger than the chunk size (" +
                                std::to_string(h.totalBytes) + " bytes, at most " +
                                std::to_string(want.chunkBytes) + ")");
    return;
  }
  if (h.totalBytes != want.bytes || !(h.tag == want.tag))
    throw MessageMismatch(peer, h.tag, h.totalBytes, want.tag, want.bytes);
}

}  // namespace gyre::transport::tcp_wire
