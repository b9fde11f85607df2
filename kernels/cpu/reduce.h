// Element-wise reduction kernels for host memory.
//
// Every collective's arithmetic goes through run(): the algorithms never loop
// over elements themselves. Implementations exist per instruction set
// (scalar, AVX2, AVX-512) and one is chosen once, at run time, from what the
// CPU supports (GYRE_CPU_ISA=scalar|avx2|avx512 forces one, for tests).
#pragma once

#include <cstddef>
#include <cstdint>

namespace gyre::kernels {

// Values match gyreDataType_t.
enum class DType : uint8_t {
  Int8 = 0,
  Uint8 = 1,
  Int32 = 2,
  Uint32 = 3,
  Int64 = 4,
  Uint64 = 5,
  Float16 = 6,
  Float32 = 7,
  Float64 = 8,
  Bfloat16 = 9,
};
inline constexpr int kNumDTypes = 10;

// The binary operations. Average is not one: the algorithms sum and divide
// once at the end (ReduceTask::divisor), so it is exact for exact sums.
enum class Op : uint8_t { Sum = 0, Prod = 1, Max = 2, Min = 3 };
inline constexpr int kNumOps = 4;

size_t dtypeSize(DType t);
const char* dtypeName(DType t);  // "int8", ..., "bfloat16"
const char* opName(Op op);       // "sum", "prod", "max", "min"

// out0[i] = a[i] op b[i]            (b != nullptr)
// out0[i] = a[i]                    (b == nullptr: a copy, or a divide)
// then, if divisor > 1, out0[i] /= divisor, and if out1, out1[i] = out0[i].
//
// Semantics, identical in every implementation (tests compare them bitwise):
// - integers wrap on overflow (two's complement); the divide truncates
//   toward zero;
// - float16/bfloat16 compute each operation in float32 and round to nearest
//   even once (float32 holds enough bits that this is the correctly rounded
//   result); float32/float64 use their own arithmetic;
// - the divide for float types: float16/bfloat16/float32 divide in float32,
//   float64 in float64, each correctly rounded;
// - max/min return NaN if either input is NaN (a's NaN if both), otherwise
//   a when a and b compare equal (so max(-0, +0) is -0 when a is -0);
// - out0/out1 may be the same pointer as a or b, never a partial overlap.
struct ReduceTask {
  DType dtype = DType::Float32;
  Op op = Op::Sum;
  const void* a = nullptr;
  const void* b = nullptr;
  void* out0 = nullptr;
  void* out1 = nullptr;
  size_t count = 0;
  uint32_t divisor = 1;
  // out0 is part of a large buffer that will not be read again soon: write
  // it with non-temporal stores (x86), skipping the read-for-ownership and
  // leaving the cache to data that is about to be used (out1, a peer's FIFO).
  bool streamOut0 = false;
};

void run(const ReduceTask& task);

// Many inputs into one result, written to many outputs: for every j,
//   out[j][i] = ((in[0][i] op in[1][i]) op in[2][i]) ... op in[nin-1][i]
// with the divisor applied in the last step, each step rounded to the type
// as run() rounds it: the bits of a chain of run()s, in the inputs' order.
// It is the direct AllReduce's one pass over every rank's slice
// (collectives/direct.cc, "direct_multi"). An output may be one of the
// inputs (the same pointer), never a partial overlap; nin >= 1.
inline constexpr int kMaxReduceAll = 16;
struct ReduceAllTask {
  DType dtype = DType::Float32;
  Op op = Op::Sum;
  const void* in[kMaxReduceAll] = {};
  void* out[kMaxReduceAll] = {};
  int nin = 0, nout = 0;
  size_t count = 0;
  uint32_t divisor = 1;
};
void runAll(const ReduceAllTask& task);

// Byte copies tuned for the collectives' buffers (large, cache-missing).
// streamDst: as ReduceTask::streamOut0, whatever the size.
void copy(void* dst, const void* src, size_t bytes, bool streamDst = false);

// A gather or scatter: many runs, each copied by copyRun, then copyRunsDone
// once. With streamDst the runs are written with non-temporal stores and
// fenced once at the end, not once per run (a strided view's runs are a few
// hundred bytes to a few KiB: a fence each would cost as much as the copy).
void copyRun(void* dst, const void* src, size_t bytes, bool streamDst);
void copyRunsDone(bool streamDst);

// True where a `rep movsb` copy crawls: the destination starts 1-63 bytes
// past the source, counted modulo 4 KiB. On AMD Zen (the dev host) both
// glibc's memcpy (which uses rep movsb from 2 KiB to several MiB) and the
// kernel's copies (process_vm_readv, socket reads) run 5-15x slower there:
// 2-3 against 30-45 GB/s in cache, 1.6 against 8.3 through the kernel.
// copy() steps around it; other callers of the kernel can too.
bool repMovsbCrawls(const void* dst, const void* src);
void copy2(void* dst0, void* dst1, const void* src, size_t bytes);

// An operation writing this many bytes of output in total should ask for
// streamOut0: its output cannot stay in cache anyway.
size_t streamingThresholdBytes();

// The instruction set in use: "scalar", "avx2" or "avx512".
const char* isaName();

}  // namespace gyre::kernels
