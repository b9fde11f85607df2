// A GPT-2-shaped decoder-only transformer: token and position embeddings, N
// pre-LayerNorm blocks (causal self-attention, GELU MLP with a 4x hidden
// layer), a final LayerNorm, and an output head tied to the token embedding.
//
// All parameters live in ONE contiguous float array and all gradients in
// another with the same layout (docs/harness.md): data parallelism reduces
// the gradient array in buckets of consecutive bytes, ZeRO cuts both arrays
// into equal shards, and a checkpoint names each slice, so every later step
// needs the layout as data, not as member fields.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "harness/tensor.h"

namespace gyre::harness {

struct GptConfig {
  int vocab = 256;  // byte-level
  int maxSeq = 64;  // positions the model has embeddings for
  int layers = 2;
  int heads = 4;
  int dim = 64;  // channels; a multiple of heads
};

// One named parameter: elements [offset, offset + size) of the flat arrays.
struct ParamInfo {
  std::string name;
  size_t offset = 0;
  std::vector<int> shape;
  size_t size = 0;
  // AdamW decays matrices (and embeddings), not biases or LayerNorm gains:
  // pulling a gain towards zero is not regularization.
  bool decay = false;
  int layer = -1;  // the block it belongs to; -1 for embeddings and the final norm
};

// The parameters in storage order: wte, wpe, then each block's together
// (h<l>.ln1.w, .ln1.b, .attn.qkv.w, .attn.qkv.b, .attn.proj.w, .attn.proj.b,
// .ln2.w, .ln2.b, .mlp.fc.w, .mlp.fc.b, .mlp.proj.w, .mlp.proj.b), then
// lnf.w, lnf.b. A block's parameters are one range, so a layer can be
// gathered, freed or reduced as a unit.
std::vector<ParamInfo> gptLayout(const GptConfig& config);

class Gpt {
 public:
  explicit Gpt(const GptConfig& config);

  const GptConfig& config() const { return config_; }
  const std::vector<ParamInfo>& layout() const { return layout_; }
  const ParamInfo& info(std::string_view name) const;

  std::span<float> params() { return params_.span(); }
  std::span<const float> params() const { return params_.span(); }
  std::span<float> grads() { return grads_.span(); }
  std::span<const float> grads() const { return grads_.span(); }
  // One parameter's slice of the flat arrays, by name ("h0.attn.qkv.w").
  std::span<float> param(std::string_view name);
  std::span<float> grad(std::string_view name);

  // GPT-2's initialization: weights N(0, 0.02), residual projections scaled
  // by 1/sqrt(2 * layers), biases 0, LayerNorm gains 1. The same seed gives
  // the same parameters, bit for bit.
  void initialize(uint64_t seed);

  // The mean next-token loss of B sequences of T tokens (inputs and targets
  // [B, T], targets being the inputs shifted by one). Keeps the activations
  // for backward().
  float forward(const int* inputs, const int* targets, int B, int T);
  // Adds the gradient of the last forward's loss to grads().
  void backward();

  // Called during backward() each time a part of grads() is final, so that
  // data parallelism can start reducing it while the rest is computed.
  // Backward runs from the output to the input, so the parts come in reverse
  // layout order: `layers` (the final norm lnf.w, lnf.b), then each block
  // from layers - 1 down to 0, then -1 (the embeddings wte and wpe; wte also
  // gets the tied head's gradient at the start, so it is final only here).
  // After the call for part p, every gradient from gradReadyFrom(p) to the
  // end of the array is final. An empty hook (the default) is not called.
  using BackwardHook = std::function<void(int part)>;
  void setBackwardHook(BackwardHook hook) { hook_ = std::move(hook); }
  // Where the final gradients start after the hook's call for `part`.
  size_t gradReadyFrom(int part) const;
  void zeroGrad() { grads_.zero(); }

 private:
  struct BlockParams;
  struct BlockActs {
    Tensor ln1, ln1Mean, ln1Rstd, qkv, att, attOut, attProj, res1;
    Tensor ln2, ln2Mean, ln2Rstd, fc, fcGelu, fcProj, res2;
  };
  BlockParams block(float* base, int l) const;
  void blockForward(int l, const float* x, BlockActs& a);
  // dx += the gradient reaching the block's input; dres2 is its output's.
  void blockBackward(int l, const float* x, const BlockActs& a, const float* dres2, float* dx);

  GptConfig config_;
  std::vector<ParamInfo> layout_;
  Tensor params_, grads_;

  // The last forward's batch and activations.
  int B_ = 0, T_ = 0;
  std::vector<int> inputs_, targets_;
  Tensor encoded_;
  std::vector<BlockActs> blocks_;
  Tensor lnf_, lnfMean_, lnfRstd_, logits_, probs_;
  BackwardHook hook_;
};

}  // namespace gyre::harness
