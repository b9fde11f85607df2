#include "compression.h"

#include <c10/util/Exception.h>

#include "tensors.h"

namespace gyre_torch {

namespace {

void checkCompressible(const at::Tensor& t, const char* call) {
  checkDevice(t, call);
  TORCH_CHECK(t.is_contiguous(), "gyre ", call, ": the tensor must be contiguous (a DDP bucket is)");
  const auto s = t.scalar_type();
  TORCH_CHECK(s == at::kFloat || s == at::kHalf || s == at::kBFloat16, "gyre ", call, ": codecs apply to float32, ",
              "float16 and bfloat16 tensors, not ", s);
}

}  // namespace

c10::intrusive_ptr<c10d::Work> allreduceCodec(ProcessGroupGyre& pg, const at::Tensor& t, gyreCodec_t codec,
                                              bool average) {
  checkCompressible(t, "allreduce_codec");
  const gyreDataType_t type = dataTypeOf(t, "allreduce_codec");
  const gyreRedOp_t op = average ? gyreAvg : gyreSum;
  gyreComm_t comm = pg.comm();
  return pg.submit(c10d::OpType::ALLREDUCE, "allreduce_codec", {t}, [t, type, op, codec, comm] {
    return gyreAllReduceCodec(t.data_ptr(), t.data_ptr(), static_cast<size_t>(t.numel()), type, op, codec, comm,
                              nullptr);
  });
}

Compressor::Compressor(c10::intrusive_ptr<ProcessGroupGyre> pg, gyreCodec_t codec, int64_t count,
                       at::ScalarType dtype, bool errorFeedback)
    : pg_(std::move(pg)), count_(count), dtype_(dtype) {
  TORCH_CHECK(count >= 0, "gyre compressor: count ", count, " is negative");
  const gyreDataType_t type = dataTypeOf(at::empty({0}, at::TensorOptions().dtype(dtype)), "compressor");
  const gyreResult_t r = gyreCompressorCreate(&handle_, pg_->comm(), codec, static_cast<size_t>(count), type,
                                              errorFeedback ? GYRE_COMPRESSOR_ERROR_FEEDBACK : 0);
  TORCH_CHECK(r == gyreSuccess, "gyre compressor: ", gyreGetErrorString(r), ": ", gyreGetLastError(pg_->comm()));
}

Compressor::~Compressor() {
  gyreCompressor_t h = handle_;
  try {
    pg_->submit(c10d::OpType::UNKNOWN, "compressor destroy", {}, [h] { return gyreCompressorDestroy(h); });
  } catch (const std::exception&) {
    // The group has stopped (interpreter exit): once its worker has run
    // the calls that used this compressor, nothing else will.
    pg_->stop();
    gyreCompressorDestroy(h);
  }
}

c10::intrusive_ptr<c10d::Work> Compressor::allreduce(const at::Tensor& t, bool average) {
  checkCompressible(t, "compressed allreduce");
  TORCH_CHECK(t.numel() == count_ && t.scalar_type() == dtype_, "gyre compressed allreduce: the compressor is for ",
              count_, " values of ", dtype_, ", not ", t.numel(), " of ", t.scalar_type());
  const gyreDataType_t type = dataTypeOf(t, "compressed allreduce");
  const gyreRedOp_t op = average ? gyreAvg : gyreSum;
  gyreComm_t comm = pg_->comm();
  gyreCompressor_t h = handle_;
  return pg_->submit(c10d::OpType::ALLREDUCE, "compressed allreduce", {t}, [t, type, op, h, comm] {
    return gyreCompressedAllReduce(t.data_ptr(), t.data_ptr(), static_cast<size_t>(t.numel()), type, op, h, comm,
                                   nullptr);
  });
}

}  // namespace gyre_torch
