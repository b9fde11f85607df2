#include "core/group.h"

#include <algorithm>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "base/error.h"
#include "core/communicator.h"

namespace gyre::core::group {

namespace {

struct State {
  // Per communicator, in the order they were first used in the group.
  std::vector<std::pair<Communicator*, std::vector<Operation>>> pending;
};

thread_local State tls;
// Apart from the calls: every call asks for it, and a thread_local with a
// destructor is reached through a wrapper that first checks it was made
// (two TLS lookups a call, ~36 instructions; this one is constant
// initialized and has nothing to destroy).
thread_local int depth = 0;

}  // namespace

bool active() { return depth > 0; }

void start() { ++depth; }

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

namespace {

using Pending = std::vector<std::pair<Communicator*, std::vector<Operation>>>;

// The end of a group (`call` names it): its calls at the outermost end,
// nothing at an inner one.
std::optional<Pending> takeAtEnd(const char* call) {
  if (depth == 0) throwError(gyreInvalidUsage, std::string(call) + " without a matching gyreGroupStart");
  if (--depth > 0) return std::nullopt;
  Pending pending = std::move(tls.pending);
  tls.pending.clear();
  return pending;
}

}  // namespace

void end() {
  std::optional<Pending> taken = takeAtEnd("gyreGroupEnd");
  if (!taken) return;
  Pending& pending = *taken;
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

namespace {

// One call's microseconds by the cost model. The calls it has no model of
// are priced as their nearest modelled kin: a Send or Recv as one hop (a
// Broadcast between two ranks), AllToAllv as an AllToAll of its mean
// block, Gather and Scatter as a Reduce and a Broadcast of a rank's block,
// a Barrier as a one-byte AllReduce; the sequence and expert exchanges as
// an AllToAll of their bytes per peer.
double estimateOne(const Communicator& c, const Operation& op) {
  using collectives::OpKind;
  const int n = c.nranks();
  auto us = [&](OpKind kind, size_t bytes, int ranks) {
    return ranks <= 1 ? 0.0 : c.estimate(kind, std::max<size_t>(bytes, 1), ranks).us;
  };
  switch (op.kind) {
    case OpKind::AllReduce:
    case OpKind::Broadcast:
    case OpKind::Reduce:
      return us(op.kind, std::max(op.sendBytes, op.recvBytes), n);
    case OpKind::AllGather:
      return us(op.kind, op.sendBytes, n);
    case OpKind::ReduceScatter:
      return us(op.kind, op.recvBytes, n);
    case OpKind::AllToAll:
      return us(op.kind, op.sendBytes / std::max(n, 1), n);
    case OpKind::SendRecv:
      return us(OpKind::Broadcast, std::max(op.sendBytes, op.recvBytes), 2);
    case OpKind::AllToAllv:
      return us(OpKind::AllToAll, std::max(op.sendBytes, op.recvBytes) / std::max(n, 1), n);
    case OpKind::Gather:
      return us(OpKind::Reduce, op.sendBytes, n);
    case OpKind::Scatter:
      return us(OpKind::Broadcast, op.recvBytes, n);
    case OpKind::Barrier:
      return us(OpKind::AllReduce, 1, n);
    default:
      return us(OpKind::AllToAll, std::max(op.sendBytes, op.recvBytes) / std::max(n, 1), n);
  }
}

}  // namespace

double simulateEnd() {
  std::optional<Pending> pending = takeAtEnd("gyreGroupSimulateEnd");
  if (!pending) return 0.0;
  double slowest = 0.0;
  for (auto& [comm, ops] : *pending) {
    double sum = 0.0;
    for (Operation& op : ops) {
      sum += estimateOne(*comm, op);
      if (op.request)
        op.request->complete(gyreInvalidUsage,
                             "the group was simulated (gyreGroupSimulateEnd): the call did not run");
    }
    slowest = std::max(slowest, sum);
  }
  return slowest;
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
