#include "harness/layout.h"

#include <stdexcept>

namespace gyre::harness {

namespace {

size_t product(const std::vector<int>& shape) {
  size_t n = 1;
  for (int d : shape) n *= static_cast<size_t>(d);
  return n;
}

void validate(const GptConfig& c, const ModelShard& s) {
  if (c.vocab <= 0 || c.maxSeq <= 0 || c.layers < 0 || c.heads <= 0 || c.dim <= 0 ||
      c.dim % c.heads != 0) {
    throw std::invalid_argument(
        "GptConfig: vocab, maxSeq, heads and dim must be positive and dim a multiple of heads");
  }
  if (s.tpSize <= 0 || s.tpRank < 0 || s.tpRank >= s.tpSize) {
    throw std::invalid_argument("ModelShard: tensor-parallel rank " + std::to_string(s.tpRank) +
                                " of " + std::to_string(s.tpSize));
  }
  if (c.heads % s.tpSize != 0) {
    throw std::invalid_argument("tensor parallelism over " + std::to_string(s.tpSize) +
                                " ranks needs a head count divisible by it; the model has " +
                                std::to_string(c.heads) + " heads");
  }
  if (c.experts < 0 || (c.experts > 0 && (c.topK < 1 || c.topK > c.experts))) {
    throw std::invalid_argument("GptConfig: top-" + std::to_string(c.topK) + " of " +
                                std::to_string(c.experts) + " experts");
  }
  if (c.experts > 0 && s.tpSize > 1)
    throw std::invalid_argument("a mixture of experts with tensor parallelism is not supported");
  if (s.epSize <= 0 || s.epRank < 0 || s.epRank >= s.epSize) {
    throw std::invalid_argument("ModelShard: expert-parallel rank " + std::to_string(s.epRank) +
                                " of " + std::to_string(s.epSize));
  }
  if (s.epSize > 1 && (c.experts == 0 || c.experts % s.epSize != 0)) {
    throw std::invalid_argument("expert parallelism over " + std::to_string(s.epSize) +
                                " ranks needs a mixture whose expert count it divides; the model "
                                "has " + std::to_string(c.experts) + " experts");
  }
  const int last = shardLastLayer(c, s);
  if (s.firstLayer < 0 || s.firstLayer > last || last > c.layers) {
    throw std::invalid_argument("ModelShard: blocks [" + std::to_string(s.firstLayer) + ", " +
                                std::to_string(last) + ") of a model with " +
                                std::to_string(c.layers));
  }
}

}  // namespace

int shardLastLayer(const GptConfig& config, const ModelShard& shard) {
  return shard.lastLayer < 0 ? config.layers : shard.lastLayer;
}

ModelShard pipelineStage(const GptConfig& config, int stage, int stages, int tpRank, int tpSize) {
  if (stages <= 0 || stage < 0 || stage >= stages) {
    throw std::invalid_argument("pipeline stage " + std::to_string(stage) + " of " +
                                std::to_string(stages));
  }
  if (stages > 1 && stages > config.layers) {
    throw std::invalid_argument("a pipeline of " + std::to_string(stages) +
                                " stages needs at least as many blocks; the model has " +
                                std::to_string(config.layers));
  }
  const int base = config.layers / stages, extra = config.layers % stages;
  ModelShard s;
  s.tpRank = tpRank;
  s.tpSize = tpSize;
  s.firstLayer = stage * base + std::min(stage, extra);
  s.lastLayer = s.firstLayer + base + (stage < extra ? 1 : 0);
  s.embeddings = stage == 0;
  s.head = stage == stages - 1;
  return s;
}

std::vector<ParamInfo> gptLayout(const GptConfig& c, const ModelShard& s) {
  validate(c, s);
  std::vector<ParamInfo> layout;
  size_t offset = 0;
  const int t = s.tpSize;
  auto add = [&](std::string name, std::vector<int> global, TpSplit split, int part) {
    ParamInfo p;
    p.name = std::move(name);
    p.offset = offset;
    p.globalShape = global;
    p.shape = std::move(global);
    if (split == TpSplit::Rows || split == TpSplit::QkvRows) p.shape[0] /= t;
    if (split == TpSplit::Columns) p.shape[1] /= t;
    if (split == TpSplit::ExpertRows) p.shape[0] /= s.epSize;
    p.size = product(p.shape);
    p.split = (split == TpSplit::ExpertRows ? s.epSize : t) > 1 ? split : TpSplit::None;
    p.decay = p.shape.size() == 2;
    p.part = part;
    offset += p.size;
    layout.push_back(std::move(p));
  };
  const int C = c.dim;
  if (s.embeddings) {
    add("wte", {c.vocab, C}, TpSplit::None, -1);
    add("wpe", {c.maxSeq, C}, TpSplit::None, -1);
  }
  for (int l = s.firstLayer; l < shardLastLayer(c, s); ++l) {
    std::string h = "h" + std::to_string(l) + ".";
    add(h + "ln1.w", {C}, TpSplit::None, l);
    add(h + "ln1.b", {C}, TpSplit::None, l);
    add(h + "attn.qkv.w", {3 * C, C}, TpSplit::QkvRows, l);
    add(h + "attn.qkv.b", {3 * C}, TpSplit::QkvRows, l);
    add(h + "attn.proj.w", {C, C}, TpSplit::Columns, l);
    add(h + "attn.proj.b", {C}, TpSplit::None, l);
    add(h + "ln2.w", {C}, TpSplit::None, l);
    add(h + "ln2.b", {C}, TpSplit::None, l);
    if (c.experts > 0) {
      const int E = c.experts;
      add(h + "moe.gate.w", {E, C}, TpSplit::None, l);
      add(h + "moe.fc.w", {E * 4 * C, C}, TpSplit::ExpertRows, l);
      add(h + "moe.fc.b", {E * 4 * C}, TpSplit::ExpertRows, l);
      add(h + "moe.proj.w", {E * C, 4 * C}, TpSplit::ExpertRows, l);
      add(h + "moe.proj.b", {E * C}, TpSplit::ExpertRows, l);
      continue;
    }
    add(h + "mlp.fc.w", {4 * C, C}, TpSplit::Rows, l);
    add(h + "mlp.fc.b", {4 * C}, TpSplit::Rows, l);
    add(h + "mlp.proj.w", {C, 4 * C}, TpSplit::Columns, l);
    add(h + "mlp.proj.b", {C}, TpSplit::None, l);
  }
  if (s.head) {
    add("lnf.w", {C}, TpSplit::None, c.layers);
    add("lnf.b", {C}, TpSplit::None, c.layers);
    if (!s.embeddings) {
      add("wte", {c.vocab, C}, TpSplit::None, c.layers);
      layout.back().tiedCopy = true;
    }
  }
  if (layout.empty()) throw std::invalid_argument("ModelShard: a piece of the model with nothing");
  return layout;
}

size_t globalIndex(const ParamInfo& p, const ModelShard& s, size_t i) {
  if (i >= p.size)
    throw std::out_of_range("globalIndex: element " + std::to_string(i) + " of " + p.name);
  // A vector is one row of its own width.
  const size_t cols = p.shape.size() == 2 ? static_cast<size_t>(p.shape[1]) : 1;
  const size_t row = i / cols, col = i % cols;
  const size_t globalCols = p.globalShape.size() == 2 ? static_cast<size_t>(p.globalShape[1]) : 1;
  const size_t rows = static_cast<size_t>(p.shape[0]);
  switch (p.split) {
    case TpSplit::None:
      return i;
    case TpSplit::Rows:
      return (s.tpRank * rows + row) * globalCols + col;
    case TpSplit::ExpertRows:
      return (s.epRank * rows + row) * globalCols + col;
    case TpSplit::Columns:
      return row * globalCols + s.tpRank * cols + col;
    case TpSplit::QkvRows: {
      // rows/3 of each of the queries, keys and values: the rank's heads.
      const size_t third = rows / 3, globalThird = static_cast<size_t>(p.globalShape[0]) / 3;
      const size_t which = row / third, within = row % third;
      return (which * globalThird + s.tpRank * third + within) * globalCols + col;
    }
  }
  return i;
}

std::vector<PartRange> partRanges(const std::vector<ParamInfo>& layout) {
  std::vector<PartRange> parts;
  for (const ParamInfo& p : layout) {
    if (!parts.empty() && parts.back().part == p.part) {
      if (parts.back().begin + parts.back().size != p.offset)
        throw std::invalid_argument("partRanges: " + p.name + " is not next to its part's others");
      parts.back().size += p.size;
      continue;
    }
    for (const PartRange& r : parts) {
      if (r.part == p.part)
        throw std::invalid_argument("partRanges: part " + std::to_string(p.part) +
                                    " is not one range");
    }
    parts.push_back({p.part, p.offset, p.size});
  }
  return parts;
}

}  // namespace gyre::harness
