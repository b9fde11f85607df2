// Asynchronous model averaging (gyre.h, docs/compression.md): a thread per
// averager runs rounds of an AllReduce average on a private communicator
// (split from the caller's at start, so the two never interleave calls on
// one communicator) while the caller computes; the model is shared through
// one mutex, the consistency rule the caller follows.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/api_support.h"
#include "core/group.h"

struct gyreAverager {
  gyreComm_t comm = nullptr;  // the private one
  float* model = nullptr;
  size_t count = 0;
  std::chrono::milliseconds interval{0};
  std::mutex mu;                  // guards model, version, failure
  uint64_t version = 0;           // unlocks so far: the caller may have written
  gyreResult_t failure = gyreSuccess;
  std::string why;
  std::atomic<std::thread::id> holder{};  // the caller's thread that holds mu, if one does
  std::atomic<bool> stopRequested{false};
  std::atomic<uint64_t> rounds{0};
  std::mutex pauseMu;                // the wait between rounds, which a stop cuts short
  std::condition_variable pauseCv;
  std::thread worker;
};

namespace {

using gyre::throwError;
using gyre::api::guarded;
using gyre::api::raiseIfFailed;

// One round: does any rank want to stop (all see the same answer), the
// model's copy averaged, and the difference added. Returns false once the
// ranks have agreed to stop (after that round's averaging). A failed call
// fails the round as it failed (a dead peer, the timeout).
bool averageOnce(gyreAverager& a, std::vector<float>& copy, std::vector<float>& average) {
  int stop = a.stopRequested.load(std::memory_order_acquire) ? 1 : 0, anyStop = 0;
  raiseIfFailed(gyreAllReduce(&stop, &anyStop, 1, gyreInt32, gyreMax, a.comm, nullptr));
  uint64_t seen;
  {
    std::lock_guard<std::mutex> lock(a.mu);
    std::memcpy(copy.data(), a.model, a.count * sizeof(float));
    seen = a.version;
  }
  raiseIfFailed(gyreAllReduce(copy.data(), average.data(), a.count, gyreFloat32, gyreAvg, a.comm, nullptr));
  {
    std::lock_guard<std::mutex> lock(a.mu);
    if (a.version == seen) {  // untouched since the copy: the average itself
      std::memcpy(a.model, average.data(), a.count * sizeof(float));
    } else {  // keep what the caller did meanwhile
      for (size_t i = 0; i < a.count; ++i) a.model[i] += average[i] - copy[i];
    }
  }
  a.rounds.fetch_add(1, std::memory_order_relaxed);
  return anyStop == 0;
}

void run(gyreAverager* a) {
  std::vector<float> copy(a->count), average(a->count);
  try {
    for (;;) {
      const auto next = std::chrono::steady_clock::now() + a->interval;
      if (!averageOnce(*a, copy, average)) break;
      std::unique_lock<std::mutex> lock(a->pauseMu);
      a->pauseCv.wait_until(lock, next, [a] { return a->stopRequested.load(); });
    }
  } catch (const gyre::Error& e) {
    std::lock_guard<std::mutex> lock(a->mu);
    a->failure = e.code();
    a->why = e.what();
  } catch (const std::exception& e) {
    std::lock_guard<std::mutex> lock(a->mu);
    a->failure = gyreInternalError;
    a->why = e.what();
  }
}

gyreAverager& valid(gyreAverager_t a) {
  if (!a) throwError(gyreInvalidArgument, "averager is NULL");
  return *a;
}

}  // namespace

extern "C" {

gyreResult_t gyreAveragerStart(gyreAverager_t* averager, gyreComm_t comm, void* model, size_t count,
                               gyreDataType_t datatype, unsigned intervalMs) {
  return guarded("gyreAveragerStart", [&] {
    if (!averager) throwError(gyreInvalidArgument, "averager is NULL");
    gyre::api::impl(comm);
    if (datatype != gyreFloat32)
      throwError(gyreInvalidArgument, "the averager keeps float32 models, not type " +
                                          std::to_string(gyre::api::enumBits(datatype)));
    gyre::api::requireBuffer(model, count * sizeof(float), "model");
    if (gyre::core::group::active()) throwError(gyreInvalidUsage, "gyreAveragerStart inside a group");
    auto a = std::make_unique<gyreAverager>();
    a->model = static_cast<float*>(model);
    a->count = count;
    a->interval = std::chrono::milliseconds(intervalMs);
    gyreComm_t priv = nullptr;
    raiseIfFailed(gyreCommSplit(comm, 0, 0, &priv, nullptr));
    a->comm = priv;
    a->worker = std::thread(run, a.get());
    *averager = a.release();
  });
}

gyreResult_t gyreAveragerLock(gyreAverager_t averager) {
  return guarded("gyreAveragerLock", [&] {
    gyreAverager& a = valid(averager);
    if (a.holder.load() == std::this_thread::get_id())
      throwError(gyreInvalidUsage, "this thread holds the averager's lock already");
    a.mu.lock();
    if (a.failure != gyreSuccess) {
      const gyreResult_t r = a.failure;
      const std::string why = a.why;
      a.mu.unlock();
      throwError(r, "the averager failed: " + why);
    }
    a.holder.store(std::this_thread::get_id());
  });
}

gyreResult_t gyreAveragerUnlock(gyreAverager_t averager) {
  return guarded("gyreAveragerUnlock", [&] {
    gyreAverager& a = valid(averager);
    if (a.holder.load() != std::this_thread::get_id())
      throwError(gyreInvalidUsage, "gyreAveragerUnlock without gyreAveragerLock on this thread");
    ++a.version;
    a.holder.store(std::thread::id());
    a.mu.unlock();
  });
}

gyreResult_t gyreAveragerStop(gyreAverager_t averager, uint64_t* rounds) {
  return guarded("gyreAveragerStop", [&] {
    if (valid(averager).holder.load() == std::this_thread::get_id())
      throwError(gyreInvalidUsage, "gyreAveragerStop while this thread holds the averager's lock");
    std::unique_ptr<gyreAverager> a(averager);
    {
      std::lock_guard<std::mutex> lock(a->pauseMu);  // (so the pause cannot miss it)
      a->stopRequested.store(true, std::memory_order_release);
    }
    a->pauseCv.notify_all();
    a->worker.join();
    if (rounds) *rounds = a->rounds.load();
    const gyreResult_t failure = a->failure;
    const std::string why = a->why;
    gyreCommDestroy(a->comm);
    if (failure != gyreSuccess) throwError(failure, "the averager failed: " + why);
  });
}

}  // extern "C"
