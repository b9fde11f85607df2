// The collectives' argument checks and dispatch (api_collectives.cc), for
// the entry points elsewhere that make the same calls in another form (the
// compressed ones, api_compressed.cc).
#pragma once

#include "core/communicator.h"
#include "core/operation.h"
#include "gyre/gyre.h"

namespace gyre::api {

// Runs the call now, adds it to the caller's open group, or enqueues it on
// the stream.
void dispatch(core::Communicator& c, core::Operation&& op, gyreStream_t stream);
// The same for a nonblocking call: runs in the background, *request set.
void dispatchNonblocking(core::Communicator& c, core::Operation&& op, gyreRequest_t* request);
// Each checks its arguments as the plain call does and captures the call.
core::Operation allReduceOp(core::Communicator& c, const void* s, void* r, size_t count, gyreDataType_t t,
                            gyreRedOp_t op);
core::Operation allGatherOp(core::Communicator& c, const void* s, void* r, size_t count, gyreDataType_t t);
core::Operation reduceScatterOp(core::Communicator& c, const void* s, void* r, size_t count, gyreDataType_t t,
                                gyreRedOp_t op);

}  // namespace gyre::api
