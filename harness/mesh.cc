#include "harness/mesh.h"

#include <stdexcept>

#include "harness/data_parallel.h"

namespace gyre::harness {

Mesh::Mesh(gyreComm_t world, const MeshShape& shape) : shape_(shape), world_(world) {
  if (shape.dp < 1 || shape.tp < 1 || shape.pp < 1)
    throw std::invalid_argument("Mesh: dp, tp and pp must be at least 1");
  int ranks = 0;
  checkGyre(gyreCommUserRank(world, &rank_), "gyreCommUserRank", world);
  checkGyre(gyreCommCount(world, &ranks), "gyreCommCount", world);
  if (ranks != shape.dp * shape.tp * shape.pp) {
    throw std::invalid_argument("Mesh: " + describe() + " needs " +
                                std::to_string(shape.dp * shape.tp * shape.pp) +
                                " ranks; the job has " + std::to_string(ranks));
  }
  tpRank_ = rank_ % shape.tp;
  dpRank_ = (rank_ / shape.tp) % shape.dp;
  ppRank_ = rank_ / (shape.tp * shape.dp);
  // Every rank makes every split in the same order: each is collective.
  auto split = [&](int color, int key, gyreComm_t* out, const char* what) {
    checkGyre(gyreCommSplit(world, color, key, out, nullptr), what, world);
  };
  try {
    split(ppRank_ * shape.dp + dpRank_, tpRank_, &tp_,
          "gyreCommSplit of the tensor-parallel group");
    split(ppRank_ * shape.tp + tpRank_, dpRank_, &dp_, "gyreCommSplit of the data-parallel group");
    split(dpRank_ * shape.tp + tpRank_, ppRank_, &pp_, "gyreCommSplit of the pipeline");
    const bool ends = shape.pp > 1 && (firstStage() || lastStage());
    split(ends ? dpRank_ * shape.tp + tpRank_ : GYRE_SPLIT_NOCOLOR, ppRank_, &tied_,
          "gyreCommSplit of the tied embedding's pair");
  } catch (...) {
    for (gyreComm_t c : {tp_, dp_, pp_, tied_})
      if (c) gyreCommDestroy(c);
    throw;
  }
}

Mesh::~Mesh() {
  for (gyreComm_t c : {tied_, pp_, dp_, tp_}) {
    if (c == nullptr) continue;
    gyreCommFinalize(c);
    gyreCommDestroy(c);
  }
}

std::string Mesh::describe() const {
  return "dp " + std::to_string(shape_.dp) + " x tp " + std::to_string(shape_.tp) + " x pp " +
         std::to_string(shape_.pp);
}

std::string Mesh::place() const {
  return "rank " + std::to_string(rank_) + " = dp " + std::to_string(dpRank_) + ", tp " +
         std::to_string(tpRank_) + ", pp " + std::to_string(ppRank_);
}

}  // namespace gyre::harness
