// GYRE_TRACE_FILE: every call of every communicator of the process as a
// Chrome trace (the Trace Event Format's JSON array, which chrome://tracing
// and Perfetto open), one file per process (docs/reliability.md, "Traces").
// A call is a complete event ("ph": "X") on its communicator's row, with its
// number, bytes, type, algorithm, transports and result; a communicator's
// row is named when it is made ("comm 2: rank 0 of 4").
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace gyre::core::trace {

// Whether GYRE_TRACE_FILE is set (read once): the calls' timing is skipped
// otherwise.
bool enabled();

// A communicator of `nranks` with this process's rank `rank` was made; its
// row's number (0 when tracing is off). The first one names the file's
// %r and the process's "pid" in the trace.
int addCommunicator(int rank, int nranks, const std::string& name);

struct Call {
  const char* name = "";
  uint64_t seq = 0;
  int64_t startNs = 0, endNs = 0;  // steady clock
  size_t bytes = 0;
  const char* dtype = "";
  const char* algorithm = "";  // "" where no algorithm is chosen (point to point)
  std::string transports;      // the transports to the peers it used: "shm", "shm+tcp"
  const char* result = "ok";   // or the result's name
};

// Appends one call to the process's trace (thread safe).
void record(int row, const Call& call);

// GYRE_TRACE_STEPS=1: a call's plan steps, nested under it. Steps of a
// plan's first lane go on the communicator's row; those of its other lanes,
// which overlap the first's, on a row per lane below it ("comm 1 lane 2").
struct Step {
  const char* name = "";  // "send", "recv-reduce-send", "copy" ...
  uint32_t index = 0;     // in the plan
  uint32_t lane = 0;
  int from = -1, to = -1;  // the peers it receives from and sends to (-1: none)
  size_t bytes = 0;
  int64_t startNs = 0, endNs = 0;
};
void recordSteps(int row, const std::vector<Step>& steps);

}  // namespace gyre::core::trace
