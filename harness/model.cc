#include "harness/model.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "harness/layers.h"
#include "harness/random.h"

namespace gyre::harness {

namespace {

constexpr int kBlockParams = 12;     // per block, in gptLayout's order
constexpr int kFirstBlockParam = 2;  // after wte and wpe

bool endsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

}  // namespace

std::vector<ParamInfo> gptLayout(const GptConfig& c) {
  if (c.vocab <= 0 || c.maxSeq <= 0 || c.layers < 0 || c.heads <= 0 || c.dim <= 0 ||
      c.dim % c.heads != 0) {
    throw std::invalid_argument(
        "GptConfig: vocab, maxSeq, heads and dim must be positive and dim a multiple of heads");
  }
  std::vector<ParamInfo> layout;
  size_t offset = 0;
  auto add = [&](std::string name, std::vector<int> shape, int layer) {
    ParamInfo p;
    p.name = std::move(name);
    p.offset = offset;
    p.size = elementsOf(shape);
    p.decay = shape.size() == 2;
    p.shape = std::move(shape);
    p.layer = layer;
    offset += p.size;
    layout.push_back(std::move(p));
  };
  const int C = c.dim;
  add("wte", {c.vocab, C}, -1);
  add("wpe", {c.maxSeq, C}, -1);
  for (int l = 0; l < c.layers; ++l) {
    std::string h = "h" + std::to_string(l) + ".";
    add(h + "ln1.w", {C}, l);
    add(h + "ln1.b", {C}, l);
    add(h + "attn.qkv.w", {3 * C, C}, l);
    add(h + "attn.qkv.b", {3 * C}, l);
    add(h + "attn.proj.w", {C, C}, l);
    add(h + "attn.proj.b", {C}, l);
    add(h + "ln2.w", {C}, l);
    add(h + "ln2.b", {C}, l);
    add(h + "mlp.fc.w", {4 * C, C}, l);
    add(h + "mlp.fc.b", {4 * C}, l);
    add(h + "mlp.proj.w", {C, 4 * C}, l);
    add(h + "mlp.proj.b", {C}, l);
  }
  add("lnf.w", {C}, -1);
  add("lnf.b", {C}, -1);
  return layout;
}

struct Gpt::BlockParams {
  float *ln1w, *ln1b, *qkvw, *qkvb, *projw, *projb, *ln2w, *ln2b, *fcw, *fcb, *mprojw, *mprojb;
};

Gpt::Gpt(const GptConfig& config) : config_(config), layout_(gptLayout(config)) {
  useDeterministicBlas();
  const ParamInfo& last = layout_.back();
  const int total[] = {static_cast<int>(last.offset + last.size)};
  params_.resize(total);
  grads_.resize(total);
  blocks_.resize(config.layers);
}

const ParamInfo& Gpt::info(std::string_view name) const {
  auto it = std::find_if(layout_.begin(), layout_.end(),
                         [&](const ParamInfo& p) { return p.name == name; });
  if (it == layout_.end())
    throw std::invalid_argument("the model has no parameter " + std::string(name));
  return *it;
}

std::span<float> Gpt::param(std::string_view name) {
  const ParamInfo& p = info(name);
  return params_.span().subspan(p.offset, p.size);
}

std::span<float> Gpt::grad(std::string_view name) {
  const ParamInfo& p = info(name);
  return grads_.span().subspan(p.offset, p.size);
}

Gpt::BlockParams Gpt::block(float* base, int l) const {
  const ParamInfo* p = &layout_[kFirstBlockParam + kBlockParams * l];
  auto at = [&](int k) { return base + p[k].offset; };
  return {at(0), at(1), at(2), at(3), at(4), at(5), at(6), at(7), at(8), at(9), at(10), at(11)};
}

void Gpt::initialize(uint64_t seed) {
  Random rng(seed);
  const float residualScale = 1.0f / std::sqrt(2.0f * std::max(config_.layers, 1));
  for (const ParamInfo& p : layout_) {
    float* w = params_.data() + p.offset;
    if (p.shape.size() == 1) {
      // LayerNorm gains start at 1, every bias and LayerNorm shift at 0.
      const bool gain = endsWith(p.name, "ln1.w") || endsWith(p.name, "ln2.w") || p.name == "lnf.w";
      std::fill(w, w + p.size, gain ? 1.0f : 0.0f);
      continue;
    }
    // The projections back into the residual stream add up over the blocks;
    // GPT-2 scales them so that the stream's variance does not grow with depth.
    float std = endsWith(p.name, "proj.w") ? 0.02f * residualScale : 0.02f;
    for (size_t i = 0; i < p.size; ++i) w[i] = rng.normal(0.0f, std);
  }
}

void Gpt::blockForward(int l, const float* x, BlockActs& a) {
  const int N = B_ * T_, C = config_.dim;
  BlockParams p = block(params_.data(), l);
  a.ln1.resize({N, C});
  a.ln1Mean.resize({N});
  a.ln1Rstd.resize({N});
  a.qkv.resize({N, 3 * C});
  a.att.resize({B_, config_.heads, T_, T_});
  a.attOut.resize({N, C});
  a.attProj.resize({N, C});
  a.res1.resize({N, C});
  a.ln2.resize({N, C});
  a.ln2Mean.resize({N});
  a.ln2Rstd.resize({N});
  a.fc.resize({N, 4 * C});
  a.fcGelu.resize({N, 4 * C});
  a.fcProj.resize({N, C});
  a.res2.resize({N, C});

  layerNormForward(a.ln1.data(), a.ln1Mean.data(), a.ln1Rstd.data(), x, p.ln1w, p.ln1b, N, C);
  linearForward(a.qkv.data(), a.ln1.data(), p.qkvw, p.qkvb, N, C, 3 * C);
  attentionForward(a.attOut.data(), a.att.data(), a.qkv.data(), B_, T_, C, config_.heads);
  linearForward(a.attProj.data(), a.attOut.data(), p.projw, p.projb, N, C, C);
  residualForward(a.res1.data(), x, a.attProj.data(), N * C);
  layerNormForward(a.ln2.data(), a.ln2Mean.data(), a.ln2Rstd.data(), a.res1.data(), p.ln2w, p.ln2b,
                   N, C);
  linearForward(a.fc.data(), a.ln2.data(), p.fcw, p.fcb, N, C, 4 * C);
  geluForward(a.fcGelu.data(), a.fc.data(), N * 4 * C);
  linearForward(a.fcProj.data(), a.fcGelu.data(), p.mprojw, p.mprojb, N, 4 * C, C);
  residualForward(a.res2.data(), a.res1.data(), a.fcProj.data(), N * C);
}

float Gpt::forward(const int* inputs, const int* targets, int B, int T) {
  if (B <= 0 || T <= 0 || T > config_.maxSeq) {
    throw std::invalid_argument("Gpt::forward: need B > 0 and 0 < T <= maxSeq (" +
                                std::to_string(config_.maxSeq) + "), got B " + std::to_string(B) +
                                ", T " + std::to_string(T));
  }
  const int N = B * T, C = config_.dim, V = config_.vocab;
  for (int n = 0; n < N; ++n) {
    if (inputs[n] < 0 || inputs[n] >= V || targets[n] < 0 || targets[n] >= V) {
      throw std::invalid_argument("Gpt::forward: a token outside the vocabulary of " +
                                  std::to_string(V));
    }
  }
  B_ = B;
  T_ = T;
  inputs_.assign(inputs, inputs + N);
  targets_.assign(targets, targets + N);

  const float* wte = params_.data() + layout_[0].offset;
  const float* wpe = params_.data() + layout_[1].offset;
  encoded_.resize({N, C});
  embeddingForward(encoded_.data(), inputs, wte, wpe, B, T, C);
  const float* x = encoded_.data();
  for (int l = 0; l < config_.layers; ++l) {
    blockForward(l, x, blocks_[l]);
    x = blocks_[l].res2.data();
  }
  const ParamInfo& lnfw = layout_[layout_.size() - 2];
  const ParamInfo& lnfb = layout_.back();
  lnf_.resize({N, C});
  lnfMean_.resize({N});
  lnfRstd_.resize({N});
  layerNormForward(lnf_.data(), lnfMean_.data(), lnfRstd_.data(), x, params_.data() + lnfw.offset,
                   params_.data() + lnfb.offset, N, C);
  logits_.resize({N, V});
  linearForward(logits_.data(), lnf_.data(), wte, nullptr, N, C, V);  // the head is tied to wte
  probs_.resize({N, V});
  return crossEntropyForward(probs_.data(), logits_.data(), targets, N, V);
}

void Gpt::blockBackward(int l, const float* x, const BlockActs& a, const float* dres2, float* dx) {
  const int N = B_ * T_, C = config_.dim;
  BlockParams p = block(params_.data(), l);
  BlockParams g = block(grads_.data(), l);
  // res2 = res1 + mlp(ln2(res1)): the MLP branch first.
  Tensor dfcGelu({N, 4 * C}), dfc({N, 4 * C}), dln2({N, C});
  linearBackward(dfcGelu.data(), g.mprojw, g.mprojb, dres2, a.fcGelu.data(), p.mprojw, N, 4 * C, C);
  geluBackward(dfc.data(), a.fc.data(), dfcGelu.data(), N * 4 * C);
  linearBackward(dln2.data(), g.fcw, g.fcb, dfc.data(), a.ln2.data(), p.fcw, N, C, 4 * C);
  Tensor dres1({N, C});
  std::copy(dres2, dres2 + static_cast<size_t>(N) * C, dres1.data());  // the skip path
  layerNormBackward(dres1.data(), g.ln2w, g.ln2b, dln2.data(), a.res1.data(), p.ln2w,
                    a.ln2Mean.data(), a.ln2Rstd.data(), N, C);
  // res1 = x + attn(ln1(x)).
  for (size_t i = 0; i < dres1.size(); ++i) dx[i] += dres1[i];
  Tensor dattOut({N, C}), dqkv({N, 3 * C}), dln1({N, C});
  linearBackward(dattOut.data(), g.projw, g.projb, dres1.data(), a.attOut.data(), p.projw, N, C, C);
  attentionBackward(dqkv.data(), dattOut.data(), a.qkv.data(), a.att.data(), B_, T_, C,
                    config_.heads);
  linearBackward(dln1.data(), g.qkvw, g.qkvb, dqkv.data(), a.ln1.data(), p.qkvw, N, C, 3 * C);
  layerNormBackward(dx, g.ln1w, g.ln1b, dln1.data(), x, p.ln1w, a.ln1Mean.data(), a.ln1Rstd.data(),
                    N, C);
}

void Gpt::backward() {
  if (B_ == 0) throw std::logic_error("Gpt::backward before any forward");
  const int N = B_ * T_, C = config_.dim, V = config_.vocab;
  float* wte = params_.data() + layout_[0].offset;
  float* dwte = grads_.data() + layout_[0].offset;
  float* dwpe = grads_.data() + layout_[1].offset;
  const ParamInfo& lnfw = layout_[layout_.size() - 2];
  const ParamInfo& lnfb = layout_.back();

  Tensor dlogits({N, V}), dlnf({N, C});
  crossEntropyBackward(dlogits.data(), probs_.data(), targets_.data(), N, V);
  linearBackward(dlnf.data(), dwte, nullptr, dlogits.data(), lnf_.data(), wte, N, C, V);
  const float* last = config_.layers > 0 ? blocks_.back().res2.data() : encoded_.data();
  Tensor dx({N, C});
  layerNormBackward(dx.data(), grads_.data() + lnfw.offset, grads_.data() + lnfb.offset,
                    dlnf.data(), last, params_.data() + lnfw.offset, lnfMean_.data(),
                    lnfRstd_.data(), N, C);
  if (hook_) hook_(config_.layers);
  for (int l = config_.layers - 1; l >= 0; --l) {
    const float* x = l > 0 ? blocks_[l - 1].res2.data() : encoded_.data();
    Tensor dinp({N, C});
    blockBackward(l, x, blocks_[l], dx.data(), dinp.data());
    dx = std::move(dinp);
    if (hook_) hook_(l);
  }
  embeddingBackward(dwte, dwpe, dx.data(), inputs_.data(), B_, T_, C);
  if (hook_) hook_(-1);
}

size_t Gpt::gradReadyFrom(int part) const {
  if (part < -1 || part > config_.layers) {
    throw std::invalid_argument("Gpt::gradReadyFrom: no part " + std::to_string(part) +
                                " (from -1 to " + std::to_string(config_.layers) + ")");
  }
  if (part == -1) return 0;
  if (part == config_.layers) return layout_[layout_.size() - 2].offset;  // lnf.w
  return layout_[kFirstBlockParam + kBlockParams * part].offset;
}

}  // namespace gyre::harness
