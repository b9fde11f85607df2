#include "core/group.h"

#include <utility>
#include <vector>

#include "core/communicator.h"
#include "core/error.h"

namespace gyre::core::group {

namespace {

struct State {
  int depth = 0;
  // Per communicator, in the order they were first used in the group.
  std::vector<std::pair<Communicator*, std::vector<Operation>>> pending;
};

thread_local State tls;

}  // namespace

bool active() { return tls.depth > 0; }

void start() { ++tls.depth; }

void add(Communicator& comm, Operation op) {
  for (auto& [c, ops] : tls.pending) {
    if (c == &comm) {
      ops.push_back(std::move(op));
      return;
    }
  }
  tls.pending.emplace_back(&comm, std::vector<Operation>{});
  tls.pending.back().second.push_back(std::move(op));
}

void end() {
  if (tls.depth == 0) throwError(gyreInvalidUsage, "gyreGroupEnd without a matching gyreGroupStart");
  if (--tls.depth > 0) return;
  auto pending = std::move(tls.pending);
  tls.pending.clear();
  // Every communicator's calls run, even after one fails; the first failure
  // is reported.
  std::string firstError;
  gyreResult_t firstCode = gyreSuccess;
  for (auto& [comm, ops] : pending) {
    try {
      comm->runGroup(ops);
    } catch (const Error& e) {
      if (firstCode == gyreSuccess) {
        firstCode = e.code();
        firstError = e.what();
      }
    }
  }
  if (firstCode != gyreSuccess) throw Error(firstCode, firstError);
}

void forget(const Communicator& comm) {
  for (auto it = tls.pending.begin(); it != tls.pending.end();) {
    if (it->first == &comm) {
      for (Operation& op : it->second)
        if (op.request) op.request->complete(gyreInvalidUsage, "the communicator was destroyed inside a group");
      it = tls.pending.erase(it);
    } else {
      ++it;
    }
  }
}

}  // namespace gyre::core::group
