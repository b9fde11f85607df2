// A TCP part header as a peer sends it (tcp_wire.h), against what the
// receiving lane expects: tcp_wire::checkPartHeader, then, for a header it
// accepts, tcp_wire::partRange for the message it announces, whose parts
// must cover the message exactly.
//
// Input: a byte of settings (bits 0-2: lanes - 1; bit 3: the size is known;
// bits 4-7: the lane it came on, modulo lanes), a byte choosing the chunk
// size (2^n bytes, n modulo 32), the 40-byte header, then the expected size
// (8 bytes) and tag (24); missing bytes are zero.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "transport/tcp/tcp_wire.h"

namespace {

// The parts of a message of `total` bytes over `lanes` lanes must follow one
// another from 0 to total.
void checkParts(size_t total, size_t lanes) {
  size_t at = 0;
  for (size_t k = 0; k < lanes; ++k) {
    size_t offset = 0, length = 0;
    gyre::transport::tcp_wire::partRange(total, lanes, k, offset, length);
    if (offset != at || length > total - offset) std::abort();
    at += length;
  }
  if (at != total) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gyre::transport;
  uint8_t in[2 + 40 + 8 + 24] = {};
  std::memcpy(in, data, size < sizeof in ? size : sizeof in);
  const size_t lanes = (in[0] & 7) + 1;
  tcp_wire::PartExpectation want;
  want.lane = uint32_t((in[0] >> 4) % lanes);
  want.sizeKnown = in[0] & 8;
  want.chunkBytes = size_t(1) << (in[1] % 32);
  tcp_wire::PartHeader h;
  std::memcpy(&h, in + 2, sizeof h);
  std::memcpy(&want.bytes, in + 42, 8);
  std::memcpy(&want.tag, in + 50, sizeof want.tag);
  // The caller never asks for more than the chunk size (maxMessageBytes).
  if (want.sizeKnown && want.bytes > want.chunkBytes) want.bytes %= want.chunkBytes + 1;
  try {
    tcp_wire::checkPartHeader(h, want, 1, std::string("rank 1"));
  } catch (const gyre::Error&) {
    return 0;  // a named error is the right answer to garbage
  }
  // Accepted: the message fits what it lands in.
  if (h.totalBytes > want.chunkBytes) std::abort();
  if (want.sizeKnown && (h.totalBytes != want.bytes || !(h.tag == want.tag))) std::abort();
  checkParts(size_t(h.totalBytes), lanes);
  return 0;
}
