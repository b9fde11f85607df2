#include "harness/mesh.h"

#include <stdexcept>

#include "harness/data_parallel.h"

namespace gyre::harness {

Mesh::Mesh(gyreComm_t world, const MeshShape& shape) : shape_(shape), world_(world) {
  if (shape.dp < 1 || shape.tp < 1 || shape.pp < 1 || shape.sp < 1 || shape.ep < 1)
    throw std::invalid_argument("Mesh: dp, sp, tp, pp and ep must be at least 1");
  if (dataSize() % shape.ep != 0) {
    throw std::invalid_argument("Mesh: expert parallelism over " + std::to_string(shape.ep) +
                                " ranks needs a data group (dp x sp = " +
                                std::to_string(dataSize()) + ") that is a multiple of it");
  }
  int ranks = 0;
  checkGyre(gyreCommUserRank(world, &rank_), "gyreCommUserRank", world);
  checkGyre(gyreCommCount(world, &ranks), "gyreCommCount", world);
  const int want = shape.dp * shape.sp * shape.tp * shape.pp;
  if (ranks != want) {
    throw std::invalid_argument("Mesh: " + describe() + " needs " + std::to_string(want) +
                                " ranks; the job has " + std::to_string(ranks));
  }
  const int tp = shape.tp, sp = shape.sp, dp = shape.dp;
  tpRank_ = rank_ % tp;
  spRank_ = (rank_ / tp) % sp;
  dpRank_ = (rank_ / (tp * sp)) % dp;
  ppRank_ = rank_ / (tp * sp * dp);
  // Every rank makes every split in the same order: each is collective. A
  // color is the rank's place on the other axes, in mixed radix.
  auto split = [&](int color, int key, gyreComm_t* out, const char* what) {
    checkGyre(gyreCommSplit(world, color, key, out, nullptr), what, world);
  };
  try {
    split((ppRank_ * dp + dpRank_) * sp + spRank_, tpRank_, &tp_,
          "gyreCommSplit of the tensor-parallel group");
    split((ppRank_ * sp + spRank_) * tp + tpRank_, dpRank_, &dp_,
          "gyreCommSplit of the data-parallel group");
    if (sp > 1) {
      split((ppRank_ * dp + dpRank_) * tp + tpRank_, spRank_, &sp_,
            "gyreCommSplit of the sequence-parallel group");
      split(ppRank_ * tp + tpRank_, dataRank(), &data_,
            "gyreCommSplit of the data x sequence-parallel group");
    }
    if (shape.ep > 1) {
      const int ep = shape.ep, groups = dataSize() / ep;
      split((ppRank_ * groups + dataRank() / ep) * tp + tpRank_, epRank(), &ep_,
            "gyreCommSplit of the expert-parallel group");
      split((ppRank_ * ep + epRank()) * tp + tpRank_, dataRank() / ep, &expertData_,
            "gyreCommSplit of the expert-data group");
    }
    split((dpRank_ * sp + spRank_) * tp + tpRank_, ppRank_, &pp_, "gyreCommSplit of the pipeline");
    const bool ends = shape.pp > 1 && (firstStage() || lastStage());
    split(ends ? (dpRank_ * sp + spRank_) * tp + tpRank_ : GYRE_SPLIT_NOCOLOR, ppRank_, &tied_,
          "gyreCommSplit of the tied embedding's pair");
  } catch (...) {
    for (gyreComm_t c : {tp_, dp_, sp_, data_, ep_, expertData_, pp_, tied_})
      if (c) gyreCommDestroy(c);
    throw;
  }
  if (data_ == nullptr) data_ = dp_;
  if (expertData_ == nullptr) expertData_ = data_;
}

Mesh::~Mesh() {
  for (gyreComm_t c : {tied_, pp_, expertData_ == data_ ? nullptr : expertData_, ep_,
                       data_ == dp_ ? nullptr : data_, sp_, dp_, tp_}) {
    if (c == nullptr) continue;
    gyreCommFinalize(c);
    gyreCommDestroy(c);
  }
}

std::string Mesh::describe() const {
  return "dp " + std::to_string(shape_.dp) +
         (shape_.sp > 1 ? " x sp " + std::to_string(shape_.sp) : std::string()) + " x tp " +
         std::to_string(shape_.tp) + " x pp " + std::to_string(shape_.pp) +
         (shape_.ep > 1 ? ", ep " + std::to_string(shape_.ep) : std::string());
}

std::string Mesh::place() const {
  return "rank " + std::to_string(rank_) + " = dp " + std::to_string(dpRank_) +
         (shape_.sp > 1 ? ", sp " + std::to_string(spRank_) : std::string()) + ", tp " +
         std::to_string(tpRank_) + ", pp " + std::to_string(ppRank_) +
         (shape_.ep > 1 ? ", ep " + std::to_string(epRank()) : std::string());
}

}  // namespace gyre::harness
