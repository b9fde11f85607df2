// gyreCommSplit: a child communicator from the ranks that give one color,
// ordered by key, without a new rendezvous: the parent's transports carry
// the exchange of colors, keys and the children's addresses.
#include <algorithm>
#include <cstring>

#include "base/log.h"
#include "bootstrap/unique_id.h"
#include "core/communicator.h"

namespace gyre::core {

std::unique_ptr<Communicator> Communicator::prepareChild(int rank, int nranks, const gyreConfig_t* userConfig,
                                                         Deadline deadline, const std::string& secretLabel) {
  const Config cfg = userConfig ? Config::resolve(userConfig) : config_;
  std::unique_ptr<Communicator> child = makeShell(rank, nranks, cfg);
  bootstrap::Bootstrap::Params bp = bootstrapParams(rank, nranks, cfg, deadline);
  bp.id.secret = bootstrap::deriveSecret(bootstrap::secretHex(bootstrap_->secret()) + secretLabel);
  // The child listens where the parent does (loopback stays loopback).
  child->bootstrap_ = bootstrap::Bootstrap::prepare(bp, bootstrap::SockAddr::unpack(bootstrap_->self().listenAddr));
  return child;
}

void Communicator::connectChild(Communicator& child, std::vector<bootstrap::PeerInfo> table, Deadline deadline) {
  try {
    child.bootstrap_->complete(std::move(table), deadline);
    child.setUpTransports(deadline);
    // The child runs on the same machine: it keeps the parent's numbers
    // unless it was given a file of its own.
    child.setUpTuner(deadline, &tuning_.model);
  } catch (const Error& e) {
    child.bootstrap_->reportFailure(e);  // the child's other members may wait on this one
    throw;
  }
}

std::unique_ptr<Communicator> Communicator::split(int color, int key, const gyreConfig_t* userConfig) {
  ActiveScope active(activeCalls_);
  checkUsable();
  // The bootstrap ring is ours alone while we use it.
  waitForTurn();
  Turn turn{*this};

  const Deadline deadline = Deadline::afterMs(config_.timeoutMs);
  const uint64_t splitNo = ++splits_;
  struct Choice {
    int32_t color, key;
  };
  // Through the transports, tagged as the split: a rank that makes another
  // call meanwhile fails with a mismatch naming both, on both sides.
  std::vector<Choice> choices(static_cast<size_t>(nranks_));
  choices[rank_] = Choice{color, key};
  exchangeForSplit(choices.data(), sizeof(Choice));

  // The child's members: same color, ordered by key, then by parent rank.
  std::vector<int> members;
  if (color != GYRE_SPLIT_NOCOLOR)
    for (int r = 0; r < nranks_; ++r)
      if (choices[r].color == color) members.push_back(r);
  std::stable_sort(members.begin(), members.end(),
                   [&](int a, int b) { return choices[a].key < choices[b].key; });
  const int childRank =
      color == GYRE_SPLIT_NOCOLOR
          ? -1
          : static_cast<int>(std::find(members.begin(), members.end(), rank_) - members.begin());

  // Each member's child listener goes to every rank; everyone takes part,
  // non-members with an empty entry.
  std::unique_ptr<Communicator> child;
  std::vector<bootstrap::PeerInfo> infos(static_cast<size_t>(nranks_));
  std::memset(infos.data(), 0, infos.size() * sizeof(bootstrap::PeerInfo));
  if (childRank >= 0) {
    // A secret only this split's members can compute.
    child = prepareChild(childRank, static_cast<int>(members.size()), userConfig, deadline,
                         "/split/" + std::to_string(splitNo) + "/" + std::to_string(color));
    infos[rank_] = child->bootstrap_->self();
  } else {
    infos[rank_].rank = -1;
  }
  exchangeForSplit(infos.data(), sizeof(bootstrap::PeerInfo));
  if (!child) return nullptr;

  std::vector<bootstrap::PeerInfo> table;
  for (int r : members) table.push_back(infos[r]);
  connectChild(*child, std::move(table), deadline);
  log::setThreadRank(rank_);
  GYRE_INFO("rank %d: split %llu, color %d: rank %d of %d", rank_, static_cast<unsigned long long>(splitNo), color,
            childRank, child->nranks_);
  return child;
}

}  // namespace gyre::core
