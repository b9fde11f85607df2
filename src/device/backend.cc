#include "device/backend.h"

#include <cstdlib>
#include <cstring>
#include <memory>
#include <atomic>

#include "base/log.h"
#include "device/emulated.h"

namespace gyre::device {

#ifdef GYRE_HAVE_CUDA
// cuda_backend.cc: CUDA's backend where the runtime sees a device, else
// null with why filled.
std::unique_ptr<Backend> makeCudaBackend(std::string* why);
#endif

const char* kindName(MemoryKind k) {
  switch (k) {
    case MemoryKind::Host: return "host memory";
    case MemoryKind::PinnedHost: return "pinned host memory";
    case MemoryKind::Device: return "device memory";
    case MemoryKind::Managed: return "managed memory";
  }
  return "memory";
}

namespace {

std::atomic<Backend*> forTesting{nullptr};

struct Default {
  std::unique_ptr<Backend> backend;
  std::string why;
  Default() {
    const char* env = std::getenv("GYRE_DEVICE_BACKEND");
    if (env && std::strcmp(env, "emulated") == 0) {
      backend = std::make_unique<EmulatedBackend>();
      GYRE_INFO("device: the host-emulated backend (GYRE_DEVICE_BACKEND=emulated), %d devices",
                backend->deviceCount());
      return;
    }
#ifdef GYRE_HAVE_CUDA
    backend = makeCudaBackend(&why);
    if (backend) {
      GYRE_INFO("device: CUDA, %d device(s)", backend->deviceCount());
    } else {
      GYRE_INFO("device: none usable (%s); host memory only", why.c_str());
    }
#else
    why = "this gyre was built without CUDA";
#endif
  }
};

}  // namespace

Backend* backend(std::string* why) {
  if (Backend* b = forTesting.load(std::memory_order_acquire)) return b;
  static Default d;  // decided once, on first use
  if (!d.backend && why) *why = d.why;
  return d.backend.get();
}

void setBackendForTesting(Backend* b) {
  forTesting.store(b, std::memory_order_release);
}

}  // namespace gyre::device
