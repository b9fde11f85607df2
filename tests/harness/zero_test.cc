// ZeRO on one process: the shard partition, the decay segments cut to a
// shard, the parts of a layout, and Zero on a one-rank communicator, which
// must train bit for bit as the model does on its own at every stage (the
// reductions are identities and the optimizer sees the same segments). The
// multi-rank runs are harness_zero* (zero_rank.cc).
#include "harness/zero.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "harness/model.h"
#include "harness/optimizer.h"
#include "harness/random.h"

namespace gyre::harness::test {
namespace {

GptConfig smallConfig() { return {.vocab = 256, .maxSeq = 16, .layers = 3, .heads = 2, .dim = 16}; }

TEST(HarnessZero, ShardsCutTheArrayIntoEqualRangesInRankOrder) {
  for (size_t n :
       {size_t{0}, size_t{1}, size_t{7}, size_t{8}, size_t{9}, size_t{100}, size_t{34688}}) {
    for (int ranks : {1, 2, 3, 4, 7, 8}) {
      SCOPED_TRACE(std::to_string(n) + " elements, " + std::to_string(ranks) + " ranks");
      const size_t stride = shardStride(n, ranks);
      EXPECT_GE(stride * ranks, n);
      EXPECT_LT(stride * ranks, n + ranks);  // padding of less than one element per rank
      size_t end = 0;
      bool shorter = false;
      for (int r = 0; r < ranks; ++r) {
        const FlatRange s = shardRange(n, r, ranks);
        EXPECT_EQ(s.begin, end);  // consecutive, in rank order
        EXPECT_LE(s.size(), stride);
        if (shorter) {
          EXPECT_EQ(s.size(), 0u);  // only the last ones are short
        }
        shorter = shorter || s.size() < stride;
        end = s.end;
      }
      EXPECT_EQ(end, n);  // and together exactly the array
    }
  }
  EXPECT_EQ(shardRange(10, 3, 4).begin, 9u);
  EXPECT_EQ(shardRange(10, 3, 4).end, 10u);
  EXPECT_EQ(shardRange(9, 3, 4).size(), 0u);
  EXPECT_THROW(shardRange(10, 4, 4), std::invalid_argument);
  EXPECT_THROW(shardRange(10, -1, 4), std::invalid_argument);
  EXPECT_THROW(shardStride(10, 0), std::invalid_argument);
}

TEST(HarnessZero, CutSegmentsKeepsTheShardsPartRebasedToZero) {
  const std::vector<DecaySegment> segments = {{0, 10, true}, {10, 5, false}, {15, 20, true}};
  auto equal = [](const std::vector<DecaySegment>& a, const std::vector<DecaySegment>& b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
      if (a[i].offset != b[i].offset || a[i].size != b[i].size || a[i].decay != b[i].decay)
        return false;
    return true;
  };
  EXPECT_TRUE(equal(cutSegments(segments, 5, 17), {{0, 5, true}, {5, 5, false}, {10, 2, true}}));
  EXPECT_TRUE(equal(cutSegments(segments, 10, 15), {{0, 5, false}}));
  EXPECT_TRUE(equal(cutSegments(segments, 0, 35), segments));
  EXPECT_TRUE(equal(cutSegments(segments, 30, 40), {{0, 5, true}}));
  EXPECT_TRUE(cutSegments(segments, 3, 3).empty());
  EXPECT_TRUE(cutSegments(segments, 35, 50).empty());
  EXPECT_THROW(cutSegments(segments, 4, 3), std::invalid_argument);

  // The model's segments cut at every shard: each element keeps its decay.
  Gpt model(smallConfig());
  const std::vector<DecaySegment> all = decaySegments(model.layout());
  std::vector<int> decay(model.size(), -1);
  for (const DecaySegment& s : all)
    for (size_t i = s.offset; i < s.offset + s.size; ++i) decay[i] = s.decay;
  for (int ranks : {1, 2, 3, 4, 7}) {
    std::vector<int> seen(model.size(), -1);
    for (int r = 0; r < ranks; ++r) {
      const FlatRange shard = shardRange(model.size(), r, ranks);
      for (const DecaySegment& s : cutSegments(all, shard.begin, shard.end)) {
        ASSERT_LE(s.offset + s.size, shard.size());
        for (size_t i = s.offset; i < s.offset + s.size; ++i) seen[shard.begin + i] = s.decay;
      }
    }
    EXPECT_EQ(seen, decay) << ranks << " ranks";
  }
}

TEST(HarnessZero, PartRangesAreTheModelsParts) {
  Gpt model(smallConfig());
  const std::vector<PartRange> parts = partRanges(model.layout());
  ASSERT_EQ(parts.size(), model.backwardParts().size());
  for (size_t i = 0; i < parts.size(); ++i) {
    const int part = model.backwardParts()[parts.size() - 1 - i];  // backward's reverse
    EXPECT_EQ(parts[i].part, part);
    EXPECT_EQ(parts[i].begin, model.partBegin(part));
    EXPECT_EQ(parts[i].size, model.partSize(part));
  }
  // The buckets from the layout are the model's.
  for (size_t elems : {size_t{1}, size_t{500}, size_t{5000}, kDefaultBucketElems}) {
    const std::vector<GradBucket> a = gradBuckets(model, elems),
                                  b = gradBuckets(model.layout(), elems);
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(a[i].offset, b[i].offset);
      EXPECT_EQ(a[i].size, b[i].size);
      EXPECT_EQ(a[i].part, b[i].part);
    }
  }
}

// A random batch of B sequences of T tokens, the same for the same seed.
struct Batch {
  static constexpr int B = 2, T = 16;
  std::vector<int> inputs, targets;
  explicit Batch(uint64_t seed) : inputs(B * T), targets(B * T) {
    Random rng(seed);
    for (int i = 0; i < B * T; ++i) {
      inputs[i] = static_cast<int>(rng.below(256));
      targets[i] = static_cast<int>(rng.below(256));
    }
  }
};

constexpr float kLr = 1e-2f, kMaxNorm = 0.5f;  // a norm that clips

// One step of the model on its own arrays.
float plainStep(Gpt& model, AdamW& adam, uint64_t seed) {
  const Batch batch(seed);
  model.zeroGrad();
  const float loss = model.forward(batch.inputs.data(), batch.targets.data(), Batch::B, Batch::T);
  model.backward();
  clipToNorm(model.grads(), std::sqrt(sumOfSquares(model.grads())), kMaxNorm);
  adam.step(model.params(), model.grads(), kLr);
  return loss;
}

// The same step through Zero (the model built on it).
float zeroStep(Zero& zero, Gpt& model, uint64_t seed) {
  const Batch batch(seed);
  zero.beginStep();
  const float loss = model.forward(batch.inputs.data(), batch.targets.data(), Batch::B, Batch::T);
  model.backward();
  zero.finishBackward();
  zero.step(kLr, kMaxNorm);
  return zero.averageLoss(loss);
}

bool sameBits(std::span<const float> a, std::span<const float> b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(HarnessZero, OneRankTrainsAsTheModelAloneAtEveryStage) {
  gyreComm_t comm = nullptr;
  ASSERT_EQ(gyreCommInitAll(&comm, 1, nullptr), gyreSuccess) << gyreGetLastError(nullptr);
  Gpt plain(smallConfig());
  plain.initialize(5);
  AdamW adam(decaySegments(plain.layout()), plain.size(), AdamWConfig{});
  std::vector<float> losses;
  for (int s = 0; s < 3; ++s) losses.push_back(plainStep(plain, adam, 10 + s));

  for (int stage = 0; stage <= 3; ++stage) {
    SCOPED_TRACE("stage " + std::to_string(stage));
    Zero zero(comm, plain.layout(), stage, AdamWConfig{}, 500);
    Gpt model(smallConfig(), {}, &zero);
    std::vector<float> init(model.size());
    model.initialize(5, init);
    zero.setParams(init);
    for (int s = 0; s < 3; ++s) EXPECT_EQ(zeroStep(zero, model, 10 + s), losses[s]) << "step " << s;
    EXPECT_TRUE(sameBits(zero.gatherParams(), plain.params()));
    EXPECT_TRUE(sameBits(zero.shardM(), adam.m()));
    EXPECT_TRUE(sameBits(zero.shardV(), adam.v()));
    EXPECT_EQ(zero.adamSteps(), 3);
    EXPECT_EQ(zero.shard().begin, 0u);
    EXPECT_EQ(zero.shard().end, plain.size());
    const ZeroMemory m = zero.memory();
    EXPECT_EQ(m.params, plain.size() * sizeof(float));
    EXPECT_EQ(m.grads, plain.size() * sizeof(float));
    EXPECT_EQ(m.optimizer, 2 * plain.size() * sizeof(float));
    // Stages 2 and 3 hand out per-part buffers, at most the embeddings'
    // (held through backward), two blocks' gradients and at stage 3 the
    // gathered parameters of two parts.
    if (stage < 2) {
      EXPECT_EQ(m.peakTransient, 0u);
    } else {
      EXPECT_GT(m.peakTransient, 0u);
    }
  }
  EXPECT_EQ(gyreCommDestroy(comm), gyreSuccess);
}

TEST(HarnessZero, MicroBatchesAddUpInTheShard) {
  gyreComm_t comm = nullptr;
  ASSERT_EQ(gyreCommInitAll(&comm, 1, nullptr), gyreSuccess) << gyreGetLastError(nullptr);
  const Batch first(30), second(31);
  // The model alone: two backwards into the same gradients, then the step.
  Gpt plain(smallConfig());
  plain.initialize(9);
  AdamW adam(decaySegments(plain.layout()), plain.size(), AdamWConfig{});
  plain.zeroGrad();
  for (const Batch* b : {&first, &second}) {
    plain.forward(b->inputs.data(), b->targets.data(), Batch::B, Batch::T);
    plain.backward();
  }
  clipToNorm(plain.grads(), std::sqrt(sumOfSquares(plain.grads())), kMaxNorm);
  adam.step(plain.params(), plain.grads(), kLr);

  for (int stage = 0; stage <= 3; ++stage) {
    SCOPED_TRACE("stage " + std::to_string(stage));
    Zero zero(comm, plain.layout(), stage);
    Gpt model(smallConfig(), {}, &zero);
    std::vector<float> init(model.size());
    model.initialize(9, init);
    zero.setParams(init);
    zero.beginStep(2);
    for (const Batch* b : {&first, &second}) {
      model.forward(b->inputs.data(), b->targets.data(), Batch::B, Batch::T);
      model.backward();
    }
    zero.finishBackward();
    zero.step(kLr, kMaxNorm);
    const std::vector<float> params = zero.gatherParams();
    if (stage < 2) {
      // The same additions into one array.
      EXPECT_TRUE(sameBits(params, plain.params()));
    } else {
      // Each backward's parts are added to the shard, so the order of the
      // additions differs.
      double diff = 0, norm = 0;
      for (size_t i = 0; i < params.size(); ++i) {
        diff += std::pow(double(params[i]) - plain.params()[i], 2);
        norm += std::pow(double(plain.params()[i]), 2);
      }
      EXPECT_LT(std::sqrt(diff / norm), 1e-6);
    }
  }
  EXPECT_EQ(gyreCommDestroy(comm), gyreSuccess);
}

TEST(HarnessZero, AShardCheckpointResumesTheSameRun) {
  gyreComm_t comm = nullptr;
  ASSERT_EQ(gyreCommInitAll(&comm, 1, nullptr), gyreSuccess) << gyreGetLastError(nullptr);
  for (int stage : {0, 3}) {
    SCOPED_TRACE("stage " + std::to_string(stage));
    Zero a(comm, Gpt(smallConfig()).layout(), stage);
    Gpt modelA(smallConfig(), {}, &a);
    std::vector<float> init(modelA.size());
    modelA.initialize(7, init);
    a.setParams(init);
    for (int s = 0; s < 2; ++s) zeroStep(a, modelA, 20 + s);

    Zero b(comm, modelA.layout(), stage);
    Gpt modelB(smallConfig(), {}, &b);
    b.loadShard(a.shardParams(), a.shardM(), a.shardV(), a.adamSteps());
    for (int s = 2; s < 4; ++s) EXPECT_EQ(zeroStep(a, modelA, 20 + s), zeroStep(b, modelB, 20 + s));
    EXPECT_TRUE(sameBits(a.gatherParams(), b.gatherParams()));
    EXPECT_EQ(b.adamSteps(), 4);
    EXPECT_THROW(b.loadShard(a.shardParams().first(3), a.shardM(), a.shardV(), 1),
                 std::invalid_argument);
  }
  EXPECT_EQ(gyreCommDestroy(comm), gyreSuccess);
}

TEST(HarnessZero, RefusesBadInputAndCallsOutOfOrder) {
  gyreComm_t comm = nullptr;
  ASSERT_EQ(gyreCommInitAll(&comm, 1, nullptr), gyreSuccess) << gyreGetLastError(nullptr);
  const std::vector<ParamInfo> layout = Gpt(smallConfig()).layout();
  EXPECT_THROW(Zero(comm, layout, 4), std::invalid_argument);
  EXPECT_THROW(Zero(comm, layout, -1), std::invalid_argument);
  EXPECT_THROW(Zero(comm, {}, 1), std::invalid_argument);
  EXPECT_THROW(Zero(comm, layout, 1, AdamWConfig{}, 0), std::invalid_argument);
  EXPECT_THROW(Zero(nullptr, layout, 1), GyreError);
  {
    Zero zero(comm, layout, 3);
    Gpt model(smallConfig(), {}, &zero);
    EXPECT_THROW(zero.setParams(std::vector<float>(3)), std::invalid_argument);
    EXPECT_THROW(zero.step(kLr, kMaxNorm), std::logic_error);
    EXPECT_THROW(zero.finishBackward(), std::logic_error);
    EXPECT_THROW(zero.beginStep(0), std::invalid_argument);
    EXPECT_THROW(zero.acquireParams(7), std::invalid_argument);
    EXPECT_THROW(zero.releaseParams(0), std::logic_error);  // not acquired
    // A backward outside beginStep() ... finishBackward().
    const Batch batch(1);
    model.forward(batch.inputs.data(), batch.targets.data(), Batch::B, Batch::T);
    EXPECT_THROW(model.backward(), std::logic_error);
    // Two micro-batches announced, one run.
    zero.beginStep(2);
    model.forward(batch.inputs.data(), batch.targets.data(), Batch::B, Batch::T);
    model.backward();
    EXPECT_THROW(zero.finishBackward(), std::logic_error);
    EXPECT_THROW(zero.setNormRanges({{0, model.size() + 1}}), std::invalid_argument);
  }
  EXPECT_EQ(gyreCommDestroy(comm), gyreSuccess);
}

TEST(HarnessZero, TheNormHookAndRangesDecideWhatIsClipped) {
  gyreComm_t comm = nullptr;
  ASSERT_EQ(gyreCommInitAll(&comm, 1, nullptr), gyreSuccess) << gyreGetLastError(nullptr);
  Gpt plain(smallConfig());
  plain.initialize(3);
  const Batch batch(4);
  plain.forward(batch.inputs.data(), batch.targets.data(), Batch::B, Batch::T);
  plain.backward();
  const size_t half = plain.size() / 2;
  const double expected = sumOfSquares(plain.grads().subspan(half));

  Zero zero(comm, plain.layout(), 2);
  Gpt model(smallConfig(), {}, &zero);
  std::vector<float> init(model.size());
  model.initialize(3, init);
  zero.setParams(init);
  double seen = -1;
  zero.setGlobalSumSq([&](double local) {
    seen = local;
    return 4 * local;  // as if three more ranks had the same
  });
  zero.setNormRanges({{half, plain.size()}});
  zero.beginStep();
  model.forward(batch.inputs.data(), batch.targets.data(), Batch::B, Batch::T);
  model.backward();
  zero.finishBackward();
  EXPECT_EQ(zero.step(kLr, 0.0f), std::sqrt(4 * expected));
  EXPECT_EQ(seen, expected);
  EXPECT_EQ(gyreCommDestroy(comm), gyreSuccess);
}

}  // namespace
}  // namespace gyre::harness::test
