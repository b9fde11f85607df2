// ProcessGroupGyre: torch.distributed's backend "gyre" (docs/pytorch.md),
// a c10d::ProcessGroup over gyre's public C ABI.
//
// Every call is checked on the caller's thread (a bad argument raises at
// once, as gloo's do) and then queued to one worker thread per group, which
// runs the calls in order with gyre's blocking host calls and completes
// their Works. One thread keeps the order of calls the same on every rank
// whatever the caller does between them (async_op, DDP's hooks firing
// from autograd's threads), which gyre's matching requires; it is how
// ProcessGroupGloo runs too.
//
// Written against torch 1.13, where a backend is a ProcessGroup subclass.
// In torch 2.x it would derive from c10d::Backend instead (the same virtual
// calls, plus a few new ones such as allgather_into_tensor_coalesced), and
// register through Backend.register_backend with devices=["cpu"].
#pragma once

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "gyre/gyre.h"
#include "tensors.h"
#include "work.h"

namespace gyre_torch {

class ProcessGroupGyre : public c10d::ProcessGroup {
 public:
  // Collective over the group: rank 0 makes a unique id and posts it in the
  // store (torch's rendezvous: no second address is needed), every rank
  // reads it and joins. `timeout` becomes gyre's: a call that makes no
  // progress for that long fails on every rank instead of hanging.
  ProcessGroupGyre(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                   std::chrono::milliseconds timeout, const std::string& name);
  // Takes a communicator made elsewhere (what split() makes).
  ProcessGroupGyre(gyreComm_t comm, int rank, int size);
  ~ProcessGroupGyre() override;
  // The constructor, and the group made known to stopAll().
  static c10::intrusive_ptr<ProcessGroupGyre> create(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                                     std::chrono::milliseconds timeout, const std::string& name);
  // A group of all of parent's ranks, split from its communicator (no new
  // rendezvous): the split runs in its place among parent's queued calls.
  static c10::intrusive_ptr<ProcessGroupGyre> split(const c10::intrusive_ptr<ProcessGroupGyre>& parent,
                                                    std::chrono::milliseconds timeout, const std::string& name);
  // How the communicator was made: "rendezvous" (through the store) or "split".
  const std::string& madeBy() const { return madeBy_; }

  const std::string getBackendName() const override { return "gyre"; }
  gyreComm_t comm() const { return comm_; }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                     const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                                     std::vector<at::Tensor>& inputs,
                                                     const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs, const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& outputSplits,
                                               std::vector<int64_t>& inputSplits,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src, int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;

  // batch_isend_irecv's bracket: the sends and receives between them run
  // as one gyre group, where any order of them is safe.
  void startCoalescing() override;
  void endCoalescing(std::vector<c10::intrusive_ptr<c10d::Work>>& works) override;

  // Queues `run` (a gyre call, made on the worker thread) and returns its
  // Work; `after` runs once it succeeded (copies results back). What the
  // collectives above build on, and the compressed calls of the hooks.
  c10::intrusive_ptr<c10d::Work> submit(c10d::OpType type, const char* name, std::vector<at::Tensor> outputs,
                                        std::function<gyreResult_t()> run, std::function<void()> after = {});

  // Runs what every live group has queued and stops their worker threads
  // (later calls raise). gyre.torch calls it at interpreter exit (atexit),
  // while Python still runs: a future's Python callback run later, during
  // finalization, would end the worker thread under the C++ runtime's feet.
  static void stopAll();
  // Runs the queued calls and stops the worker thread, once (later calls
  // return at once, after the first has finished). Whether it was running.
  bool stop();

 private:
  // One queued call, or a coalesced batch of them run as one gyre group.
  struct Job {
    std::vector<c10::intrusive_ptr<GyreWork>> works;
    std::string name;
    std::vector<std::function<gyreResult_t()>> runs;
    std::vector<std::function<void()>> after;
    bool grouped = false;
  };
  void loop();
  gyreResult_t run(Job& job);
  // ReduceScatter of src (every rank's blocks, contiguous) into out, the
  // common end of reduce_scatter and _reduce_scatter_base.
  c10::intrusive_ptr<c10d::Work> submitReduceScatter(c10d::OpType type, const char* name, const at::Tensor& src,
                                                     const at::Tensor& out, gyreDataType_t dtype,
                                                     std::shared_ptr<CallOp> op);
  bool inBatch();  // between startCoalescing and endCoalescing
  std::string describe(const std::string& name, gyreResult_t r) const;

  static c10::intrusive_ptr<ProcessGroupGyre> remember(c10::intrusive_ptr<ProcessGroupGyre> group);

  gyreComm_t comm_ = nullptr;
  std::string madeBy_ = "rendezvous";
  std::mutex mutex_;
  std::mutex stopMutex_;  // (one stop() joins the worker; the others wait for it)
  std::condition_variable wake_;
  std::deque<Job> queue_;
  bool stopping_ = false;
  bool failed_ = false;  // (worker thread) a call failed: the communicator is gone
  bool coalescing_ = false;
  Job batch_;  // the calls between startCoalescing and endCoalescing
  uint64_t calls_ = 0;
  std::thread worker_;
};

}  // namespace gyre_torch
