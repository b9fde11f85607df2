// Shared by the C entry points: the error translation and the argument
// checks (each names the argument and the rule it breaks).
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <thread>
#include <unordered_set>

#include "base/error.h"
#include "core/communicator.h"
#include "core/last_error.h"
#include "gyre/gyre.h"
#include "kernels/cpu/reduce.h"

struct gyreComm {
  std::unique_ptr<gyre::core::Communicator> impl;

  // A nonblocking init (config.blocking = 0): the thread that connects, and
  // what it ends with. initPending is the fast path every call checks.
  struct PendingInit {
    std::thread thread;
    std::atomic<bool> done{false};
    gyreResult_t code = gyreSuccess;
    std::string message;
    std::unique_ptr<gyre::core::Communicator> result;
  };
  std::atomic<bool> initPending{false};
  std::mutex initMu;
  std::unique_ptr<PendingInit> pending;
  gyreResult_t initCode = gyreSuccess;  // a failed nonblocking init, once joined
  std::string initMessage;

  // Joins a pending init (waiting for it); afterwards impl is set, or
  // initCode/initMessage say why not.
  void finishInit();

  // gyreCommRegister's handles; the memory itself needs no preparation on
  // host transports.
  struct Registration {
    void* buff;
    size_t size;
  };
  std::mutex regMu;
  std::unordered_set<Registration*> registrations;

  ~gyreComm();
};

struct gyreRequest {
  std::shared_ptr<gyre::core::RequestState> state;
};

namespace gyre::api {

// Runs body, turning exceptions into a result and the thread's last error.
template <typename F>
gyreResult_t guarded(const char* fn, F&& body) {
  try {
    body();
    return gyreSuccess;
  } catch (const Error& e) {
    setLastError(fn, e.what());
    return e.code();
  } catch (const std::bad_alloc&) {
    setLastError(fn, "out of memory");
    return gyreSystemError;
  } catch (const std::exception& e) {
    try {
      setLastError(fn, (std::string("internal error: ") + e.what()).c_str());
    } catch (...) {
      setLastError(fn, "internal error");
    }
    return gyreInternalError;
  } catch (...) {
    setLastError(fn, "internal error");
    return gyreInternalError;
  }
}

inline core::Communicator& impl(gyreComm_t comm) {
  if (!comm) throwError(gyreInvalidArgument, "comm is NULL");
  if (comm->initPending.load(std::memory_order_acquire)) comm->finishInit();
  if (!comm->impl) {
    if (comm->initCode != gyreSuccess)
      throwError(gyreInvalidUsage,
                 "the communicator's nonblocking init failed: " + comm->initMessage);
    throwError(gyreInvalidArgument, "comm is NULL");
  }
  return *comm->impl;
}

// A caller may pass any int where an enum is expected. Reading such a value
// as the C++ enum type is undefined, so look at its bits instead.
template <typename E>
int enumBits(const E& e) {
  static_assert(sizeof(E) == sizeof(int));
  int v;
  std::memcpy(&v, &e, sizeof(v));
  return v;
}

void checkDataType(const gyreDataType_t& t);
// A built-in op, or a PreMulSum op of comm made for this data type.
void checkRedOp(const gyreRedOp_t& op, const core::Communicator& comm, const gyreDataType_t& t);
void checkRank(int r, int nranks, const char* what);  // "root", "peer"
// count * blocks elements of t, in bytes; throws naming `what` on overflow.
size_t bytesOf(size_t count, size_t blocks, gyreDataType_t t, const char* what);
void requireBuffer(const void* p, size_t bytes, const char* name);
// Buffers that overlap are an error unless b is exactly at a + okOffset
// (in place, as the operation defines it).
void checkOverlap(const void* a, size_t aBytes, const void* b, size_t bBytes, size_t okOffset, const char* rule);

// For entry points made of other public calls (decentralized SGD, the
// averager): a nested call's failure raised again, with its own code and
// sentence (the calling thread's last error).
inline void raiseIfFailed(gyreResult_t r) {
  if (r != gyreSuccess) throwError(r, lastError());
}

}  // namespace gyre::api
