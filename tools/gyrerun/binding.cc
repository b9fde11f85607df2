#include "binding.h"

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

namespace gyre::run {

CpuBinding::CpuBinding() {
  // The kernel's mask may be wider than cpu_set_t's 1024 CPUs: grow until
  // it fits (EINVAL means too small).
  for (maxCpus_ = 1024;; maxCpus_ *= 2) {
    bytes_ = CPU_ALLOC_SIZE(maxCpus_);
    mask_ = CPU_ALLOC(maxCpus_);
    if (!mask_) throw std::runtime_error("out of memory");
    if (sched_getaffinity(0, bytes_, mask_) == 0) break;
    int err = errno;
    CPU_FREE(mask_);
    mask_ = nullptr;
    if (err != EINVAL || maxCpus_ >= (1 << 20))
      throw std::runtime_error(std::string("sched_getaffinity: ") + std::strerror(err));
  }
  for (int c = 0; c < maxCpus_; ++c)
    if (CPU_ISSET_S(c, bytes_, mask_)) cpus_.push_back(c);
  if (cpus_.empty()) throw std::runtime_error("gyrerun's CPU affinity mask is empty");
}

CpuBinding::~CpuBinding() {
  if (mask_) CPU_FREE(mask_);
}

const cpu_set_t* CpuBinding::maskFor(int rank) {
  CPU_ZERO_S(bytes_, mask_);
  CPU_SET_S(cpuFor(rank), bytes_, mask_);
  return mask_;
}

}  // namespace gyre::run
