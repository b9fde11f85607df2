// A GPT-2-shaped decoder-only transformer: token and position embeddings, N
// pre-LayerNorm blocks (causal self-attention, GELU MLP with a 4x hidden
// layer), a final LayerNorm, and an output head tied to the token embedding.
//
// A Gpt is the piece of that model one rank holds (ModelShard, layout.h):
// all of it by default; with tensor parallelism some of every block's heads
// and MLP units, with the partial sums completed by a reduction the caller
// supplies (setTpReduce); with pipeline parallelism a run of blocks, fed and
// read through activations instead of tokens and loss. The model itself
// never talks to another rank: parallelism lives in the files named after it.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "harness/layout.h"
#include "harness/moe.h"
#include "harness/tensor.h"

namespace gyre::harness {

// One micro-batch's activations, kept from forward() for backward(). A
// pipeline holds several at once; the whole-model calls use one of the
// model's own.
struct Activations {
  struct Block {
    // With sequence parallelism qkv and att hold every token of this rank's
    // heads (attention's side), the rest this rank's tokens.
    Tensor ln1, ln1Mean, ln1Rstd, qkv, att, attOut, attProj, res1;
    Tensor ln2, ln2Mean, ln2Rstd, fc, fcGelu, fcProj, res2;
    // A mixture-of-experts block's routing and its experts' rows (fcProj
    // then holds the layer's output).
    MoeRouting moe;
    ExpertActivations moeRows;
  };
  int B = 0, T = 0;
  std::vector<int> inputs, targets;
  Tensor input;  // the stage's input [B*T, C]: the embeddings, or what the previous stage sent
  std::vector<Block> blocks;
  Tensor lnf, lnfMean, lnfRstd, logits, probs;
  float loss = 0;
  // The mixture-of-experts blocks' load-balancing losses (auxCoef included),
  // summed over this piece's blocks: added to the loss's gradient by
  // backward, not to `loss`, which stays the next-token loss.
  double aux = 0;
};

// Where a model's parameters and gradients are, part by part. The default
// (no storage given) is the model's own two flat arrays; ZeRO stage 3 gives
// one that gathers a part's parameters before it is used and frees them
// after, so that a rank never holds the whole model at once.
class PartStorage {
 public:
  virtual ~PartStorage() = default;
  // The part's parameters, partSize(part) elements in layout order,
  // valid until releaseParams(part).
  virtual const float* acquireParams(int part) = 0;
  virtual void releaseParams(int part) = 0;
  // A buffer to add the part's gradients into, valid until releaseGrads.
  virtual float* acquireGrads(int part) = 0;
  // The part's gradients of this backward are complete.
  virtual void releaseGrads(int part) = 0;
};

class Gpt {
 public:
  // storage: nullptr for the model's own arrays; otherwise not owned, and
  // params()/grads()/param()/grad() are not available.
  explicit Gpt(const GptConfig& config, const ModelShard& shard = {},
               PartStorage* storage = nullptr);

  const GptConfig& config() const { return config_; }
  const ModelShard& shard() const { return shard_; }
  const std::vector<ParamInfo>& layout() const { return layout_; }
  const ParamInfo& info(std::string_view name) const;
  // Elements in the flat layout (what params() would hold).
  size_t size() const { return size_; }

  std::span<float> params();
  std::span<const float> params() const;
  std::span<float> grads();
  std::span<const float> grads() const;
  // One parameter's slice of the flat arrays, by name ("h0.attn.qkv.w").
  std::span<float> param(std::string_view name);
  std::span<float> grad(std::string_view name);

  // The parts this model holds, in the order backward finishes them: the
  // final norm (config.layers), the blocks from the last to the first, then
  // the embeddings (-1).
  const std::vector<int>& backwardParts() const { return backwardParts_; }
  // A part's range of the flat layout.
  size_t partBegin(int part) const;
  size_t partSize(int part) const;

  // GPT-2's initialization: weights N(0, 0.02), residual projections scaled
  // by 1/sqrt(2 * layers), biases 0, LayerNorm gains 1. Each global tensor
  // is drawn from its own stream of the seed and each rank keeps its piece,
  // so every mesh starts from the same model, bit for bit.
  void initialize(uint64_t seed);
  // The same for a storage-backed model: fills out (size() elements).
  void initialize(uint64_t seed, std::span<float> out) const;

  // Tensor parallelism: sums a partial [B*T, C] result over the
  // tensor-parallel ranks in place (the same bits on every rank). Needed
  // when the shard's tpSize > 1.
  using TpReduce = std::function<void(float* data, size_t count)>;
  void setTpReduce(TpReduce reduce) { tpReduce_ = std::move(reduce); }

  // Sequence parallelism (DeepSpeed-Ulysses): `size` ranks split every
  // sequence into consecutive runs, rank r holding the r-th run, for every
  // layer but attention. The runs are T tokens each (rank r from position
  // r x T) unless `runs` gives each rank's count, which may differ (FlexSP
  // splits a sequence of any length over its group); then forward's T must
  // be runs[rank], and the run starts at the sum of the runs before it.
  // Around attention, toHeads turns this rank's tokens of every (local) head
  // into every token of its share of the heads, and toSeq back; attention
  // then runs on whole sequences, so its result is the unsplit model's.
  // The parameters are whole on every rank; their gradients here are this
  // rank's tokens' share, which the caller sums over the group (as over
  // data parallelism).
  struct SeqParallel {
    int rank = 0, size = 1;
    std::vector<int> runs;  // empty: T tokens on every rank
    // in [B][tokens[rank]][parts x heads][headDim] -> out [B][sum of tokens]
    // [parts x share][headDim] (qkv: the parts Q, K, V, else one), share =
    // shareHeads; tokens: every rank's run of each sequence.
    using Exchange = std::function<void(const float* in, float* out, int B,
                                        std::span<const size_t> tokens, bool qkv)>;
    Exchange toHeads;
    // The reverse: [B][sum of tokens][parts x share][headDim] -> [B][tokens[rank]][parts x
    // heads][headDim].
    Exchange toSeq;
    int shareHeads = 0;  // the heads this rank attends over
  };
  void setSeqParallel(SeqParallel sp);
  const SeqParallel& seqParallel() const { return sp_; }

  // Expert parallelism (the shard's epSize > 1): this piece holds its
  // shard's experts of every mixture block, and each block's tokens reach
  // them through `exchange` (not owned; it must outlive the model's calls).
  // The experts' gradients here are their share from every token of the
  // exchange's ranks; the caller reduces them over the ranks holding the
  // same experts.
  void setExpertExchange(ExpertExchange* exchange) { experts_ = exchange; }

  // Forward of one micro-batch of B sequences of T tokens through this
  // piece: the first stage embeds `inputs`, the others read `input`
  // [B*T, C]; the last stage returns the mean next-token loss against
  // `targets` (every stage gets `targets` for the checks, may be null when
  // not last), the others return 0 and leave their output in output(a).
  float forward(Activations& a, const int* inputs, const int* targets, const float* input, int B,
                int T);
  // What a non-last stage sends on: [B*T, C].
  const float* output(const Activations& a) const;
  // Adds this micro-batch's gradients: the last stage's from its loss times
  // lossScale (1/micro-batches makes a micro-batched step one step on their
  // mean), the others' from dOutput [B*T, C]. A non-first stage writes the
  // gradient of its input into dInput [B*T, C].
  void backward(Activations& a, const float* dOutput, float* dInput, float lossScale = 1.0f);

  // The whole model on one batch (inputs and targets [B, T]) with the
  // model's own activations.
  float forward(const int* inputs, const int* targets, int B, int T);
  void backward();
  // Mixture-of-experts slots routed and dropped by the forwards since the
  // last call (every block of this piece), then reset.
  struct MoeCounts {
    int64_t slots = 0, dropped = 0;
  };
  MoeCounts takeMoeCounts() { return std::exchange(moeCounts_, {}); }
  // What the whole-model forward kept (its aux, its blocks' routing).
  const Activations& lastActivations() const { return own_; }

  // Called during backward each time a part's gradients are final (after
  // the storage's releaseGrads), in backwardParts() order, so that data
  // parallelism can start reducing them while the rest is computed. An
  // empty hook (the default) is not called.
  using BackwardHook = std::function<void(int part)>;
  void setBackwardHook(BackwardHook hook) { hook_ = std::move(hook); }
  // Where the final gradients start after the hook's call for `part`.
  size_t gradReadyFrom(int part) const;
  void zeroGrad();

 private:
  // Pointers to one block's twelve tensors in a part's buffer.
  template <typename F>
  struct BlockOf {
    F *ln1w, *ln1b, *qkvw, *qkvb, *projw, *projb, *ln2w, *ln2b, *fcw, *fcb, *mprojw, *mprojb;
    F* gatew;  // a mixture of experts' gate; fcw ... mprojb then hold every expert's, in turn
  };
  template <typename F>
  BlockOf<F> block(F* part, int l) const;
  const float* acquireParams(int part);
  void releaseParams(int part);
  float* acquireGrads(int part);
  void releaseGrads(int part);
  void reduceTp(float* data, size_t count);
  ExpertExchange& expertExchange() const;
  // Attention's side of a block whose rank-side run is T tokens: whole
  // sequences (tokens) of the heads this rank attends over (Cs = heads x
  // head dim); without sequence parallelism, the run and every local head.
  struct AttentionSide {
    bool sp = false;
    int tokens = 0, heads = 0, width = 0;
  };
  AttentionSide attentionSide(int T) const;
  // Every rank's run of a sequence whose run here is T tokens (the
  // exchanges' layout), and where this rank's run starts in its sequence.
  std::vector<size_t> seqRuns(int T) const;
  size_t seqPosition(int T) const;
  void blockForward(int l, const float* x, Activations::Block& a, int B, int T);
  // dx += the gradient reaching the block's input; dres2 is its output's.
  void blockBackward(int l, const float* x, const Activations::Block& a, const float* dres2,
                     float* dx, int B, int T);
  // The loss's head over the final norm's output; returns the loss.
  float headForward(Activations& a, const float* x);
  // The head's backward into dx, the gradient of the last block's output.
  void headBackward(Activations& a, float lossScale, float* dx, float* dwte);

  GptConfig config_;
  ModelShard shard_;
  int lastLayer_ = 0;
  std::vector<ParamInfo> layout_;
  size_t size_ = 0;
  std::vector<int> backwardParts_;
  PartStorage* storage_ = nullptr;
  Tensor params_, grads_;
  TpReduce tpReduce_;
  SeqParallel sp_;
  ExpertExchange* experts_ = nullptr;
  float auxScale_ = 1.0f;
  MoeCounts moeCounts_;  // the load-balancing loss's share of this backward (its lossScale)
  BackwardHook hook_;
  Activations own_;  // the whole-model calls' activations
};

}  // namespace gyre::harness
