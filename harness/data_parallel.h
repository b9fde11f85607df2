// Data parallelism: every rank holds the whole model, trains on its share of
// the global batch, and the ranks average their gradients before each
// optimizer step, so that every replica takes the same step as a single rank
// training on the whole batch (docs/harness.md, "Data parallel").
//
// The gradient array is cut into buckets of consecutive elements, and each
// bucket's AllReduce (gyreIallReduce, op gyreAvg) is launched as soon as
// backward has finished every gradient it covers, so that it runs while the
// rest of backward is computed. backward() returns once all of them have
// completed. Uses gyre's public C ABI only.
//
// Two other modes come from the compression issue (docs/compression.md):
// a codec compresses each bucket's AllReduce (with error feedback per
// bucket, so what rounding loses is carried to the next step rather than
// dropped), and decentralized averaging replaces the gradient AllReduce by
// averaging each replica's parameters with one or two peers after its
// optimizer step (Bagua's decentralized SGD; the replicas then drift
// together instead of staying identical).
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "gyre/gyre.h"
#include "harness/model.h"

namespace gyre::harness {

// A failed gyre call: the message names the call and carries gyre's own
// account of it (gyreGetLastError).
class GyreError : public std::runtime_error {
 public:
  GyreError(const std::string& what, gyreResult_t result)
      : std::runtime_error(what), result_(result) {}
  gyreResult_t result() const { return result_; }

 private:
  gyreResult_t result_;
};

// Throws GyreError for anything but gyreSuccess, with `what` (the call),
// gyreGetErrorString and gyreGetLastError(comm) in the message.
void checkGyre(gyreResult_t result, const char* what, gyreComm_t comm);

// Elements [offset, offset + size) of the gradient array, final after the
// model's backward hook has been called for `part` (Gpt::setBackwardHook).
struct GradBucket {
  size_t offset = 0;
  size_t size = 0;
  int part = 0;
};

// 1 MiB of float32 gradients per bucket.
inline constexpr size_t kDefaultBucketElems = (size_t{1} << 20) / sizeof(float);

// The buckets of `model`'s gradients in the order they become ready (the
// reverse of the layout: lnf, the blocks from the last to the first, then
// the embeddings), covering the array exactly once. The parts that backward
// finishes together (the final norm, one block, the two embeddings) go into
// a bucket whole, several to a bucket while they fit in bucketElems; a part
// larger than a bucket is cut into bucketElems pieces (the last, lowest one
// shorter), which are all ready at once.
std::vector<GradBucket> gradBuckets(const Gpt& model, size_t bucketElems = kDefaultBucketElems);
// The same from the layout alone (ZeRO holds the arrays, not the model).
std::vector<GradBucket> gradBuckets(const std::vector<ParamInfo>& layout,
                                    size_t bucketElems = kDefaultBucketElems);

struct DpOptions {
  size_t bucketElems = kDefaultBucketElems;
  // Compress each bucket's AllReduce. gyre's compressed calls block, so a
  // thread of this object's runs them in bucket order while backward goes
  // on, as gyreIallReduce would.
  gyreCodec_t codec = gyreCodecNone;
  // Average parameters with peers after each step (afterStep) instead of
  // gradients; with a codec, low-precision decentralized SGD
  // (gyreDecentralizedStep, ring neighbours).
  bool decentralized = false;
  gyrePeers_t peers = gyrePeersRing;
};

class DataParallel {
 public:
  // comm: the data-parallel ranks (every rank of it holds a replica of
  // model). Does not take ownership of comm; model must outlive this.
  DataParallel(gyreComm_t comm, Gpt& model, const DpOptions& options);
  DataParallel(gyreComm_t comm, Gpt& model, size_t bucketElems = kDefaultBucketElems)
      : DataParallel(comm, model, DpOptions{.bucketElems = bucketElems}) {}
  ~DataParallel();
  DataParallel(const DataParallel&) = delete;
  DataParallel& operator=(const DataParallel&) = delete;

  // Copies rank 0's parameters to every rank (a Broadcast), so the replicas
  // start identical whatever each rank's initialization did.
  void broadcastParameters();

  // model.backward() for this rank's part of the batch, with each bucket's
  // AllReduce launched as soon as its gradients are final; returns when all
  // have completed: grads() is then the average over the ranks, the same
  // bits on every rank. Throws GyreError when a gyre call fails (after
  // waiting for whatever it had launched, so no reduction still writes into
  // grads()).
  void backward();

  // After the optimizer's step: in decentralized mode, averages this
  // replica's parameters with its peers' for `step` (every rank passes the
  // same step); otherwise nothing.
  void afterStep(uint64_t step);

  // The mean of every rank's loss: with equal local batches, the mean over
  // the global batch, which a single rank training on it reports.
  float averageLoss(float localLoss);

  // How long the last backward() waited, after the model's backward had
  // returned, for reductions still running: communication nothing hid.
  double lastWaitSeconds() const { return lastWait_; }

  const std::vector<GradBucket>& buckets() const { return buckets_; }
  int rank() const { return rank_; }
  int ranks() const { return ranks_; }

 private:
  void launchReady(int part);
  // Waits for every launched reduction; returns the first failure, if any.
  gyreResult_t waitAll(std::string* error);
  void compressLoop();

  gyreComm_t comm_;
  Gpt& model_;
  DpOptions options_;
  std::vector<GradBucket> buckets_;
  int rank_ = 0, ranks_ = 1;
  size_t next_ = 0;  // the next bucket to launch
  std::vector<gyreRequest_t> pending_;
  double lastWait_ = 0;

  // The codec's thread: buckets queued by index, run in order.
  std::vector<gyreCompressor_t> compressors_;
  std::thread compressor_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<size_t> queue_;
  size_t queued_ = 0;      // buckets queued this backward
  size_t compressed_ = 0;  // of which completed
  bool stop_ = false;
  gyreResult_t compressFailure_ = gyreSuccess;
  std::string compressError_;

  gyreDecentralized_t decentralized_ = nullptr;  // low-precision decentralized SGD
};

}  // namespace gyre::harness
