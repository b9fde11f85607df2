#include "flexsp/group_comms.h"

#include <stdexcept>
#include <string>
#include <vector>

namespace gyre::flexsp {

namespace {

void check(gyreResult_t r, const char* what, gyreComm_t comm) {
  if (r != gyreSuccess)
    throw std::runtime_error(std::string("flexsp: ") + what + ": " + gyreGetLastError(comm));
}

}  // namespace

GroupComms::GroupComms(gyreComm_t world) : world_(world) {
  check(gyreCommUserRank(world, &rank_), "gyreCommUserRank", world);
  check(gyreCommCount(world, &size_), "gyreCommCount", world);
}

GroupComms::~GroupComms() {
  for (auto& [block, comm] : made_)
    if (comm) gyreCommDestroy(comm);
}

gyreComm_t GroupComms::forPlan(const Plan& plan) {
  // Every rank sees the same plan and the same history, so every rank
  // knows which blocks are new without asking.
  bool fresh = false;
  int color = GYRE_SPLIT_NOCOLOR;
  std::pair<int, int> mine{-1, 0};
  for (const Group& g : plan.groups) {
    if (g.firstRank + g.size > size_)
      throw std::runtime_error("flexsp: the plan's group at rank " + std::to_string(g.firstRank) +
                               " reaches beyond the world's " + std::to_string(size_) + " ranks");
    const std::pair<int, int> block{g.firstRank, g.size};
    const bool known = made_.count(block) != 0;
    fresh = fresh || !known;
    if (rank_ >= g.firstRank && rank_ < g.firstRank + g.size) {
      mine = block;
      if (!known) color = g.firstRank;  // blocks of one plan start apart
    }
  }
  if (mine.first < 0)
    throw std::runtime_error("flexsp: rank " + std::to_string(rank_) +
                             " is in none of the plan's groups");
  if (fresh) {
    gyreComm_t made = nullptr;
    check(gyreCommSplit(world_, color, rank_, &made, nullptr), "gyreCommSplit", world_);
    ++splits_;
    if (color != GYRE_SPLIT_NOCOLOR) made_[mine] = made;
    // Blocks of the other ranks' new groups: this rank is in none of them,
    // so it keeps no communicator, but must not split for them again.
    for (const Group& g : plan.groups) made_.try_emplace({g.firstRank, g.size}, nullptr);
  }
  return made_.at(mine);
}

void broadcastPlan(Plan& plan, int root, gyreComm_t comm) {
  // [groups, then per group: firstRank, size, count, the sequences]
  std::vector<int64_t> flat;
  flat.push_back(static_cast<int64_t>(plan.groups.size()));
  for (const Group& g : plan.groups) {
    flat.insert(flat.end(), {g.firstRank, g.size, static_cast<int64_t>(g.sequences.size())});
    flat.insert(flat.end(), g.sequences.begin(), g.sequences.end());
  }
  int64_t n = static_cast<int64_t>(flat.size());
  check(gyreBroadcast(&n, &n, 1, gyreInt64, root, comm, nullptr), "gyreBroadcast", comm);
  flat.resize(static_cast<size_t>(n));
  check(gyreBroadcast(flat.data(), flat.data(), static_cast<size_t>(n), gyreInt64, root, comm,
                      nullptr),
        "gyreBroadcast", comm);
  Plan out;
  size_t at = 1;
  for (int64_t g = 0; g < flat[0]; ++g) {
    Group group{static_cast<int>(flat[at]), static_cast<int>(flat[at + 1]), {}, 0};
    const auto count = static_cast<size_t>(flat[at + 2]);
    at += 3;
    for (size_t i = 0; i < count; ++i) group.sequences.push_back(static_cast<int>(flat[at + i]));
    at += count;
    out.groups.push_back(std::move(group));
  }
  out.seconds = plan.seconds;  // root's; others predict their own if they need it
  out.method = plan.method;
  out.note = plan.note;
  plan = std::move(out);
}

}  // namespace gyre::flexsp
