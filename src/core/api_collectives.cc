// The collective, point-to-point, group, request, PreMulSum and split entry
// points. Each checks its arguments, captures the call as an Operation, and
// hands it to the communicator (or to the caller's open group).
#include <vector>

#include "collectives/call.h"
#include "core/api_ops.h"
#include "core/api_support.h"
#include "core/device_calls.h"
#include "core/group.h"

namespace {

using gyre::throwError;
using gyre::api::bytesOf;
using gyre::api::checkDataType;
using gyre::api::checkOverlap;
using gyre::api::checkRank;
using gyre::api::checkRedOp;
using gyre::api::guarded;
using gyre::api::impl;
using gyre::api::requireBuffer;
using gyre::collectives::OpKind;
using gyre::core::CallKey;
using gyre::core::Communicator;
using gyre::core::Operation;

}  // namespace

namespace gyre::api {

void dispatch(Communicator& c, Operation&& op, gyreStream_t stream) {
  gyre::core::bindStream(op, stream);
  c.bindPreMulSum(op);
  if (gyre::core::group::active()) {
    c.checkUsable();
    gyre::core::group::add(c, std::move(op));
  } else {
    c.submit(std::move(op));
  }
}

// A blocking host call: the same call as the last one runs again on its
// plan (Communicator::repeat); any other is made (make(): its checks and
// Operation) and dispatched, keyed so that the next may repeat it.
template <typename Make>
void dispatchOrRepeat(Communicator& c, const CallKey& key, gyreStream_t stream, Make&& make) {
  if (!stream && c.repeat(key)) return;
  Operation o = make();
  if (!stream) o.key = key;
  dispatch(c, std::move(o), stream);
}

// Blocking calls go through dispatch; nonblocking ones get a request first.
void dispatchNonblocking(Communicator& c, Operation&& op, gyreRequest_t* request) {
  if (!request) throwError(gyreInvalidArgument, "request is NULL");
  auto state = std::make_shared<gyre::core::RequestState>();
  op.request = state;
  auto handle = std::make_unique<gyreRequest>();
  handle->state = state;
  dispatch(c, std::move(op), nullptr);
  *request = handle.release();
}

Operation allReduceOp(Communicator& c, const void* s, void* r, size_t count, gyreDataType_t t, gyreRedOp_t op) {
  checkDataType(t);
  checkRedOp(op, c, t);
  const size_t bytes = bytesOf(count, 1, t, "count");
  requireBuffer(s, bytes, "sendbuff");
  requireBuffer(r, bytes, "recvbuff");
  checkOverlap(s, bytes, r, bytes, 0, "sendbuff == recvbuff");
  Operation o;
  o.kind = OpKind::AllReduce;
  o.sendbuff = s;
  o.recvbuff = r;
  o.count = count;
  o.dtype = t;
  o.redop = gyre::api::enumBits(op);
  o.sendBytes = o.recvBytes = bytes;
  return o;
}

Operation broadcastOp(Communicator& c, const void* s, void* r, size_t count, gyreDataType_t t, int root) {
  checkDataType(t);
  checkRank(root, c.nranks(), "root");
  const size_t bytes = bytesOf(count, 1, t, "count");
  requireBuffer(r, bytes, "recvbuff");
  if (c.rank() == root) {
    requireBuffer(s, bytes, "sendbuff (on the root)");
    checkOverlap(s, bytes, r, bytes, 0, "sendbuff == recvbuff");
  }
  Operation o;
  o.kind = OpKind::Broadcast;
  o.sendbuff = c.rank() == root ? s : nullptr;
  o.recvbuff = r;
  o.count = count;
  o.dtype = t;
  o.root = root;
  o.sendBytes = o.sendbuff ? bytes : 0;
  o.recvBytes = bytes;
  return o;
}

Operation reduceOp(Communicator& c, const void* s, void* r, size_t count, gyreDataType_t t, gyreRedOp_t op, int root) {
  checkDataType(t);
  checkRedOp(op, c, t);
  checkRank(root, c.nranks(), "root");
  const size_t bytes = bytesOf(count, 1, t, "count");
  requireBuffer(s, bytes, "sendbuff");
  if (c.rank() == root) {
    requireBuffer(r, bytes, "recvbuff (on the root)");
    checkOverlap(s, bytes, r, bytes, 0, "sendbuff == recvbuff");
  }
  Operation o;
  o.kind = OpKind::Reduce;
  o.sendbuff = s;
  o.recvbuff = c.rank() == root ? r : nullptr;
  o.count = count;
  o.dtype = t;
  o.redop = gyre::api::enumBits(op);
  o.root = root;
  o.sendBytes = bytes;
  o.recvBytes = o.recvbuff ? bytes : 0;
  return o;
}

Operation allGatherOp(Communicator& c, const void* s, void* r, size_t count, gyreDataType_t t) {
  checkDataType(t);
  const size_t n = static_cast<size_t>(c.nranks());
  const size_t bytes = bytesOf(count, 1, t, "sendcount"), all = bytesOf(count, n, t, "sendcount");
  requireBuffer(s, bytes, "sendbuff");
  requireBuffer(r, all, "recvbuff");
  checkOverlap(r, all, s, bytes, c.rank() * bytes, "sendbuff == recvbuff + rank * sendcount");
  Operation o;
  o.kind = OpKind::AllGather;
  o.sendbuff = s;
  o.recvbuff = r;
  o.count = count;
  o.dtype = t;
  o.sendBytes = bytes;
  o.recvBytes = all;
  return o;
}

Operation reduceScatterOp(Communicator& c, const void* s, void* r, size_t count, gyreDataType_t t, gyreRedOp_t op) {
  checkDataType(t);
  checkRedOp(op, c, t);
  const size_t n = static_cast<size_t>(c.nranks());
  const size_t bytes = bytesOf(count, 1, t, "recvcount"), all = bytesOf(count, n, t, "recvcount");
  requireBuffer(s, all, "sendbuff");
  requireBuffer(r, bytes, "recvbuff");
  checkOverlap(s, all, r, bytes, c.rank() * bytes, "recvbuff == sendbuff + rank * recvcount");
  Operation o;
  o.kind = OpKind::ReduceScatter;
  o.sendbuff = s;
  o.recvbuff = r;
  o.count = count;
  o.dtype = t;
  o.redop = gyre::api::enumBits(op);
  o.sendBytes = all;
  o.recvBytes = bytes;
  return o;
}

Operation allToAllOp(Communicator& c, const void* s, void* r, size_t count, gyreDataType_t t) {
  checkDataType(t);
  const size_t all = bytesOf(count, static_cast<size_t>(c.nranks()), t, "count");
  requireBuffer(s, all, "sendbuff");
  requireBuffer(r, all, "recvbuff");
  checkOverlap(s, all, r, all, 0, "sendbuff == recvbuff");
  Operation o;
  o.kind = OpKind::AllToAll;
  o.sendbuff = s;
  o.recvbuff = r;
  o.count = count;
  o.dtype = t;
  o.sendBytes = o.recvBytes = all;
  return o;
}

Operation allToAllvOp(Communicator& c, const void* s, const size_t* sc, const size_t* sd, void* r, const size_t* rc,
                      const size_t* rd, gyreDataType_t t) {
  checkDataType(t);
  if (!sc || !sd || !rc || !rd)
    throwError(gyreInvalidArgument, std::string(!sc ? "sendcounts" : !sd ? "sdispls" : !rc ? "recvcounts" : "rdispls") +
                                        " is NULL");
  const int n = c.nranks();
  size_t sendEnd = 0, recvEnd = 0;  // extents in elements
  for (int j = 0; j < n; ++j) {
    if (sd[j] > SIZE_MAX - sc[j] || rd[j] > SIZE_MAX - rc[j])
      throwError(gyreInvalidArgument, "displacement + count overflows at index " + std::to_string(j));
    sendEnd = std::max(sendEnd, sc[j] ? sd[j] + sc[j] : 0);
    recvEnd = std::max(recvEnd, rc[j] ? rd[j] + rc[j] : 0);
  }
  const int me = c.rank();
  if (sc[me] != rc[me])
    throwError(gyreInvalidArgument, "sendcounts[" + std::to_string(me) + "] (" + std::to_string(sc[me]) +
                                        ") must equal recvcounts[" + std::to_string(me) + "] (" + std::to_string(rc[me]) +
                                        "): the block a rank keeps for itself");
  const size_t sendBytes = bytesOf(sendEnd, 1, t, "send extent"), recvBytes = bytesOf(recvEnd, 1, t, "receive extent");
  requireBuffer(s, sendBytes, "sendbuff");
  requireBuffer(r, recvBytes, "recvbuff");
  const auto ps = reinterpret_cast<uintptr_t>(s), pr = reinterpret_cast<uintptr_t>(r);
  if (s && r && sendBytes && recvBytes && ps < pr + recvBytes && pr < ps + sendBytes)
    throwError(gyreInvalidArgument, "sendbuff and recvbuff overlap: AllToAllv needs separate buffers");
  Operation o;
  o.kind = OpKind::AllToAllv;
  o.sendbuff = s;
  o.recvbuff = r;
  o.dtype = t;
  o.vcounts.reserve(4 * static_cast<size_t>(n));
  for (const size_t* a : {sc, sd, rc, rd}) o.vcounts.insert(o.vcounts.end(), a, a + n);
  o.sendBytes = sendBytes;
  o.recvBytes = recvBytes;
  return o;
}

Operation gatherOp(Communicator& c, const void* s, void* r, size_t count, gyreDataType_t t, int root) {
  checkDataType(t);
  checkRank(root, c.nranks(), "root");
  const size_t bytes = bytesOf(count, 1, t, "sendcount"),
               all = bytesOf(count, static_cast<size_t>(c.nranks()), t, "sendcount");
  requireBuffer(s, bytes, "sendbuff");
  if (c.rank() == root) {
    requireBuffer(r, all, "recvbuff (on the root)");
    checkOverlap(r, all, s, bytes, root * bytes, "sendbuff == recvbuff + root * sendcount");
  }
  Operation o;
  o.kind = OpKind::Gather;
  o.sendbuff = s;
  o.recvbuff = c.rank() == root ? r : nullptr;
  o.count = count;
  o.dtype = t;
  o.root = root;
  o.sendBytes = bytes;
  o.recvBytes = o.recvbuff ? all : 0;
  return o;
}

Operation scatterOp(Communicator& c, const void* s, void* r, size_t count, gyreDataType_t t, int root) {
  checkDataType(t);
  checkRank(root, c.nranks(), "root");
  const size_t bytes = bytesOf(count, 1, t, "recvcount"),
               all = bytesOf(count, static_cast<size_t>(c.nranks()), t, "recvcount");
  requireBuffer(r, bytes, "recvbuff");
  if (c.rank() == root) {
    requireBuffer(s, all, "sendbuff (on the root)");
    checkOverlap(s, all, r, bytes, root * bytes, "recvbuff == sendbuff + root * recvcount");
  }
  Operation o;
  o.kind = OpKind::Scatter;
  o.sendbuff = c.rank() == root ? s : nullptr;
  o.recvbuff = r;
  o.count = count;
  o.dtype = t;
  o.root = root;
  o.sendBytes = o.sendbuff ? all : 0;
  o.recvBytes = bytes;
  return o;
}

Operation pointToPointOp(Communicator& c, bool isSend, const void* s, void* r, size_t count, gyreDataType_t t, int peer) {
  checkDataType(t);
  checkRank(peer, c.nranks(), "peer");
  const size_t bytes = bytesOf(count, 1, t, "count");
  requireBuffer(isSend ? s : r, bytes, isSend ? "sendbuff" : "recvbuff");
  if (peer == c.rank() && !gyre::core::group::active())
    throwError(gyreInvalidUsage, std::string("a ") + (isSend ? "send to" : "receive from") +
                                     " this rank itself must be inside a group with its matching " +
                                     (isSend ? "receive" : "send"));
  Operation o;
  o.kind = OpKind::SendRecv;
  o.isSend = isSend;
  o.sendbuff = s;
  o.recvbuff = r;
  o.count = count;
  o.dtype = t;
  o.peer = peer;
  o.sendBytes = isSend ? bytes : 0;
  o.recvBytes = isSend ? 0 : bytes;
  return o;
}

Operation barrierOp() {
  Operation o;
  o.kind = OpKind::Barrier;
  o.dtype = gyreUint8;
  return o;
}

}  // namespace gyre::api

using namespace gyre::api;  // the operations above, for the entry points below

extern "C" {

gyreResult_t gyreAllReduce(const void* sendbuff, void* recvbuff, size_t count, gyreDataType_t datatype,
                           gyreRedOp_t op, gyreComm_t comm, gyreStream_t stream) {
  return guarded("gyreAllReduce", [&] {
    Communicator& c = impl(comm);
    const CallKey key{true, OpKind::AllReduce, enumBits(datatype), enumBits(op), -1, count, sendbuff, recvbuff};
    dispatchOrRepeat(c, key, stream, [&] { return allReduceOp(c, sendbuff, recvbuff, count, datatype, op); });
  });
}

gyreResult_t gyreBroadcast(const void* sendbuff, void* recvbuff, size_t count, gyreDataType_t datatype, int root,
                           gyreComm_t comm, gyreStream_t stream) {
  return guarded("gyreBroadcast", [&] {
    Communicator& c = impl(comm);
    const CallKey key{true, OpKind::Broadcast, enumBits(datatype), 0, root, count, sendbuff, recvbuff};
    dispatchOrRepeat(c, key, stream, [&] { return broadcastOp(c, sendbuff, recvbuff, count, datatype, root); });
  });
}

gyreResult_t gyreReduce(const void* sendbuff, void* recvbuff, size_t count, gyreDataType_t datatype, gyreRedOp_t op,
                        int root, gyreComm_t comm, gyreStream_t stream) {
  return guarded("gyreReduce", [&] {
    Communicator& c = impl(comm);
    const CallKey key{true, OpKind::Reduce, enumBits(datatype), enumBits(op), root, count, sendbuff, recvbuff};
    dispatchOrRepeat(c, key, stream, [&] { return reduceOp(c, sendbuff, recvbuff, count, datatype, op, root); });
  });
}

gyreResult_t gyreAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, gyreDataType_t datatype,
                           gyreComm_t comm, gyreStream_t stream) {
  return guarded("gyreAllGather", [&] {
    Communicator& c = impl(comm);
    const CallKey key{true, OpKind::AllGather, enumBits(datatype), 0, -1, sendcount, sendbuff, recvbuff};
    dispatchOrRepeat(c, key, stream, [&] { return allGatherOp(c, sendbuff, recvbuff, sendcount, datatype); });
  });
}

gyreResult_t gyreReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, gyreDataType_t datatype,
                               gyreRedOp_t op, gyreComm_t comm, gyreStream_t stream) {
  return guarded("gyreReduceScatter", [&] {
    Communicator& c = impl(comm);
    const CallKey key{true, OpKind::ReduceScatter, enumBits(datatype), enumBits(op), -1, recvcount, sendbuff, recvbuff};
    dispatchOrRepeat(c, key, stream, [&] { return reduceScatterOp(c, sendbuff, recvbuff, recvcount, datatype, op); });
  });
}

gyreResult_t gyreAllToAll(const void* sendbuff, void* recvbuff, size_t count, gyreDataType_t datatype, gyreComm_t comm,
                          gyreStream_t stream) {
  return guarded("gyreAllToAll", [&] {
    Communicator& c = impl(comm);
    const CallKey key{true, OpKind::AllToAll, enumBits(datatype), 0, -1, count, sendbuff, recvbuff};
    dispatchOrRepeat(c, key, stream, [&] { return allToAllOp(c, sendbuff, recvbuff, count, datatype); });
  });
}

gyreResult_t gyreAllToAllv(const void* sendbuff, const size_t sendcounts[], const size_t sdispls[], void* recvbuff,
                           const size_t recvcounts[], const size_t rdispls[], gyreDataType_t datatype, gyreComm_t comm,
                           gyreStream_t stream) {
  return guarded("gyreAllToAllv", [&] {
    Communicator& c = impl(comm);
    Operation o = allToAllvOp(c, sendbuff, sendcounts, sdispls, recvbuff, recvcounts, rdispls, datatype);
    dispatch(c, std::move(o), stream);
  });
}

gyreResult_t gyreGather(const void* sendbuff, void* recvbuff, size_t sendcount, gyreDataType_t datatype, int root,
                        gyreComm_t comm, gyreStream_t stream) {
  return guarded("gyreGather", [&] {
    Communicator& c = impl(comm);
    const CallKey key{true, OpKind::Gather, enumBits(datatype), 0, root, sendcount, sendbuff, recvbuff};
    dispatchOrRepeat(c, key, stream, [&] { return gatherOp(c, sendbuff, recvbuff, sendcount, datatype, root); });
  });
}

gyreResult_t gyreScatter(const void* sendbuff, void* recvbuff, size_t recvcount, gyreDataType_t datatype, int root,
                         gyreComm_t comm, gyreStream_t stream) {
  return guarded("gyreScatter", [&] {
    Communicator& c = impl(comm);
    const CallKey key{true, OpKind::Scatter, enumBits(datatype), 0, root, recvcount, sendbuff, recvbuff};
    dispatchOrRepeat(c, key, stream, [&] { return scatterOp(c, sendbuff, recvbuff, recvcount, datatype, root); });
  });
}

gyreResult_t gyreSend(const void* sendbuff, size_t count, gyreDataType_t datatype, int peer, gyreComm_t comm,
                      gyreStream_t stream) {
  return guarded("gyreSend", [&] {
    Communicator& c = impl(comm);
    Operation o = pointToPointOp(c, true, sendbuff, nullptr, count, datatype, peer);
    dispatch(c, std::move(o), stream);
  });
}

gyreResult_t gyreRecv(void* recvbuff, size_t count, gyreDataType_t datatype, int peer, gyreComm_t comm,
                      gyreStream_t stream) {
  return guarded("gyreRecv", [&] {
    Communicator& c = impl(comm);
    Operation o = pointToPointOp(c, false, nullptr, recvbuff, count, datatype, peer);
    dispatch(c, std::move(o), stream);
  });
}

gyreResult_t gyreBarrier(gyreComm_t comm, gyreStream_t stream) {
  return guarded("gyreBarrier", [&] {
    Communicator& c = impl(comm);
    dispatch(c, barrierOp(), stream);
  });
}

gyreResult_t gyreGroupStart(void) {
  return guarded("gyreGroupStart", [] { gyre::core::group::start(); });
}

gyreResult_t gyreGroupEnd(void) {
  return guarded("gyreGroupEnd", [] { gyre::core::group::end(); });
}

gyreResult_t gyreGroupSimulateEnd(double* microseconds) {
  return guarded("gyreGroupSimulateEnd", [&] {
    // The group ends either way: one left open would swallow later calls.
    const double us = gyre::core::group::simulateEnd();
    if (!microseconds) throwError(gyreInvalidArgument, "microseconds is NULL (the group was ended, its calls not run)");
    *microseconds = us;
  });
}

gyreResult_t gyreIallReduce(const void* sendbuff, void* recvbuff, size_t count, gyreDataType_t datatype, gyreRedOp_t op,
                            gyreComm_t comm, gyreRequest_t* request) {
  return guarded("gyreIallReduce", [&] {
    Communicator& c = impl(comm);
    dispatchNonblocking(c, allReduceOp(c, sendbuff, recvbuff, count, datatype, op), request);
  });
}

gyreResult_t gyreIbroadcast(const void* sendbuff, void* recvbuff, size_t count, gyreDataType_t datatype, int root,
                            gyreComm_t comm, gyreRequest_t* request) {
  return guarded("gyreIbroadcast", [&] {
    Communicator& c = impl(comm);
    dispatchNonblocking(c, broadcastOp(c, sendbuff, recvbuff, count, datatype, root), request);
  });
}

gyreResult_t gyreIreduce(const void* sendbuff, void* recvbuff, size_t count, gyreDataType_t datatype, gyreRedOp_t op,
                         int root, gyreComm_t comm, gyreRequest_t* request) {
  return guarded("gyreIreduce", [&] {
    Communicator& c = impl(comm);
    dispatchNonblocking(c, reduceOp(c, sendbuff, recvbuff, count, datatype, op, root), request);
  });
}

gyreResult_t gyreIallGather(const void* sendbuff, void* recvbuff, size_t sendcount, gyreDataType_t datatype,
                            gyreComm_t comm, gyreRequest_t* request) {
  return guarded("gyreIallGather", [&] {
    Communicator& c = impl(comm);
    dispatchNonblocking(c, allGatherOp(c, sendbuff, recvbuff, sendcount, datatype), request);
  });
}

gyreResult_t gyreIreduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, gyreDataType_t datatype,
                                gyreRedOp_t op, gyreComm_t comm, gyreRequest_t* request) {
  return guarded("gyreIreduceScatter", [&] {
    Communicator& c = impl(comm);
    dispatchNonblocking(c, reduceScatterOp(c, sendbuff, recvbuff, recvcount, datatype, op), request);
  });
}

gyreResult_t gyreIallToAll(const void* sendbuff, void* recvbuff, size_t count, gyreDataType_t datatype,
                           gyreComm_t comm, gyreRequest_t* request) {
  return guarded("gyreIallToAll", [&] {
    Communicator& c = impl(comm);
    dispatchNonblocking(c, allToAllOp(c, sendbuff, recvbuff, count, datatype), request);
  });
}

gyreResult_t gyreIallToAllv(const void* sendbuff, const size_t sendcounts[], const size_t sdispls[], void* recvbuff,
                            const size_t recvcounts[], const size_t rdispls[], gyreDataType_t datatype,
                            gyreComm_t comm, gyreRequest_t* request) {
  return guarded("gyreIallToAllv", [&] {
    Communicator& c = impl(comm);
    dispatchNonblocking(c, allToAllvOp(c, sendbuff, sendcounts, sdispls, recvbuff, recvcounts, rdispls, datatype),
                        request);
  });
}

gyreResult_t gyreIsend(const void* sendbuff, size_t count, gyreDataType_t datatype, int peer, gyreComm_t comm,
                       gyreRequest_t* request) {
  return guarded("gyreIsend", [&] {
    Communicator& c = impl(comm);
    dispatchNonblocking(c, pointToPointOp(c, true, sendbuff, nullptr, count, datatype, peer), request);
  });
}

gyreResult_t gyreIrecv(void* recvbuff, size_t count, gyreDataType_t datatype, int peer, gyreComm_t comm,
                       gyreRequest_t* request) {
  return guarded("gyreIrecv", [&] {
    Communicator& c = impl(comm);
    dispatchNonblocking(c, pointToPointOp(c, false, nullptr, recvbuff, count, datatype, peer), request);
  });
}

gyreResult_t gyreIbarrier(gyreComm_t comm, gyreRequest_t* request) {
  return guarded("gyreIbarrier", [&] { dispatchNonblocking(impl(comm), barrierOp(), request); });
}

gyreResult_t gyreWait(gyreRequest_t request) {
  gyreResult_t result = gyreSuccess;
  gyreResult_t r = guarded("gyreWait", [&] {
    if (!request || !request->state) throwError(gyreInvalidArgument, "request is NULL");
    std::unique_ptr<gyreRequest> owned(request);
    auto& st = *owned->state;
    std::unique_lock<std::mutex> lock(st.mu);
    st.cv.wait(lock, [&] { return st.done; });
    result = st.result;
    if (result != gyreSuccess) throw gyre::Error(result, st.message);
  });
  return r != gyreSuccess ? r : result;
}

gyreResult_t gyreTest(gyreRequest_t request, int* done) {
  return guarded("gyreTest", [&] {
    if (!request || !request->state) throwError(gyreInvalidArgument, "request is NULL");
    if (!done) throwError(gyreInvalidArgument, "done is NULL");
    auto& st = *request->state;
    std::unique_lock<std::mutex> lock(st.mu);
    *done = st.done ? 1 : 0;
    if (!st.done) return;
    const gyreResult_t result = st.result;
    const std::string message = st.message;
    lock.unlock();
    delete request;
    if (result != gyreSuccess) throw gyre::Error(result, message);
  });
}

gyreResult_t gyreRedOpCreatePreMulSum(gyreRedOp_t* op, void* scalar, gyreDataType_t datatype,
                                      gyreScalarResidence_t residence, gyreComm_t comm) {
  return guarded("gyreRedOpCreatePreMulSum", [&] {
    Communicator& c = impl(comm);
    if (!op) throwError(gyreInvalidArgument, "op is NULL");
    if (!scalar) throwError(gyreInvalidArgument, "scalar is NULL");
    checkDataType(datatype);
    const int where = gyre::api::enumBits(residence);
    if (where != gyreScalarDevice && where != gyreScalarHostImmediate)
      throwError(gyreInvalidArgument, "residence " + std::to_string(where) +
                                          " is neither gyreScalarDevice nor gyreScalarHostImmediate");
    *op = static_cast<gyreRedOp_t>(c.createPreMulSum(scalar, datatype, residence));
  });
}

gyreResult_t gyreRedOpDestroy(gyreRedOp_t op, gyreComm_t comm) {
  return guarded("gyreRedOpDestroy", [&] { impl(comm).destroyRedOp(gyre::api::enumBits(op)); });
}

gyreResult_t gyreCommSplit(gyreComm_t comm, int color, int key, gyreComm_t* newcomm, gyreConfig_t* config) {
  return guarded("gyreCommSplit", [&] {
    Communicator& c = impl(comm);
    if (!newcomm) throwError(gyreInvalidArgument, "newcomm is NULL");
    *newcomm = nullptr;
    if (color < 0 && color != GYRE_SPLIT_NOCOLOR)
      throwError(gyreInvalidArgument, "color " + std::to_string(color) + " is negative (use GYRE_SPLIT_NOCOLOR to opt out)");
    auto child = c.split(color, key, config);
    if (!child) return;
    auto handle = std::make_unique<gyreComm>();
    handle->impl = std::move(child);
    *newcomm = handle.release();
  });
}

gyreResult_t gyreCommShrink(gyreComm_t comm, const int* excludeRanks, int excludeCount,
                            gyreComm_t* newcomm, const gyreConfig_t* config, int flags) {
  return guarded("gyreCommShrink", [&] {
    Communicator& c = impl(comm);
    if (!newcomm) throwError(gyreInvalidArgument, "newcomm is NULL");
    *newcomm = nullptr;
    if (flags != GYRE_SHRINK_DEFAULT && flags != GYRE_SHRINK_ABORT)
      throwError(gyreInvalidArgument, "flags " + std::to_string(flags) +
                                          " (GYRE_SHRINK_DEFAULT 0 or GYRE_SHRINK_ABORT 1)");
    if (excludeCount < 0)
      throwError(gyreInvalidArgument, "excludeCount " + std::to_string(excludeCount) + " is negative");
    if (excludeCount > 0 && !excludeRanks)
      throwError(gyreInvalidArgument, "excludeRanks is NULL but excludeCount is " + std::to_string(excludeCount));
    std::vector<int> exclude;
    for (int i = 0; i < excludeCount; ++i) {
      const int r = excludeRanks[i];
      if (r < 0 || r >= c.nranks())
        throwError(gyreInvalidArgument, "excludeRanks[" + std::to_string(i) + "] = " + std::to_string(r) +
                                            " is not a rank of the communicator (0.." +
                                            std::to_string(c.nranks() - 1) + ")");
      if (r == c.rank())
        throwError(gyreInvalidArgument, "excludeRanks[" + std::to_string(i) + "] is this rank (" + std::to_string(r) +
                                            "): an excluded rank does not call gyreCommShrink");
      exclude.push_back(r);
    }
    auto child = c.shrink(exclude, flags == GYRE_SHRINK_ABORT, config);
    auto handle = std::make_unique<gyreComm>();
    handle->impl = std::move(child);
    *newcomm = handle.release();
  });
}

}  // extern "C"
