// While a UCX transport closes its endpoints: UCX's own error line for a
// flush that failed because the peer had already left is taken off the
// output and counted instead.
//
// Without UCX's peer error handling (gyre's default where UCX may not use
// RDMA) UCX logs a failed endpoint flush at ERROR ("req ...: error during
// flush: Endpoint timeout"). At the end of a job whose ranks leave at
// different times, the last to close flush toward peers that are gone:
// 2-5 jobs in 100 over UCX's tcp printed it, though nothing was lost (a
// peer that left needed nothing more; a peer that still waits for our data
// is still there, and its flush succeeds). Only this thread's lines from
// UCX's flush error are taken, only inside the scope; the rest of UCX's
// output is untouched.
#pragma once

namespace gyre::transport {

class UcxTeardownLog {
 public:
  UcxTeardownLog();
  ~UcxTeardownLog();
  UcxTeardownLog(const UcxTeardownLog&) = delete;
  UcxTeardownLog& operator=(const UcxTeardownLog&) = delete;
  // Flush errors taken so far in this scope.
  int flushErrors() const;

 private:
  unsigned handlers_ = 0;  // UCX's count of log handlers once ours was pushed
};

}  // namespace gyre::transport
