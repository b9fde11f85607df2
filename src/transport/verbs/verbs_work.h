// The ids of a verbs connection's work requests: which kind of work (its
// completion is dispatched by it), and for an eager write, which of the
// connection's send slots it went from.
#pragma once

#include <cstdint>

namespace gyre::transport::verbs_work {

enum WorkKind : uint64_t {
  kRecvWork = 1,
  kSlotWrite = 2,
  kNoticeWrite = 3,
  kRendezvousRead = 4,
  kOneSided = 5
};
inline uint64_t workId(WorkKind k, uint64_t index = 0) {
  return (static_cast<uint64_t>(k) << 56) | index;
}
inline WorkKind workKind(uint64_t id) { return static_cast<WorkKind>(id >> 56); }
inline uint64_t workIndex(uint64_t id) { return id & ((uint64_t{1} << 56) - 1); }

}  // namespace gyre::transport::verbs_work
