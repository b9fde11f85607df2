// Byte copies for the collectives' buffers.
//
// While a copy's bytes (read plus written) fit in cache, memcpy (one
// destination) and the ISA's copy2 loop (two) are the fastest. Beyond that,
// ordinary stores first read every destination line from memory
// (read-for-ownership) only to evict it again; non-temporal stores skip that
// read. Measured with kernels_bench on the 2-core EPYC dev VM (32 MiB L3):
// the crossover was at 11-15 MiB of traffic (copy: 5-6 MiB, copy2: 4-5 MiB);
// past it streaming was 1.3-2x faster (copy2: 25 vs 15 GB/s at 8 MiB, 16 vs
// 10 at 64 MiB; copy: 34 vs 17 at 8 MiB, 14 vs 10 at 64 MiB). We stream past
// 16 MiB of traffic: half that L3, leaving the rest to the other cores.
#include <algorithm>
#include <cstdint>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>  // x86-64 baseline: no dispatch needed
#endif

#include "kernels/cpu/isa.h"

namespace gyre::kernels {
namespace detail {

#if defined(__SSE2__)
// A constant rather than the L3 size from sysconf: on the dev VM that
// reports the whole socket's 256 MiB where a core sees 32 MiB (which is also
// why glibc's memcpy never streams there), and the measured crossover was
// near half of the 32 MiB.
size_t streamingFootprint() { return size_t{16} << 20; }

namespace {

// dst0 (and dst1) must be 16-byte aligned.
template <bool kTwo>
void streamAligned(unsigned char* d0, unsigned char* d1, const unsigned char* s, size_t bytes) {
  size_t i = 0;
  for (; i + 64 <= bytes; i += 64) {
    __m128i v[4];
    for (int k = 0; k < 4; ++k)
      v[k] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 16 * k));
    for (int k = 0; k < 4; ++k) _mm_stream_si128(reinterpret_cast<__m128i*>(d0 + i + 16 * k), v[k]);
    if constexpr (kTwo) {
      for (int k = 0; k < 4; ++k)
        _mm_stream_si128(reinterpret_cast<__m128i*>(d1 + i + 16 * k), v[k]);
    }
  }
  // Streaming stores are weakly ordered: without the fence, a later store
  // (say, the flag that tells a peer the data is ready) could become visible
  // before the data.
  _mm_sfence();
  if (i < bytes) {
    std::memcpy(d0 + i, s + i, bytes - i);
    if constexpr (kTwo) std::memcpy(d1 + i, s + i, bytes - i);
  }
}

// Copies the bytes before dst0's first 16-byte boundary normally, then
// streams. With dst1, both destinations must share that alignment.
template <bool kTwo>
void stream(void* dst0, void* dst1, const void* src, size_t bytes) {
  auto* d0 = static_cast<unsigned char*>(dst0);
  auto* d1 = static_cast<unsigned char*>(dst1);
  const auto* s = static_cast<const unsigned char*>(src);
  const size_t head = (16 - (reinterpret_cast<uintptr_t>(d0) & 15)) & 15;
  std::memcpy(d0, s, head);
  if constexpr (kTwo) std::memcpy(d1, s, head);
  streamAligned<kTwo>(d0 + head, kTwo ? d1 + head : nullptr, s + head, bytes - head);
}

}  // namespace

void streamCopyNoFence(void* dst, const void* src, size_t bytes) {
  auto* d = static_cast<unsigned char*>(dst);
  const auto* s = static_cast<const unsigned char*>(src);
  const size_t head = std::min(bytes, (16 - (reinterpret_cast<uintptr_t>(d) & 15)) & 15);
  std::memcpy(d, s, head);
  size_t i = head;
  for (; i + 64 <= bytes; i += 64) {
    __m128i v[4];
    for (int k = 0; k < 4; ++k)
      v[k] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 16 * k));
    for (int k = 0; k < 4; ++k) _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 16 * k), v[k]);
  }
  if (i < bytes) std::memcpy(d + i, s + i, bytes - i);
}

void storeFence() { _mm_sfence(); }

void copy2With(const KernelTable& table, void* dst0, void* dst1, const void* src, size_t bytes) {
  const bool sameAlignment =
      ((reinterpret_cast<uintptr_t>(dst0) ^ reinterpret_cast<uintptr_t>(dst1)) & 15) == 0;
  if (3 * bytes > streamingFootprint() && sameAlignment) {
    stream<true>(dst0, dst1, src, bytes);
  } else {
    table.copy2(dst0, dst1, src, bytes);
  }
}

#else  // not x86: the plain loops only

size_t streamingFootprint() { return SIZE_MAX; }
void streamCopyNoFence(void* dst, const void* src, size_t bytes) { std::memcpy(dst, src, bytes); }
void storeFence() {}

void copy2With(const KernelTable& table, void* dst0, void* dst1, const void* src, size_t bytes) {
  table.copy2(dst0, dst1, src, bytes);
}

#endif

}  // namespace detail

bool repMovsbCrawls(const void* dst, const void* src) {
  const uintptr_t distance = (reinterpret_cast<uintptr_t>(dst) - reinterpret_cast<uintptr_t>(src)) & 4095;
  return distance >= 1 && distance < 64;
}

void copy(void* dst, const void* src, size_t bytes, bool streamDst) {
  if (dst == src || bytes == 0) return;  // memcpy onto itself is undefined
#if defined(__SSE2__)
  if (streamDst || 2 * bytes > detail::streamingFootprint())
    return detail::stream<false>(dst, nullptr, src, bytes);
#endif
  // Below 1 KiB memcpy never uses rep movsb. Above it, at a distance where
  // rep movsb crawls, the ISA's register loop (as fast as memcpy elsewhere).
  // The distance is chance: a FIFO slot's place against a piece's offset in
  // the user's buffer. One slot in a cycle of eight landing there made a
  // skewed 2-rank AllToAllv of 512 KiB take 55-90 us instead of 35.
  if (bytes >= 1024 && repMovsbCrawls(dst, src)) return detail::activeTable().copy(dst, src, bytes);
  std::memcpy(dst, src, bytes);
}

void copyRun(void* dst, const void* src, size_t bytes, bool streamDst) {
  if (streamDst) return detail::streamCopyNoFence(dst, src, bytes);
  copy(dst, src, bytes);
}

void copyRunsDone(bool streamDst) {
  if (streamDst) detail::storeFence();
}

size_t streamingThresholdBytes() { return detail::streamingFootprint() / 2; }

void copy2(void* dst0, void* dst1, const void* src, size_t bytes) {
  if (bytes == 0) return;
  // A destination that is the source needs no write (and must not get one
  // through memcpy); the other still gets its copy.
  if (dst0 == src || dst1 == src || dst0 == dst1) {
    copy(dst0, src, bytes);
    copy(dst1, src, bytes);
    return;
  }
  detail::copy2With(detail::activeTable(), dst0, dst1, src, bytes);
}

}  // namespace gyre::kernels
