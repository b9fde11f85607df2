// gyreCommGrow's part on the running ranks: they agree on the size and on
// the one join handle in play before any of them goes to its rendezvous, so
// that a disagreement is the same named error on every rank at once rather
// than a rendezvous that some ranks never reach (and a wait for the timeout).
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "base/hash.h"
#include "base/log.h"
#include "core/communicator.h"

namespace gyre::core {

namespace {

// What only this communicator's ranks share, as a fingerprint: a handle
// carries it so a handle of another communicator is told from ours.
uint64_t commTagOf(const bootstrap::Secret& secret) {
  return fnv1a(std::string_view("gyre join handle"), fnv1a(secret.data(), secret.size()));
}

struct Proposal {
  int32_t newNranks;
  int32_t hasHandle;
  gyreJoinHandle handle;
};

}  // namespace

JoinHandle Communicator::makeJoinHandle(const gyreUniqueId& rendezvous) {
  checkUsable();
  JoinHandle h;
  h.commTag = commTagOf(bootstrap_->secret());
  h.maker = rank_;
  h.oldNranks = nranks_;
  h.rendezvous = rendezvous;
  std::lock_guard<std::mutex> lock(joinMutex_);
  h.serial = ++joinHandlesMade_;
  liveJoinHandles_.insert(h.serial);
  GYRE_INFO("rank %d: made join handle #%llu for growing from %d ranks", rank_,
            static_cast<unsigned long long>(h.serial), nranks_);
  return h;
}

JoinHandle Communicator::agreeOnGrow(int newNranks, const gyreJoinHandle* mine) {
  ActiveScope active(activeCalls_);
  checkUsable();
  waitForTurn();  // the transports carry the agreement, ours alone meanwhile
  Turn turn{*this};

  std::vector<Proposal> all(static_cast<size_t>(nranks_));
  std::memset(all.data(), 0, all.size() * sizeof(Proposal));
  Proposal& own = all[static_cast<size_t>(rank_)];
  own.newNranks = newNranks;
  own.hasHandle = mine != nullptr;
  if (mine) own.handle = *mine;
  exchangeForSplit(all.data(), sizeof(Proposal), collectives::OpKind::CommGrow);

  // Every rank holds the same table now and draws the same conclusions.
  for (int r = 1; r < nranks_; ++r)
    if (all[r].newNranks != all[0].newNranks)
      throwError(gyreInvalidUsage, "gyreCommGrow: the ranks asked for different sizes: rank 0 for " +
                                       std::to_string(all[0].newNranks) + " ranks, rank " + std::to_string(r) +
                                       " for " + std::to_string(all[r].newNranks));
  if (all[0].newNranks <= nranks_ || all[0].newNranks > GYRE_MAX_RANKS)
    throwError(gyreInvalidArgument, "gyreCommGrow: newNranks " + std::to_string(all[0].newNranks) +
                                        " does not grow the communicator's " + std::to_string(nranks_) +
                                        " ranks (at most GYRE_MAX_RANKS; gyreCommShrink makes fewer)");
  int holder = -1;
  for (int r = 0; r < nranks_; ++r) {
    if (!all[r].hasHandle) continue;
    if (holder < 0) {
      holder = r;
    } else if (std::memcmp(&all[r].handle, &all[holder].handle, sizeof(gyreJoinHandle)) != 0) {
      throwError(gyreInvalidUsage, "gyreCommGrow: ranks " + std::to_string(holder) + " and " + std::to_string(r) +
                                       " passed different join handles (every rank that passes one passes "
                                       "the same; the others pass NULL)");
    }
  }
  if (holder < 0)
    throwError(gyreInvalidUsage,
               "gyreCommGrow: no rank passed a join handle (the rank that made it with gyreCommGetJoinHandle "
               "passes it; the new processes are given it)");
  const JoinHandle h = decodeJoinHandle(all[holder].handle);
  if (h.commTag != commTagOf(bootstrap_->secret()) || h.oldNranks != nranks_)
    throwError(gyreInvalidUsage,
               "gyreCommGrow: rank " + std::to_string(holder) +
                   "'s join handle was made by another communicator (another job's, or this job's before it "
                   "grew, shrank or split), not by this one");

  // Only the maker knows whether the handle was spent: it says so to all.
  int32_t spent = 0;
  if (rank_ == h.maker) {
    std::lock_guard<std::mutex> lock(joinMutex_);
    spent = liveJoinHandles_.erase(h.serial) == 0;
  }
  std::vector<int32_t> verdicts(static_cast<size_t>(nranks_), 0);
  verdicts[static_cast<size_t>(rank_)] = spent;
  exchangeForSplit(verdicts.data(), sizeof(int32_t), collectives::OpKind::CommGrow);
  if (verdicts[static_cast<size_t>(h.maker)])
    throwError(gyreInvalidUsage, "gyreCommGrow: the join handle is stale: rank " + std::to_string(h.maker) +
                                     " made it (its handle #" + std::to_string(h.serial) +
                                     ") and a grow has used it already; make a new one");
  GYRE_INFO("rank %d: growing from %d to %d ranks with rank %d's join handle #%llu", rank_, nranks_,
            all[0].newNranks, h.maker, static_cast<unsigned long long>(h.serial));
  return h;
}

}  // namespace gyre::core
