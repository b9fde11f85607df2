// The soak's random operations (tests/soak_test.cc, tests/chaos_test.cc):
// from one seed every rank draws the same sequence of operations, runs them
// blocking, nonblocking or grouped on the world or a split's child, and
// checks every result exactly.
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bench/exact_values.h"
#include "tests/support/multiprocess.h"

namespace gyre::test {

// splitmix64: the same draws on every rank and machine.
struct Rng {
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  int below(int n) { return static_cast<int>(next() % static_cast<uint64_t>(n)); }
};

const gyreDataType_t kTypes[] = {gyreInt8,   gyreUint8,   gyreInt32,   gyreUint32,  gyreInt64,
                                 gyreUint64, gyreFloat16, gyreFloat32, gyreFloat64, gyreBfloat16};
const gyreRedOp_t kOps[] = {gyreSum, gyreProd, gyreMax, gyreMin, gyreAvg};
enum Kind { AllReduce, Broadcast, Reduce, AllGather, ReduceScatter, AllToAll, Ring, kKinds };
const char* const kNames[] = {"allreduce",     "broadcast", "reduce", "allgather",
                              "reducescatter", "alltoall",  "ring"};

// One drawn operation with its buffers, launched and later checked.
struct Op {
  Kind kind;
  int index;  // in the sequence: the patterns' seeds
  gyreComm_t comm;
  int rank, n;
  gyreDataType_t t;
  gyreRedOp_t op;
  size_t count;
  int root;
  std::vector<char> in, out;
  gyreRequest_t request = nullptr;

  size_t bytes(size_t elems) const { return elems * dtypeBytes(t); }
  uint64_t seed(int from, int to) const {
    return (static_cast<uint64_t>(index) << 16) ^ (from << 8) ^ to;
  }

  void prepare() {
    const size_t e = dtypeBytes(t);
    switch (kind) {
      case AllReduce:
      case Reduce:
        in.resize(count * e);
        out.assign(count * e, 0);
        fillInput(in.data(), count, t, op, rank);
        break;
      case Broadcast:
        in.resize(count * e);
        if (rank == root)
          fillPattern(in.data(), count, t, seed(root, 0));
        else
          fillConstant(in.data(), count, t, 0);
        break;
      case AllGather:
        in.resize(count * e);
        out.assign(n * count * e, 0);
        fillPattern(in.data(), count, t, seed(rank, 0));
        break;
      case ReduceScatter:
        in.resize(n * count * e);
        out.assign(count * e, 0);
        fillInput(in.data(), n * count, t, op, rank);
        break;
      case AllToAll:
      case Ring:
        in.resize((kind == Ring ? 1 : n) * count * e);
        out.assign(in.size(), 0);
        for (int j = 0; j < (kind == Ring ? 1 : n); ++j)
          fillPattern(in.data() + j * count * e, count, t,
                      seed(rank, kind == Ring ? (rank + 1) % n : j));
        break;
      default:
        break;
    }
  }

  // Blocking (request null) or nonblocking; inside a group when one is open.
  gyreResult_t launch(bool nonblocking) {
    gyreRequest_t* r = nonblocking ? &request : nullptr;
    switch (kind) {
      case AllReduce:
        return r ? gyreIallReduce(in.data(), out.data(), count, t, op, comm, r)
                 : gyreAllReduce(in.data(), out.data(), count, t, op, comm, nullptr);
      case Broadcast:
        return r ? gyreIbroadcast(in.data(), in.data(), count, t, root, comm, r)
                 : gyreBroadcast(in.data(), in.data(), count, t, root, comm, nullptr);
      case Reduce:
        return r ? gyreIreduce(in.data(), out.data(), count, t, op, root, comm, r)
                 : gyreReduce(in.data(), out.data(), count, t, op, root, comm, nullptr);
      case AllGather:
        return r ? gyreIallGather(in.data(), out.data(), count, t, comm, r)
                 : gyreAllGather(in.data(), out.data(), count, t, comm, nullptr);
      case ReduceScatter:
        return r ? gyreIreduceScatter(in.data(), out.data(), count, t, op, comm, r)
                 : gyreReduceScatter(in.data(), out.data(), count, t, op, comm, nullptr);
      case AllToAll:
        return r ? gyreIallToAll(in.data(), out.data(), count, t, comm, r)
                 : gyreAllToAll(in.data(), out.data(), count, t, comm, nullptr);
      case Ring: {
        // Its own group, so the send and the receive cannot wait on each other.
        gyreResult_t a = gyreGroupStart();
        if (a == gyreSuccess) a = gyreSend(in.data(), count, t, (rank + 1) % n, comm, nullptr);
        if (a == gyreSuccess) a = gyreRecv(out.data(), count, t, (rank + n - 1) % n, comm, nullptr);
        const gyreResult_t b = gyreGroupEnd();
        return a != gyreSuccess ? a : b;
      }
      default:
        return gyreInvalidUsage;
    }
  }

  // The number of wrong elements; *what says the first.
  size_t check(std::string* what) const {
    const size_t e = dtypeBytes(t);
    size_t wrong = 0;
    switch (kind) {
      case AllReduce:
        return countWrong(out.data(), count, t, op, n, what);
      case Reduce:
        return rank == root ? countWrong(out.data(), count, t, op, n, what) : 0;
      case Broadcast:
        return countPatternWrong(in.data(), count, t, seed(root, 0), what);
      case AllGather:
        for (int j = 0; j < n; ++j)
          wrong += countPatternWrong(out.data() + j * count * e, count, t, seed(j, 0), what);
        return wrong;
      case ReduceScatter:
        return countWrong(out.data(), count, t, op, n, what, rank * count);
      case AllToAll:
        for (int j = 0; j < n; ++j)
          wrong += countPatternWrong(out.data() + j * count * e, count, t, seed(j, rank), what);
        return wrong;
      case Ring:
        return countPatternWrong(out.data(), count, t, seed((rank + n - 1) % n, rank), what);
      default:
        return 1;
    }
  }
};

// How a run of random operations ended.
struct RandomOpsEnd {
  int started = 0;                    // operations launched
  gyreResult_t failed = gyreSuccess;  // the first call that failed, if any
  std::string error;                  // its gyreGetLastError
  long wrongOps = 0;                  // operations whose result was not exact
};

// Runs `ops` operations drawn from `seed` on world and half (the split of
// ranks of the same parity), checking each result exactly (wrong results go
// to check). Stops at the first call that fails; the nonblocking calls still
// outstanding are waited for, so none is left behind. atOp(i) runs before
// operation i is launched.
inline RandomOpsEnd runRandomOps(Checker& check, gyreComm_t world, gyreComm_t half, int rank, int n,
                                 int ops, uint64_t seed,
                                 const std::function<void(int)>& atOp = {}) {
  RandomOpsEnd end, waitEnd;
  Rng rng{seed};
  std::vector<std::unique_ptr<Op>> pending;  // nonblocking, not waited yet
  auto record = [](RandomOpsEnd& e, gyreResult_t r) {
    if (r != gyreSuccess && e.failed == gyreSuccess) {
      e.failed = r;
      e.error = gyreGetLastError(nullptr);
    }
    return r != gyreSuccess;
  };
  auto failed = [&](gyreResult_t r) { return record(end, r); };
  auto finish = [&](Op& op) {
    std::string what;
    const size_t wrong = op.check(&what);
    if (wrong && end.wrongOps++ < 5)
      check.fail(std::string(kNames[op.kind]) + " #" + std::to_string(op.index) + " (" +
                 dtypeLabel(op.t) + ", " + opLabel(op.op) + ", " + std::to_string(op.count) +
                 " elements): " + std::to_string(wrong) + " wrong, first " + what);
  };
  // A nonblocking call that failed in the background makes the next call
  // refuse (gyreInvalidUsage, "failed earlier"): the waits' failures come
  // first, as their calls did.
  auto waitAll = [&] {
    for (auto& p : pending)
      if (!record(waitEnd, gyreWait(p->request)) && end.failed == gyreSuccess &&
          waitEnd.failed == gyreSuccess)
        finish(*p);
    pending.clear();
  };
  for (int i = 0; i < ops && end.failed == gyreSuccess && waitEnd.failed == gyreSuccess &&
                  check.failures() == 0;) {
    // A run of 1 to 3 operations, blocking, nonblocking or in a group.
    const int mode = rng.below(3), runLength = 1 + rng.below(3);
    std::vector<std::unique_ptr<Op>> run;
    for (int k = 0; k < runLength && i < ops; ++k, ++i) {
      auto op = std::make_unique<Op>();
      op->kind = static_cast<Kind>(rng.below(kKinds));
      op->index = i;
      const bool onHalf = rng.below(5) == 0;
      op->comm = onHalf ? half : world;
      op->n = onHalf ? n / 2 : n;
      op->rank = onHalf ? rank / 2 : rank;
      op->t = kTypes[rng.below(10)];
      op->op = kOps[rng.below(5)];
      op->count = rng.below(8) == 0 ? 1 + rng.below(1 << 15) : 1 + rng.below(700);
      op->root = rng.below(op->n);
      // A ring in a group or nonblocking is the group it makes itself.
      if (op->kind == Ring && mode != 0) op->kind = AllReduce;
      op->prepare();
      run.push_back(std::move(op));
    }
    if (mode == 2 && failed(gyreGroupStart())) break;
    std::vector<bool> launched(run.size(), false);
    for (size_t k = 0; k < run.size(); ++k) {
      if (atOp) atOp(run[k]->index);
      ++end.started;
      launched[k] = !failed(run[k]->launch(mode == 1));
      if (!launched[k]) break;
    }
    if (mode == 2) failed(gyreGroupEnd());
    if (mode == 1) {
      for (size_t k = 0; k < run.size(); ++k)
        if (launched[k]) pending.push_back(std::move(run[k]));
      if (pending.size() >= 4 || rng.below(2) == 0 || end.failed != gyreSuccess) waitAll();
    } else if (end.failed == gyreSuccess) {
      for (auto& op : run) finish(*op);
    }
  }
  waitAll();
  if (waitEnd.failed != gyreSuccess) {
    end.failed = waitEnd.failed;
    end.error = waitEnd.error;
  }
  return end;
}

}  // namespace gyre::test
