// The mixture-of-experts calls (gyre.h, docs/moe.md): every argument
// checked by name, the routing made (collectives/moe_route.h) and each
// exchange handed on as an operation of its own (communicator_moe.cc).
#include <memory>
#include <string>

#include "collectives/moe_route.h"
#include "core/api_ops.h"
#include "core/api_support.h"

struct gyreMoeRouting {
  gyre::core::Communicator* comm = nullptr;
  std::shared_ptr<gyre::collectives::MoeRoute> route;
};

namespace {

using gyre::throwError;
using gyre::collectives::MoeRoute;
using gyre::collectives::OpKind;
using gyre::core::Communicator;
using gyre::core::Operation;

[[noreturn]] void bad(const std::string& what) { throwError(gyreInvalidArgument, what); }

MoeRoute& routeOf(gyreMoeRouting_t routing, const Communicator& c) {
  if (!routing) bad("routing is NULL");
  if (routing->comm != &c)
    bad("routing was made on another communicator (gyreMoeRoutingCreate's comm must be the call's)");
  return *routing->route;
}

// Host memory only, for now: the rows are packed and placed by the host.
void checkStream(gyreStream_t stream) {
  if (stream && stream != GYRE_STREAM_LEGACY)
    throwError(gyreInvalidUsage,
               "the MoE calls run on host memory only: stream must be NULL (or GYRE_STREAM_LEGACY)");
}

size_t rowsBytes(size_t rows, size_t hidden, gyreDataType_t t, const char* what) {
  return gyre::api::bytesOf(rows, hidden, t, what);
}

void checkHidden(size_t hidden) {
  if (hidden < 1 || hidden > gyre::collectives::kMaxMoeHidden)
    bad("hidden " + std::to_string(hidden) + " is not in [1, " + std::to_string(gyre::collectives::kMaxMoeHidden) +
        "]");
}

void checkOverlap(const void* s, size_t sBytes, const void* r, size_t rBytes) {
  const auto ps = reinterpret_cast<uintptr_t>(s), pr = reinterpret_cast<uintptr_t>(r);
  if (s && r && sBytes && rBytes && ps < pr + rBytes && pr < ps + sBytes)
    bad("sendbuff and recvbuff overlap: the MoE exchanges need separate buffers");
}

Operation dispatchOp(Communicator& c, const void* s, void* r, size_t recvRows, size_t hidden, gyreDataType_t t,
                     int flags, gyreMoeRouting_t routing) {
  gyre::api::checkDataType(t);
  checkHidden(hidden);
  if (flags & ~GYRE_MOE_PER_SLOT)
    bad("flags " + std::to_string(flags) + " has bits other than GYRE_MOE_PER_SLOT");
  MoeRoute& m = routeOf(routing, c);
  const bool perSlot = flags & GYRE_MOE_PER_SLOT;
  const size_t sendBytes =
      rowsBytes(m.tokens * (perSlot ? m.k : 1), hidden, t, perSlot ? "tokens x k x hidden" : "tokens x hidden");
  const size_t recvBytes = rowsBytes(recvRows, hidden, t, "recvRows x hidden");
  if (m.received && recvRows < m.recvTotal)
    bad("recvRows " + std::to_string(recvRows) + " is less than the " + std::to_string(m.recvTotal) +
        " rows that this rank's experts receive (gyreMoeRecvCounts' totalRows)");
  gyre::api::requireBuffer(s, m.packedRows() ? sendBytes : 0, "sendbuff");
  gyre::api::requireBuffer(r, recvBytes, "recvbuff");
  checkOverlap(s, sendBytes, r, recvBytes);
  Operation o;
  o.kind = OpKind::MoeDispatch;
  o.sendbuff = s;
  o.recvbuff = r;
  o.dtype = t;
  o.count = gyre::collectives::moeShapeCode(m, hidden);
  o.moe = routing->route;
  o.moeHidden = hidden;
  o.moeRows = recvRows;
  o.moePerSlot = perSlot;
  o.moeCountsKnown = m.received;
  o.sendBytes = sendBytes;
  o.recvBytes = recvBytes;
  return o;
}

Operation combineOp(Communicator& c, const void* s, size_t sendRows, void* r, const float* weights, size_t hidden,
                    gyreDataType_t t, gyreMoeRouting_t routing) {
  gyre::api::checkDataType(t);
  checkHidden(hidden);
  MoeRoute& m = routeOf(routing, c);
  if (!m.received)
    throwError(gyreInvalidUsage,
               "the routing's counts are not known yet: combine follows a dispatch (or gyreMoeExchangeCounts) "
               "with this routing, and a nonblocking dispatch must have been waited for");
  if (sendRows != m.recvTotal)
    bad("sendRows " + std::to_string(sendRows) + " does not match the routing: its dispatch brought " +
        std::to_string(m.recvTotal) + " rows to this rank");
  if (weights && t != gyreFloat16 && t != gyreBfloat16 && t != gyreFloat32 && t != gyreFloat64)
    bad("weights are given but datatype is not a floating type (a weighted combine is float16, bfloat16, float32 "
        "or float64; pass weights NULL for each slot's row)");
  const size_t sendBytes = rowsBytes(sendRows, hidden, t, "sendRows x hidden");
  const size_t recvBytes =
      rowsBytes(m.tokens * (weights ? 1 : m.k), hidden, t, weights ? "tokens x hidden" : "tokens x k x hidden");
  gyre::api::requireBuffer(s, sendBytes, "sendbuff");
  gyre::api::requireBuffer(r, recvBytes, "recvbuff");
  checkOverlap(s, sendBytes, r, recvBytes);
  Operation o;
  o.kind = OpKind::MoeCombine;
  o.sendbuff = s;
  o.recvbuff = r;
  o.dtype = t;
  o.count = gyre::collectives::moeShapeCode(m, hidden);
  o.moe = routing->route;
  o.moeHidden = hidden;
  o.moeWeights = weights;
  o.sendBytes = sendBytes;
  o.recvBytes = recvBytes;
  return o;
}

}  // namespace

extern "C" {

gyreResult_t gyreMoeRoutingCreate(gyreMoeRouting_t* routing, const int32_t* choices, size_t tokens, int k,
                                  int experts, const int* expertRank, size_t capacity, gyreComm_t comm) {
  return gyre::api::guarded("gyreMoeRoutingCreate", [&] {
    if (!routing) bad("routing is NULL");
    Communicator& c = gyre::api::impl(comm);
    const int n = c.nranks();
    if (k < 1 || static_cast<uint32_t>(k) > gyre::collectives::kMaxMoeTopK)
      bad("k " + std::to_string(k) + " is not in [1, " + std::to_string(gyre::collectives::kMaxMoeTopK) + "]");
    if (experts < 1 || static_cast<uint32_t>(experts) > gyre::collectives::kMaxMoeExperts)
      bad("experts " + std::to_string(experts) + " is not in [1, " +
          std::to_string(gyre::collectives::kMaxMoeExperts) + "]");
    size_t slots = 0;
    if (__builtin_mul_overflow(tokens, static_cast<size_t>(k), &slots) || slots > (size_t{1} << 40))
      bad("tokens x k is too large");
    if (slots && !choices) bad("choices is NULL but tokens is " + std::to_string(tokens));
    std::vector<int> map(static_cast<size_t>(experts));
    if (expertRank) {
      for (int e = 0; e < experts; ++e) {
        if (expertRank[e] < 0 || expertRank[e] >= n)
          bad("expertRank[" + std::to_string(e) + "] is " + std::to_string(expertRank[e]) + ", not a rank in [0, " +
              std::to_string(n) + ")");
        map[static_cast<size_t>(e)] = expertRank[e];
      }
    } else {
      if (experts % n)
        bad("experts " + std::to_string(experts) + " is not a multiple of the " + std::to_string(n) +
            " ranks (the default map puts experts / nranks on each rank; pass expertRank for another)");
      for (int e = 0; e < experts; ++e) map[static_cast<size_t>(e)] = e / (experts / n);
    }
    for (size_t i = 0; i < slots; ++i)
      if (choices[i] < -1 || choices[i] >= experts)
        bad("choices[" + std::to_string(i / static_cast<size_t>(k)) + "][" +
            std::to_string(i % static_cast<size_t>(k)) + "] is " + std::to_string(choices[i]) +
            ", not an expert in [0, " + std::to_string(experts) + ") nor -1");
    auto h = std::make_unique<gyreMoeRouting>();
    h->comm = &c;
    h->route = std::make_shared<MoeRoute>(gyre::collectives::routeTokens(
        n, c.rank(), static_cast<uint32_t>(experts), static_cast<uint32_t>(k), tokens, capacity, map, choices));
    *routing = h.release();
  });
}

gyreResult_t gyreMoeRoutingDestroy(gyreMoeRouting_t routing) {
  return gyre::api::guarded("gyreMoeRoutingDestroy", [&] {
    if (!routing) bad("routing is NULL");
    delete routing;  // a queued call keeps the route itself
  });
}

gyreResult_t gyreMoeExchangeCounts(gyreMoeRouting_t routing, gyreComm_t comm) {
  return gyre::api::guarded("gyreMoeExchangeCounts", [&] {
    Communicator& c = gyre::api::impl(comm);
    MoeRoute& m = routeOf(routing, c);
    Operation o;
    o.kind = OpKind::MoeCounts;
    o.dtype = gyreUint64;
    o.count = m.code;
    o.moe = routing->route;
    gyre::api::dispatch(c, std::move(o), nullptr);
  });
}

gyreResult_t gyreMoeSendCounts(gyreMoeRouting_t routing, size_t* sent, size_t* dropped) {
  return gyre::api::guarded("gyreMoeSendCounts", [&] {
    if (!routing) bad("routing is NULL");
    const MoeRoute& m = *routing->route;
    for (uint32_t e = 0; e < m.experts; ++e) {
      if (sent) sent[e] = m.sent[e];
      if (dropped) dropped[e] = m.dropped[e];
    }
  });
}

gyreResult_t gyreMoeLocalExperts(gyreMoeRouting_t routing, int* localExperts, int* ids) {
  return gyre::api::guarded("gyreMoeLocalExperts", [&] {
    if (!routing) bad("routing is NULL");
    const MoeRoute& m = *routing->route;
    const auto& mine = m.localOf[static_cast<size_t>(m.rank)];
    if (localExperts) *localExperts = static_cast<int>(mine.size());
    if (ids)
      for (size_t l = 0; l < mine.size(); ++l) ids[l] = static_cast<int>(mine[l]);
  });
}

gyreResult_t gyreMoeRecvCounts(gyreMoeRouting_t routing, size_t* rows, size_t* dropped, size_t* totalRows) {
  return gyre::api::guarded("gyreMoeRecvCounts", [&] {
    if (!routing) bad("routing is NULL");
    const MoeRoute& m = *routing->route;
    if (!m.received)
      throwError(gyreInvalidUsage,
                 "the routing's counts are not known yet (gyreMoeExchangeCounts, or a dispatch, brings them)");
    for (size_t i = 0; rows && i < m.recvRows.size(); ++i) rows[i] = m.recvRows[i];
    for (size_t l = 0; dropped && l < m.recvDropped.size(); ++l) dropped[l] = m.recvDropped[l];
    if (totalRows) *totalRows = m.recvTotal;
  });
}

gyreResult_t gyreMoeDispatch(const void* sendbuff, void* recvbuff, size_t recvRows, size_t hidden,
                             gyreDataType_t datatype, int flags, gyreMoeRouting_t routing, gyreComm_t comm,
                             gyreStream_t stream) {
  return gyre::api::guarded("gyreMoeDispatch", [&] {
    Communicator& c = gyre::api::impl(comm);
    checkStream(stream);
    gyre::api::dispatch(c, dispatchOp(c, sendbuff, recvbuff, recvRows, hidden, datatype, flags, routing), nullptr);
  });
}

gyreResult_t gyreMoeCombine(const void* sendbuff, size_t sendRows, void* recvbuff, const float* weights,
                            size_t hidden, gyreDataType_t datatype, gyreMoeRouting_t routing, gyreComm_t comm,
                            gyreStream_t stream) {
  return gyre::api::guarded("gyreMoeCombine", [&] {
    Communicator& c = gyre::api::impl(comm);
    checkStream(stream);
    gyre::api::dispatch(c, combineOp(c, sendbuff, sendRows, recvbuff, weights, hidden, datatype, routing), nullptr);
  });
}

gyreResult_t gyreImoeDispatch(const void* sendbuff, void* recvbuff, size_t recvRows, size_t hidden,
                              gyreDataType_t datatype, int flags, gyreMoeRouting_t routing, gyreComm_t comm,
                              gyreRequest_t* request) {
  return gyre::api::guarded("gyreImoeDispatch", [&] {
    Communicator& c = gyre::api::impl(comm);
    gyre::api::dispatchNonblocking(c, dispatchOp(c, sendbuff, recvbuff, recvRows, hidden, datatype, flags, routing),
                                   request);
  });
}

gyreResult_t gyreImoeCombine(const void* sendbuff, size_t sendRows, void* recvbuff, const float* weights,
                             size_t hidden, gyreDataType_t datatype, gyreMoeRouting_t routing, gyreComm_t comm,
                             gyreRequest_t* request) {
  return gyre::api::guarded("gyreImoeCombine", [&] {
    Communicator& c = gyre::api::impl(comm);
    gyre::api::dispatchNonblocking(
        c, combineOp(c, sendbuff, sendRows, recvbuff, weights, hidden, datatype, routing), request);
  });
}

}  // extern "C"
