// Instruction-set selection, the public entry points, and the byte copies.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "tests/kernels/reference.h"

namespace gyre::kernels::testing {
namespace {

using detail::Isa;

const detail::KernelTable& best() {
  if (const auto* t = detail::tableFor(Isa::Avx512)) return *t;
  if (const auto* t = detail::tableFor(Isa::Avx2)) return *t;
  return detail::scalarTable();
}

TEST(Dispatch, ScalarIsAlwaysAvailable) {
  ASSERT_NE(detail::tableFor(Isa::Scalar), nullptr);
  EXPECT_EQ(detail::tableFor(Isa::Scalar)->isa, Isa::Scalar);
}

TEST(Dispatch, EveryCompiledTableIsComplete) {
  // Includes tables this CPU cannot run: they are inspected, never called.
  std::vector<const detail::KernelTable*> tables = {&detail::scalarTable()};
#if defined(__x86_64__)
  tables.push_back(&detail::avx2Table());
  tables.push_back(&detail::avx512Table());
#endif
  for (const detail::KernelTable* t : tables) {
    EXPECT_NE(t->copy2, nullptr);
    EXPECT_NE(t->copy, nullptr);
    for (const auto& row : t->reduce) {
      for (const auto& column : row) {
        EXPECT_NE(column[0], nullptr);
        EXPECT_NE(column[1], nullptr);
      }
    }
  }
}

TEST(Dispatch, RequestsPickOrFallBackWithOneWarning) {
  EXPECT_EQ(&detail::selectTable(nullptr), &best());
  EXPECT_EQ(&detail::selectTable(""), &best());

  ::testing::internal::CaptureStderr();
  EXPECT_EQ(detail::selectTable("scalar").isa, Isa::Scalar);
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");

  ::testing::internal::CaptureStderr();
  EXPECT_EQ(&detail::selectTable("sse9"), &best());
  const std::string unknown = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(unknown.find("GYRE_CPU_ISA=sse9"), std::string::npos) << unknown;
  EXPECT_EQ(std::count(unknown.begin(), unknown.end(), '\n'), 1) << unknown;

  for (Isa isa : {Isa::Avx2, Isa::Avx512}) {
    ::testing::internal::CaptureStderr();
    const detail::KernelTable& t = detail::selectTable(detail::isaName(isa));
    const std::string warning = ::testing::internal::GetCapturedStderr();
    if (detail::tableFor(isa) != nullptr) {
      EXPECT_EQ(t.isa, isa);
      EXPECT_EQ(warning, "");
    } else {
      EXPECT_EQ(&t, &best());
      EXPECT_NE(warning.find("not supported"), std::string::npos) << warning;
    }
  }
}

// The environment is read once per process, so these run in a fresh child.
TEST(DispatchDeathTest, EnvironmentForcesTheChoice) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        setenv("GYRE_CPU_ISA", "scalar", 1);
        std::exit(std::strcmp(isaName(), "scalar") == 0 ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
  EXPECT_EXIT(
      {
        setenv("GYRE_CPU_ISA", "bogus", 1);
        std::exit(std::strcmp(isaName(), detail::isaName(best().isa)) == 0 ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "GYRE_CPU_ISA=bogus");
}

TEST(PublicApi, NamesAndSizes) {
  EXPECT_EQ(dtypeSize(DType::Bfloat16), 2u);
  EXPECT_EQ(dtypeSize(DType::Uint64), 8u);
  EXPECT_STREQ(dtypeName(DType::Float16), "float16");
  EXPECT_STREQ(dtypeName(DType::Bfloat16), "bfloat16");
  EXPECT_STREQ(opName(Op::Prod), "prod");
  const std::string name = isaName();
  EXPECT_TRUE(name == "scalar" || name == "avx2" || name == "avx512") << name;
}

TEST(PublicApi, RunUsesTheActiveTable) {
  run(ReduceTask{});  // count 0 with null pointers: nothing to do
  std::vector<float> a = {1, 2, 3}, b = {4, 5, 6}, out(3), out1(3);
  ReduceTask task;
  task.a = a.data();
  task.b = b.data();
  task.out0 = out.data();
  task.out1 = out1.data();
  task.count = 3;
  task.divisor = 5;
  run(task);
  EXPECT_EQ(out, (std::vector<float>{1, 7.0f / 5, 9.0f / 5}));
  EXPECT_EQ(out1, out);
}

using CopyTest = IsaTest;

// memcmp must not see a null pointer, even for zero bytes.
bool sameBytes(const void* x, const void* y, size_t n) {
  return n == 0 || std::memcmp(x, y, n) == 0;
}

// Writes src into dst + at and checks that only those bytes changed.
::testing::AssertionResult landed(const std::vector<unsigned char>& dst, size_t at,
                                  const unsigned char* src, size_t bytes, unsigned char canary) {
  if (!sameBytes(dst.data() + at, src, bytes)) return ::testing::AssertionFailure() << "content";
  auto outside = [&](size_t from, size_t to) {
    for (size_t i = from; i < to; ++i) {
      if (dst[i] != canary) return false;
    }
    return true;
  };
  if (!outside(0, at) || !outside(at + bytes, dst.size())) {
    return ::testing::AssertionFailure() << "a byte outside the copy changed";
  }
  return ::testing::AssertionSuccess();
}

TEST_P(CopyTest, CopiesEveryByteAndNothingElse) {
  std::vector<size_t> sizes = {0, 1, 31, 32, 33, 127, 128, 129, 255, 4099, (1u << 20) + 5};
  // These take the non-temporal path of copy2With and copy, where the cache
  // is small enough for a quick test.
  const size_t big = detail::streamingFootprint() / 2 + 1;
  if (big <= (size_t{32} << 20)) {
    sizes.push_back(big);
    sizes.push_back(big + 77);
  }
  constexpr size_t kGuard = 64;
  for (size_t bytes : sizes) {
    for (size_t offset : {0, 1, 3}) {
      SCOPED_TRACE(::testing::Message() << bytes << " bytes, offset " << offset);
      std::vector<unsigned char> src(bytes + offset);
      for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<unsigned char>(i * 131 + 7);
      const unsigned char* from = src.data() + offset;
      // Destinations equally misaligned (the streaming case), then not.
      for (size_t at1 : {offset, size_t{0}}) {
        std::vector<unsigned char> d0(bytes + offset + kGuard, 0xa5);
        std::vector<unsigned char> d1(bytes + at1 + kGuard, 0x5a);
        detail::copy2With(table(), d0.data() + offset, d1.data() + at1, from, bytes);
        ASSERT_TRUE(landed(d0, offset, from, bytes, 0xa5));
        ASSERT_TRUE(landed(d1, at1, from, bytes, 0x5a));
      }
      std::vector<unsigned char> d0(bytes + offset + kGuard, 0xa5), d1(bytes + kGuard, 0x5a);
      table().copy2(d0.data() + offset, d1.data(), from, bytes);  // the ISA's own loop
      ASSERT_TRUE(landed(d0, offset, from, bytes, 0xa5));
      ASSERT_TRUE(landed(d1, 0, from, bytes, 0x5a));

      std::vector<unsigned char> d2(bytes + 2 * offset + kGuard, 0xa5);
      copy(d2.data() + 2 * offset, from, bytes);
      ASSERT_TRUE(landed(d2, 2 * offset, from, bytes, 0xa5));
    }
  }
}

// Where rep movsb crawls (the destination 1-63 bytes past the source,
// modulo 4 KiB), copy() takes the ISA's register loop: both must be exact at
// every distance around those, at sizes on either side of copy()'s 1 KiB
// switch and of the loops' register widths.
TEST_P(CopyTest, CopiesAtEveryDistanceWithinAPage) {
  constexpr size_t kGuard = 64;
  std::vector<size_t> distances;
  for (size_t d = 0; d <= 130; ++d) distances.push_back(d);
  for (size_t d = 4030; d < 4096; ++d) distances.push_back(d);
  for (size_t bytes : {1, 31, 32, 33, 63, 64, 65, 1023, 1024, 4099, 70001}) {
    std::vector<unsigned char> src(bytes + 4096);
    for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<unsigned char>(i * 37 + 11);
    for (size_t srcOffset : {0, 24}) {
      const unsigned char* from = src.data() + srcOffset;
      for (size_t d : distances) {
        SCOPED_TRACE(::testing::Message() << bytes << " bytes, source at " << srcOffset << ", distance " << d);
        // dst - src == d (mod 4096) wherever the vectors landed.
        std::vector<unsigned char> dst(bytes + 2 * 4096 + kGuard, 0xa5);
        const uintptr_t want = (reinterpret_cast<uintptr_t>(from) + d) & 4095;
        const size_t at = 4096 + ((want - reinterpret_cast<uintptr_t>(dst.data() + 4096)) & 4095);
        ASSERT_EQ(((reinterpret_cast<uintptr_t>(dst.data() + at) - reinterpret_cast<uintptr_t>(from)) & 4095), d);
        table().copy(dst.data() + at, from, bytes);
        ASSERT_TRUE(landed(dst, at, from, bytes, 0xa5)) << "the ISA's loop";
        std::fill(dst.begin(), dst.end(), 0xa5);
        copy(dst.data() + at, from, bytes);
        ASSERT_TRUE(landed(dst, at, from, bytes, 0xa5)) << "copy()";
      }
    }
  }
}

TEST(PublicApi, RepMovsbCrawlsOneToSixtyThreeBytesPastTheSourceModuloAPage) {
  alignas(4096) static unsigned char page[3 * 4096];
  const unsigned char* src = page + 4096 + 40;
  for (int d = -200; d <= 4200; ++d) {
    const size_t m = static_cast<size_t>((d % 4096 + 4096) % 4096);
    EXPECT_EQ(repMovsbCrawls(src + d, src), m >= 1 && m <= 63) << "distance " << d;
  }
}

// copyRun / copyRunsDone: a strided view's scatter, each run landing in
// place and nothing between the runs touched, streamed or not, at every
// alignment of the runs and lengths on both sides of a 64-byte block.
TEST(PublicApi, CopyRunsScatterEveryRunAndNothingBetween) {
  for (bool stream : {false, true})
    for (size_t run : {1, 15, 16, 63, 64, 65, 100, 512, 4099})
      for (size_t misalign : {0, 3, 8}) {
        SCOPED_TRACE(::testing::Message() << run << "-byte runs at +" << misalign << (stream ? ", streamed" : ""));
        const size_t runs = 7, stride = run + 29;
        std::vector<unsigned char> src(runs * run), dst(misalign + runs * stride + 64, 0xa5);
        for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<unsigned char>(i * 131 + 7);
        for (size_t r = 0; r < runs; ++r) copyRun(dst.data() + misalign + r * stride, src.data() + r * run, run, stream);
        copyRunsDone(stream);
        for (size_t i = 0; i < dst.size(); ++i) {
          const bool inside = i >= misalign && (i - misalign) % stride < run && (i - misalign) / stride < runs;
          const unsigned char want = inside ? src[(i - misalign) / stride * run + (i - misalign) % stride] : 0xa5;
          ASSERT_EQ(dst[i], want) << "byte " << i;
        }
      }
}

TEST(PublicApi, CopiesOntoTheSourceAreNoOps) {
  std::vector<unsigned char> src(300), other(300, 0);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<unsigned char>(i);
  const std::vector<unsigned char> original = src;
  copy(src.data(), src.data(), src.size());
  copy2(src.data(), other.data(), src.data(), src.size());
  EXPECT_EQ(src, original);
  EXPECT_EQ(other, original);
  copy2(nullptr, nullptr, nullptr, 0);
}

// The b == nullptr form without a divisor is a plain copy into each output
// that is not a itself.
TEST_P(CopyTest, CopyFormWritesOnlyOutputsThatAreNotA) {
  std::vector<int32_t> a(1001), out0(1001, -1), out1(1001, -2);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<int32_t>(i * 7);
  const std::vector<int32_t> original = a;
  ReduceTask task;
  task.dtype = DType::Int32;
  task.a = a.data();
  task.count = a.size();
  task.out0 = out0.data();
  task.out1 = out1.data();
  runTask(task);
  EXPECT_EQ(out0, original);
  EXPECT_EQ(out1, original);
  std::fill(out1.begin(), out1.end(), -2);
  task.out0 = a.data();
  runTask(task);
  EXPECT_EQ(a, original);
  EXPECT_EQ(out1, original);
}

INSTANTIATE_TEST_SUITE_P(Isas, CopyTest, ::testing::ValuesIn(kAllIsas), isaParamName);

}  // namespace
}  // namespace gyre::kernels::testing
