// --bind core: rank i runs on the i-th CPU of gyrerun's own affinity mask
// (modulo its size), so that a job started under taskset or a cgroup cpuset
// stays inside it.
#pragma once

#include <sched.h>

#include <cstddef>
#include <vector>

namespace gyre::run {

class CpuBinding {
 public:
  // Reads the calling thread's mask; throws std::runtime_error on failure.
  CpuBinding();
  ~CpuBinding();
  CpuBinding(const CpuBinding&) = delete;
  CpuBinding& operator=(const CpuBinding&) = delete;

  // A mask holding only rank's CPU, valid until the next call.
  const cpu_set_t* maskFor(int rank);
  size_t maskBytes() const { return bytes_; }
  int cpuFor(int rank) const { return cpus_[static_cast<size_t>(rank) % cpus_.size()]; }

 private:
  std::vector<int> cpus_;  // ascending
  int maxCpus_ = 0;        // capacity of the masks
  size_t bytes_ = 0;
  cpu_set_t* mask_ = nullptr;
};

}  // namespace gyre::run
