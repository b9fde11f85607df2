#include "harness/model.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "harness/layers.h"
#include "harness/random.h"
#include "harness/token_file.h"

namespace gyre::harness {

namespace {

// Tensors per block, in gptLayout's order: the dense MLP's four, or a
// mixture of experts' five.
int blockParams(const GptConfig& c) { return c.experts > 0 ? 13 : 12; }

MoeConfig moeConfig(const GptConfig& c) {
  return {.experts = c.experts, .topK = c.topK, .capacityFactor = c.capacityFactor,
          .auxCoef = c.auxCoef};
}

bool endsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

void addBias(float* out, const float* bias, int N, int OC) {
  for (int n = 0; n < N; ++n) {
    float* o = out + static_cast<size_t>(n) * OC;
    for (int oc = 0; oc < OC; ++oc) o[oc] += bias[oc];
  }
}

void checkTokens(const int* tokens, int n, int vocab, const char* what) {
  for (int i = 0; i < n; ++i) {
    if (tokens[i] < 0 || tokens[i] >= vocab) {
      throw std::invalid_argument(std::string("Gpt::forward: ") + what +
                                  " hold a token outside the vocabulary of " +
                                  std::to_string(vocab));
    }
  }
}

}  // namespace

Gpt::Gpt(const GptConfig& config, const ModelShard& shard, PartStorage* storage)
    : config_(config),
      shard_(shard),
      lastLayer_(shardLastLayer(config, shard)),
      layout_(gptLayout(config, shard)),
      storage_(storage) {
  useDeterministicBlas();
  size_ = layout_.back().offset + layout_.back().size;
  if (shard_.head) backwardParts_.push_back(config_.layers);
  for (int l = lastLayer_ - 1; l >= shard_.firstLayer; --l) backwardParts_.push_back(l);
  if (shard_.embeddings) backwardParts_.push_back(-1);
  if (storage_ == nullptr) {
    const int total[] = {static_cast<int>(size_)};
    params_.resize(total);
    grads_.resize(total);
  }
}

const ParamInfo& Gpt::info(std::string_view name) const {
  // The tied copy of wte is a later entry of the same name; the first match
  // is what this rank's wte is.
  auto it = std::find_if(layout_.begin(), layout_.end(),
                         [&](const ParamInfo& p) { return p.name == name; });
  if (it == layout_.end())
    throw std::invalid_argument("the model has no parameter " + std::string(name));
  return *it;
}

std::span<float> Gpt::params() {
  if (storage_) throw std::logic_error("Gpt::params: the parameters live in the model's storage");
  return params_.span();
}
std::span<const float> Gpt::params() const {
  if (storage_) throw std::logic_error("Gpt::params: the parameters live in the model's storage");
  return params_.span();
}
std::span<float> Gpt::grads() {
  if (storage_) throw std::logic_error("Gpt::grads: the gradients live in the model's storage");
  return grads_.span();
}
std::span<const float> Gpt::grads() const {
  if (storage_) throw std::logic_error("Gpt::grads: the gradients live in the model's storage");
  return grads_.span();
}

std::span<float> Gpt::param(std::string_view name) {
  const ParamInfo& p = info(name);
  return params().subspan(p.offset, p.size);
}

std::span<float> Gpt::grad(std::string_view name) {
  const ParamInfo& p = info(name);
  return grads().subspan(p.offset, p.size);
}

size_t Gpt::partBegin(int part) const {
  for (const ParamInfo& p : layout_)
    if (p.part == part) return p.offset;
  throw std::invalid_argument("Gpt: this piece of the model has no part " + std::to_string(part));
}

size_t Gpt::partSize(int part) const {
  size_t n = 0;
  for (const ParamInfo& p : layout_)
    if (p.part == part) n += p.size;
  if (n == 0)
    throw std::invalid_argument("Gpt: this piece of the model has no part " + std::to_string(part));
  return n;
}

template <typename F>
Gpt::BlockOf<F> Gpt::block(F* part, int l) const {
  const ParamInfo* p =
      &layout_[(shard_.embeddings ? 2 : 0) + blockParams(config_) * (l - shard_.firstLayer)];
  const size_t base = p[0].offset;
  auto at = [&](int k) { return part + (p[k].offset - base); };
  if (config_.experts > 0)
    return {at(0), at(1), at(2), at(3), at(4), at(5), at(6), at(7), at(9), at(10), at(11), at(12),
            at(8)};
  return {at(0), at(1), at(2), at(3), at(4), at(5), at(6), at(7), at(8), at(9), at(10), at(11),
          nullptr};
}

void Gpt::initialize(uint64_t seed) { initialize(seed, params()); }

void Gpt::initialize(uint64_t seed, std::span<float> out) const {
  if (out.size() != size_)
    throw std::invalid_argument("Gpt::initialize: a buffer of the wrong size");
  const float residualScale = 1.0f / std::sqrt(2.0f * std::max(config_.layers, 1));
  std::vector<float> global;
  for (const ParamInfo& p : layout_) {
    float* w = out.data() + p.offset;
    if (p.shape.size() == 1) {
      // LayerNorm gains start at 1, every bias and LayerNorm shift at 0.
      const bool gain = endsWith(p.name, "ln1.w") || endsWith(p.name, "ln2.w") || p.name == "lnf.w";
      std::fill(w, w + p.size, gain ? 1.0f : 0.0f);
      continue;
    }
    // The projections back into the residual stream add up over the blocks;
    // GPT-2 scales them so that the stream's variance does not grow with depth.
    const float std = endsWith(p.name, "proj.w") ? 0.02f * residualScale : 0.02f;
    // The tensor's own stream (from its name), drawn whole, so that every
    // piece of it on every mesh is the same numbers.
    const auto* name = reinterpret_cast<const uint8_t*>(p.name.data());
    Random rng(seed ^ fnv1a64({name, p.name.size()}));
    global.resize(static_cast<size_t>(p.globalShape[0]) * p.globalShape[1]);
    for (float& x : global) x = rng.normal(0.0f, std);
    for (size_t i = 0; i < p.size; ++i) w[i] = global[globalIndex(p, shard_, i)];
  }
}

const float* Gpt::acquireParams(int part) {
  return storage_ ? storage_->acquireParams(part) : params_.data() + partBegin(part);
}
void Gpt::releaseParams(int part) {
  if (storage_) storage_->releaseParams(part);
}
float* Gpt::acquireGrads(int part) {
  return storage_ ? storage_->acquireGrads(part) : grads_.data() + partBegin(part);
}
void Gpt::releaseGrads(int part) {
  if (storage_) storage_->releaseGrads(part);
  if (hook_) hook_(part);
}

void Gpt::zeroGrad() {
  // A storage-backed model's gradients are the storage's to clear.
  if (!storage_) grads_.zero();
}

void Gpt::setSeqParallel(SeqParallel sp) {
  const int localHeads = config_.heads / shard_.tpSize;
  if (sp.size < 1 || sp.rank < 0 || sp.rank >= sp.size)
    throw std::invalid_argument("Gpt: sequence-parallel rank " + std::to_string(sp.rank) +
                                " of " + std::to_string(sp.size));
  if (sp.size > 1 && (!sp.toHeads || !sp.toSeq))
    throw std::invalid_argument("Gpt: sequence parallelism needs both exchanges");
  if (sp.shareHeads < 0 || sp.shareHeads > localHeads)
    throw std::invalid_argument("Gpt: a sequence-parallel share of " +
                                std::to_string(sp.shareHeads) + " heads of " +
                                std::to_string(localHeads));
  if (!sp.runs.empty()) {
    if (static_cast<int>(sp.runs.size()) != sp.size ||
        std::any_of(sp.runs.begin(), sp.runs.end(), [](int n) { return n < 1; }))
      throw std::invalid_argument(
          "Gpt: sequence-parallel runs need one count of at least 1 token "
          "per rank of " +
          std::to_string(sp.size));
  }
  if (sp.size == 1) sp.shareHeads = localHeads;
  sp_ = std::move(sp);
}

ExpertExchange& Gpt::expertExchange() const {
  if (experts_ == nullptr)
    throw std::logic_error("Gpt: expert parallelism needs setExpertExchange");
  if (experts_->size() != shard_.epSize || experts_->rank() != shard_.epRank) {
    throw std::invalid_argument("Gpt: an expert exchange of rank " +
                                std::to_string(experts_->rank()) + " of " +
                                std::to_string(experts_->size()) + " for the shard's " +
                                std::to_string(shard_.epRank) + " of " +
                                std::to_string(shard_.epSize));
  }
  return *experts_;
}

Gpt::AttentionSide Gpt::attentionSide(int T) const {
  const int localHeads = config_.heads / shard_.tpSize, headDim = config_.dim / config_.heads;
  if (sp_.size == 1) return {false, T, localHeads, localHeads * headDim};
  const std::vector<size_t> runs = seqRuns(T);
  size_t tokens = 0;
  for (size_t n : runs) tokens += n;
  return {true, static_cast<int>(tokens), sp_.shareHeads, sp_.shareHeads * headDim};
}

std::vector<size_t> Gpt::seqRuns(int T) const {
  if (sp_.runs.empty()) return std::vector<size_t>(sp_.size, static_cast<size_t>(T));
  if (sp_.runs[sp_.rank] != T)
    throw std::invalid_argument("Gpt: this sequence-parallel rank's run is " +
                                std::to_string(sp_.runs[sp_.rank]) + " tokens, not " +
                                std::to_string(T));
  return {sp_.runs.begin(), sp_.runs.end()};
}

size_t Gpt::seqPosition(int T) const {
  const std::vector<size_t> runs = seqRuns(T);
  size_t position = 0;
  for (int r = 0; r < sp_.rank; ++r) position += runs[r];
  return position;
}

void Gpt::reduceTp(float* data, size_t count) {
  if (shard_.tpSize == 1) return;
  if (!tpReduce_) throw std::logic_error("Gpt: tensor parallelism needs setTpReduce");
  tpReduce_(data, count);
}

// Tensor parallel (Megatron): this rank's heads and MLP units are the
// column-parallel qkv and fc (their outputs split), and proj and mlp.proj the
// row-parallel layers (their inputs split) whose partial products reduceTp
// sums before the bias, which every rank holds whole, is added once.
void Gpt::blockForward(int l, const float* x, Activations::Block& a, int B, int T) {
  const int N = B * T, C = config_.dim, t = shard_.tpSize;
  const int Cl = C / t, Hl = 4 * C / t, NHl = config_.heads / t;
  const auto [sp, Ts, NHs, Cs] = attentionSide(T);
  const BlockOf<const float> p = block(acquireParams(l), l);
  a.ln1.resize({N, C});
  a.ln1Mean.resize({N});
  a.ln1Rstd.resize({N});
  a.qkv.resize({B * Ts, 3 * Cs});
  a.att.resize({B, NHs, Ts, Ts});
  a.attOut.resize({N, Cl});
  a.attProj.resize({N, C});
  a.res1.resize({N, C});
  a.ln2.resize({N, C});
  a.ln2Mean.resize({N});
  a.ln2Rstd.resize({N});
  a.fc.resize({config_.experts > 0 ? 0 : N, Hl});
  a.fcGelu.resize({config_.experts > 0 ? 0 : N, Hl});
  a.fcProj.resize({N, C});
  a.res2.resize({N, C});

  layerNormForward(a.ln1.data(), a.ln1Mean.data(), a.ln1Rstd.data(), x, p.ln1w, p.ln1b, N, C);
  if (sp) {
    Tensor qkv({N, 3 * Cl}), attOut({B * Ts, Cs});
    linearForward(qkv.data(), a.ln1.data(), p.qkvw, p.qkvb, N, C, 3 * Cl);
    sp_.toHeads(qkv.data(), a.qkv.data(), B, seqRuns(T), true);
    if (NHs > 0)  // more ranks than heads leaves some ranks none
      attentionForward(attOut.data(), a.att.data(), a.qkv.data(), B, Ts, Cs, NHs);
    sp_.toSeq(attOut.data(), a.attOut.data(), B, seqRuns(T), false);
  } else {
    linearForward(a.qkv.data(), a.ln1.data(), p.qkvw, p.qkvb, N, C, 3 * Cl);
    attentionForward(a.attOut.data(), a.att.data(), a.qkv.data(), B, T, Cl, NHl);
  }
  linearForward(a.attProj.data(), a.attOut.data(), p.projw, nullptr, N, Cl, C);
  reduceTp(a.attProj.data(), a.attProj.size());
  addBias(a.attProj.data(), p.projb, N, C);
  residualForward(a.res1.data(), x, a.attProj.data(), N * C);
  layerNormForward(a.ln2.data(), a.ln2Mean.data(), a.ln2Rstd.data(), a.res1.data(), p.ln2w, p.ln2b,
                   N, C);
  if (config_.experts > 0) {
    const auto experts = expertViews<ExpertParams>(p.fcw, p.fcb, p.mprojw, p.mprojb,
                                                 shard_.localExperts(config_), C);
    if (shard_.epSize > 1) {
      moeForward(moeConfig(config_), expertExchange(), a.ln2.data(), p.gatew, experts,
                 a.fcProj.data(), N, C, a.moe, a.moeRows);
    } else {
      moeForward(moeConfig(config_), a.ln2.data(), p.gatew, experts, a.fcProj.data(), N, C,
                 a.moe, a.moeRows);
    }
    moeCounts_.slots += static_cast<int64_t>(N) * config_.topK;
    for (int d : a.moe.dropped) moeCounts_.dropped += d;
  } else {
    linearForward(a.fc.data(), a.ln2.data(), p.fcw, p.fcb, N, C, Hl);
    geluForward(a.fcGelu.data(), a.fc.data(), N * Hl);
    linearForward(a.fcProj.data(), a.fcGelu.data(), p.mprojw, nullptr, N, Hl, C);
    reduceTp(a.fcProj.data(), a.fcProj.size());
    addBias(a.fcProj.data(), p.mprojb, N, C);
  }
  residualForward(a.res2.data(), a.res1.data(), a.fcProj.data(), N * C);
  releaseParams(l);
}

float Gpt::forward(Activations& a, const int* inputs, const int* targets, const float* input, int B,
                   int T) {
  if (B <= 0 || T <= 0 || attentionSide(T).tokens > config_.maxSeq) {
    throw std::invalid_argument(
        "Gpt::forward: need B > 0 and 0 < T, the whole sequence (T on each "
        "sequence-parallel rank, or their runs) <= maxSeq (" +
        std::to_string(config_.maxSeq) + "), got B " + std::to_string(B) + ", T " +
        std::to_string(T) + " on rank " + std::to_string(sp_.rank) + " of " +
        std::to_string(sp_.size));
  }
  const int N = B * T, C = config_.dim, V = config_.vocab;
  if (shard_.embeddings ? inputs == nullptr : input == nullptr)
    throw std::invalid_argument(
        "Gpt::forward: no input (tokens on the first stage, else activations)");
  if (shard_.head && targets == nullptr)
    throw std::invalid_argument("Gpt::forward: the last stage needs the targets");
  if (shard_.embeddings) checkTokens(inputs, N, V, "the inputs");
  if (shard_.head) checkTokens(targets, N, V, "the targets");
  a.B = B;
  a.T = T;
  if (shard_.embeddings) a.inputs.assign(inputs, inputs + N);
  if (shard_.head) a.targets.assign(targets, targets + N);

  a.input.resize({N, C});
  if (shard_.embeddings) {
    const float* e = acquireParams(-1);
    embeddingForward(a.input.data(), inputs, e, e + (V + seqPosition(T)) * C, B, T, C);
    releaseParams(-1);
  } else {
    std::copy(input, input + static_cast<size_t>(N) * C, a.input.data());
  }
  a.blocks.resize(lastLayer_ - shard_.firstLayer);
  a.aux = 0;
  for (int l = shard_.firstLayer; l < lastLayer_; ++l)
    blockForward(
        l,
        l == shard_.firstLayer ? a.input.data() : a.blocks[l - shard_.firstLayer - 1].res2.data(),
        a.blocks[l - shard_.firstLayer], B, T);
  if (config_.experts > 0)
    for (const Activations::Block& b : a.blocks) a.aux += b.moe.auxLoss;
  a.loss = shard_.head ? headForward(a, output(a)) : 0.0f;
  return a.loss;
}

// The head: lnf, then logits against wte (tied; on a last stage without the
// embeddings, the stage's copy of it at the end of the head's part).
float Gpt::headForward(Activations& a, const float* x) {
  const int N = a.B * a.T, C = config_.dim, V = config_.vocab;
  const int L = config_.layers;
  const float* h = acquireParams(L);
  const float* wte = shard_.embeddings ? acquireParams(-1) : h + 2 * C;
  a.lnf.resize({N, C});
  a.lnfMean.resize({N});
  a.lnfRstd.resize({N});
  layerNormForward(a.lnf.data(), a.lnfMean.data(), a.lnfRstd.data(), x, h, h + C, N, C);
  a.logits.resize({N, V});
  linearForward(a.logits.data(), a.lnf.data(), wte, nullptr, N, C, V);
  a.probs.resize({N, V});
  const float loss = crossEntropyForward(a.probs.data(), a.logits.data(), a.targets.data(), N, V);
  if (shard_.embeddings) releaseParams(-1);
  releaseParams(L);
  return loss;
}

const float* Gpt::output(const Activations& a) const {
  return a.blocks.empty() ? a.input.data() : a.blocks.back().res2.data();
}

void Gpt::headBackward(Activations& a, float lossScale, float* dx, float* dwte) {
  const int N = a.B * a.T, C = config_.dim, V = config_.vocab, L = config_.layers;
  const float* h = acquireParams(L);
  float* g = acquireGrads(L);
  const float* wte = shard_.embeddings ? acquireParams(-1) : h + 2 * C;
  if (!shard_.embeddings) dwte = g + 2 * C;
  Tensor dlogits({N, V}), dlnf({N, C});
  crossEntropyBackward(dlogits.data(), a.probs.data(), a.targets.data(), N, V);
  if (lossScale != 1.0f)
    for (size_t i = 0; i < dlogits.size(); ++i) dlogits[i] *= lossScale;
  linearBackward(dlnf.data(), dwte, nullptr, dlogits.data(), a.lnf.data(), wte, N, C, V);
  layerNormBackward(dx, g, g + C, dlnf.data(), output(a), h, a.lnfMean.data(), a.lnfRstd.data(), N,
                    C);
  if (shard_.embeddings) releaseParams(-1);
  releaseParams(L);
  releaseGrads(L);
}

void Gpt::blockBackward(int l, const float* x, const Activations::Block& a, const float* dres2,
                        float* dx, int B, int T) {
  const int N = B * T, C = config_.dim, t = shard_.tpSize;
  const int Cl = C / t, Hl = 4 * C / t, NHl = config_.heads / t;
  const auto [sp, Ts, NHs, Cs] = attentionSide(T);
  const BlockOf<const float> p = block(acquireParams(l), l);
  const BlockOf<float> g = block(acquireGrads(l), l);
  // res2 = res1 + mlp(ln2(res1)): the MLP branch first.
  Tensor dln2({N, C});
  if (config_.experts > 0) {
    const int E = shard_.localExperts(config_);
    const auto experts = expertViews<ExpertParams>(p.fcw, p.fcb, p.mprojw, p.mprojb, E, C);
    const auto grads = expertViews<ExpertGrads>(g.fcw, g.fcb, g.mprojw, g.mprojb, E, C);
    if (shard_.epSize > 1) {
      moeBackward(moeConfig(config_), expertExchange(), a.ln2.data(), p.gatew, experts, grads,
                  a.moe, a.moeRows, dres2, auxScale_, g.gatew, dln2.data(), C);
    } else {
      moeBackward(moeConfig(config_), a.ln2.data(), p.gatew, experts, grads, a.moe, a.moeRows,
                  dres2, auxScale_, g.gatew, dln2.data(), C);
    }
  } else {
    Tensor dfcGelu({N, Hl}), dfc({N, Hl});
    linearBackward(dfcGelu.data(), g.mprojw, g.mprojb, dres2, a.fcGelu.data(), p.mprojw, N, Hl,
                   C);
    geluBackward(dfc.data(), a.fc.data(), dfcGelu.data(), N * Hl);
    linearBackward(dln2.data(), g.fcw, g.fcb, dfc.data(), a.ln2.data(), p.fcw, N, C, Hl);
    reduceTp(dln2.data(), dln2.size());  // each rank's units' share of ln2's gradient
  }
  Tensor dres1({N, C});
  std::copy(dres2, dres2 + static_cast<size_t>(N) * C, dres1.data());  // the skip path
  layerNormBackward(dres1.data(), g.ln2w, g.ln2b, dln2.data(), a.res1.data(), p.ln2w,
                    a.ln2Mean.data(), a.ln2Rstd.data(), N, C);
  // res1 = x + attn(ln1(x)).
  for (size_t i = 0; i < dres1.size(); ++i) dx[i] += dres1[i];
  Tensor dattOut({N, Cl}), dqkv({N, 3 * Cl}), dln1({N, C});
  linearBackward(dattOut.data(), g.projw, g.projb, dres1.data(), a.attOut.data(), p.projw, N, Cl,
                 C);
  if (sp) {
    // Attention's gradient on its side: the output's gradient to whole
    // sequences of this rank's heads, and the qkv gradient back.
    Tensor dattOutH({B * Ts, Cs}), dqkvH({B * Ts, 3 * Cs});
    sp_.toHeads(dattOut.data(), dattOutH.data(), B, seqRuns(T), false);
    if (NHs > 0)
      attentionBackward(dqkvH.data(), dattOutH.data(), a.qkv.data(), a.att.data(), B, Ts, Cs,
                        NHs);
    sp_.toSeq(dqkvH.data(), dqkv.data(), B, seqRuns(T), true);
  } else {
    attentionBackward(dqkv.data(), dattOut.data(), a.qkv.data(), a.att.data(), B, T, Cl, NHl);
  }
  linearBackward(dln1.data(), g.qkvw, g.qkvb, dqkv.data(), a.ln1.data(), p.qkvw, N, C, 3 * Cl);
  // The keys' bias has an exact gradient of 0 (adding the same q.b_k to
  // every score of a softmax's row changes nothing); what the sum above
  // leaves there is rounding noise, which AdamW's normalized step would
  // turn into lr-sized moves that no other summation order reproduces.
  std::fill(g.qkvb + Cl, g.qkvb + 2 * Cl, 0.0f);
  reduceTp(dln1.data(), dln1.size());
  layerNormBackward(dx, g.ln1w, g.ln1b, dln1.data(), x, p.ln1w, a.ln1Mean.data(), a.ln1Rstd.data(),
                    N, C);
  releaseParams(l);
  releaseGrads(l);
}

void Gpt::backward(Activations& a, const float* dOutput, float* dInput, float lossScale) {
  if (a.B == 0) throw std::logic_error("Gpt::backward before any forward");
  if (!shard_.head && dOutput == nullptr)
    throw std::invalid_argument(
        "Gpt::backward: a stage before the last needs its output's gradient");
  if (!shard_.embeddings && dInput == nullptr)
    throw std::invalid_argument(
        "Gpt::backward: a stage after the first writes its input's gradient");
  const int B = a.B, T = a.T, N = B * T, C = config_.dim, V = config_.vocab;
  auxScale_ = lossScale;
  // The embeddings' gradients take the tied head's share first and the
  // embedding's last, so they stay open through the whole backward.
  float* ge = shard_.embeddings ? acquireGrads(-1) : nullptr;
  Tensor dx({N, C});
  if (shard_.head) {
    headBackward(a, lossScale, dx.data(), ge);
  } else {
    std::copy(dOutput, dOutput + static_cast<size_t>(N) * C, dx.data());
  }
  for (int l = lastLayer_ - 1; l >= shard_.firstLayer; --l) {
    const int i = l - shard_.firstLayer;
    const float* x = i > 0 ? a.blocks[i - 1].res2.data() : a.input.data();
    Tensor dinp({N, C});
    blockBackward(l, x, a.blocks[i], dx.data(), dinp.data(), B, T);
    dx = std::move(dinp);
  }
  if (shard_.embeddings) {
    embeddingBackward(ge, ge + (V + seqPosition(T)) * C, dx.data(), a.inputs.data(), B, T, C);
    releaseGrads(-1);
  } else {
    std::copy(dx.data(), dx.data() + dx.size(), dInput);
  }
}

float Gpt::forward(const int* inputs, const int* targets, int B, int T) {
  if (!shard_.embeddings || !shard_.head)
    throw std::logic_error(
        "Gpt::forward(tokens): this piece is a pipeline stage; pass Activations");
  return forward(own_, inputs, targets, nullptr, B, T);
}

void Gpt::backward() { backward(own_, nullptr, nullptr); }

size_t Gpt::gradReadyFrom(int part) const {
  if (std::find(backwardParts_.begin(), backwardParts_.end(), part) == backwardParts_.end()) {
    throw std::invalid_argument("Gpt::gradReadyFrom: no part " + std::to_string(part) +
                                " in this piece of the model");
  }
  return partBegin(part);
}

}  // namespace gyre::harness
