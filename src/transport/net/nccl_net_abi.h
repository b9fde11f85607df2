// gyre's own declaration of NCCL's network plugin ABI ("ext-net"), versions
// 8 to 12: the tables a plugin exports as `ncclNetPlugin_vN` and the property
// structs they fill. NCCL ships these declarations with its sources, not with
// the CUDA toolkit, so gyre writes them down from the published layout: each
// struct's members in NCCL's order with C types of the same size, so a
// plugin built against NCCL's headers and this file agree byte for byte
// (the static_asserts below pin the sizes on LP64).
//
// What changed between the versions, as gyre's adapter (net_plugin.cc) sees it:
//   v8   sizes are int; init(logger).
//   v9   sizes are size_t; properties gain forceFlush, virtual devices and the
//        largest point-to-point and collective transfer; makeVDevice.
//   v10  init also takes a profiler callback; connect takes a comm config
//        (traffic class); isend/irecv take profiler handles.
//   v11  a context: init returns one, listen and connect take it, finalize
//        ends it; properties gain maxMultiRequestSize; setNetAttr.
//   v12  as v11 with eight virtual devices per NIC and rail and plane ids.
//
// The conventions plugins rely on: connect and accept do not block (called
// again until a comm appears), isend and irecv may return no request (try
// again later), a listen handle is at most 128 bytes, and test() drives the
// plugin's progress.
#pragma once

#include <cstddef>
#include <cstdint>

namespace gyre::netabi {

// ncclResult_t: an int-sized C enum.
using Result = int;
constexpr Result kSuccess = 0, kUnhandledCudaError = 1, kSystemError = 2, kInternalError = 3,
                 kInvalidArgument = 4, kInvalidUsage = 5, kRemoteError = 6;

constexpr size_t kHandleMaxBytes = 128;  // NCCL_NET_HANDLE_MAXSIZE
constexpr int kPtrHost = 0x1, kPtrCuda = 0x2, kPtrDmaBuf = 0x4;

// ncclDebugLogLevel values a plugin passes to the logger.
constexpr int kLogNone = 0, kLogVersion = 1, kLogWarn = 2, kLogInfo = 3, kLogAbort = 4, kLogTrace = 5;

using Logger = void (*)(int level, unsigned long subsystems, const char* file, int line, const char* fmt, ...);
using ProfilerCallback = Result (*)(void** eventHandle, int type, void* profilerHandle, int64_t pluginId,
                                    void* extraData);

// A device-offload handle (never asked for by gyre: it passes a null one).
struct DeviceHandle {
  int netDeviceType;
  int netDeviceVersion;
  void* handle;
  size_t size;
  int needsProxyProgress;
};

struct CommConfig {  // v10 and later
  int trafficClass;  // -1: undefined
};

template <int kDevs>
struct VirtualDeviceProps {
  int ndevs;
  int devs[kDevs];
};

struct PropertiesV8 {
  char* name;
  char* pciPath;
  uint64_t guid;
  int ptrSupport;
  int regIsGlobal;
  int speed;  // Mbit/s
  int port;
  float latency;
  int maxComms;
  int maxRecvs;
  int netDeviceType;
  int netDeviceVersion;
};

struct PropertiesV9 {  // v9 and v10
  char* name;
  char* pciPath;
  uint64_t guid;
  int ptrSupport;
  int regIsGlobal;
  int forceFlush;
  int speed;
  int port;
  float latency;
  int maxComms;
  int maxRecvs;
  int netDeviceType;
  int netDeviceVersion;
  VirtualDeviceProps<4> vProps;
  size_t maxP2pBytes;
  size_t maxCollBytes;
};

// v11; v12 adds eight virtual devices per NIC and the rail and plane ids
// (written out: deriving one from the other would pad the base).
struct PropertiesV11 {
  char* name;
  char* pciPath;
  uint64_t guid;
  int ptrSupport;
  int regIsGlobal;
  int forceFlush;
  int speed;
  int port;
  float latency;
  int maxComms;
  int maxRecvs;
  int netDeviceType;
  int netDeviceVersion;
  VirtualDeviceProps<4> vProps;
  size_t maxP2pBytes;
  size_t maxCollBytes;
  int maxMultiRequestSize;
};
struct PropertiesV12 {
  char* name;
  char* pciPath;
  uint64_t guid;
  int ptrSupport;
  int regIsGlobal;
  int forceFlush;
  int speed;
  int port;
  float latency;
  int maxComms;
  int maxRecvs;
  int netDeviceType;
  int netDeviceVersion;
  VirtualDeviceProps<8> vProps;
  size_t maxP2pBytes;
  size_t maxCollBytes;
  int maxMultiRequestSize;
  int16_t railId;
  int16_t planeId;
};

struct CommAttr {
  int32_t maxConcurrentPeers, minConcurrentPeers, maxFlowsPerPeer, minFlowsPerPeer;
};
struct NetAttr {  // v11 and later: hints from the caller (setNetAttr)
  CommAttr sendCommAttr, recvCommAttr;
  uint32_t op, algo, proto;
};

struct NetV8 {
  const char* name;
  Result (*init)(Logger);
  Result (*devices)(int* ndev);
  Result (*getProperties)(int dev, PropertiesV8* props);
  Result (*listen)(int dev, void* handle, void** listenComm);
  Result (*connect)(int dev, void* handle, void** sendComm, DeviceHandle** sendDevComm);
  Result (*accept)(void* listenComm, void** recvComm, DeviceHandle** recvDevComm);
  Result (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  Result (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle);
  Result (*deregMr)(void* comm, void* mhandle);
  Result (*isend)(void* sendComm, void* data, int size, int tag, void* mhandle, void** request);
  Result (*irecv)(void* recvComm, int n, void** data, int* sizes, int* tags, void** mhandles, void** request);
  Result (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
  Result (*test)(void* request, int* done, int* sizes);
  Result (*closeSend)(void* sendComm);
  Result (*closeRecv)(void* recvComm);
  Result (*closeListen)(void* listenComm);
  Result (*getDeviceMr)(void* comm, void* mhandle, void** deviceMhandle);
  Result (*irecvConsumed)(void* recvComm, int n, void* request);
};

struct NetV9 {
  const char* name;
  Result (*init)(Logger);
  Result (*devices)(int* ndev);
  Result (*getProperties)(int dev, PropertiesV9* props);
  Result (*listen)(int dev, void* handle, void** listenComm);
  Result (*connect)(int dev, void* handle, void** sendComm, DeviceHandle** sendDevComm);
  Result (*accept)(void* listenComm, void** recvComm, DeviceHandle** recvDevComm);
  Result (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  Result (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle);
  Result (*deregMr)(void* comm, void* mhandle);
  Result (*isend)(void* sendComm, void* data, size_t size, int tag, void* mhandle, void** request);
  Result (*irecv)(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles, void** request);
  Result (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
  Result (*test)(void* request, int* done, int* sizes);
  Result (*closeSend)(void* sendComm);
  Result (*closeRecv)(void* recvComm);
  Result (*closeListen)(void* listenComm);
  Result (*getDeviceMr)(void* comm, void* mhandle, void** deviceMhandle);
  Result (*irecvConsumed)(void* recvComm, int n, void* request);
  Result (*makeVDevice)(int* d, VirtualDeviceProps<4>* props);
};

struct NetV10 {
  const char* name;
  Result (*init)(Logger, ProfilerCallback);
  Result (*devices)(int* ndev);
  Result (*getProperties)(int dev, PropertiesV9* props);
  Result (*listen)(int dev, void* handle, void** listenComm);
  Result (*connect)(int dev, CommConfig* config, void* handle, void** sendComm, DeviceHandle** sendDevComm);
  Result (*accept)(void* listenComm, void** recvComm, DeviceHandle** recvDevComm);
  Result (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  Result (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle);
  Result (*deregMr)(void* comm, void* mhandle);
  Result (*isend)(void* sendComm, void* data, size_t size, int tag, void* mhandle, void* phandle, void** request);
  Result (*irecv)(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles, void** phandles,
                  void** request);
  Result (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
  Result (*test)(void* request, int* done, int* sizes);
  Result (*closeSend)(void* sendComm);
  Result (*closeRecv)(void* recvComm);
  Result (*closeListen)(void* listenComm);
  Result (*getDeviceMr)(void* comm, void* mhandle, void** deviceMhandle);
  Result (*irecvConsumed)(void* recvComm, int n, void* request);
  Result (*makeVDevice)(int* d, VirtualDeviceProps<4>* props);
};

// v11 and v12 differ only in their properties and virtual-device structs.
template <typename Props, typename VProps>
struct NetV11Layout {
  const char* name;
  Result (*init)(void** ctx, uint64_t commId, CommConfig* config, Logger, ProfilerCallback);
  Result (*devices)(int* ndev);
  Result (*getProperties)(int dev, Props* props);
  Result (*listen)(void* ctx, int dev, void* handle, void** listenComm);
  Result (*connect)(void* ctx, int dev, void* handle, void** sendComm, DeviceHandle** sendDevComm);
  Result (*accept)(void* listenComm, void** recvComm, DeviceHandle** recvDevComm);
  Result (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  Result (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle);
  Result (*deregMr)(void* comm, void* mhandle);
  Result (*isend)(void* sendComm, void* data, size_t size, int tag, void* mhandle, void* phandle, void** request);
  Result (*irecv)(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles, void** phandles,
                  void** request);
  Result (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
  Result (*test)(void* request, int* done, int* sizes);
  Result (*closeSend)(void* sendComm);
  Result (*closeRecv)(void* recvComm);
  Result (*closeListen)(void* listenComm);
  Result (*getDeviceMr)(void* comm, void* mhandle, void** deviceMhandle);
  Result (*irecvConsumed)(void* recvComm, int n, void* request);
  Result (*makeVDevice)(int* d, VProps* props);
  Result (*finalize)(void* ctx);
  Result (*setNetAttr)(void* ctx, NetAttr* attr);
};
using NetV11 = NetV11Layout<PropertiesV11, VirtualDeviceProps<4>>;
using NetV12 = NetV11Layout<PropertiesV12, VirtualDeviceProps<8>>;

// The exported symbols, newest first (the loader takes the newest it finds).
inline constexpr const char* kSymbolV12 = "ncclNetPlugin_v12";
inline constexpr const char* kSymbolV11 = "ncclNetPlugin_v11";
inline constexpr const char* kSymbolV10 = "ncclNetPlugin_v10";
inline constexpr const char* kSymbolV9 = "ncclNetPlugin_v9";
inline constexpr const char* kSymbolV8 = "ncclNetPlugin_v8";

// The layout pinned: a change here would break every plugin.
static_assert(sizeof(void*) == 8, "the layouts below are LP64's");
static_assert(sizeof(PropertiesV8) == 64 && sizeof(PropertiesV9) == 104);
static_assert(sizeof(PropertiesV11) == 112 && sizeof(PropertiesV12) == 128);
static_assert(offsetof(PropertiesV9, maxCollBytes) == 96 && offsetof(PropertiesV12, railId) == 124);

static_assert(sizeof(DeviceHandle) == 32);
static_assert(sizeof(NetV8) == 19 * 8);
static_assert(sizeof(NetV9) == 20 * 8 && sizeof(NetV10) == 20 * 8);
static_assert(sizeof(NetV11) == 22 * 8 && sizeof(NetV12) == 22 * 8);

}  // namespace gyre::netabi
