// Bandwidth of the CPU kernels, per instruction set, next to plain memcpy.
//
// Sizes are the bytes of each buffer; the reported rate counts every byte
// read and written (a reduce moves 3x its size, a copy 2x, copy2 3x), so the
// numbers compare directly with memcpy's and with the machine's bandwidth.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/common/codec.h"
#include "kernels/cpu/codec_isa.h"
#include "kernels/cpu/half.h"
#include "kernels/cpu/isa.h"

namespace {

using gyre::kernels::DType;
using gyre::kernels::Op;
namespace detail = gyre::kernels::detail;

constexpr int64_t kSizes[] = {4 << 10, 256 << 10, 4 << 20, 64 << 20};

// Page-aligned, pre-faulted memory, so the first iteration pays no faults.
class Buffer {
 public:
  explicit Buffer(size_t bytes)
      : p_(static_cast<unsigned char*>(std::aligned_alloc(4096, round(bytes)))) {
    std::memset(p_, 0, round(bytes));
  }
  ~Buffer() { std::free(p_); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  unsigned char* get() const { return p_; }

 private:
  static size_t round(size_t bytes) { return (bytes + 4095) / 4096 * 4096; }
  unsigned char* p_;
};

// Ordinary values: NaNs, infinities or subnormals could take slow paths that
// real gradients do not.
void fill(DType dt, unsigned char* p, size_t count) {
  for (size_t i = 0; i < count; ++i) {
    const float v = 1.0f + static_cast<float>(i % 7) * 0.25f;
    switch (dt) {
      case DType::Float16: {
        const uint16_t h = gyre::kernels::floatToHalf(v);
        std::memcpy(p + 2 * i, &h, 2);
        break;
      }
      case DType::Bfloat16: {
        const uint16_t h = gyre::kernels::floatToBfloat16(v);
        std::memcpy(p + 2 * i, &h, 2);
        break;
      }
      case DType::Float32:
        std::memcpy(p + 4 * i, &v, 4);
        break;
      case DType::Float64: {
        const double d = v;
        std::memcpy(p + 8 * i, &d, 8);
        break;
      }
      default: {
        const int32_t x = static_cast<int32_t>(i % 1000);
        std::memcpy(p + 4 * i, &x, 4);
        break;
      }
    }
  }
}

void reduceBench(benchmark::State& state, const detail::KernelTable* table, DType dt, Op op) {
  const size_t bytes = static_cast<size_t>(state.range(0));
  const size_t count = bytes / gyre::kernels::dtypeSize(dt);
  Buffer a(bytes), b(bytes), out(bytes);
  fill(dt, a.get(), count);
  fill(dt, b.get(), count);
  const detail::ReduceFn fn = table->reduce[static_cast<int>(dt)][static_cast<int>(op)][0];
  for (auto _ : state) {
    fn(a.get(), b.get(), out.get(), nullptr, count, 1);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(3 * bytes));
}

void copy2Bench(benchmark::State& state, const detail::KernelTable* table) {
  const size_t bytes = static_cast<size_t>(state.range(0));
  Buffer src(bytes), d0(bytes), d1(bytes);
  std::memset(src.get(), 1, bytes);
  for (auto _ : state) {
    detail::copy2With(*table, d0.get(), d1.get(), src.get(), bytes);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(3 * bytes));
}

void copy2FnBench(benchmark::State& state, detail::Copy2Fn fn) {
  const size_t bytes = static_cast<size_t>(state.range(0));
  Buffer src(bytes), d0(bytes), d1(bytes);
  std::memset(src.get(), 1, bytes);
  for (auto _ : state) {
    fn(d0.get(), d1.get(), src.get(), bytes);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(3 * bytes));
}

// distance: where the destination starts past the source, modulo a page
// (1-63 is where rep movsb crawls; see kernels::repMovsbCrawls).
void copyBench(benchmark::State& state, void (*fn)(void*, const void*, size_t), size_t distance) {
  const size_t bytes = static_cast<size_t>(state.range(0));
  Buffer src(bytes), dst(bytes + distance);
  std::memset(src.get(), 1, bytes);
  for (auto _ : state) {
    fn(dst.get() + distance, src.get(), bytes);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(2 * bytes));
}

void plainMemcpy(void* dst, const void* src, size_t bytes) { std::memcpy(dst, src, bytes); }

// The codecs on float32 input of state.range(0) bytes, with error feedback
// (a residual read and written, as a compressed AllReduce keeps one), and
// their decoders accumulating into float32. Bytes counted: every byte read
// and written (input, residual both ways, message; the decoder's message
// and its output both ways).
// The 16-bit formats (fp16, bf16: encode rounds each element, decode
// widens it) count the same way.
enum class CodecStep { Quantize, Dequantize, Pack, Unpack, EncodeFp16, DecodeFp16, EncodeBf16, DecodeBf16 };
void codecBench(benchmark::State& state, const detail::CodecTable* t, CodecStep step) {
  namespace codec = gyre::kernels::codec;
  const size_t bytes = static_cast<size_t>(state.range(0)), n = bytes / 4;
  const bool minMax = step == CodecStep::Quantize || step == CodecStep::Dequantize;
  const bool signs = step == CodecStep::Pack || step == CodecStep::Unpack;
  const codec::Input wire =
      step == CodecStep::EncodeFp16 || step == CodecStep::DecodeFp16 ? codec::kF16 : codec::kBf16;
  const size_t msgBytes = minMax ? codec::minMaxBytes(n) : signs ? codec::signBytes(n) : n * 2;
  Buffer in(bytes), residual(bytes), msg(msgBytes), out(bytes);
  fill(DType::Float32, in.get(), n);
  auto* r = reinterpret_cast<float*>(residual.get());
  auto* o = reinterpret_cast<float*>(out.get());
  if (minMax) {
    t->quantizeMinMax(codec::kF32, in.get(), n, msg.get(), nullptr);
  } else if (signs) {
    t->packSigns(codec::kF32, in.get(), n, msg.get(), nullptr);
  } else {
    t->encodeFloats(wire, codec::kF32, in.get(), n, msg.get(), nullptr);
  }
  for (auto _ : state) {
    switch (step) {
      case CodecStep::Quantize: t->quantizeMinMax(codec::kF32, in.get(), n, msg.get(), r); break;
      case CodecStep::Dequantize: t->dequantizeMinMax(msg.get(), n, o, true); break;
      case CodecStep::Pack: t->packSigns(codec::kF32, in.get(), n, msg.get(), r); break;
      case CodecStep::Unpack: t->unpackSigns(msg.get(), n, o, true); break;
      case CodecStep::EncodeFp16:
      case CodecStep::EncodeBf16: t->encodeFloats(wire, codec::kF32, in.get(), n, msg.get(), r); break;
      case CodecStep::DecodeFp16:
      case CodecStep::DecodeBf16: t->widen(wire, msg.get(), n, o, true); break;
    }
    benchmark::ClobberMemory();
  }
  const bool encode = step == CodecStep::Quantize || step == CodecStep::Pack || step == CodecStep::EncodeFp16 ||
                      step == CodecStep::EncodeBf16;
  const size_t moved = encode ? bytes + 2 * bytes + msgBytes : msgBytes + 2 * bytes;
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(moved));
}

void withSizes(benchmark::internal::Benchmark* b) {
  for (int64_t size : kSizes) b->Arg(size);
}

}  // namespace

// gyre's copy with the size-based choice, and with streaming forced (what the
// collectives ask for when an operation's output is too large for cache).
void gyreCopy(void* d, const void* s, size_t n) { gyre::kernels::copy(d, s, n); }
void gyreCopyStreaming(void* d, const void* s, size_t n) { gyre::kernels::copy(d, s, n, true); }

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;

  struct Kernel {
    DType dt;
    Op op;
  };
  const Kernel kernels[] = {{DType::Float32, Op::Sum},  {DType::Float16, Op::Sum},
                            {DType::Bfloat16, Op::Sum}, {DType::Float64, Op::Sum},
                            {DType::Int32, Op::Sum},    {DType::Float32, Op::Max}};
  for (int i = 0; i < detail::kNumIsas; ++i) {
    const detail::KernelTable* table = detail::tableFor(static_cast<detail::Isa>(i));
    if (table == nullptr) continue;
    const std::string isa = detail::isaName(table->isa);
    for (const Kernel& k : kernels) {
      const std::string name = std::string("reduce_") + gyre::kernels::opName(k.op) + "_" +
                               gyre::kernels::dtypeName(k.dt) + "/" + isa;
      benchmark::RegisterBenchmark(name.c_str(), reduceBench, table, k.dt, k.op)->Apply(withSizes);
    }
    benchmark::RegisterBenchmark(("copy2/" + isa).c_str(), copy2Bench, table)->Apply(withSizes);
    // The ISA's loop alone, without copy2's switch to non-temporal stores on
    // large buffers: the comparison that justifies (or not) that switch.
    benchmark::RegisterBenchmark(("copy2_loop/" + isa).c_str(), copy2FnBench, table->copy2)
        ->Apply(withSizes);
  }
  for (int i = 0; i < detail::kNumIsas; ++i) {
    const detail::CodecTable* t = detail::codecsFor(static_cast<detail::Isa>(i));
    if (t == nullptr || (i > 0 && t == detail::codecsFor(static_cast<detail::Isa>(i - 1)))) continue;
    const std::string isa = detail::isaName(t->isa);
    const std::pair<const char*, CodecStep> steps[] = {{"codec_quantize_int8", CodecStep::Quantize},
                                                       {"codec_dequantize_int8", CodecStep::Dequantize},
                                                       {"codec_pack_signs", CodecStep::Pack},
                                                       {"codec_unpack_signs", CodecStep::Unpack},
                                                       {"codec_encode_fp16", CodecStep::EncodeFp16},
                                                       {"codec_decode_fp16", CodecStep::DecodeFp16},
                                                       {"codec_encode_bf16", CodecStep::EncodeBf16},
                                                       {"codec_decode_bf16", CodecStep::DecodeBf16}};
    for (const auto& [name, step] : steps)
      benchmark::RegisterBenchmark((std::string(name) + "/" + isa).c_str(), codecBench, t, step)->Apply(withSizes);
  }
  benchmark::RegisterBenchmark("copy", copyBench, &gyreCopy, size_t{0})->Apply(withSizes);
  benchmark::RegisterBenchmark("copy_streaming", copyBench, &gyreCopyStreaming, size_t{0})->Apply(withSizes);
  benchmark::RegisterBenchmark("memcpy", copyBench, &plainMemcpy, size_t{0})->Apply(withSizes);
  // The destination 16 bytes past the source: memcpy's rep movsb crawls there.
  benchmark::RegisterBenchmark("copy_distance16", copyBench, &gyreCopy, size_t{16})->Apply(withSizes);
  benchmark::RegisterBenchmark("memcpy_distance16", copyBench, &plainMemcpy, size_t{16})->Apply(withSizes);

  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
