// An NCCL network plugin (nccl_net_abi.h) loaded with dlopen, whatever its
// version, behind one interface: sizes are size_t, one buffer per receive,
// a request-less isend/irecv is "try again", and every failure is an Error
// naming the plugin, the call and its result. The net transport
// (net_transport.h) is its only user.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "base/error.h"
#include "transport/net/nccl_net_abi.h"

namespace gyre::transport {

// What gyre needs of a device's properties, from any version's struct.
struct NetDeviceProperties {
  std::string name;
  int ptrSupport = 0;
  int speedMbps = 0;
  int maxComms = 0;
  int maxRecvs = 0;
  size_t maxTransferBytes = 0;  // the largest point-to-point transfer (v9 and later; 0: not said)
};

class NetPlugin {
 public:
  // Loads the plugin `spec` names: a path (it has a '/' or ends in .so), or a
  // name NAME, tried as libgyre-net-NAME.so and then libnccl-net-NAME.so on
  // the library path. Takes the newest table it knows (v12 down to v8) and
  // initialises it. Throws Error saying what failed: not found, no table of
  // a known version (and which it has), or init's result.
  static std::unique_ptr<NetPlugin> load(const std::string& spec);
  ~NetPlugin();
  NetPlugin(const NetPlugin&) = delete;
  NetPlugin& operator=(const NetPlugin&) = delete;

  const std::string& name() const { return name_; }  // the table's name
  const std::string& path() const { return path_; }
  int version() const { return version_; }
  // "plugin NAME (vN, PATH)": for messages.
  std::string describe() const;

  int devices();
  NetDeviceProperties properties(int dev);
  // handle: kHandleMaxBytes the caller keeps for the peer's connect.
  void* listen(int dev, void* handle);
  // Do not block: null until the connection is made (call again with the
  // same handle, which the plugin may use to keep its state).
  void* connect(int dev, void* handle);
  void* accept(void* listenComm);
  void* registerMemory(void* comm, void* data, size_t bytes);
  void deregisterMemory(void* comm, void* mhandle) noexcept;
  // Null: the plugin cannot take it now; try again later.
  void* isend(void* sendComm, void* data, size_t bytes, int tag, void* mhandle);
  void* irecv(void* recvComm, void* data, size_t bytes, int tag, void* mhandle);
  // Drives the plugin; true once the request is done (it is then freed),
  // with the bytes it moved.
  bool test(void* request, size_t* bytes);
  void closeSend(void* comm) noexcept;
  void closeRecv(void* comm) noexcept;
  void closeListen(void* comm) noexcept;

 private:
  NetPlugin() = default;
  [[noreturn]] void fail(const char* call, netabi::Result r) const;
  void check(const char* call, netabi::Result r) const {
    if (r != netabi::kSuccess) fail(call, r);
  }

  void* library_ = nullptr;
  std::string path_, name_;
  int version_ = 0;
  const netabi::NetV8* v8_ = nullptr;
  const netabi::NetV9* v9_ = nullptr;
  const netabi::NetV10* v10_ = nullptr;
  const netabi::NetV11* v11_ = nullptr;
  const netabi::NetV12* v12_ = nullptr;
  void* context_ = nullptr;  // v11 and later
};

// A plugin result as words ("remote error").
const char* netResultName(netabi::Result r);

}  // namespace gyre::transport
