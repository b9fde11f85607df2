// What a local peer writes for this rank to read over shared memory
// (shm_checks.h), chosen by the first byte (modulo 4), the rest its bytes
// (missing ones zero unless said):
//   0  the 64-byte field holding the peer's segment name, as the bootstrap
//      brought it (missing bytes 'x', so a short input has no end):
//      segmentName
//   1  a segment header's magic and owner (4 + 4 bytes), then the rank it
//      should be (4): checkSegmentHeader
//   2  a slot header's seq, size and tag (8 + 8 + 24), the message number
//      the receiver waits for (8), its FIFO's slots (1 byte, 1..256), the
//      size and tag it expects (8 + 24): slotState, checkSlotMessage
//   3  an abort report: origin (4), the communicator's size (2 bytes,
//      1..65536), the reporting rank (2, modulo size), then the message
//      text, without an end if it fills the field: abortReport
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "transport/shm/shm_checks.h"

namespace {

using namespace gyre::transport;

template <typename T>
T take(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

void segmentName(const uint8_t* data, size_t size) {
  char field[64];
  std::memset(field, 'x', sizeof field);
  std::memcpy(field, data, size < sizeof field ? size : sizeof field);
  std::string name;
  try {
    name = shm::segmentName(field, sizeof field, "rank 1");
  } catch (const gyre::Error&) {
    return;
  }
  if (name.size() >= sizeof field) std::abort();
  if (!name.empty() &&
      (name.rfind(shm::kSegmentPrefix, 0) != 0 || name.find('/', 1) != std::string::npos))
    std::abort();  // shm_open would be given a name that is not gyre's
}

void segmentHeader(const uint8_t* in) {
  shm::SegmentHeader h{};
  h.magic = take<uint32_t>(in);
  h.ownerRank = take<int32_t>(in + 4);
  const int peer = take<int32_t>(in + 8);
  try {
    shm::checkSegmentHeader(h, peer, "rank 1", "/gyre-1-000000000000");
  } catch (const gyre::Error&) {
    return;
  }
  if (h.magic != shm::kSegmentMagic || h.ownerRank != peer) std::abort();
}

void slot(const uint8_t* in) {
  const uint64_t seq = take<uint64_t>(in), bytes = take<uint64_t>(in + 8);
  const MessageTag tag = take<MessageTag>(in + 16);
  const uint64_t message = take<uint64_t>(in + 40);
  const int nslots = int(in[48]) + 1;
  const uint64_t wantBytes = take<uint64_t>(in + 49);
  const MessageTag wantTag = take<MessageTag>(in + 57);
  const shm::SlotState state = shm::slotState(seq, message, nslots);
  if ((state == shm::SlotState::Published) != (seq == message + 1)) std::abort();
  if (state != shm::SlotState::Published) return;
  try {
    shm::checkSlotMessage(bytes, tag, wantBytes, wantTag, 1);
  } catch (const gyre::Error&) {
    return;
  }
  if (bytes != wantBytes || !(tag == wantTag)) std::abort();
}

void abortReport(const uint8_t* in, const uint8_t* text, size_t textBytes) {
  shm::SegmentHeader h{};
  h.abortOrigin = take<int32_t>(in);
  const int nranks = int(take<uint16_t>(in + 4)) + 1;
  const int owner = int(take<uint16_t>(in + 6)) % nranks;
  std::memcpy(h.abortMessage, text,
              textBytes < sizeof h.abortMessage ? textBytes : sizeof h.abortMessage);
  const PeerReport r =
      shm::abortReport(h.abortOrigin, h.abortMessage, sizeof h.abortMessage, owner, nranks);
  // The origin indexes the peer list of the rank that reads it.
  if (r.origin < 0 || r.origin >= nranks) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const int which = data[0] % 4;
  ++data, --size;
  if (which == 0) return segmentName(data, size), 0;
  uint8_t in[96] = {};
  std::memcpy(in, data, size < sizeof in ? size : sizeof in);
  if (which == 1) segmentHeader(in);
  if (which == 2) slot(in);
  if (which == 3) abortReport(in, size > 8 ? data + 8 : data, size > 8 ? size - 8 : 0);
  return 0;
}
