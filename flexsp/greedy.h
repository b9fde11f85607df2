// The planner's fallback, always there: group sizes from a few simple
// shapes, sequences placed longest first where they finish earliest, then
// moves out of the slowest group while they help. No optimum promised;
// fast (milliseconds for hundreds of sequences) and never absent.
#pragma once

#include <optional>
#include <vector>

#include "flexsp/plan.h"

namespace gyre::flexsp {

// Placed groups (placeGroups) of at most largestGroup ranks holding every
// sequence within memory, or nothing when none of the shapes tried holds
// the batch.
std::optional<std::vector<Group>> greedyGroups(const std::vector<int64_t>& lengths, int worldSize,
                                               int largestGroup, int64_t memoryTokens,
                                               const SequenceTime& time);

}  // namespace gyre::flexsp
