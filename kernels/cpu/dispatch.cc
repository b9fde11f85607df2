// Chooses the instruction set once and routes run() through its table.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "kernels/cpu/isa.h"

#if defined(GYRE_KERNELS_X86)
#include <cpuid.h>
#endif

namespace gyre::kernels {

size_t dtypeSize(DType t) {
  static constexpr size_t kSizes[kNumDTypes] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2};
  const auto i = static_cast<unsigned>(t);
  return i < kNumDTypes ? kSizes[i] : 0;
}

const char* dtypeName(DType t) {
  static constexpr const char* kNames[kNumDTypes] = {"int8",    "uint8",   "int32",   "uint32",
                                                     "int64",   "uint64",  "float16", "float32",
                                                     "float64", "bfloat16"};
  const auto i = static_cast<unsigned>(t);
  return i < kNumDTypes ? kNames[i] : "unknown";
}

const char* opName(Op op) {
  static constexpr const char* kNames[kNumOps] = {"sum", "prod", "max", "min"};
  const auto i = static_cast<unsigned>(op);
  return i < kNumOps ? kNames[i] : "unknown";
}

namespace detail {
namespace {

#if defined(GYRE_KERNELS_X86)
// __builtin_cpu_supports also checks that the OS saves the wide registers
// (XCR0), which a bare CPUID test would miss. F16C is read from CPUID because
// not every compiler accepts "f16c" there; it needs only the AVX state the
// avx2 check already covers.
bool hasF16c() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid(1, &a, &b, &c, &d) != 0 && (c & bit_F16C) != 0;
}
bool cpuCanRun(Isa isa) {
  __builtin_cpu_init();
  switch (isa) {
    case Isa::Scalar:
      return true;
    case Isa::Avx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && hasF16c();
    case Isa::Avx512:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("fma") && hasF16c();
  }
  return false;
}
#endif

const KernelTable& bestTable() {
  if (const KernelTable* t = tableFor(Isa::Avx512)) return *t;
  if (const KernelTable* t = tableFor(Isa::Avx2)) return *t;
  return scalarTable();
}

}  // namespace

const char* isaName(Isa isa) {
  switch (isa) {
    case Isa::Scalar:
      return "scalar";
    case Isa::Avx2:
      return "avx2";
    case Isa::Avx512:
      return "avx512";
  }
  return "unknown";
}

const KernelTable* tableFor(Isa isa) {
  if (isa == Isa::Scalar) return &scalarTable();
#if defined(GYRE_KERNELS_X86)
  if (!cpuCanRun(isa)) return nullptr;
  if (isa == Isa::Avx2) return &avx2Table();
  if (isa == Isa::Avx512) return &avx512Table();
#endif
  return nullptr;
}

const KernelTable& selectTable(const char* request) {
  const KernelTable& best = bestTable();
  if (request == nullptr || *request == '\0') return best;
  for (int i = 0; i < kNumIsas; ++i) {
    const auto isa = static_cast<Isa>(i);
    if (std::strcmp(request, isaName(isa)) != 0) continue;
    if (const KernelTable* t = tableFor(isa)) return *t;
    std::fprintf(stderr, "gyre: GYRE_CPU_ISA=%s is not supported on this CPU; using %s\n", request,
                 isaName(best.isa));
    return best;
  }
  std::fprintf(stderr, "gyre: GYRE_CPU_ISA=%s is not one of scalar|avx2|avx512; using %s\n",
               request, isaName(best.isa));
  return best;
}

const KernelTable& activeTable() {
  // A function-local static: initialized once, thread-safely, on first use.
  static const KernelTable& table = selectTable(std::getenv("GYRE_CPU_ISA"));
  return table;
}

namespace {

// Computes into an L1-resident block and streams each block to out0, so
// every ISA's loop gets non-temporal output without a variant of its own.
void runStreaming(const KernelTable& table, const ReduceTask& task) {
  alignas(64) unsigned char block[4096];
  const size_t esz = dtypeSize(task.dtype);
  const size_t per = sizeof(block) / esz;
  auto at = [esz](const void* p, size_t i) {
    return p ? static_cast<const unsigned char*>(p) + i * esz : nullptr;
  };
  for (size_t i = 0; i < task.count; i += per) {
    ReduceTask part = task;
    part.streamOut0 = false;
    part.count = std::min(per, task.count - i);
    part.a = at(task.a, i);
    part.b = at(task.b, i);
    part.out0 = block;
    part.out1 = task.out1 ? const_cast<unsigned char*>(at(task.out1, i)) : nullptr;
    runWith(table, part);
    streamCopyNoFence(const_cast<unsigned char*>(at(task.out0, i)), block, part.count * esz);
  }
  storeFence();  // streamed stores are weakly ordered; order them before what follows
}

}  // namespace

void runWith(const KernelTable& table, const ReduceTask& task) {
  if (task.count == 0) return;
  if (task.streamOut0 && task.out0 != nullptr) {
    const bool plainCopy = task.b == nullptr && task.divisor <= 1 && task.out1 == nullptr;
    if (plainCopy) return copy(task.out0, task.a, task.count * dtypeSize(task.dtype), true);
    return runStreaming(table, task);
  }
  const auto dt = static_cast<unsigned>(task.dtype);
  const auto op = static_cast<unsigned>(task.op);
  // The core validates tasks before they get here; an out-of-range value has
  // no sensible meaning, so do nothing rather than index out of the table.
  if (dt >= kNumDTypes || op >= kNumOps) return;
  const bool divide = task.divisor > 1;
  if (task.b == nullptr && !divide) {
    // A pure copy: bytes, whatever the dtype, to each output that is not a.
    const size_t bytes = task.count * dtypeSize(task.dtype);
    void* d0 = task.out0 != task.a ? task.out0 : nullptr;
    void* d1 =
        task.out1 != nullptr && task.out1 != task.a && task.out1 != task.out0 ? task.out1 : nullptr;
    if (d0 != nullptr && d1 != nullptr) {
      copy2With(table, d0, d1, task.a, bytes);
    } else if (d0 != nullptr || d1 != nullptr) {
      copy(d0 != nullptr ? d0 : d1, task.a, bytes);
    }
    return;
  }
  const int column = task.b != nullptr ? static_cast<int>(op) : kOpCopy;
  const int extra = divide || task.out1 != nullptr ? 1 : 0;
  table.reduce[dt][column][extra](task.a, task.b, task.out0, task.out1, task.count, task.divisor);
}

}  // namespace detail

void run(const ReduceTask& task) { detail::runWith(detail::activeTable(), task); }

const char* isaName() { return detail::isaName(detail::activeTable().isa); }

}  // namespace gyre::kernels
