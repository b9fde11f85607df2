// What a model is made of, as data: its configuration, which piece of it one
// rank holds (tensor and pipeline parallelism), and the table of named
// parameters in the rank's flat arrays.
//
// All of a rank's parameters live in ONE contiguous float array and all its
// gradients in another with the same layout (docs/harness.md): data
// parallelism reduces the gradient array in buckets of consecutive
// elements, ZeRO cuts both arrays into equal shards, and a checkpoint names
// each slice of each global tensor, so every later step needs the layout as
// data, not as member fields.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace gyre::harness {

struct GptConfig {
  int vocab = 256;  // byte-level
  int maxSeq = 64;  // positions the model has embeddings for
  int layers = 2;
  int heads = 4;
  int dim = 64;  // channels; a multiple of heads
  // A mixture of experts in place of every block's MLP (harness/moe.h):
  // 0 for the dense MLP.
  int experts = 0;
  int topK = 2;
  float capacityFactor = 0.0f;  // per rank's batch; 0: no limit
  float auxCoef = 0.01f;        // the load-balancing loss's weight
};

// The piece of the model one rank holds. Tensor parallelism (Megatron's)
// gives each of tpSize ranks heads/tpSize of every block's attention heads
// and 4*dim/tpSize of its MLP's hidden units; pipeline parallelism gives
// each stage a run of consecutive blocks, the first stage the embeddings and
// the last the final norm and the output head. The default is all of it.
struct ModelShard {
  int tpRank = 0;
  int tpSize = 1;
  int firstLayer = 0;      // the blocks [firstLayer, lastLayer)
  int lastLayer = -1;      // -1: up to config.layers
  bool embeddings = true;  // wte, wpe: this rank embeds the tokens (first stage)
  bool head = true;        // lnf and the output head: this rank computes the loss (last stage)
  // Expert parallelism: a mixture's experts spread over epSize ranks, rank
  // epRank holding experts [epRank x E/epSize, (epRank + 1) x E/epSize) of
  // every block (the gate and everything else whole).
  int epRank = 0;
  int epSize = 1;
  int localExperts(const GptConfig& c) const { return c.experts / epSize; }
  int firstExpert(const GptConfig& c) const { return epRank * localExperts(c); }
};

// Pipeline stage `stage` of `stages`: the blocks split as evenly as possible
// (the earlier stages take one more when they do not divide), at
// tensor-parallel rank tpRank of tpSize. Throws std::invalid_argument when a
// stage would get no block (stages > layers, unless stages == 1).
ModelShard pipelineStage(const GptConfig& config, int stage, int stages, int tpRank = 0,
                         int tpSize = 1);

// How a rank's piece of a tensor sits in the global tensor under tensor
// parallelism: whole (replicated on every tensor-parallel rank), a block of
// rows (a column-parallel layer's outputs: mlp.fc), a block of columns (a
// row-parallel layer's inputs: attn.proj.w, mlp.proj.w), or the queries',
// keys' and values' rows of the rank's heads (attn.qkv). ExpertRows is
// expert parallelism's: the rank's experts' rows of a mixture's stacked
// expert tensors (moe.fc.*, moe.proj.*), a block of rows at epRank.
enum class TpSplit { None, Rows, Columns, QkvRows, ExpertRows };

// One named parameter: elements [offset, offset + size) of the flat arrays.
struct ParamInfo {
  std::string name;  // the global tensor's name, the same on every rank
  size_t offset = 0;
  std::vector<int> shape;        // this rank's piece
  std::vector<int> globalShape;  // the whole tensor
  size_t size = 0;
  TpSplit split = TpSplit::None;
  // AdamW decays matrices (and embeddings), not biases or LayerNorm gains:
  // pulling a gain towards zero is not regularization.
  bool decay = false;
  // The part it belongs to (Gpt's backward hook, ZeRO-3's gathers): -1 for
  // the embeddings, l for block l, config.layers for the final norm and head.
  int part = -1;
  // The last pipeline stage's copy of wte for the tied output head (the first
  // stage holds the original; their gradients are summed between them).
  bool tiedCopy = false;
};

// The table of `shard`'s parameters in storage order: part -1 (wte, wpe),
// then each block's twelve (h<l>.ln1.w, .ln1.b, .attn.qkv.w, .attn.qkv.b,
// .attn.proj.w, .attn.proj.b, .ln2.w, .ln2.b, .mlp.fc.w, .mlp.fc.b,
// .mlp.proj.w, .mlp.proj.b; with experts the MLP's four are .moe.gate.w
// [E, C], .moe.fc.w [E*4C, C], .moe.fc.b [E*4C], .moe.proj.w [E*C, 4C] and
// .moe.proj.b [E*C], expert e's rows the e-th of each), then part `layers` (lnf.w, lnf.b, and on a last
// stage without the embeddings the tied copy of wte). A part is one range,
// so a layer can be gathered, freed or reduced as a unit. Throws
// std::invalid_argument naming what is wrong with the config or shard.
std::vector<ParamInfo> gptLayout(const GptConfig& config, const ModelShard& shard = {});

// One part's range of the flat arrays: the unit that backward finishes,
// that ZeRO-3 gathers and frees, and that a pipeline stage owns.
struct PartRange {
  int part = 0;
  size_t begin = 0;
  size_t size = 0;
};

// The parts of a layout in storage order, which is the reverse of the order
// backward finishes them (Gpt::backwardParts). Throws std::invalid_argument
// when a part's parameters are not consecutive.
std::vector<PartRange> partRanges(const std::vector<ParamInfo>& layout);

// The row-major index in the global tensor of element i of p's piece.
size_t globalIndex(const ParamInfo& p, const ModelShard& shard, size_t i);

// The blocks shard holds, lastLayer resolved.
int shardLastLayer(const GptConfig& config, const ModelShard& shard);

}  // namespace gyre::harness
