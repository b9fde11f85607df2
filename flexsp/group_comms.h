// The communicators of a plan's groups, made by gyreCommSplit and kept:
// a step whose plan has a shape seen before splits nothing, and a new
// shape splits once, for the groups not yet made (a group is a block of
// ranks, the same block in any plan). Every block is aligned, so a rank
// belongs to at most log2(world) + 1 of them: the cache stays small.
#pragma once

#include <map>
#include <utility>

#include "flexsp/plan.h"
#include "gyre/gyre.h"

namespace gyre::flexsp {

class GroupComms {
 public:
  // world: the communicator the plans' ranks are numbered in; not owned.
  explicit GroupComms(gyreComm_t world);
  ~GroupComms();  // destroys the communicators it made
  GroupComms(const GroupComms&) = delete;
  GroupComms& operator=(const GroupComms&) = delete;

  // This rank's group's communicator for the plan. Collective over world:
  // every rank calls it with the same plan (plan on one rank and
  // broadcastPlan: a solve within a time limit may differ between ranks).
  // Throws std::runtime_error with gyre's sentence when a split fails.
  gyreComm_t forPlan(const Plan& plan);
  // How many gyreCommSplit calls it has made.
  int splits() const { return splits_; }

 private:
  gyreComm_t world_;
  int rank_ = 0, size_ = 0;
  std::map<std::pair<int, int>, gyreComm_t> made_;  // (firstRank, size) -> this rank's communicator
  int splits_ = 0;
};

// Sends root's plan's groups and sequences to every rank of comm (two
// broadcasts), so that every rank uses the same plan. Collective.
void broadcastPlan(Plan& plan, int root, gyreComm_t comm);

}  // namespace gyre::flexsp
