// Calls on device memory and CUDA streams (docs/gpu.md): classifying a
// call's buffers against its stream, on the caller's thread.
#pragma once

#include "core/operation.h"
#include "gyre/gyre.h"

namespace gyre::core {

// Checks op's buffers against `stream` and marks op as a stream call when
// stream is set. Without a device backend (a host without a GPU) a NULL
// stream costs nothing and a stream is an error saying why.
//   - NULL stream: device memory is an error (it needs its stream);
//   - a stream: pageable host memory is an error, and so is memory of
//     another device than the stream's.
void bindStream(Operation& op, gyreStream_t stream);

}  // namespace gyre::core
