#include "core/group.h"

#include <thread>
#include <utility>
#include <vector>

#include "base/error.h"
#include "core/communicator.h"

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
  // (in the order the communicators were first used) is reported. Calls on
  // different communicators may depend on each other (a send on one that a
  // peer receives only after its calls on the other), so each communicator's
  // part runs on a thread of its own, all at once; the usual single
  // communicator runs here.
  if (pending.empty()) return;  // an empty group
  std::vector<std::pair<gyreResult_t, std::string>> results(pending.size(), {gyreSuccess, std::string()});
  auto runOne = [&](size_t i) {
    try {
      pending[i].first->runGroup(pending[i].second);
    } catch (const Error& e) {
      results[i] = {e.code(), e.what()};
    } catch (const std::exception& e) {
      results[i] = {gyreInternalError, std::string("internal error: ") + e.what()};
    }
  };
  std::vector<std::thread> others;
  for (size_t i = 1; i < pending.size(); ++i) others.emplace_back(runOne, i);
  runOne(0);
  for (std::thread& t : others) t.join();
  for (const auto& [code, why] : results)
    if (code != gyreSuccess) throw Error(code, why);
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
