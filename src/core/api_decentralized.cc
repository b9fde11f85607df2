// Decentralized averaging (gyre.h, docs/compression.md "Decentralized
// averaging"): gyrePeerAverage checks the call as AllReduce's, then the
// selection, and hands the communicator a PeerAverage operation; the
// low-precision variant keeps its neighbours' replicas in an object.
#include <memory>
#include <string>
#include <vector>

#include "collectives/peer_average.h"
#include "core/api_ops.h"
#include "core/api_support.h"
#include "core/group.h"
#include "kernels/cpu/codec.h"

using gyre::throwError;
using gyre::api::guarded;
using gyre::api::impl;
using gyre::api::raiseIfFailed;

extern "C" {

gyreResult_t gyrePeerAverage(const void* sendbuff, void* recvbuff, size_t count, gyreDataType_t datatype,
                             gyrePeers_t peers, uint64_t step, gyreComm_t comm, gyreStream_t stream) {
  return guarded("gyrePeerAverage", [&] {
    gyre::core::Communicator& c = impl(comm);
    const int selection = gyre::api::enumBits(peers);
    if (selection < 0 || selection >= gyreNumPeerSelections)
      throwError(gyreInvalidArgument, "peers " + std::to_string(selection) +
                                          " is not a gyrePeers_t (gyrePeersShiftOne, gyrePeersRing or gyrePeersRandom)");
    // Refuses what the selection cannot do here (shift_one's odd rank count).
    gyre::collectives::averagingPeers(static_cast<gyre::collectives::PeerSelection>(selection), step, c.nranks(),
                                      c.rank());
    gyre::core::Operation o = gyre::api::allReduceOp(c, sendbuff, recvbuff, count, datatype, gyreSum);
    o.kind = gyre::collectives::OpKind::PeerAverage;
    o.redop = selection;
    o.root = static_cast<int>(step & 0x7fffffff);  // the step travels in the tag's root
    gyre::api::dispatch(c, std::move(o), stream);
  });
}

}  // extern "C"

// ---- Low-precision decentralized SGD ---------------------------------------

// One rank's state: its model as its neighbours know it (prev), and its
// replicas of theirs; the encoded change is exchanged by a group of sends
// and receives (bytes), like any other point-to-point traffic.
struct gyreDecentralized {
  gyreComm_t comm = nullptr;
  gyreCodec_t codec = gyreCodecInt8;
  size_t count = 0;
  std::vector<int> neighbours;                 // left, right (one on two ranks, none on one)
  std::vector<float> prev;                     // this rank's model at the last step
  std::vector<std::vector<float>> replicas;    // by neighbour
  std::vector<float> change;                   // scratch: the change to encode
  std::vector<unsigned char> mine;             // our encoded change
  std::vector<std::vector<unsigned char>> theirs;  // by neighbour
};

namespace {

using gyre::kernels::Codec;

// Sends `out` (bytes) to every neighbour and receives theirs into `in`.
// The group is closed whatever happened to its calls (a refused one is
// the error reported), so no half-made group is left open.
void swapWithNeighbours(gyreDecentralized& d, const void* out, size_t bytes, std::vector<void*> in) {
  if (d.neighbours.empty()) return;
  raiseIfFailed(gyreGroupStart());
  gyreResult_t first = gyreSuccess;
  std::string why;
  auto note = [&](gyreResult_t r) {
    if (r != gyreSuccess && first == gyreSuccess) first = r, why = gyre::lastError();
  };
  for (size_t i = 0; i < d.neighbours.size(); ++i) {
    note(gyreSend(out, bytes, gyreUint8, d.neighbours[i], d.comm, nullptr));
    note(gyreRecv(in[i], bytes, gyreUint8, d.neighbours[i], d.comm, nullptr));
  }
  const gyreResult_t end = gyreGroupEnd();
  if (first != gyreSuccess) throwError(first, why);
  raiseIfFailed(end);
}

}  // namespace

extern "C" {

gyreResult_t gyreDecentralizedCreate(gyreDecentralized_t* decentralized, gyreComm_t comm, const void* model,
                                     size_t count, gyreDataType_t datatype, gyreCodec_t codec) {
  return guarded("gyreDecentralizedCreate", [&] {
    if (!decentralized) throwError(gyreInvalidArgument, "decentralized is NULL");
    gyre::core::Communicator& c = impl(comm);
    if (datatype != gyreFloat32)
      throwError(gyreInvalidArgument, "low-precision decentralized SGD keeps float32 models, not type " +
                                          std::to_string(gyre::api::enumBits(datatype)));
    const int v = gyre::api::enumBits(codec);
    if (v <= gyreCodecNone || v >= gyreNumCodecs)
      throwError(gyreInvalidArgument, "codec " + std::to_string(v) +
                                          " is not one that encodes (gyreCodecFp16, Bf16, Int8 or OneBit)");
    gyre::api::requireBuffer(model, count * sizeof(float), "model");
    if (gyre::core::group::active()) throwError(gyreInvalidUsage, "gyreDecentralizedCreate inside a group");
    auto d = std::make_unique<gyreDecentralized>();
    d->comm = comm;
    d->codec = codec;
    d->count = count;
    const int n = c.nranks(), r = c.rank();
    if (n >= 2) d->neighbours.push_back((r + n - 1) % n);
    if (n >= 3) d->neighbours.push_back((r + 1) % n);
    const auto* m = static_cast<const float*>(model);
    d->prev.assign(m, m + count);
    d->replicas.assign(d->neighbours.size(), std::vector<float>(count));
    std::vector<void*> in;
    for (auto& rep : d->replicas) in.push_back(rep.data());
    swapWithNeighbours(*d, d->prev.data(), count * sizeof(float), in);  // the replicas start exact
    *decentralized = d.release();
  });
}

gyreResult_t gyreDecentralizedStep(gyreDecentralized_t d, void* model) {
  return guarded("gyreDecentralizedStep", [&] {
    if (!d) throwError(gyreInvalidArgument, "decentralized is NULL");
    impl(d->comm);
    gyre::api::requireBuffer(model, d->count * sizeof(float), "model");
    if (gyre::core::group::active()) throwError(gyreInvalidUsage, "gyreDecentralizedStep inside a group");
    const size_t n = d->count;
    auto* x = static_cast<float*>(model);
    const Codec codec = static_cast<Codec>(d->codec);
    // The change: (x - prev) from the local step, plus the pull towards the
    // neighbours' replicas, with the ring's weights (1/3 each; 1/2 with one
    // neighbour). Written out (not fused), so every build rounds alike.
    d->change.resize(n);
    const size_t k = d->neighbours.size();
    const float w = 1.0f / static_cast<float>(k + 1);
    for (size_t i = 0; i < n; ++i) {
      float pull = 0.0f;
      for (size_t j = 0; j < k; ++j) pull += d->replicas[j][i] - d->prev[i];
      d->change[i] = (x[i] - d->prev[i]) + w * pull;
    }
    const size_t bytes = gyre::kernels::messageBytes(codec, n);
    d->mine.resize(bytes);
    d->theirs.assign(k, std::vector<unsigned char>(bytes));
    if (n) gyre::kernels::encode(codec, gyre::kernels::DType::Float32, d->change.data(), n, d->mine.data(), nullptr);
    std::vector<void*> in;
    for (auto& t : d->theirs) in.push_back(t.data());
    swapWithNeighbours(*d, d->mine.data(), bytes, in);
    if (!n) return;
    // prev += our decoded change (what the neighbours now hold of us), and
    // each replica += its neighbour's.
    gyre::kernels::decode(codec, d->mine.data(), n, gyre::kernels::DType::Float32, d->prev.data(), true);
    for (size_t j = 0; j < k; ++j)
      gyre::kernels::decode(codec, d->theirs[j].data(), n, gyre::kernels::DType::Float32, d->replicas[j].data(), true);
    std::copy(d->prev.begin(), d->prev.end(), x);
  });
}

gyreResult_t gyreDecentralizedDestroy(gyreDecentralized_t d) {
  return guarded("gyreDecentralizedDestroy", [&] { delete d; });
}

}  // extern "C"
