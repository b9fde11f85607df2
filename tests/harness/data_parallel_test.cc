// Data parallel on one process: the bucketing (the buckets cover the
// gradient array exactly once, in the order backward finishes them), the
// backward hook's order, and DataParallel on a one-rank communicator
// (gyreCommInitAll), which must leave backward's gradients as they are. The
// multi-rank runs are harness_data_parallel_* (dp_rank.cc).
#include "harness/data_parallel.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "harness/model.h"
#include "harness/random.h"

namespace gyre::harness::test {
namespace {

GptConfig smallConfig() { return {.vocab = 256, .maxSeq = 16, .layers = 3, .heads = 2, .dim = 16}; }

// A random batch of B sequences of T tokens, the same for the same seed.
struct RandomBatch {
  static constexpr int B = 2, T = 16;
  std::vector<int> inputs, targets;
  explicit RandomBatch(uint64_t seed) : inputs(B * T), targets(B * T) {
    Random rng(seed);
    for (int i = 0; i < B * T; ++i) {
      inputs[i] = static_cast<int>(rng.below(256));
      targets[i] = static_cast<int>(rng.below(256));
    }
  }
  // The model's loss on it, its gradients zeroed first (backward is for the caller).
  float forward(Gpt& model) const {
    model.zeroGrad();
    return model.forward(inputs.data(), targets.data(), B, T);
  }
};

// Runs one forward and backward of a random batch.
float forwardBackward(Gpt& model, uint64_t seed) {
  const float loss = RandomBatch(seed).forward(model);
  model.backward();
  return loss;
}

TEST(HarnessDataParallel, HookCallsThePartsInReverseLayoutOrder) {
  Gpt model(smallConfig());
  model.initialize(1);
  std::vector<int> parts;
  model.setBackwardHook([&](int part) { parts.push_back(part); });
  forwardBackward(model, 2);
  EXPECT_EQ(parts, (std::vector<int>{3, 2, 1, 0, -1}));
  EXPECT_EQ(model.gradReadyFrom(3), model.info("lnf.w").offset);
  EXPECT_EQ(model.gradReadyFrom(1), model.info("h1.ln1.w").offset);
  EXPECT_EQ(model.gradReadyFrom(-1), 0u);
  EXPECT_THROW(model.gradReadyFrom(4), std::invalid_argument);
}

// What every bucketing must satisfy.
void checkBuckets(const Gpt& model, size_t bucketElems) {
  SCOPED_TRACE("bucket of " + std::to_string(bucketElems) + " elements");
  const std::vector<GradBucket> buckets = gradBuckets(model, bucketElems);
  ASSERT_FALSE(buckets.empty());
  // Exactly once, from the end of the array down to 0: each bucket ends
  // where the one before it (in ready order) starts.
  size_t end = model.grads().size();
  int part = model.config().layers;
  for (const GradBucket& b : buckets) {
    EXPECT_GT(b.size, 0u);
    EXPECT_LE(b.size, bucketElems);
    EXPECT_EQ(b.offset + b.size, end);
    end = b.offset;
    // In ready order, each launched at the first hook call after which all
    // of it is final, and not before.
    EXPECT_LE(b.part, part);
    part = b.part;
    EXPECT_LE(model.gradReadyFrom(b.part), b.offset);
    if (b.part < model.config().layers) {
      EXPECT_GT(model.gradReadyFrom(b.part + 1), b.offset);
    }
  }
  EXPECT_EQ(end, 0u);
  // A part that fits in a bucket is never cut: no bucket boundary inside it.
  size_t partEnd = model.grads().size();
  for (int p = model.config().layers; p >= -1; --p) {
    const size_t partBegin = model.gradReadyFrom(p);
    if (partEnd - partBegin <= bucketElems) {
      for (const GradBucket& b : buckets) {
        EXPECT_FALSE(b.offset > partBegin && b.offset < partEnd)
            << "part " << p << " [" << partBegin << ", " << partEnd << ") cut at " << b.offset;
      }
    }
    partEnd = partBegin;
  }
}

TEST(HarnessDataParallel, BucketsCoverTheGradientsOnceInReadyOrder) {
  Gpt model(smallConfig());
  const size_t n = model.grads().size();
  const size_t block = model.gradReadyFrom(1) - model.gradReadyFrom(0);
  for (size_t elems : {size_t{1}, size_t{7}, size_t{100}, size_t{1000}, block, block + 1,
                       2 * block + 40, n - 1, n, kDefaultBucketElems}) {
    checkBuckets(model, elems);
  }
  // One bucket when it all fits; one per part when each part just fits.
  EXPECT_EQ(gradBuckets(model, n).size(), 1u);
  const std::vector<GradBucket> perBlock = gradBuckets(model, block);
  EXPECT_EQ(perBlock[1].offset, model.gradReadyFrom(2));
  EXPECT_EQ(perBlock[1].size, block);
  EXPECT_EQ(perBlock[1].part, 2);
  EXPECT_THROW(gradBuckets(model, 0), std::invalid_argument);
}

TEST(HarnessDataParallel, OneRankLeavesTheGradientsAsBackwardMadeThem) {
  gyreComm_t comm = nullptr;
  ASSERT_EQ(gyreCommInitAll(&comm, 1, nullptr), gyreSuccess) << gyreGetLastError(nullptr);
  Gpt plain(smallConfig()), model(smallConfig());
  plain.initialize(3);
  model.initialize(3);
  const float plainLoss = forwardBackward(plain, 4);
  {
    DataParallel dp(comm, model, 500);
    EXPECT_GT(dp.buckets().size(), 5u);
    EXPECT_EQ(dp.ranks(), 1);
    const float loss = RandomBatch(4).forward(model);
    dp.backward();
    EXPECT_EQ(dp.averageLoss(loss), plainLoss);
  }
  EXPECT_EQ(
      std::memcmp(model.grads().data(), plain.grads().data(), plain.grads().size() * sizeof(float)),
      0);
  EXPECT_EQ(gyreCommDestroy(comm), gyreSuccess);
}

TEST(HarnessDataParallel, AGyreFailureIsAnExceptionWithGyresAccount) {
  Gpt model(smallConfig());
  try {
    DataParallel dp(nullptr, model);
    ADD_FAILURE() << "no GyreError for a null communicator";
  } catch (const GyreError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("gyreCommUserRank"), std::string::npos) << what;
    EXPECT_NE(what.find(gyreGetErrorString(e.result())), std::string::npos) << what;
    EXPECT_NE(e.result(), gyreSuccess);
    std::printf("%s\n", what.c_str());
  }
}

}  // namespace
}  // namespace gyre::harness::test
