// libgyre-net-socket.so: gyre's socket network (socket_net.h) behind NCCL's
// net plugin tables, v8 to v12, so that gyre (GYRE_NET_PLUGIN=socket) and
// NCCL (NCCL_NET_PLUGIN) can load it alike.
//
// Test builds (GYRE_NET_SOCKET_ONLY=N) export one version's table only, to
// drive gyre's loader through each; with GYRE_NET_SOCKET_FAULTS they also
// read GYRE_TEST_NET_FAULT at init, a comma list of: init (init fails),
// nodevices, onecomm (maxComms 1), smalltransfers (maxP2pBytes 1000),
// cudaonly (no host pointers), sendfail:N (the isend after N fails),
// oversize (a receive over 4 KiB reports more bytes than its buffer holds).
#include <cstdlib>
#include <cstring>
#include <string>

#include "socket_net.h"

// Not in an anonymous namespace: a build that exports one version leaves
// the others' entry points unused (hidden by the visibility preset anyway).
namespace gyre::netsocket {
namespace tables {

using namespace netabi;

constexpr const char* kName = "gyre-socket";

void readFaults() {
#ifdef GYRE_NET_SOCKET_FAULTS
  const char* spec = std::getenv("GYRE_TEST_NET_FAULT");
  Faults& f = faults();
  f = Faults{};
  if (!spec) return;
  const std::string s = std::string(",") + spec + ",";
  f.failInit = s.find(",init,") != std::string::npos;
  f.noDevices = s.find(",nodevices,") != std::string::npos;
  f.oneComm = s.find(",onecomm,") != std::string::npos;
  f.smallTransfers = s.find(",smalltransfers,") != std::string::npos;
  f.cudaOnly = s.find(",cudaonly,") != std::string::npos;
  f.oversize = s.find(",oversize,") != std::string::npos;
  const size_t at = s.find(",sendfail:");
  if (at != std::string::npos) f.failSendAfter = std::atol(s.c_str() + at + 10);
#endif
}

Result init(Logger logger) {
  setLogger(logger);
  readFaults();
  if (faults().failInit) {
    logLine(kLogWarn, "gyre-net-socket: init fails (GYRE_TEST_NET_FAULT=init)");
    return kSystemError;
  }
  return findDevices();
}

Result countDevices(int* n) {
  *n = faults().noDevices ? 0 : static_cast<int>(devices().size());
  return kSuccess;
}

// Every version's properties struct has these members.
template <typename P>
Result fillCommon(int dev, P* p) {
  if (dev < 0 || dev >= static_cast<int>(devices().size())) return kInvalidArgument;
  std::memset(p, 0, sizeof(*p));
  const Device& d = devices()[static_cast<size_t>(dev)];
  p->name = const_cast<char*>(d.name.c_str());
  p->pciPath = nullptr;
  p->guid = static_cast<uint64_t>(dev);
  p->ptrSupport = faults().cudaOnly ? kPtrCuda : kPtrHost;
  p->regIsGlobal = 0;
  p->speed = d.speedMbps;
  p->port = 0;
  p->latency = 0;
  p->maxComms = faults().oneComm ? 1 : 65536;
  p->maxRecvs = 1;
  p->netDeviceType = 0;  // host
  p->netDeviceVersion = 0;
  return kSuccess;
}

template <typename P>
Result fillTransfers(int dev, P* p) {
  Result r = fillCommon(dev, p);
  if (r != kSuccess) return r;
  p->vProps.ndevs = 1;
  p->vProps.devs[0] = dev;
  p->maxP2pBytes = faults().smallTransfers ? 1000 : size_t(1) << 31;
  p->maxCollBytes = p->maxP2pBytes;
  return kSuccess;
}

Result propsV8(int dev, PropertiesV8* p) { return fillCommon(dev, p); }
Result propsV9(int dev, PropertiesV9* p) { return fillTransfers(dev, p); }
Result propsV11(int dev, PropertiesV11* p) {
  Result r = fillTransfers(dev, p);
  p->maxMultiRequestSize = 1;
  return r;
}
Result propsV12(int dev, PropertiesV12* p) {
  Result r = fillTransfers(dev, p);
  p->maxMultiRequestSize = 1;
  p->railId = p->planeId = 0;
  return r;
}

Result listenAny(int dev, void* handle, void** listenComm) { return listen(dev, handle, listenComm); }
Result connectAny(int dev, void* handle, void** sendComm, DeviceHandle** device) {
  if (device) *device = nullptr;
  return connect(dev, handle, sendComm);
}
Result acceptAny(void* listenComm, void** recvComm, DeviceHandle** device) {
  if (device) *device = nullptr;
  return accept(listenComm, recvComm);
}

Result regMr(void*, void*, size_t, int type, void** mhandle) {
  *mhandle = nullptr;
  if (type != kPtrHost) return kInvalidArgument;  // host memory only
  static int token;
  *mhandle = &token;
  return kSuccess;
}
Result deregMr(void*, void*) { return kSuccess; }

Result sendSized(void* comm, void* data, size_t size, void** request) {
  *request = nullptr;
  if (faults().failSendAfter == 0) {
    logLine(kLogWarn, "gyre-net-socket: isend fails (GYRE_TEST_NET_FAULT=sendfail)");
    return kSystemError;
  }
  Result r = isend(comm, data, size, request);
  if (*request && faults().failSendAfter > 0) --faults().failSendAfter;
  return r;
}

Result isendV8(void* comm, void* data, int size, int, void*, void** request) {
  return sendSized(comm, data, static_cast<size_t>(size), request);
}
Result isendV9(void* comm, void* data, size_t size, int, void*, void** request) {
  return sendSized(comm, data, size, request);
}
Result isendV10(void* comm, void* data, size_t size, int, void*, void*, void** request) {
  return sendSized(comm, data, size, request);
}
Result irecvV8(void* comm, int n, void** data, int* sizes, int*, void**, void** request) {
  if (n != 1) return kInvalidArgument;
  const size_t size = static_cast<size_t>(sizes[0]);
  return irecv(comm, n, data, &size, request);
}
Result irecvV9(void* comm, int n, void** data, size_t* sizes, int*, void**, void** request) {
  return irecv(comm, n, data, sizes, request);
}
Result irecvV10(void* comm, int n, void** data, size_t* sizes, int*, void**, void**, void** request) {
  return irecv(comm, n, data, sizes, request);
}
Result iflush(void*, int, void**, int*, void**, void** request) {
  *request = nullptr;  // host memory: nothing to flush
  return kSuccess;
}

Result initV10(Logger logger, ProfilerCallback) { return init(logger); }
Result connectV10(int dev, CommConfig*, void* handle, void** sendComm, DeviceHandle** device) {
  return connectAny(dev, handle, sendComm, device);
}

int gContext = 0;  // v11's context: this plugin keeps its state per process
Result initV11(void** ctx, uint64_t, CommConfig*, Logger logger, ProfilerCallback) {
  *ctx = &gContext;
  return init(logger);
}
Result listenV11(void*, int dev, void* handle, void** listenComm) { return listen(dev, handle, listenComm); }
Result connectV11(void*, int dev, void* handle, void** sendComm, DeviceHandle** device) {
  return connectAny(dev, handle, sendComm, device);
}
Result finalize(void*) { return kSuccess; }
Result setNetAttr(void*, NetAttr*) { return kSuccess; }

}  // namespace tables
}  // namespace gyre::netsocket

using namespace gyre::netsocket;
using namespace gyre::netsocket::tables;
using namespace gyre::netabi;

#define GYRE_EXPORT extern "C" __attribute__((visibility("default")))

#if !defined(GYRE_NET_SOCKET_ONLY) || GYRE_NET_SOCKET_ONLY == 8
GYRE_EXPORT const NetV8 ncclNetPlugin_v8 = {
    kName,   init,    countDevices, propsV8,  listenAny, connectAny, acceptAny, regMr,     nullptr, deregMr,
    isendV8, irecvV8, iflush,       test,     closeComm, closeComm,  closeListen, nullptr, nullptr};
#endif
#if !defined(GYRE_NET_SOCKET_ONLY) || GYRE_NET_SOCKET_ONLY == 9
GYRE_EXPORT const NetV9 ncclNetPlugin_v9 = {
    kName,   init,    countDevices, propsV9,  listenAny, connectAny, acceptAny,   regMr,   nullptr, deregMr,
    isendV9, irecvV9, iflush,       test,     closeComm, closeComm,  closeListen, nullptr, nullptr, nullptr};
#endif
#if !defined(GYRE_NET_SOCKET_ONLY) || GYRE_NET_SOCKET_ONLY == 10
GYRE_EXPORT const NetV10 ncclNetPlugin_v10 = {
    kName,    initV10,  countDevices, propsV9,  listenAny, connectV10, acceptAny,   regMr,   nullptr, deregMr,
    isendV10, irecvV10, iflush,       test,     closeComm, closeComm,  closeListen, nullptr, nullptr, nullptr};
#endif
#if !defined(GYRE_NET_SOCKET_ONLY) || GYRE_NET_SOCKET_ONLY == 11
GYRE_EXPORT const NetV11 ncclNetPlugin_v11 = {
    kName,    initV11,  countDevices, propsV11, listenV11, connectV11, acceptAny,   regMr,   nullptr, deregMr,
    isendV10, irecvV10, iflush,       test,     closeComm, closeComm,  closeListen, nullptr, nullptr, nullptr,
    finalize, setNetAttr};
#endif
#if !defined(GYRE_NET_SOCKET_ONLY) || GYRE_NET_SOCKET_ONLY == 12
GYRE_EXPORT const NetV12 ncclNetPlugin_v12 = {
    kName,    initV11,  countDevices, propsV12, listenV11, connectV11, acceptAny,   regMr,   nullptr, deregMr,
    isendV10, irecvV10, iflush,       test,     closeComm, closeComm,  closeListen, nullptr, nullptr, nullptr,
    finalize, setNetAttr};
#endif
