// gyrePeerAverage (gyre.h, docs/compression.md "Decentralized averaging"):
// checks the call as AllReduce's, then the selection, and hands the
// communicator a PeerAverage operation.
#include <string>

#include "collectives/peer_average.h"
#include "core/api_ops.h"
#include "core/api_support.h"

using gyre::throwError;
using gyre::api::guarded;
using gyre::api::impl;

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
