// Decentralized peer averaging (docs/compression.md, "Decentralized
// averaging"): each rank replaces its buffer with the average of its own
// and a few peers' copies, instead of every rank's (AllReduce). Which peers,
// at which step, is a pure function of (selection, step, ranks), so every
// rank computes the same pairs without a message.
#pragma once

#include <cstdint>
#include <vector>

#include "collectives/planner.h"

namespace gyre::collectives {

// gyrePeers_t's values (gyre.h).
enum class PeerSelection : uint8_t { ShiftOne = 0, Ring = 1, Random = 2 };
constexpr int kPeerSelections = 3;
const char* peerSelectionName(PeerSelection s);

// The peers `rank` averages with at `step`, ascending, without itself:
// - ShiftOne: the lower half of the ranks pairs with the upper half, the
//   pairing shifting by one each step (Bagua's shift_one: one peer, and
//   over n/2 steps every cross pair); an even rank count.
// - Ring: the ranks before and after it (one peer for two ranks).
// - Random: a random perfect matching drawn from `step` (the same on every
//   rank); with an odd count one rank per step averages with nobody.
std::vector<int> averagingPeers(PeerSelection s, uint64_t step, int nranks, int rank);

// Sends this rank's buffer to each peer and receives theirs (lanes per
// peer), then, once every lane is done, averages in rank order:
// output = (x_a + x_b + ...) / k. The call's selection is desc.redop, its
// step's low 31 bits desc.root (so both travel in the tag, and ranks that
// disagree fail by name); CallArgs::divisor must be k.
void buildPeerAverage(const CallRequest& req, PlanEnv& env, Plan& plan);

}  // namespace gyre::collectives
