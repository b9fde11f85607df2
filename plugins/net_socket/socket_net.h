// gyre's socket network, as an NCCL net plugin would implement it: devices
// are the host's network interfaces, a listen handle carries an address and
// a nonce, a comm is one non-blocking TCP socket, and each message is its
// 8-byte length followed by the bytes. Requests on a comm complete in the
// order they were posted; test() moves the bytes (there is no thread).
// socket_plugin.cc exports it through the ABI tables of every version.
//
// This library is what an external plugin is: it uses nothing of gyre but
// the ABI declaration (transport/net/nccl_net_abi.h), so it runs under
// NCCL as well.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "transport/net/nccl_net_abi.h"

namespace gyre::netsocket {

using netabi::Result;

struct Device {
  std::string name;  // the interface
  sockaddr_storage address{};
  socklen_t addressBytes = 0;
  int speedMbps = 10000;
};

// Faults a test build injects (GYRE_TEST_NET_FAULT; see socket_plugin.cc).
struct Faults {
  bool failInit = false, noDevices = false, oneComm = false, smallTransfers = false, cudaOnly = false;
  bool oversize = false;  // a completed receive over 4 KiB reports 64 bytes more than it was given
  long failSendAfter = -1;  // the isend after this many fails (-1: never)
};
Faults& faults();

// The process's devices, found at init (GYRE_SOCKET_IFNAME picks them as it
// does for gyre: prefixes, '^' excludes, '=' matches exactly).
std::vector<Device>& devices();
Result findDevices();

// Where a log line goes (the logger init was given).
void logLine(int level, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
void setLogger(netabi::Logger logger);

constexpr int kMaxRequests = 32;  // per comm, as NCCL_NET_MAX_REQUESTS

struct Comm;

struct Request {
  Comm* comm = nullptr;
  enum class State { Free, Active, Done } state = State::Free;
  uint8_t* data = nullptr;
  size_t capacity = 0;   // a receive's room
  uint64_t length = 0;   // the message's bytes (a receive: once its header arrived)
  size_t headerDone = 0, dataDone = 0;
};

struct Comm {
  int fd = -1;
  bool sending = false;
  Request requests[kMaxRequests];
  uint64_t posted = 0, moved = 0;  // requests posted; the first not yet fully moved
  std::string broken;              // why the socket failed (empty: healthy)
};

Result listen(int dev, void* handle, void** listenComm);
Result connect(int dev, void* handle, void** sendComm);
Result accept(void* listenComm, void** recvComm);
Result isend(void* sendComm, void* data, size_t size, void** request);
Result irecv(void* recvComm, int n, void** data, const size_t* sizes, void** request);
Result test(void* request, int* done, int* size);
Result closeComm(void* comm);
Result closeListen(void* listenComm);

}  // namespace gyre::netsocket
