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
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>
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

class DataParallel {
 public:
  // comm: the data-parallel ranks (every rank of it holds a replica of
  // model). Does not take ownership of comm; model must outlive this.
  DataParallel(gyreComm_t comm, Gpt& model, size_t bucketElems = kDefaultBucketElems);
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

  // The mean of every rank's loss: with equal local batches, the mean over
  // the global batch, which a single rank training on it reports.
  float averageLoss(float localLoss);

  const std::vector<GradBucket>& buckets() const { return buckets_; }
  int rank() const { return rank_; }
  int ranks() const { return ranks_; }

 private:
  void launchReady(int part);
  // Waits for every launched request; returns the first failure, if any.
  gyreResult_t waitAll(std::string* error);

  gyreComm_t comm_;
  Gpt& model_;
  std::vector<GradBucket> buckets_;
  int rank_ = 0, ranks_ = 1;
  size_t next_ = 0;  // the next bucket to launch
  std::vector<gyreRequest_t> pending_;
};

}  // namespace gyre::harness
