// The model's pieces against the whole model, in one process: tensor-parallel
// shards run on threads that sum their partial results through a shared
// buffer, and pipeline stages run one after the other, each handing its
// output (and, backwards, its input's gradient) to the next. The loss and
// every gradient, put back into global coordinates, must be the whole
// model's. The layout's bookkeeping (splits, stages, global indices) is
// checked here too.
#include <gtest/gtest.h>

#include <barrier>
#include <cmath>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "harness/model.h"

namespace gyre::harness::test {
namespace {

GptConfig config() { return {.vocab = 11, .maxSeq = 8, .layers = 4, .heads = 4, .dim = 16}; }

struct Batch {
  int B = 2, T = 8;
  std::vector<int> inputs, targets;
  Batch() {
    for (int i = 0; i < B * T; ++i) {
      inputs.push_back((i * 7 + 3) % 11);
      targets.push_back((i * 5 + 1) % 11);
    }
  }
};

// The whole model's loss and gradients on the batch.
struct Reference {
  Gpt model{config()};
  float loss = 0;
  Reference() {
    model.initialize(5);
    Batch b;
    loss = model.forward(b.inputs.data(), b.targets.data(), b.B, b.T);
    model.backward();
  }
  // The global tensor `name`'s gradient (or parameter) element g.
  float grad(const std::string& name, size_t g) { return model.grad(name)[g]; }
  float param(const std::string& name, size_t g) { return model.param(name)[g]; }
};

// Norm of (piece's gradient - the whole model's at the same global
// elements) relative to the latter's norm; `sum` adds extra to the piece.
double gradDifference(Reference& ref, Gpt& piece, const ParamInfo& p,
                      const std::vector<float>* extra = nullptr) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < p.size; ++i) {
    const double want = ref.grad(p.name, globalIndex(p, piece.shard(), i));
    const double got = piece.grads()[p.offset + i] + (extra ? (*extra)[i] : 0.0f);
    diff += (got - want) * (got - want);
    norm += want * want;
  }
  return norm == 0 ? std::sqrt(diff) : std::sqrt(diff / norm);
}

TEST(HarnessShard, LayoutSplitsAndStages) {
  const GptConfig c = config();
  const auto whole = gptLayout(c);
  size_t total = 0;
  for (int r = 0; r < 4; ++r) {
    const ModelShard s{.tpRank = r, .tpSize = 4};
    for (const ParamInfo& p : gptLayout(c, s)) {
      if (p.split == TpSplit::None) continue;
      total += p.size;
    }
  }
  size_t split = 0;
  for (const ParamInfo& p : whole)
    if (p.name.find("qkv") != std::string::npos || p.name.find("proj.w") != std::string::npos ||
        p.name.find("fc") != std::string::npos)
      split += p.size;
  EXPECT_EQ(total, split) << "the tensor-parallel pieces cover each split tensor once";

  // Every global element of a split tensor is held by exactly one rank.
  for (const ParamInfo& g : whole) {
    std::vector<int> hits(g.size, 0);
    for (int r = 0; r < 2; ++r) {
      const ModelShard s{.tpRank = r, .tpSize = 2};
      Gpt piece(c, s);
      const ParamInfo& p = piece.info(g.name);
      for (size_t i = 0; i < p.size; ++i) ++hits[globalIndex(p, s, i)];
    }
    const int want = g.name.find("qkv") != std::string::npos ||
                             g.name.find("proj.w") != std::string::npos ||
                             g.name.find("fc") != std::string::npos
                         ? 1
                         : 2;
    for (size_t i = 0; i < g.size; ++i) ASSERT_EQ(hits[i], want) << g.name << " element " << i;
  }

  // Stages: 4 blocks over 3 stages are 2, 1, 1; the last holds a tied wte.
  const ModelShard s0 = pipelineStage(c, 0, 3), s2 = pipelineStage(c, 2, 3);
  EXPECT_EQ(s0.firstLayer, 0);
  EXPECT_EQ(s0.lastLayer, 2);
  EXPECT_EQ(pipelineStage(c, 1, 3).lastLayer, 3);
  EXPECT_TRUE(s0.embeddings && !s0.head && s2.head && !s2.embeddings);
  Gpt last(c, s2);
  EXPECT_TRUE(last.layout().back().tiedCopy);
  EXPECT_EQ(last.backwardParts(), (std::vector<int>{4, 3}));
  EXPECT_THROW(pipelineStage(c, 0, 5), std::invalid_argument);
  EXPECT_THROW((Gpt{c, ModelShard{.tpRank = 0, .tpSize = 3}}), std::invalid_argument);
  EXPECT_THROW(last.forward(nullptr, nullptr, 1, 1), std::logic_error);
}

TEST(HarnessShard, EveryMeshStartsFromTheSameModel) {
  Reference ref;
  for (int r = 0; r < 2; ++r) {
    const ModelShard s = pipelineStage(config(), 1, 2, r, 2);
    Gpt piece(config(), s);
    piece.initialize(5);
    for (const ParamInfo& p : piece.layout())
      for (size_t i = 0; i < p.size; ++i)
        ASSERT_EQ(piece.params()[p.offset + i], ref.param(p.name, globalIndex(p, s, i))) << p.name;
  }
}

TEST(HarnessShard, TensorParallelMatchesTheWholeModel) {
  for (int t : {2, 4}) {
    Reference ref;
    std::vector<std::unique_ptr<Gpt>> pieces;
    for (int r = 0; r < t; ++r) {
      pieces.push_back(std::make_unique<Gpt>(config(), ModelShard{.tpRank = r, .tpSize = t}));
      pieces.back()->initialize(5);
    }
    // A sum over the threads in rank order, the same bits on each.
    std::barrier sync(t);
    std::vector<float*> slots(t);
    std::vector<float> sum;
    for (int r = 0; r < t; ++r) {
      pieces[r]->setTpReduce([&, r](float* data, size_t n) {
        slots[r] = data;
        sync.arrive_and_wait();
        if (r == 0) {
          sum.assign(n, 0.0f);
          for (int k = 0; k < t; ++k)
            for (size_t i = 0; i < n; ++i) sum[i] += slots[k][i];
        }
        sync.arrive_and_wait();
        std::copy(sum.begin(), sum.end(), data);
        sync.arrive_and_wait();
      });
    }
    std::vector<float> losses(t);
    std::vector<std::thread> threads;
    for (int r = 0; r < t; ++r) {
      threads.emplace_back([&, r] {
        Batch b;
        losses[r] = pieces[r]->forward(b.inputs.data(), b.targets.data(), b.B, b.T);
        pieces[r]->backward();
      });
    }
    for (auto& th : threads) th.join();
    for (int r = 0; r < t; ++r) {
      EXPECT_NEAR(losses[r], ref.loss, 1e-5 * ref.loss) << "tp " << t << " rank " << r;
      for (const ParamInfo& p : pieces[r]->layout())
        EXPECT_LT(gradDifference(ref, *pieces[r], p), 1e-5) << "tp " << t << " " << p.name;
    }
  }
}

TEST(HarnessShard, PipelineStagesMatchTheWholeModel) {
  for (int stages : {2, 4}) {
    Reference ref;
    Batch b;
    const int N = b.B * b.T, C = config().dim;
    std::vector<std::unique_ptr<Gpt>> st;
    std::vector<Activations> acts(stages);
    for (int s = 0; s < stages; ++s) {
      st.push_back(std::make_unique<Gpt>(config(), pipelineStage(config(), s, stages)));
      st.back()->initialize(5);
    }
    float loss = 0;
    for (int s = 0; s < stages; ++s) {
      const float* in = s > 0 ? st[s - 1]->output(acts[s - 1]) : nullptr;
      loss = st[s]->forward(acts[s], b.inputs.data(), b.targets.data(), in, b.B, b.T);
    }
    EXPECT_NEAR(loss, ref.loss, 1e-6 * ref.loss);
    std::vector<float> dOut, dIn(static_cast<size_t>(N) * C);
    for (int s = stages - 1; s >= 0; --s) {
      st[s]->backward(acts[s], s == stages - 1 ? nullptr : dOut.data(),
                      s > 0 ? dIn.data() : nullptr);
      dOut = dIn;
    }
    // The two copies of wte each hold a share of its gradient: their sum is
    // the whole model's.
    const ParamInfo& copy = st[stages - 1]->layout().back();
    std::vector<float> copyGrad(st[stages - 1]->grads().begin() + copy.offset,
                                st[stages - 1]->grads().begin() + copy.offset + copy.size);
    for (int s = 0; s < stages; ++s) {
      for (const ParamInfo& p : st[s]->layout()) {
        if (p.tiedCopy) continue;
        const bool wte = p.name == "wte";
        EXPECT_LT(gradDifference(ref, *st[s], p, wte ? &copyGrad : nullptr), 1e-6)
            << stages << " stages, stage " << s << " " << p.name;
      }
    }
    EXPECT_THROW(st[stages - 1]->backward(acts[stages - 1], nullptr, nullptr),
                 std::invalid_argument)
        << "a later stage must be given somewhere to write its input's gradient";
  }
}

}  // namespace
}  // namespace gyre::harness::test
