// The device mesh: dp x sp x tp x pp ranks made from one communicator with
// gyreCommSplit, each rank knowing its place on every axis and holding one
// communicator per axis (docs/harness.md, "The mesh").
//
// Rank order puts tensor parallelism innermost, then sequence, then data,
// then pipeline: world rank = ((pp_rank * dp + dp_rank) * sp + sp_rank) * tp
// + tp_rank. Tensor parallelism talks twice per block in forward and in
// backward, so its ranks are neighbours (on one host, over shared memory,
// when a job spans hosts); sequence parallelism's all-to-alls come next (two
// per block each way); pipeline stages talk least, once per micro-batch, so
// they are furthest apart. Megatron orders them the same way for the same
// reason (DeepSpeed-Ulysses puts its sequence groups inside data parallelism
// likewise).
#pragma once

#include <string>

#include "gyre/gyre.h"

namespace gyre::harness {

struct MeshShape {
  int dp = 1, tp = 1, pp = 1, sp = 1;
  // Expert parallelism: a mixture's experts spread over ep consecutive ranks
  // of the data group (dp x sp), which must be a multiple of it. It adds no
  // ranks: the tokens stay where data and sequence parallelism put them and
  // travel to their experts and back (DeepSpeed-MoE's layout).
  int ep = 1;
};

class Mesh {
 public:
  // Collective over world, whose size must be dp * sp * tp * pp (throws
  // std::invalid_argument naming the sizes otherwise). Does not take
  // ownership of world; destroys the communicators it made.
  Mesh(gyreComm_t world, const MeshShape& shape);
  ~Mesh();
  Mesh(const Mesh&) = delete;
  Mesh& operator=(const Mesh&) = delete;

  const MeshShape& shape() const { return shape_; }
  int rank() const { return rank_; }
  int dpRank() const { return dpRank_; }
  int spRank() const { return spRank_; }
  int tpRank() const { return tpRank_; }
  int ppRank() const { return ppRank_; }
  bool firstStage() const { return ppRank_ == 0; }
  bool lastStage() const { return ppRank_ == shape_.pp - 1; }

  gyreComm_t world() const { return world_; }
  gyreComm_t dp() const { return dp_; }  // same sp, tp and pp place, every dp rank
  // Same dp, tp and pp place: the ranks that split a sequence (null when sp == 1).
  gyreComm_t sp() const { return sp_; }
  // Same tp and pp place: every dp x sp rank, rank dp_rank * sp + sp_rank.
  // They hold the same piece of the model and each trains its own tokens,
  // so gradients are averaged and ZeRO shards over this group; dp() itself
  // when sp == 1.
  gyreComm_t data() const { return data_; }
  int dataRank() const { return dpRank_ * shape_.sp + spRank_; }
  int dataSize() const { return shape_.dp * shape_.sp; }
  // Expert parallelism: the ep ranks of the data group that hold every
  // expert between them (data ranks q x ep .. q x ep + ep - 1; null when
  // ep == 1), this rank's place in them, and the ranks holding the same
  // experts (data ranks with the same epRank; data() when ep == 1), over
  // which the experts' gradients are reduced.
  gyreComm_t ep() const { return ep_; }
  int epRank() const { return dataRank() % shape_.ep; }
  gyreComm_t expertData() const { return expertData_; }
  gyreComm_t tp() const { return tp_; }  // same dp and pp place
  gyreComm_t pp() const { return pp_; }  // same dp and tp place: the stages in order
  // The first and the last stage of this rank's pipeline (they sum the tied
  // embedding's gradients); null on the other stages and when pp == 1.
  gyreComm_t tiedEmbedding() const { return tied_; }

  // "dp 2 x tp 2 x pp 1" (with "x sp S" after dp when S > 1, and ", ep E"
  // at the end when E > 1), and this rank's place: "rank 3 = dp 1, tp 1,
  // pp 0" (", sp R" and ", ep R" likewise).
  std::string describe() const;
  std::string place() const;

 private:
  MeshShape shape_;
  int rank_ = 0, dpRank_ = 0, spRank_ = 0, tpRank_ = 0, ppRank_ = 0;
  gyreComm_t world_ = nullptr, dp_ = nullptr, sp_ = nullptr, data_ = nullptr, tp_ = nullptr,
             pp_ = nullptr, tied_ = nullptr, ep_ = nullptr, expertData_ = nullptr;
};

}  // namespace gyre::harness
