#include "harness/data_parallel.h"

#include <algorithm>
#include <chrono>
#include <exception>

namespace gyre::harness {

void checkGyre(gyreResult_t result, const char* what, gyreComm_t comm) {
  if (result == gyreSuccess) return;
  const char* detail = gyreGetLastError(comm);
  throw GyreError(std::string(what) + " failed: " + gyreGetErrorString(result) +
                      (detail && *detail ? std::string(": ") + detail : std::string()),
                  result);
}

std::vector<GradBucket> gradBuckets(const Gpt& model, size_t bucketElems) {
  return gradBuckets(model.layout(), bucketElems);
}

std::vector<GradBucket> gradBuckets(const std::vector<ParamInfo>& layout, size_t bucketElems) {
  if (bucketElems == 0) throw std::invalid_argument("gradBuckets: a bucket of 0 elements");
  const std::vector<PartRange> parts = partRanges(layout);
  std::vector<GradBucket> buckets;
  GradBucket current;  // grows downwards: whole parts added below its offset
  current.offset = parts.empty() ? 0 : parts.back().begin + parts.back().size;
  auto close = [&] {
    if (current.size > 0) buckets.push_back(current);
    current.size = 0;
  };
  // Backward finishes the parts in the reverse of the layout.
  for (auto it = parts.rbegin(); it != parts.rend(); ++it) {
    const size_t begin = it->begin, end = it->begin + it->size, size = it->size;
    const int part = it->part;
    if (size > bucketElems) {
      // Too big for one bucket: pieces of bucketElems from its end down.
      close();
      for (size_t hi = end; hi > begin;) {
        const size_t lo = hi - std::min(bucketElems, hi - begin);
        buckets.push_back({lo, hi - lo, part});
        hi = lo;
      }
      current.offset = begin;
    } else {
      if (current.size + size > bucketElems) close();
      current.offset = begin;
      current.size += size;
      current.part = part;
    }
  }
  close();
  return buckets;
}

DataParallel::DataParallel(gyreComm_t comm, Gpt& model, const DpOptions& options)
    : comm_(comm),
      model_(model),
      options_(options),
      buckets_(gradBuckets(model, options.bucketElems)) {
  checkGyre(gyreCommUserRank(comm, &rank_), "gyreCommUserRank", comm);
  checkGyre(gyreCommCount(comm, &ranks_), "gyreCommCount", comm);
  if (options.decentralized && options.codec == gyreCodecOneBit) {
    throw std::invalid_argument(
        "DataParallel: decentralized averaging with the one-bit codec (it needs error feedback, "
        "which a replica's change does not keep)");
  }
  if (options.codec != gyreCodecNone && !options.decentralized) {
    for (const GradBucket& b : buckets_) {
      gyreCompressor_t c = nullptr;
      const gyreResult_t r = gyreCompressorCreate(&c, comm, options.codec, b.size, gyreFloat32,
                                                  GYRE_COMPRESSOR_ERROR_FEEDBACK);
      if (r != gyreSuccess) {
        for (gyreCompressor_t made : compressors_) gyreCompressorDestroy(made);
        checkGyre(r, "gyreCompressorCreate for a gradient bucket", comm);
      }
      compressors_.push_back(c);
    }
    compressor_ = std::thread([this] { compressLoop(); });
  }
}

DataParallel::~DataParallel() {
  std::string ignored;
  waitAll(&ignored);  // only after an exception escaped backward() midway
  if (compressor_.joinable()) {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    changed_.notify_all();
    compressor_.join();
  }
  for (gyreCompressor_t c : compressors_) gyreCompressorDestroy(c);
  if (decentralized_) gyreDecentralizedDestroy(decentralized_);
}

void DataParallel::compressLoop() {
  std::unique_lock lock(mutex_);
  for (;;) {
    changed_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, nothing left
    const size_t i = queue_.front();
    queue_.pop_front();
    lock.unlock();
    const GradBucket& b = buckets_[i];
    float* g = model_.grads().data() + b.offset;
    const gyreResult_t r = gyreCompressedAllReduce(g, g, b.size, gyreFloat32, gyreAvg,
                                                   compressors_[i], comm_, nullptr);
    lock.lock();
    if (r != gyreSuccess && compressFailure_ == gyreSuccess) {
      compressFailure_ = r;
      const char* detail = gyreGetLastError(comm_);
      compressError_ = std::string(gyreGetErrorString(r)) +
                       (detail && *detail ? std::string(": ") + detail : std::string());
    }
    ++compressed_;
    changed_.notify_all();
  }
}

void DataParallel::broadcastParameters() {
  std::span<float> p = model_.params();
  checkGyre(gyreBroadcast(p.data(), p.data(), p.size(), gyreFloat32, 0, comm_, nullptr),
            "gyreBroadcast of the parameters", comm_);
}

void DataParallel::launchReady(int part) {
  float* grads = model_.grads().data();
  while (next_ < buckets_.size() && buckets_[next_].part == part) {
    const GradBucket& b = buckets_[next_];
    if (!compressors_.empty()) {
      {
        std::lock_guard lock(mutex_);
        queue_.push_back(next_);
        ++queued_;
      }
      changed_.notify_all();
      ++next_;
      continue;
    }
    gyreRequest_t request = nullptr;
    // gyreAvg: the sum over the ranks divided by their count, the same bits
    // on every rank, so the replicas stay identical.
    checkGyre(gyreIallReduce(grads + b.offset, grads + b.offset, b.size, gyreFloat32, gyreAvg,
                             comm_, &request),
              "gyreIallReduce of a gradient bucket", comm_);
    pending_.push_back(request);
    ++next_;
  }
}

gyreResult_t DataParallel::waitAll(std::string* error) {
  gyreResult_t first = gyreSuccess;
  if (!compressors_.empty()) {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return compressed_ == queued_; });
    compressed_ = queued_ = 0;
    first = compressFailure_;
    *error = compressError_;
    compressFailure_ = gyreSuccess;
    return first;
  }
  for (gyreRequest_t request : pending_) {
    const gyreResult_t r = gyreWait(request);
    if (r != gyreSuccess && first == gyreSuccess) {
      first = r;
      const char* detail = gyreGetLastError(comm_);
      *error = std::string(gyreGetErrorString(r)) +
               (detail && *detail ? std::string(": ") + detail : std::string());
    }
  }
  pending_.clear();
  return first;
}

void DataParallel::backward() {
  if (options_.decentralized) {
    // The replicas keep their own gradients; afterStep averages parameters.
    if (decentralized_ == nullptr && options_.codec != gyreCodecNone) {
      const std::span<float> p = model_.params();
      checkGyre(gyreDecentralizedCreate(&decentralized_, comm_, p.data(), p.size(), gyreFloat32,
                                        options_.codec),
                "gyreDecentralizedCreate", comm_);
    }
    model_.backward();
    return;
  }
  next_ = 0;
  model_.setBackwardHook([this](int part) { launchReady(part); });
  try {
    model_.backward();
  } catch (...) {
    model_.setBackwardHook({});
    std::string ignored;
    waitAll(&ignored);  // nothing may still write into grads()
    throw;
  }
  model_.setBackwardHook({});
  std::string error;
  const auto waitStart = std::chrono::steady_clock::now();
  const gyreResult_t r = waitAll(&error);
  lastWait_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - waitStart).count();
  if (r != gyreSuccess) throw GyreError("gyreWait on a gradient bucket failed: " + error, r);
  if (next_ != buckets_.size()) {
    throw std::logic_error("DataParallel::backward: " + std::to_string(buckets_.size() - next_) +
                           " buckets were never ready");
  }
}

void DataParallel::afterStep(uint64_t step) {
  if (!options_.decentralized) return;
  const std::span<float> p = model_.params();
  if (decentralized_) {
    checkGyre(gyreDecentralizedStep(decentralized_, p.data()), "gyreDecentralizedStep", comm_);
  } else {
    checkGyre(gyrePeerAverage(p.data(), p.data(), p.size(), gyreFloat32, options_.peers, step,
                              comm_, nullptr),
              "gyrePeerAverage of the parameters", comm_);
  }
}

float DataParallel::averageLoss(float localLoss) {
  float loss = localLoss;
  checkGyre(gyreAllReduce(&loss, &loss, 1, gyreFloat32, gyreAvg, comm_, nullptr),
            "gyreAllReduce of the loss", comm_);
  return loss;
}

}  // namespace gyre::harness
