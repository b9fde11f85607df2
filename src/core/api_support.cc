#include "core/api_support.h"

namespace gyre::api {

void checkDataType(const gyreDataType_t& t) {
  const int v = enumBits(t);
  if (v < 0 || v >= gyreNumTypes)
    throwError(gyreInvalidArgument, "datatype " + std::to_string(v) + " is not a gyreDataType_t (valid: 0 to " +
                                        std::to_string(gyreNumTypes - 1) + ")");
}

void checkRedOp(const gyreRedOp_t& op, const core::Communicator& comm, const gyreDataType_t& t) {
  const int v = enumBits(op);
  if (v >= 0 && v < gyreNumOps) return;
  if (v < gyreNumOps || !comm.isRedOp(v))
    throwError(gyreInvalidArgument, "op " + std::to_string(v) + " is not a gyreRedOp_t (valid: 0 to " +
                                        std::to_string(gyreNumOps - 1) +
                                        ", or an op made by gyreRedOpCreatePreMulSum on this communicator)");
  if (comm.preMulSumType(v) != t)
    throwError(gyreInvalidArgument, "op " + std::to_string(v) + " was made for datatype " +
                                        std::to_string(comm.preMulSumType(v)) + ", not " +
                                        std::to_string(enumBits(t)));
}

void checkRank(int r, int nranks, const char* what) {
  if (r < 0 || r >= nranks)
    throwError(gyreInvalidArgument, std::string(what) + " " + std::to_string(r) + " is outside [0, " +
                                        std::to_string(nranks) + ")");
}

size_t bytesOf(size_t count, size_t blocks, gyreDataType_t t, const char* what) {
  const size_t elem = kernels::dtypeSize(static_cast<kernels::DType>(t));
  // Overflow-checked products, not divisions: this runs on every call.
  size_t elems = 0, bytes = 0;
  if (__builtin_mul_overflow(count, blocks, &elems) || __builtin_mul_overflow(elems, elem, &bytes) ||
      bytes > static_cast<size_t>(PTRDIFF_MAX))
    throwError(gyreInvalidArgument, std::string(what) + " " + std::to_string(count) + " of " +
                                        kernels::dtypeName(static_cast<kernels::DType>(t)) +
                                        (blocks > 1 ? " times " + std::to_string(blocks) + " ranks" : std::string()) +
                                        " overflows the address space");
  return bytes;
}

void requireBuffer(const void* p, size_t bytes, const char* name) {
  if (!p && bytes) throwError(gyreInvalidArgument, std::string(name) + " is NULL with " + std::to_string(bytes) + " bytes to move");
}

void checkOverlap(const void* a, size_t aBytes, const void* b, size_t bBytes, size_t okOffset, const char* rule) {
  if (!a || !b || !aBytes || !bBytes) return;
  const auto pa = reinterpret_cast<uintptr_t>(a), pb = reinterpret_cast<uintptr_t>(b);
  if (pa < pb + bBytes && pb < pa + aBytes && pb != pa + okOffset)
    throwError(gyreInvalidArgument, std::string("sendbuff and recvbuff overlap; in place means ") + rule);
}

}  // namespace gyre::api
