// Elastic training's bookkeeping (docs/harness.md, "Elastic training"): how
// a process that wants to join finds the running ranks, and what the run
// says about its changes. Training itself stays in main.cc's stretches.
//
// Joining goes through files in CHECKPOINT_DIR/elastic, which every rank
// reads anyway (a resharded load reads every shard): a process that wants
// in writes join-ID.request; at each checkpoint boundary rank 0 counts the
// requests and, when the run has room, answers each with join-ID.ticket
// (the larger size, the process's rank and the join handle), after which
// the running ranks and the newcomers make the larger communicator
// (gyreCommGrow). When the run ends rank 0 writes `finished`, so that a
// process still waiting leaves instead of waiting for its bound.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "gyre/gyre.h"

namespace gyre::harness::elastic {

std::filesystem::path directory(const std::filesystem::path& checkpointDir);

// A new run's rank 0, before the ranks first talk: requests, tickets and
// the end marker of an earlier run in the same directory are stale.
void clearStale(const std::filesystem::path& checkpointDir);

// Rank 0: the waiting processes' ids, oldest request first.
std::vector<std::string> requests(const std::filesystem::path& checkpointDir);

// Rank 0: answers the requests `ids`: newcomer i becomes rank oldRanks + i
// of newRanks. Each ticket is written whole under a temporary name and
// renamed, so a reader never sees half of one.
void admit(const std::filesystem::path& checkpointDir, const std::vector<std::string>& ids, int oldRanks,
           int newRanks, const gyreJoinHandle& handle);

// Rank 0, at the end of the run.
void markFinished(const std::filesystem::path& checkpointDir);

// A newcomer: asks to join; returns its id.
std::string requestJoin(const std::filesystem::path& checkpointDir);

struct Ticket {
  int newRanks = 0;
  int rank = 0;
  gyreJoinHandle handle{};
};
// A newcomer: waits (polling the directory) for its ticket; nullopt when the
// run finished first. Throws std::runtime_error after `waitSeconds`.
std::optional<Ticket> waitForTicket(const std::filesystem::path& checkpointDir, const std::string& id,
                                    double waitSeconds);

// One line of the run's account of itself: "gyre-train: elastic: <when>:
// <what>", on stdout, flushed (the time is the wall clock's, so lines from
// several processes can be put in order).
void event(const std::string& what);

}  // namespace gyre::harness::elastic
