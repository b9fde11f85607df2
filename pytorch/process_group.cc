#include "process_group.h"

#include <Python.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <stdexcept>

#include "tensors.h"

namespace gyre_torch {

using c10d::OpType;
using WorkPtr = c10::intrusive_ptr<c10d::Work>;

namespace {

// Results copied back into a caller's tensor that was not contiguous.
std::function<void()> copyBack(const Buffer& b, const at::Tensor& into) {
  if (!b.copyBack) return {};
  return [data = b.data, into]() mutable { into.copy_(data); };
}

// The tensors of a list as one contiguous run, one after another, without
// gaps: then gyre can read or write them in place, with no flat copy.
bool consecutive(const std::vector<at::Tensor>& list) {
  if (list.empty()) return false;
  const auto* at = static_cast<const char*>(list[0].data_ptr());
  for (const auto& t : list) {
    if (!t.is_contiguous() || static_cast<const char*>(t.data_ptr()) != at) return false;
    at += t.numel() * t.element_size();
  }
  return true;
}

size_t count(const at::Tensor& t) { return static_cast<size_t>(t.numel()); }

// torch's timeout as gyre's timeoutMs (0, never, for none).
int timeoutMsOf(std::chrono::milliseconds timeout) {
  const auto ms = timeout.count();
  return ms <= 0 ? 0 : static_cast<int>(std::min<int64_t>(ms, INT_MAX));
}

// The live groups, for stopAll().
std::mutex liveMutex;
std::vector<c10::weak_intrusive_ptr<ProcessGroupGyre>> live;

}  // namespace

ProcessGroupGyre::ProcessGroupGyre(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                   std::chrono::milliseconds timeout, const std::string& name)
    : c10d::ProcessGroup(rank, size) {
  // Each group that joins through this store takes the next generation's
  // key, so a group made again on the same store (after
  // destroy_process_group) never reads an old id.
  const int64_t joined = store->add("gyre/joined", 1);
  const std::string key = "gyre/unique_id/" + std::to_string((joined - 1) / size);
  gyreUniqueId id;
  if (rank == 0) {
    const gyreResult_t r = gyreGetUniqueId(&id);
    TORCH_CHECK(r == gyreSuccess, "gyre: making the group's unique id failed: ", gyreGetErrorString(r), ": ",
                gyreGetLastError(nullptr));
    store->set(key, std::vector<uint8_t>(id.internal, id.internal + sizeof(id.internal)));
  } else {
    const std::vector<uint8_t> bytes = store->get(key);
    TORCH_CHECK(bytes.size() == sizeof(id.internal), "gyre: the store's unique id has ", bytes.size(),
                " bytes, not ", sizeof(id.internal));
    std::memcpy(id.internal, bytes.data(), bytes.size());
  }
  gyreConfig_t config = GYRE_CONFIG_INITIALIZER;
  config.timeoutMs = timeoutMsOf(timeout);
  config.commName = name.c_str();
  const gyreResult_t r = gyreCommInitRankConfig(&comm_, size, id, rank, &config);
  TORCH_CHECK(r == gyreSuccess, "gyre: rank ", rank, " of ", size, " could not join group ", name, ": ",
              gyreGetErrorString(r), ": ", gyreGetLastError(nullptr));
  worker_ = std::thread([this] { loop(); });
}

ProcessGroupGyre::ProcessGroupGyre(gyreComm_t comm, int rank, int size)
    : c10d::ProcessGroup(rank, size), comm_(comm), madeBy_("split") {
  worker_ = std::thread([this] { loop(); });
}

c10::intrusive_ptr<ProcessGroupGyre> ProcessGroupGyre::remember(c10::intrusive_ptr<ProcessGroupGyre> group) {
  std::lock_guard<std::mutex> lock(liveMutex);
  std::erase_if(live, [](const auto& w) { return w.expired(); });
  live.emplace_back(group);
  return group;
}

c10::intrusive_ptr<ProcessGroupGyre> ProcessGroupGyre::create(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                                              int size, std::chrono::milliseconds timeout,
                                                              const std::string& name) {
  return remember(c10::make_intrusive<ProcessGroupGyre>(store, rank, size, timeout, name));
}

c10::intrusive_ptr<ProcessGroupGyre> ProcessGroupGyre::split(const c10::intrusive_ptr<ProcessGroupGyre>& parent,
                                                             std::chrono::milliseconds timeout,
                                                             const std::string& name) {
  struct Split {
    gyreComm_t child = nullptr;
    gyreConfig_t config = GYRE_CONFIG_INITIALIZER;
    std::string name;
  };
  auto s = std::make_shared<Split>();
  s->name = name;
  s->config.commName = s->name.c_str();
  s->config.timeoutMs = timeoutMsOf(timeout);
  ProcessGroupGyre* p = parent.get();
  auto work = parent->submit(OpType::UNKNOWN, "new_group (split)", {}, [p, s] {
    return gyreCommSplit(p->comm_, 0, p->getRank(), &s->child, &s->config);
  });
  work->wait();  // (raises what the split raised)
  // The Work's closure (and its reference to s) is gone once it completed.
  return remember(c10::make_intrusive<ProcessGroupGyre>(s->child, p->getRank(), p->getSize()));
}

ProcessGroupGyre::~ProcessGroupGyre() {
  // Python may drop the last reference while holding the GIL, and a queued
  // call's future may run a Python callback that needs it.
  if (Py_IsInitialized() && PyGILState_Check()) {
    Py_BEGIN_ALLOW_THREADS stop();
    Py_END_ALLOW_THREADS
  } else {
    stop();
  }
  if (comm_) failed_ ? gyreCommAbort(comm_) : gyreCommDestroy(comm_);
}

bool ProcessGroupGyre::stop() {
  std::lock_guard<std::mutex> once(stopMutex_);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (!worker_.joinable()) return false;
  worker_.join();  // (after the queued calls: they are collective)
  return true;
}

void ProcessGroupGyre::stopAll() {
  std::vector<c10::intrusive_ptr<ProcessGroupGyre>> groups;
  {
    std::lock_guard<std::mutex> lock(liveMutex);
    for (auto& w : live)
      if (auto g = w.lock()) groups.push_back(std::move(g));
    live.clear();
  }
  for (auto& g : groups) g->stop();
}

std::string ProcessGroupGyre::describe(const std::string& name, gyreResult_t r) const {
  const char* last = gyreGetLastError(comm_);
  return "gyre " + name + " failed on rank " + std::to_string(getRank()) + " of " + std::to_string(getSize()) +
         " (" + gyreGetErrorString(r) + ")" + (last && *last ? std::string(": ") + last : std::string());
}

WorkPtr ProcessGroupGyre::submit(OpType type, const char* name, std::vector<at::Tensor> outputs,
                                 std::function<gyreResult_t()> run, std::function<void()> after) {
  auto work = c10::make_intrusive<GyreWork>(getRank(), type, std::move(outputs));
  bool queued = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    TORCH_CHECK(!stopping_, "gyre ", name, ": the group has stopped (the interpreter is exiting)");
    queued = !coalescing_;
    Job& job = queued ? queue_.emplace_back() : batch_;
    job.works.push_back(work);
    job.runs.push_back(std::move(run));
    if (after) job.after.push_back(std::move(after));
    if (queued) job.name = name;
  }
  if (queued) wake_.notify_one();
  return work;
}

bool ProcessGroupGyre::inBatch() {
  std::lock_guard<std::mutex> lock(mutex_);
  return coalescing_;
}

void ProcessGroupGyre::startCoalescing() {
  std::lock_guard<std::mutex> lock(mutex_);
  TORCH_CHECK(!coalescing_, "gyre: startCoalescing inside another (batches do not nest)");
  coalescing_ = true;
  batch_ = Job{};
  batch_.name = "batch_isend_irecv";
  batch_.grouped = true;
}

void ProcessGroupGyre::endCoalescing(std::vector<WorkPtr>& works) {
  // `works` are the Works the batch's calls returned; they complete with it.
  (void)works;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    TORCH_CHECK(coalescing_, "gyre: endCoalescing without startCoalescing");
    coalescing_ = false;
    if (!batch_.works.empty()) queue_.push_back(std::move(batch_));
    batch_ = Job{};
  }
  wake_.notify_one();
}

gyreResult_t ProcessGroupGyre::run(Job& job) {
  if (!job.grouped) return job.runs[0]();
  gyreResult_t first = gyreGroupStart();
  for (auto& r : job.runs) {
    const gyreResult_t x = r();
    if (first == gyreSuccess) first = x;
  }
  const gyreResult_t end = gyreGroupEnd();
  return first != gyreSuccess ? first : end;
}

void ProcessGroupGyre::loop() {
  for (;;) {
    Job job;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    std::exception_ptr error;
    try {
      const gyreResult_t r = run(job);
      if (r == gyreSuccess) {
        for (auto& a : job.after) a();
      } else {
        failed_ = failed_ || (r != gyreInvalidArgument);
        error = std::make_exception_ptr(std::runtime_error(describe(job.name, r)));
      }
    } catch (...) {
      error = std::current_exception();
    }
    // The jobs' closures hold tensors; drop them before the futures'
    // callbacks run, so that what those free is freed.
    job.runs.clear();
    job.after.clear();
    for (auto& w : job.works) error ? w->fail(error) : w->succeed();
  }
}

// ---- Collectives --------------------------------------------------------------

WorkPtr ProcessGroupGyre::broadcast(std::vector<at::Tensor>& tensors, const c10d::BroadcastOptions& opts) {
  const at::Tensor& t = single(tensors, "broadcast");
  const gyreDataType_t type = dataTypeOf(t, "broadcast");
  const int root = checkRank(opts.rootRank, getSize(), "broadcast", "root");
  TORCH_CHECK(opts.rootTensor == 0, "gyre broadcast: rootTensor must be 0 (one tensor per process)");
  Buffer b = contiguousOf(t);
  return submit(
      OpType::BROADCAST, "broadcast", {t},
      [this, d = b.data, type, root] { return gyreBroadcast(d.data_ptr(), d.data_ptr(), count(d), type, root, comm_, nullptr); },
      copyBack(b, t));
}

WorkPtr ProcessGroupGyre::allreduce(std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts) {
  const at::Tensor& t = single(tensors, "allreduce");
  const gyreDataType_t type = dataTypeOf(t, "allreduce");
  auto op = std::make_shared<CallOp>(opts.reduceOp, t, type, comm_, "allreduce");
  Buffer b = contiguousOf(t);
  return submit(
      OpType::ALLREDUCE, "allreduce", {t},
      [this, d = b.data, type, op] {
        return gyreAllReduce(d.data_ptr(), d.data_ptr(), count(d), type, op->get(), comm_, nullptr);
      },
      copyBack(b, t));
}

WorkPtr ProcessGroupGyre::allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                              const c10d::AllreduceCoalescedOptions& opts) {
  TORCH_CHECK(!tensors.empty(), "gyre allreduce_coalesced: no tensors");
  const at::Tensor& first = tensors[0];
  const gyreDataType_t type = dataTypeOf(first, "allreduce_coalesced");
  for (const auto& t : tensors) {
    checkDevice(t, "allreduce_coalesced");
    TORCH_CHECK(t.scalar_type() == first.scalar_type(), "gyre allreduce_coalesced: tensors of ", t.scalar_type(),
                " and ", first.scalar_type(), " together (one dtype per call)");
  }
  auto op = std::make_shared<CallOp>(opts.reduceOp, first, type, comm_, "allreduce_coalesced");
  at::Tensor flat = flatten(tensors, first, true);
  return submit(
      OpType::ALLREDUCE_COALESCED, "allreduce_coalesced", tensors,
      [this, flat, type, op] {
        return gyreAllReduce(flat.data_ptr(), flat.data_ptr(), count(flat), type, op->get(), comm_, nullptr);
      },
      [flat, tensors] { unflatten(flat, tensors); });
}

WorkPtr ProcessGroupGyre::reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) {
  const at::Tensor& t = single(tensors, "reduce");
  const gyreDataType_t type = dataTypeOf(t, "reduce");
  const int root = checkRank(opts.rootRank, getSize(), "reduce", "root");
  TORCH_CHECK(opts.rootTensor == 0, "gyre reduce: rootTensor must be 0 (one tensor per process)");
  auto op = std::make_shared<CallOp>(opts.reduceOp, t, type, comm_, "reduce");
  Buffer b = contiguousOf(t);
  return submit(
      OpType::REDUCE, "reduce", {t},
      [this, d = b.data, type, op, root] {
        return gyreReduce(d.data_ptr(), d.data_ptr(), count(d), type, op->get(), root, comm_, nullptr);
      },
      copyBack(b, t));
}

WorkPtr ProcessGroupGyre::allgather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                                    const c10d::AllgatherOptions&) {
  const at::Tensor& in = single(inputs, "allgather");
  const gyreDataType_t type = dataTypeOf(in, "allgather");
  TORCH_CHECK(outputs.size() == 1, "gyre allgather: takes one output list per process, not ", outputs.size());
  const std::vector<at::Tensor>& list = outputs[0];
  checkOnePerRank(in, list, getSize(), "allgather", "output");
  const at::Tensor src = in.contiguous();
  const bool direct = consecutive(list);
  at::Tensor dst = direct ? list[0] : flatten(list, in, false);
  std::function<void()> after;
  if (!direct) after = [dst, list] { unflatten(dst, list); };
  return submit(
      OpType::ALLGATHER, "allgather", list,
      [this, src, dst, type] { return gyreAllGather(src.data_ptr(), dst.data_ptr(), count(src), type, comm_, nullptr); },
      after);
}

WorkPtr ProcessGroupGyre::_allgather_base(at::Tensor& output, at::Tensor& input, const c10d::AllgatherOptions&) {
  checkDevice(input, "_allgather_base");
  checkDevice(output, "_allgather_base");
  const gyreDataType_t type = dataTypeOf(input, "_allgather_base");
  TORCH_CHECK(output.scalar_type() == input.scalar_type(), "gyre _allgather_base: output is ", output.scalar_type(),
              " where the input is ", input.scalar_type());
  TORCH_CHECK(output.numel() == input.numel() * getSize(), "gyre _allgather_base: output has ", output.numel(),
              " elements, not the group's ", getSize(), " x ", input.numel());
  const at::Tensor src = input.contiguous();
  Buffer b = contiguousOf(output);
  return submit(
      OpType::_ALLGATHER_BASE, "_allgather_base", {output},
      [this, src, d = b.data, type] { return gyreAllGather(src.data_ptr(), d.data_ptr(), count(src), type, comm_, nullptr); },
      copyBack(b, output));
}

WorkPtr ProcessGroupGyre::allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                              std::vector<at::Tensor>& inputs, const c10d::AllgatherOptions&) {
  TORCH_CHECK(!inputs.empty(), "gyre allgather_coalesced: no tensors");
  TORCH_CHECK(static_cast<int>(outputs.size()) == getSize(), "gyre allgather_coalesced: ", outputs.size(),
              " output lists for a group of ", getSize());
  const at::Tensor& first = inputs[0];
  const gyreDataType_t type = dataTypeOf(first, "allgather_coalesced");
  for (const auto& t : inputs) {
    checkDevice(t, "allgather_coalesced");
    TORCH_CHECK(t.scalar_type() == first.scalar_type(), "gyre allgather_coalesced: tensors of ", t.scalar_type(),
                " and ", first.scalar_type(), " together (one dtype per call)");
  }
  for (const auto& list : outputs) {
    TORCH_CHECK(list.size() == inputs.size(), "gyre allgather_coalesced: an output list of ", list.size(),
                " tensors for ", inputs.size(), " inputs");
    for (size_t i = 0; i < list.size(); ++i) checkSameAs(inputs[i], {list[i]}, "allgather_coalesced", "output");
  }
  at::Tensor src = flatten(inputs, first, true);
  at::Tensor dst = at::empty({src.numel() * getSize()}, src.options());
  std::vector<at::Tensor> all;
  for (const auto& list : outputs) all.insert(all.end(), list.begin(), list.end());
  return submit(
      OpType::ALLGATHER_COALESCED, "allgather_coalesced", all,
      [this, src, dst, type] { return gyreAllGather(src.data_ptr(), dst.data_ptr(), count(src), type, comm_, nullptr); },
      [dst, all] { unflatten(dst, all); });
}

WorkPtr ProcessGroupGyre::gather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                                 const c10d::GatherOptions& opts) {
  const at::Tensor& in = single(inputs, "gather");
  const gyreDataType_t type = dataTypeOf(in, "gather");
  const int root = checkRank(opts.rootRank, getSize(), "gather", "root");
  const at::Tensor src = in.contiguous();
  if (getRank() != root) {
    TORCH_CHECK(outputs.empty() || (outputs.size() == 1 && outputs[0].empty()),
                "gyre gather: only the root (rank ", root, ") takes an output list");
    return submit(OpType::GATHER, "gather", {}, [this, src, type, root] {
      return gyreGather(src.data_ptr(), nullptr, count(src), type, root, comm_, nullptr);
    });
  }
  TORCH_CHECK(outputs.size() == 1, "gyre gather: the root takes one output list, not ", outputs.size());
  const std::vector<at::Tensor>& list = outputs[0];
  checkOnePerRank(in, list, getSize(), "gather", "output");
  const bool direct = consecutive(list);
  at::Tensor dst = direct ? list[0] : flatten(list, in, false);
  std::function<void()> after;
  if (!direct) after = [dst, list] { unflatten(dst, list); };
  return submit(
      OpType::GATHER, "gather", list,
      [this, src, dst, type, root] {
        return gyreGather(src.data_ptr(), dst.data_ptr(), count(src), type, root, comm_, nullptr);
      },
      after);
}

WorkPtr ProcessGroupGyre::scatter(std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
                                  const c10d::ScatterOptions& opts) {
  const at::Tensor& out = single(outputs, "scatter");
  const gyreDataType_t type = dataTypeOf(out, "scatter");
  const int root = checkRank(opts.rootRank, getSize(), "scatter", "root");
  Buffer b = contiguousOf(out);
  at::Tensor src;
  if (getRank() != root) {
    TORCH_CHECK(inputs.empty() || (inputs.size() == 1 && inputs[0].empty()),
                "gyre scatter: only the root (rank ", root, ") takes an input list");
  } else {
    TORCH_CHECK(inputs.size() == 1, "gyre scatter: the root takes one input list, not ", inputs.size());
    checkOnePerRank(out, inputs[0], getSize(), "scatter", "input");
    src = consecutive(inputs[0]) ? inputs[0][0] : flatten(inputs[0], out, true);
  }
  return submit(
      OpType::SCATTER, "scatter", {out},
      [this, src, d = b.data, type, root] {
        return gyreScatter(src.defined() ? src.data_ptr() : nullptr, d.data_ptr(), count(d), type, root, comm_,
                           nullptr);
      },
      copyBack(b, out));
}

WorkPtr ProcessGroupGyre::reduce_scatter(std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ReduceScatterOptions& opts) {
  const at::Tensor& out = single(outputs, "reduce_scatter");
  const gyreDataType_t type = dataTypeOf(out, "reduce_scatter");
  TORCH_CHECK(inputs.size() == 1, "gyre reduce_scatter: takes one input list per process, not ", inputs.size());
  checkOnePerRank(out, inputs[0], getSize(), "reduce_scatter", "input");
  auto op = std::make_shared<CallOp>(opts.reduceOp, out, type, comm_, "reduce_scatter");
  const at::Tensor src = consecutive(inputs[0]) ? inputs[0][0] : flatten(inputs[0], out, true);
  return submitReduceScatter(OpType::REDUCE_SCATTER, "reduce_scatter", src, out, type, std::move(op));
}

WorkPtr ProcessGroupGyre::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                               const c10d::ReduceScatterOptions& opts) {
  checkDevice(input, "_reduce_scatter_base");
  checkDevice(output, "_reduce_scatter_base");
  const gyreDataType_t type = dataTypeOf(output, "_reduce_scatter_base");
  TORCH_CHECK(output.scalar_type() == input.scalar_type(), "gyre _reduce_scatter_base: input is ",
              input.scalar_type(), " where the output is ", output.scalar_type());
  TORCH_CHECK(input.numel() == output.numel() * getSize(), "gyre _reduce_scatter_base: input has ", input.numel(),
              " elements, not the group's ", getSize(), " x ", output.numel());
  auto op = std::make_shared<CallOp>(opts.reduceOp, output, type, comm_, "_reduce_scatter_base");
  return submitReduceScatter(OpType::_REDUCE_SCATTER_BASE, "_reduce_scatter_base", input.contiguous(), output, type,
                             std::move(op));
}

WorkPtr ProcessGroupGyre::submitReduceScatter(OpType type, const char* name, const at::Tensor& src,
                                              const at::Tensor& out, gyreDataType_t dtype,
                                              std::shared_ptr<CallOp> op) {
  Buffer b = contiguousOf(out);
  return submit(
      type, name, {out},
      [this, src, d = b.data, dtype, op] {
        return gyreReduceScatter(src.data_ptr(), d.data_ptr(), count(d), dtype, op->get(), comm_, nullptr);
      },
      copyBack(b, out));
}

namespace {

// Elements per peer of an all_to_all_single side: the split sizes (rows of
// dimension 0) times a row's elements, or an equal share.
std::vector<size_t> countsOf(const at::Tensor& t, const std::vector<int64_t>& splits, int size, const char* side) {
  std::vector<size_t> counts(size);
  if (splits.empty()) {
    TORCH_CHECK(t.dim() > 0 ? t.size(0) % size == 0 : t.numel() == 0, "gyre alltoall_base: the ", side,
                "'s first dimension (", t.dim() > 0 ? t.size(0) : 0, ") does not divide among ", size,
                " ranks; pass split sizes");
    std::fill(counts.begin(), counts.end(), static_cast<size_t>(t.numel() / size));
    return counts;
  }
  TORCH_CHECK(static_cast<int>(splits.size()) == size, "gyre alltoall_base: ", splits.size(), " ", side,
              " split sizes for a group of ", size);
  TORCH_CHECK(t.dim() > 0, "gyre alltoall_base: split sizes for a ", side, " without dimensions");
  const int64_t row = t.size(0) ? t.numel() / t.size(0) : 0;
  int64_t rows = 0;
  for (int i = 0; i < size; ++i) {
    TORCH_CHECK(splits[i] >= 0, "gyre alltoall_base: ", side, " split size ", splits[i], " for rank ", i);
    rows += splits[i];
    counts[i] = static_cast<size_t>(splits[i] * row);
  }
  TORCH_CHECK(rows == t.size(0), "gyre alltoall_base: the ", side, " split sizes add up to ", rows,
              " rows, the tensor has ", t.size(0));
  return counts;
}

std::vector<size_t> displacementsOf(const std::vector<size_t>& counts) {
  std::vector<size_t> d(counts.size());
  size_t at = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    d[i] = at;
    at += counts[i];
  }
  return d;
}

}  // namespace

WorkPtr ProcessGroupGyre::alltoall_base(at::Tensor& output, at::Tensor& input, std::vector<int64_t>& outputSplits,
                                        std::vector<int64_t>& inputSplits, const c10d::AllToAllOptions&) {
  checkDevice(input, "alltoall_base");
  checkDevice(output, "alltoall_base");
  const gyreDataType_t type = dataTypeOf(input, "alltoall_base");
  TORCH_CHECK(output.scalar_type() == input.scalar_type(), "gyre alltoall_base: output is ", output.scalar_type(),
              " where the input is ", input.scalar_type());
  const at::Tensor src = input.contiguous();
  Buffer b = contiguousOf(output);
  if (outputSplits.empty() && inputSplits.empty()) {
    TORCH_CHECK(input.numel() == output.numel(), "gyre alltoall_base: input has ", input.numel(),
                " elements and output ", output.numel());
    countsOf(input, {}, getSize(), "input");
    const size_t each = count(src) / static_cast<size_t>(getSize());
    return submit(
        OpType::ALLTOALL_BASE, "alltoall_base", {output},
        [this, src, d = b.data, each, type] { return gyreAllToAll(src.data_ptr(), d.data_ptr(), each, type, comm_, nullptr); },
        copyBack(b, output));
  }
  const std::vector<size_t> sendCounts = countsOf(input, inputSplits, getSize(), "input");
  const std::vector<size_t> recvCounts = countsOf(output, outputSplits, getSize(), "output");
  const std::vector<size_t> sendDispls = displacementsOf(sendCounts), recvDispls = displacementsOf(recvCounts);
  return submit(
      OpType::ALLTOALL_BASE, "alltoall_base", {output},
      [this, src, d = b.data, sendCounts, sendDispls, recvCounts, recvDispls, type] {
        return gyreAllToAllv(src.data_ptr(), sendCounts.data(), sendDispls.data(), d.data_ptr(), recvCounts.data(),
                             recvDispls.data(), type, comm_, nullptr);
      },
      copyBack(b, output));
}

WorkPtr ProcessGroupGyre::alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                   const c10d::AllToAllOptions&) {
  TORCH_CHECK(static_cast<int>(inputs.size()) == getSize() && static_cast<int>(outputs.size()) == getSize(),
              "gyre alltoall: ", inputs.size(), " inputs and ", outputs.size(), " outputs for a group of ", getSize());
  const gyreDataType_t type = dataTypeOf(inputs[0], "alltoall");
  std::vector<size_t> sendCounts, recvCounts;
  for (int i = 0; i < getSize(); ++i) {
    checkDevice(inputs[i], "alltoall");
    checkDevice(outputs[i], "alltoall");
    TORCH_CHECK(inputs[i].scalar_type() == inputs[0].scalar_type() &&
                    outputs[i].scalar_type() == inputs[0].scalar_type(),
                "gyre alltoall: every input and output must be ", inputs[0].scalar_type());
    sendCounts.push_back(count(inputs[i]));
    recvCounts.push_back(count(outputs[i]));
  }
  const std::vector<size_t> sendDispls = displacementsOf(sendCounts), recvDispls = displacementsOf(recvCounts);
  at::Tensor src = flatten(inputs, inputs[0], true), dst = flatten(outputs, inputs[0], false);
  return submit(
      OpType::ALLTOALL, "alltoall", outputs,
      [this, src, dst, sendCounts, sendDispls, recvCounts, recvDispls, type] {
        return gyreAllToAllv(src.data_ptr(), sendCounts.data(), sendDispls.data(), dst.data_ptr(), recvCounts.data(),
                             recvDispls.data(), type, comm_, nullptr);
      },
      [dst, outputs] { unflatten(dst, outputs); });
}

WorkPtr ProcessGroupGyre::send(std::vector<at::Tensor>& tensors, int dst, int tag) {
  (void)tag;  // gyre matches a pair's messages in call order, not by tag
  const at::Tensor& t = single(tensors, "send");
  const gyreDataType_t type = dataTypeOf(t, "send");
  checkRank(dst, getSize(), "send", "destination");
  TORCH_CHECK(dst != getRank() || inBatch(), "gyre send: to itself (rank ", dst,
              ") only inside batch_isend_irecv, with its receive");
  const at::Tensor src = t.contiguous();
  return submit(OpType::SEND, "send", {t}, [this, src, type, dst] {
    return gyreSend(src.data_ptr(), count(src), type, dst, comm_, nullptr);
  });
}

WorkPtr ProcessGroupGyre::recv(std::vector<at::Tensor>& tensors, int src, int tag) {
  (void)tag;
  const at::Tensor& t = single(tensors, "recv");
  const gyreDataType_t type = dataTypeOf(t, "recv");
  checkRank(src, getSize(), "recv", "source");
  TORCH_CHECK(src != getRank() || inBatch(), "gyre recv: from itself (rank ", src,
              ") only inside batch_isend_irecv, with its send");
  Buffer b = contiguousOf(t);
  return submit(
      OpType::RECV, "recv", {t},
      [this, d = b.data, type, src] { return gyreRecv(d.data_ptr(), count(d), type, src, comm_, nullptr); },
      copyBack(b, t));
}

WorkPtr ProcessGroupGyre::recvAnysource(std::vector<at::Tensor>&, int) {
  TORCH_CHECK(false, "gyre recv: a receive from any source is not supported (gyre matches messages per pair of "
                     "ranks, in call order); name the source rank");
}

WorkPtr ProcessGroupGyre::barrier(const c10d::BarrierOptions&) {
  return submit(OpType::BARRIER, "barrier", {}, [this] { return gyreBarrier(comm_, nullptr); });
}

}  // namespace gyre_torch
