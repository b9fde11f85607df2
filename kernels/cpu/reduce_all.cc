// runAll (reduce.h) on the host: a chain of run()s over cache-sized chunks,
// so that every input chunk is read once, the running result stays in L1,
// and each output chunk is written once, after the chunk's inputs are read
// (which makes an output that is one of the inputs safe).
#include <algorithm>
#include <cstring>

#include "kernels/cpu/reduce.h"

namespace gyre::kernels {

void runAll(const ReduceAllTask& t) {
  if (t.count == 0 || t.nin < 1) return;
  const size_t esz = dtypeSize(t.dtype);
  constexpr size_t kChunkBytes = 16 * 1024;
  alignas(64) unsigned char acc[kChunkBytes];
  const size_t chunk = kChunkBytes / esz;
  for (size_t off = 0; off < t.count; off += chunk) {
    const size_t n = std::min(chunk, t.count - off);
    auto at = [&](const void* p) { return static_cast<const unsigned char*>(p) + off * esz; };
    ReduceTask r;
    r.dtype = t.dtype;
    r.op = t.op;
    r.count = n;
    r.out0 = acc;
    if (t.nin == 1) {
      r.a = at(t.in[0]);
      r.divisor = t.divisor;
      run(r);
    }
    for (int k = 1; k < t.nin; ++k) {
      r.a = k == 1 ? at(t.in[0]) : acc;
      r.b = at(t.in[k]);
      r.divisor = k == t.nin - 1 ? t.divisor : 1;
      run(r);
    }
    for (int j = 0; j < t.nout; ++j) std::memcpy(static_cast<unsigned char*>(t.out[j]) + off * esz, acc, n * esz);
  }
}

}  // namespace gyre::kernels
