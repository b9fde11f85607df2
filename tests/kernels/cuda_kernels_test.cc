// The CUDA kernels against the CPU kernels, on a real GPU (label `gpu`;
// skipped, saying why, where the runtime sees no device). Every dtype, op,
// divide, count and alignment, in place and out of place, with a second
// output: the same bits as the CPU, except a NaN that a sum, product or
// divide makes, whose payload the GPU does not keep (it is still a NaN).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "kernels/common/codec.h"
#include "kernels/cpu/codec.h"
#include "kernels/cpu/half.h"
#include "kernels/cpu/reduce.h"
#include "kernels/cpu/scale.h"
#include "kernels/cuda/launch.h"
#include "tests/kernels/reference.h"

namespace gyre::kernels::testing {
namespace {

class CudaKernels : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (cuda::deviceCount(&why) == 0) GTEST_SKIP() << "no GPU: " << why;
  }
};

// Device memory holding bytes at an offset from a 256-byte boundary.
struct DeviceBuffer {
  DeviceBuffer(size_t bytes, size_t at) : offset(at) {
    EXPECT_EQ(cudaMalloc(&base, bytes + at + 16), cudaSuccess);
  }
  ~DeviceBuffer() { cudaFree(base); }
  void* get() const { return static_cast<unsigned char*>(base) + offset; }
  void* base = nullptr;
  size_t offset;
};

void toDevice(void* dst, const std::vector<unsigned char>& src) {
  ASSERT_EQ(cudaMemcpy(dst, src.data(), src.size(), cudaMemcpyHostToDevice), cudaSuccess);
}
std::vector<unsigned char> fromDevice(const void* src, size_t bytes) {
  std::vector<unsigned char> out(bytes);
  EXPECT_EQ(cudaMemcpy(out.data(), src, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
  return out;
}

bool isNanAt(DType dt, const std::vector<unsigned char>& v, size_t i) {
  switch (dt) {
    case DType::Float32: {
      float f;
      std::memcpy(&f, v.data() + 4 * i, 4);
      return std::isnan(f);
    }
    case DType::Float64: {
      double f;
      std::memcpy(&f, v.data() + 8 * i, 8);
      return std::isnan(f);
    }
    case DType::Float16:
    case DType::Bfloat16: {
      uint16_t h;
      std::memcpy(&h, v.data() + 2 * i, 2);
      return dt == DType::Float16 ? (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) : (h & 0x7f80u) == 0x7f80u && (h & 0x7fu);
    }
    default:
      return false;
  }
}

::testing::AssertionResult same(DType dt, bool computed, const std::vector<unsigned char>& want,
                                const std::vector<unsigned char>& got) {
  const size_t size = dtypeSize(dt);
  for (size_t i = 0; i < want.size() / size; ++i) {
    if (std::memcmp(want.data() + i * size, got.data() + i * size, size) == 0) continue;
    if (computed && isNanAt(dt, want, i) && isNanAt(dt, got, i)) continue;
    return ::testing::AssertionFailure() << "element " << i << " differs";
  }
  return ::testing::AssertionSuccess();
}

TEST_F(CudaKernels, ReduceMatchesTheCpuForEveryTypeOpDivideCountAndAlignment) {
  uint64_t seed = 1;
  for (DType dt : kAllDTypes) {
    const size_t es = dtypeSize(dt);
    for (size_t n : {size_t{1}, size_t{7}, size_t{1031}, size_t{(1u << 20) + 3}}) {
      const auto a = randomValues(dt, n, ++seed);
      const auto b = randomValues(dt, n, ++seed);
      for (size_t offset : {size_t{0}, es, size_t{16} - es}) {
        DeviceBuffer da(a.size(), offset), db(b.size(), offset), d0(a.size(), offset), d1(a.size(), 0);
        toDevice(da.get(), a);
        toDevice(db.get(), b);
        for (Op op : kAllOps) {
          for (bool hasB : {true, false}) {
            for (uint32_t divisor : {1u, 3u}) {
              if (!hasB && op != Op::Sum) continue;
              ReduceTask t;
              t.dtype = dt;
              t.op = op;
              t.a = a.data();
              t.b = hasB ? b.data() : nullptr;
              std::vector<unsigned char> want(a.size());
              t.out0 = want.data();
              t.count = n;
              t.divisor = divisor;
              run(t);
              t.a = da.get();
              t.b = hasB ? db.get() : nullptr;
              t.out0 = d0.get();
              t.out1 = d1.get();  // a second output at another alignment
              ASSERT_EQ(cuda::reduce(t, nullptr), 0);
              ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
              const bool computed = (hasB && (op == Op::Sum || op == Op::Prod)) || divisor > 1;
              EXPECT_TRUE(same(dt, computed, want, fromDevice(d0.get(), want.size())))
                  << dtypeName(dt) << " " << opName(op) << " n=" << n << " offset " << offset << " divisor "
                  << divisor << (hasB ? "" : " copy");
              EXPECT_TRUE(same(dt, computed, want, fromDevice(d1.get(), want.size()))) << "out1";
            }
          }
        }
      }
    }
  }
}

TEST_F(CudaKernels, InPlaceReduceAndMisalignedPointersAreExact) {
  const size_t n = 4099;
  const auto a = randomValues(DType::Float32, n, 5);
  const auto b = randomValues(DType::Float32, n, 6);
  std::vector<unsigned char> want(a.size());
  ReduceTask t;
  t.a = a.data();
  t.b = b.data();
  t.out0 = want.data();
  t.count = n;
  run(t);
  // a at offset 4, b at offset 8: they never share a 16-byte alignment.
  DeviceBuffer da(a.size(), 4), db(b.size(), 8);
  toDevice(da.get(), a);
  toDevice(db.get(), b);
  t.a = da.get();
  t.b = db.get();
  t.out0 = da.get();  // in place
  ASSERT_EQ(cuda::reduce(t, nullptr), 0);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_TRUE(same(DType::Float32, true, want, fromDevice(da.get(), want.size())));
}

// The direct_multi plans' kernel: every dtype and op, 2 to 5 inputs (and the
// most, kMaxReduceAll), at three alignments, the divisor, several outputs,
// one of them in place over an input; against the CPU's runAll.
TEST_F(CudaKernels, ReduceAllMatchesTheCpuForEveryTypeOpInputsAndAlignment) {
  uint64_t seed = 50;
  for (DType dt : kAllDTypes) {
    const size_t es = dtypeSize(dt);
    for (int nin : {2, 3, 5, kMaxReduceAll}) {
      for (size_t n : {size_t{7}, size_t{1031}, size_t{(1u << 18) + 5}}) {
        std::vector<std::vector<unsigned char>> in;
        for (int k = 0; k < nin; ++k) in.push_back(randomValues(dt, n, ++seed));
        for (size_t offset : {size_t{0}, es, size_t{16} - es}) {
          std::vector<std::unique_ptr<DeviceBuffer>> din;
          for (int k = 0; k < nin; ++k) din.push_back(std::make_unique<DeviceBuffer>(n * es, offset));
          DeviceBuffer out0(n * es, offset), out1(n * es, 0);  // out1 at another alignment
          for (Op op : kAllOps) {
            for (uint32_t divisor : {1u, 3u}) {
              ReduceAllTask t;
              t.dtype = dt;
              t.op = op;
              t.count = n;
              t.divisor = divisor;
              t.nin = nin;
              for (int k = 0; k < nin; ++k) t.in[k] = in[static_cast<size_t>(k)].data();
              std::vector<unsigned char> want(n * es);
              t.out[0] = want.data();
              t.nout = 1;
              runAll(t);
              for (int k = 0; k < nin; ++k) {
                toDevice(din[static_cast<size_t>(k)]->get(), in[static_cast<size_t>(k)]);
                t.in[k] = din[static_cast<size_t>(k)]->get();
              }
              t.nout = 3;
              t.out[0] = out0.get();
              t.out[1] = out1.get();
              t.out[2] = din.front()->get();  // in place over the first input
              ASSERT_EQ(cuda::reduceAll(t, nullptr), 0);
              ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
              const bool computed = op == Op::Sum || op == Op::Prod || divisor > 1;
              const std::string what = std::string(dtypeName(dt)) + " " + opName(op) + " nin=" + std::to_string(nin) +
                                       " n=" + std::to_string(n) + " offset " + std::to_string(offset) +
                                       " divisor " + std::to_string(divisor);
              EXPECT_TRUE(same(dt, computed, want, fromDevice(out0.get(), want.size()))) << what;
              EXPECT_TRUE(same(dt, computed, want, fromDevice(out1.get(), want.size()))) << what << " out1";
              EXPECT_TRUE(same(dt, computed, want, fromDevice(din.front()->get(), want.size())))
                  << what << " in place";
            }
          }
        }
      }
    }
  }
}

TEST_F(CudaKernels, ScaleMatchesTheCpu) {
  const size_t n = 10007;
  for (DType dt : kAllDTypes) {
    const auto x = randomValues(dt, n, 40 + static_cast<int>(dt));
    const auto s = randomValues(dt, 1, 90 + static_cast<int>(dt));
    std::vector<unsigned char> want(x.size());
    scale(dt, want.data(), x.data(), n, s.data());
    DeviceBuffer dx(x.size(), 0), dy(x.size(), dtypeSize(dt));
    toDevice(dx.get(), x);
    ASSERT_EQ(cuda::scale(dt, dy.get(), dx.get(), n, s.data(), nullptr), 0);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_TRUE(same(dt, true, want, fromDevice(dy.get(), want.size()))) << dtypeName(dt);
  }
}

TEST_F(CudaKernels, CastsRoundLikeTheCpuAndRefuseOtherTypes) {
  const size_t n = 65536;
  std::vector<unsigned char> all(n * 2);
  for (size_t i = 0; i < n; ++i) {  // every 16-bit encoding
    const uint16_t h = static_cast<uint16_t>(i);
    std::memcpy(all.data() + 2 * i, &h, 2);
  }
  for (DType narrow : {DType::Float16, DType::Bfloat16}) {
    // Widening every encoding, then narrowing the result back.
    std::vector<unsigned char> wide(n * 4);
    for (size_t i = 0; i < n; ++i) {
      uint16_t h;
      std::memcpy(&h, all.data() + 2 * i, 2);
      const float f = narrow == DType::Float16 ? halfToFloat(h) : bfloat16ToFloat(h);
      std::memcpy(wide.data() + 4 * i, &f, 4);
    }
    DeviceBuffer dn(all.size(), 0), dw(wide.size(), 0), back(all.size(), 0);
    toDevice(dn.get(), all);
    ASSERT_EQ(cuda::cast(narrow, DType::Float32, dw.get(), dn.get(), n, nullptr), 0);
    ASSERT_EQ(cuda::cast(DType::Float32, narrow, back.get(), dw.get(), n, nullptr), 0);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_TRUE(same(DType::Float32, false, wide, fromDevice(dw.get(), wide.size()))) << dtypeName(narrow);
    std::vector<unsigned char> roundTrip(all.size());
    for (size_t i = 0; i < n; ++i) {
      float f;
      std::memcpy(&f, wide.data() + 4 * i, 4);
      const uint16_t h = narrow == DType::Float16 ? floatToHalf(f) : floatToBfloat16(f);
      std::memcpy(roundTrip.data() + 2 * i, &h, 2);
    }
    EXPECT_TRUE(same(narrow, false, roundTrip, fromDevice(back.get(), all.size()))) << dtypeName(narrow);
  }
  DeviceBuffer d(64, 0);
  const int e = cuda::cast(DType::Int32, DType::Float16, d.get(), d.get(), 4, nullptr);
  EXPECT_NE(e, 0);
  EXPECT_NE(cuda::errorString(e).find("invalid argument"), std::string::npos) << cuda::errorString(e);
}

// float32 values' bits, every NaN as one: a NaN that arithmetic makes has
// the GPU's canonical payload there (launch.h), so residuals of NaN inputs
// are NaNs on both, with payloads that may differ.
std::vector<uint32_t> floatBitsNaNsAlike(const std::vector<unsigned char>& bytes) {
  std::vector<uint32_t> out(bytes.size() / 4);
  std::memcpy(out.data(), bytes.data(), out.size() * 4);
  for (uint32_t& w : out)
    if ((w & 0x7fffffffu) > 0x7f800000u) w = 0x7fc00000u;
  return out;
}

// The codecs: the GPU's messages, residuals and decodes are the CPU's, byte
// for byte (a NaN's payload aside), for every input type, counts around chunk and word boundaries,
// NaNs and flat chunks included, with and without error feedback.
TEST_F(CudaKernels, CodecsMakeTheCpusBytes) {
  for (bool oneBit : {false, true})
    for (DType t : {DType::Float32, DType::Float16, DType::Bfloat16})
      for (size_t n : {size_t{1}, size_t{33}, size_t{4095}, size_t{4096}, size_t{4097}, size_t{5 * 4096 + 123}}) {
        const size_t esz = t == DType::Float32 ? 4 : 2;
        std::vector<unsigned char> in(n * esz);
        for (size_t i = 0; i < n; ++i) {
          float f = std::sin(static_cast<float>(i) * 0.37f) * 50.0f + static_cast<float>(i % 7);
          if (i % 1000 == 999) f = std::nanf("");
          if (i >= 4096 && i < 4096 + 10) f = 2.0f;  // part of a flat stretch
          if (esz == 4) {
            std::memcpy(in.data() + 4 * i, &f, 4);
          } else {
            const uint16_t h = t == DType::Float16 ? floatToHalf(f) : floatToBfloat16(f);
            std::memcpy(in.data() + 2 * i, &h, 2);
          }
        }
        std::vector<float> residual(n);
        for (size_t i = 0; i < n; ++i) residual[i] = static_cast<float>(i % 5) * 0.01f;
        const size_t bytes = oneBit ? codec::signBytes(n) : codec::minMaxBytes(n);
        std::vector<unsigned char> cpuMsg(bytes);
        std::vector<float> cpuRes = residual, cpuOut(n, 1.0f);
        DeviceBuffer dIn(in.size(), 0), dMsg(bytes, 0), dRes(n * 4, 0), dOut(n * 4, 0);
        toDevice(dIn.get(), in);
        std::vector<unsigned char> resBytes(n * 4), ones(n * 4);
        std::memcpy(resBytes.data(), residual.data(), n * 4);
        std::vector<float> onesF(n, 1.0f);
        std::memcpy(ones.data(), onesF.data(), n * 4);
        toDevice(dRes.get(), resBytes);
        toDevice(dOut.get(), ones);
        auto* dr = static_cast<float*>(dRes.get());
        auto* dout = static_cast<float*>(dOut.get());
        if (oneBit) {
          packSigns(t, in.data(), n, cpuMsg.data(), cpuRes.data());
          unpackSigns(cpuMsg.data(), n, cpuOut.data(), true);
          ASSERT_EQ(cuda::packSigns(t, dIn.get(), n, dMsg.get(), dr, nullptr), 0);
          ASSERT_EQ(cuda::unpackSigns(dMsg.get(), n, dout, true, nullptr), 0);
        } else {
          quantizeMinMax(t, in.data(), n, cpuMsg.data(), cpuRes.data());
          dequantizeMinMax(cpuMsg.data(), n, cpuOut.data(), true);
          ASSERT_EQ(cuda::quantizeMinMax(t, dIn.get(), n, dMsg.get(), dr, nullptr), 0);
          ASSERT_EQ(cuda::dequantizeMinMax(dMsg.get(), n, dout, true, nullptr), 0);
        }
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        const std::string what = std::string(oneBit ? "1-bit" : "int8") + " " + dtypeName(t) + " n=" + std::to_string(n);
        EXPECT_EQ(fromDevice(dMsg.get(), bytes), cpuMsg) << what << ": the message";
        std::vector<unsigned char> cr(n * 4), co(n * 4);
        std::memcpy(cr.data(), cpuRes.data(), n * 4);
        std::memcpy(co.data(), cpuOut.data(), n * 4);
        EXPECT_EQ(floatBitsNaNsAlike(fromDevice(dRes.get(), n * 4)), floatBitsNaNsAlike(cr)) << what << ": the residual";
        EXPECT_EQ(floatBitsNaNsAlike(fromDevice(dOut.get(), n * 4)), floatBitsNaNsAlike(co))
            << what << ": the accumulated decode";
      }
  DeviceBuffer d(64, 0);
  EXPECT_NE(cuda::quantizeMinMax(DType::Float64, d.get(), 4, d.get(), nullptr, nullptr), 0);
}

}  // namespace
}  // namespace gyre::kernels::testing
