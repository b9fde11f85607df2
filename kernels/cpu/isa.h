// Internal view of the reduction kernels: one table of function pointers per
// instruction set, and the dispatch that picks one. Tests and benchmarks use
// it to run every implementation the CPU supports, whatever run() chose.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/reduce.h"

namespace gyre::kernels::detail {

enum class Isa : uint8_t { Scalar = 0, Avx2 = 1, Avx512 = 2 };
inline constexpr int kNumIsas = 3;

const char* isaName(Isa isa);  // "scalar", "avx2", "avx512"

// One element-wise loop: out0 = a op b (or a, for the copy-and-divide column),
// then the divide and the second output when the task asks for them.
using ReduceFn = void (*)(const void* a, const void* b, void* out0, void* out1, size_t count,
                          uint32_t divisor);
using Copy2Fn = void (*)(void* dst0, void* dst1, const void* src, size_t bytes);
// A copy by vector loads and aligned stores: what copy() uses where memcpy's
// `rep movsb` crawls (repMovsbCrawls in reduce.h).
using CopyFn = void (*)(void* dst, const void* src, size_t bytes);

// The column after the four ops is the b == nullptr form with a divisor.
inline constexpr int kOpCopy = kNumOps;

struct KernelTable {
  Isa isa;
  // [dtype][op or kOpCopy][extra]: extra = 0 is the hot loop (no divisor, no
  // out1); extra = 1 handles both, so the common case carries no checks.
  ReduceFn reduce[kNumDTypes][kNumOps + 1][2];
  Copy2Fn copy2;
  CopyFn copy;
};

// The table for one instruction set, or nullptr when it is not compiled in or
// this CPU (and OS) cannot run it. Scalar is always available.
const KernelTable* tableFor(Isa isa);

// The table run() would use for a GYRE_CPU_ISA value (nullptr or "" means
// "best available"). An unknown or unsupported request falls back to the best
// available and prints one warning line on stderr.
const KernelTable& selectTable(const char* request);

// Chosen on first use from GYRE_CPU_ISA, then fixed for the process.
const KernelTable& activeTable();

// run() against a given table.
void runWith(const KernelTable& table, const ReduceTask& task);

// copy2() against a given table: the table's loop, or non-temporal stores
// (x86) once the bytes read plus written exceed streamingFootprint(), where
// copy() streams too.
void copy2With(const KernelTable& table, void* dst0, void* dst1, const void* src, size_t bytes);
size_t streamingFootprint();
// Non-temporal copy without the closing fence (the caller fences once after
// a series); plain memcpy where the CPU has no streaming stores.
void streamCopyNoFence(void* dst, const void* src, size_t bytes);
void storeFence();

// Per-ISA tables, defined by reduce_<isa>.cc. Use tableFor(), which checks
// that the CPU can run them.
const KernelTable& scalarTable();
const KernelTable& avx2Table();
const KernelTable& avx512Table();

}  // namespace gyre::kernels::detail
