// The device mesh: dp x tp x pp ranks made from one communicator with
// gyreCommSplit, each rank knowing its place on every axis and holding one
// communicator per axis (docs/harness.md, "The mesh").
//
// Rank order puts tensor parallelism innermost, then data, then pipeline:
// world rank = (pp_rank * dp + dp_rank) * tp + tp_rank. Tensor parallelism
// talks twice per block in forward and in backward, so its ranks are
// neighbours (on one host, over shared memory, when a job spans hosts);
// pipeline stages talk least, once per micro-batch, so they are furthest
// apart. Megatron orders them the same way for the same reason.
#pragma once

#include <string>

#include "gyre/gyre.h"

namespace gyre::harness {

struct MeshShape {
  int dp = 1, tp = 1, pp = 1;
};

class Mesh {
 public:
  // Collective over world, whose size must be dp * tp * pp (throws
  // std::invalid_argument naming the sizes otherwise). Does not take
  // ownership of world; destroys the communicators it made.
  Mesh(gyreComm_t world, const MeshShape& shape);
  ~Mesh();
  Mesh(const Mesh&) = delete;
  Mesh& operator=(const Mesh&) = delete;

  const MeshShape& shape() const { return shape_; }
  int rank() const { return rank_; }
  int dpRank() const { return dpRank_; }
  int tpRank() const { return tpRank_; }
  int ppRank() const { return ppRank_; }
  bool firstStage() const { return ppRank_ == 0; }
  bool lastStage() const { return ppRank_ == shape_.pp - 1; }

  gyreComm_t world() const { return world_; }
  gyreComm_t dp() const { return dp_; }  // same tp and pp place, every dp rank
  gyreComm_t tp() const { return tp_; }  // same dp and pp place
  gyreComm_t pp() const { return pp_; }  // same dp and tp place: the stages in order
  // The first and the last stage of this rank's pipeline (they sum the tied
  // embedding's gradients); null on the other stages and when pp == 1.
  gyreComm_t tiedEmbedding() const { return tied_; }

  // "dp 2 x tp 2 x pp 1", and this rank's place: "rank 3 = dp 1, tp 1, pp 0".
  std::string describe() const;
  std::string place() const;

 private:
  MeshShape shape_;
  int rank_ = 0, dpRank_ = 0, tpRank_ = 0, ppRank_ = 0;
  gyreComm_t world_ = nullptr, dp_ = nullptr, tp_ = nullptr, pp_ = nullptr, tied_ = nullptr;
};

}  // namespace gyre::harness
