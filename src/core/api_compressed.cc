// The compressed collectives' entry points (gyre.h, docs/compression.md):
// stateless calls with a codec, and compressors that keep one tensor's
// error feedback across calls. Each checks what the plain call checks,
// then what compression adds, and hands the plain call's Operation, marked
// with its codec and residuals, to the communicator.
#include <string>
#include <vector>

#include "core/api_ops.h"
#include "core/api_support.h"
#include "kernels/cpu/codec.h"

struct gyreCompressor {
  gyreComm_t comm = nullptr;
  gyreCodec_t codec = gyreCodecNone;
  size_t count = 0;
  gyreDataType_t dtype = gyreFloat32;
  bool feedback = false;
  // The residuals, made (zero) at a kind of call's first use: AllReduce's
  // of what this rank encodes of its input (or host's sums) and of the
  // result, ReduceScatter's of its input (the tensor), AllGather's of its
  // input (this rank's share).
  std::vector<float> allReduceInput, allReduceResult, reduceScatterInput, allGatherInput;
};

namespace {

using gyre::throwError;
using gyre::api::guarded;
using gyre::api::impl;
using gyre::collectives::OpKind;
using gyre::collectives::Residual;
using gyre::core::Communicator;
using gyre::core::Operation;

const char* typeName(gyreDataType_t t) { return gyre::kernels::dtypeName(static_cast<gyre::kernels::DType>(t)); }

void checkCodec(gyreCodec_t codec) {
  const int v = gyre::api::enumBits(codec);
  if (v < 0 || v >= gyreNumCodecs)
    throwError(gyreInvalidArgument, "codec " + std::to_string(v) +
                                        " is not a gyreCodec_t (gyreCodecNone, Fp16, Bf16, Int8 or OneBit)");
}

// What compression adds to the plain call's checks: a type the codecs
// take, and a sum or an average (what float32 accumulation at the owner
// computes; the others do not survive an encoding).
void checkCompressible(gyreCodec_t codec, gyreDataType_t t, const gyreRedOp_t* op, const char* call) {
  if (codec == gyreCodecNone) return;
  const char* name = gyre::kernels::codecName(static_cast<gyre::kernels::Codec>(codec));
  if (!gyre::kernels::codecTakes(static_cast<gyre::kernels::DType>(t)))
    throwError(gyreInvalidArgument, std::string(call) + " with codec " + name + " takes float32, float16 or bfloat16, not " +
                                         typeName(t));
  if (op && *op != gyreSum && *op != gyreAvg)
    throwError(gyreInvalidArgument, std::string(call) + " with codec " + name + " takes gyreSum or gyreAvg, not op " +
                                         std::to_string(gyre::api::enumBits(*op)));
}

void mark(Operation& o, gyreCodec_t codec) { o.codec = static_cast<uint8_t>(codec); }

gyreCompressor& compressorOf(gyreCompressor_t p, gyreComm_t comm, gyreDataType_t t, size_t tensorCount,
                             const char* countName) {
  if (!p) throwError(gyreInvalidArgument, "compressor is NULL");
  if (p->comm != comm)
    throwError(gyreInvalidArgument, "the compressor was made for another communicator");
  if (t != p->dtype)
    throwError(gyreInvalidArgument, std::string("the compressor was made for ") + typeName(p->dtype) + ", not " +
                                        typeName(t));
  if (tensorCount != p->count)
    throwError(gyreInvalidArgument, std::string("the compressor was made for a tensor of ") +
                                        std::to_string(p->count) + " values, but " + countName + " makes one of " +
                                        std::to_string(tensorCount));
  return *p;
}

// A residual of n values, made zero at first use (or null without error
// feedback, or without a codec).
float* residual(const gyreCompressor& c, std::vector<float>& r, size_t n) {
  if (!c.feedback || c.codec == gyreCodecNone || n == 0) return nullptr;
  if (r.size() != n) r.assign(n, 0.0f);
  return r.data();
}

}  // namespace

extern "C" {

gyreResult_t gyreAllReduceCodec(const void* sendbuff, void* recvbuff, size_t count, gyreDataType_t datatype,
                                gyreRedOp_t op, gyreCodec_t codec, gyreComm_t comm, gyreStream_t stream) {
  return guarded("gyreAllReduceCodec", [&] {
    Communicator& c = impl(comm);
    checkCodec(codec);
    Operation o = gyre::api::allReduceOp(c, sendbuff, recvbuff, count, datatype, op);
    checkCompressible(codec, datatype, &op, "allreduce");
    mark(o, codec);
    gyre::api::dispatch(c, std::move(o), stream);
  });
}

gyreResult_t gyreReduceScatterCodec(const void* sendbuff, void* recvbuff, size_t recvcount, gyreDataType_t datatype,
                                    gyreRedOp_t op, gyreCodec_t codec, gyreComm_t comm, gyreStream_t stream) {
  return guarded("gyreReduceScatterCodec", [&] {
    Communicator& c = impl(comm);
    checkCodec(codec);
    Operation o = gyre::api::reduceScatterOp(c, sendbuff, recvbuff, recvcount, datatype, op);
    checkCompressible(codec, datatype, &op, "reducescatter");
    mark(o, codec);
    gyre::api::dispatch(c, std::move(o), stream);
  });
}

gyreResult_t gyreAllGatherCodec(const void* sendbuff, void* recvbuff, size_t sendcount, gyreDataType_t datatype,
                                gyreCodec_t codec, gyreComm_t comm, gyreStream_t stream) {
  return guarded("gyreAllGatherCodec", [&] {
    Communicator& c = impl(comm);
    checkCodec(codec);
    Operation o = gyre::api::allGatherOp(c, sendbuff, recvbuff, sendcount, datatype);
    checkCompressible(codec, datatype, nullptr, "allgather");
    mark(o, codec);
    gyre::api::dispatch(c, std::move(o), stream);
  });
}

gyreResult_t gyreCompressorCreate(gyreCompressor_t* compressor, gyreComm_t comm, gyreCodec_t codec, size_t count,
                                  gyreDataType_t datatype, int flags) {
  return guarded("gyreCompressorCreate", [&] {
    if (!compressor) throwError(gyreInvalidArgument, "compressor is NULL");
    impl(comm);  // a valid communicator
    checkCodec(codec);
    gyre::api::checkDataType(datatype);
    checkCompressible(codec, datatype, nullptr, "a compressor");
    if (flags & ~GYRE_COMPRESSOR_ERROR_FEEDBACK)
      throwError(gyreInvalidArgument, "flags " + std::to_string(flags) +
                                          " has bits other than GYRE_COMPRESSOR_ERROR_FEEDBACK");
    auto c = std::make_unique<gyreCompressor>();
    c->comm = comm;
    c->codec = codec;
    c->count = count;
    c->dtype = datatype;
    c->feedback = flags & GYRE_COMPRESSOR_ERROR_FEEDBACK;
    *compressor = c.release();
  });
}

gyreResult_t gyreCompressorReset(gyreCompressor_t compressor) {
  return guarded("gyreCompressorReset", [&] {
    if (!compressor) throwError(gyreInvalidArgument, "compressor is NULL");
    for (std::vector<float>* r : {&compressor->allReduceInput, &compressor->allReduceResult,
                                  &compressor->reduceScatterInput, &compressor->allGatherInput})
      std::fill(r->begin(), r->end(), 0.0f);
  });
}

gyreResult_t gyreCompressorDestroy(gyreCompressor_t compressor) {
  return guarded("gyreCompressorDestroy", [&] { delete compressor; });
}

gyreResult_t gyreCompressedAllReduce(const void* sendbuff, void* recvbuff, size_t count, gyreDataType_t datatype,
                                     gyreRedOp_t op, gyreCompressor_t compressor, gyreComm_t comm,
                                     gyreStream_t stream) {
  return guarded("gyreCompressedAllReduce", [&] {
    Communicator& c = impl(comm);
    gyreCompressor& z = compressorOf(compressor, comm, datatype, count, "count");
    Operation o = gyre::api::allReduceOp(c, sendbuff, recvbuff, count, datatype, op);
    checkCompressible(z.codec, datatype, &op, "allreduce");
    mark(o, z.codec);
    // Both indexed by the tensor's values: which of them this rank encodes
    // depends on the plan (flat, or hierarchical across hosts).
    o.residuals[static_cast<int>(Residual::Input)] = residual(z, z.allReduceInput, count);
    o.residuals[static_cast<int>(Residual::Result)] = residual(z, z.allReduceResult, count);
    gyre::api::dispatch(c, std::move(o), stream);
  });
}

gyreResult_t gyreCompressedReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                         gyreDataType_t datatype, gyreRedOp_t op, gyreCompressor_t compressor,
                                         gyreComm_t comm, gyreStream_t stream) {
  return guarded("gyreCompressedReduceScatter", [&] {
    Communicator& c = impl(comm);
    const size_t n = static_cast<size_t>(c.nranks());
    gyreCompressor& z = compressorOf(compressor, comm, datatype, recvcount * n, "recvcount x nranks");
    Operation o = gyre::api::reduceScatterOp(c, sendbuff, recvbuff, recvcount, datatype, op);
    checkCompressible(z.codec, datatype, &op, "reducescatter");
    mark(o, z.codec);
    o.residuals[static_cast<int>(Residual::Input)] = residual(z, z.reduceScatterInput, recvcount * n);
    gyre::api::dispatch(c, std::move(o), stream);
  });
}

gyreResult_t gyreCompressedAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, gyreDataType_t datatype,
                                     gyreCompressor_t compressor, gyreComm_t comm, gyreStream_t stream) {
  return guarded("gyreCompressedAllGather", [&] {
    Communicator& c = impl(comm);
    const size_t n = static_cast<size_t>(c.nranks());
    gyreCompressor& z = compressorOf(compressor, comm, datatype, sendcount * n, "sendcount x nranks");
    Operation o = gyre::api::allGatherOp(c, sendbuff, recvbuff, sendcount, datatype);
    checkCompressible(z.codec, datatype, nullptr, "allgather");
    mark(o, z.codec);
    o.residuals[static_cast<int>(Residual::Input)] = residual(z, z.allGatherInput, sendcount);
    gyre::api::dispatch(c, std::move(o), stream);
  });
}

}  // extern "C"
