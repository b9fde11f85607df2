// The communicator's settings: one table of parameters, each settable from
// the environment (GYRE_*) and, for some, from gyreConfig_t. Resolved once per
// communicator; a malformed value is an invalid-argument error naming it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "gyre/gyre.h"
#include "transport/ucx/ucx_wires.h"

namespace gyre::core {

enum class TransportChoice { Auto, Shm, Tcp, Ucx, Net, Verbs };

struct Config {
  int64_t timeoutMs = 600000;  // 0: wait forever
  // GYRE_STALL_REPORT_MS: a wait this long logs a stall report (0: never;
  // -1: defaultStallReportMs of the timeout, resolved in resolve()).
  int64_t stallReportMs = -1;
  TransportChoice transport = TransportChoice::Auto;
  // GYRE_NET_TRANSPORT: under GYRE_TRANSPORT=auto, what reaches other hosts
  // (Auto: the GYRE_NET_PLUGIN plugin if one is set, else TCP; Tcp, Ucx or
  // Verbs), shared memory staying within a host.
  TransportChoice netTransport = TransportChoice::Auto;
  bool shmDisable = false;  // GYRE_SHM_DISABLE: never shared memory (as NCCL_SHM_DISABLE)
  bool tcpDisable = false;  // GYRE_TCP_DISABLE: never TCP between ranks
  std::string netPlugin;    // GYRE_NET_PLUGIN: an NCCL net plugin, by path or name (empty: none)
  int netDevice = -1;       // GYRE_NET_DEVICE: the plugin's device (-1: by the rank's place on its host)
  std::string algo;  // empty: automatic choice
  std::string commName;
  std::string socketIfname;  // NCCL syntax: prefixes, ^exclude, =exact
  int socketFamily = 0;      // AF_UNSPEC, AF_INET or AF_INET6
  int socketsPerPeer = 1;
  std::string ibHca;   // GYRE_IB_HCA: RDMA devices and ports, NCCL_IB_HCA's syntax
  int ibGidIndex = -1;  // GYRE_IB_GID_INDEX; -1: the port's RoCE v2 IPv4 GID
  int ibQpsPerConnection = 1;  // GYRE_IB_QPS_PER_CONNECTION: queue pairs that share each peer's reads
  // GYRE_UCX_ERROR_MODE: whether UCX endpoints ask for peer failure handling
  // (ucx_wires.h, peerErrorHandling).
  transport::ucx_wires::ErrorMode ucxErrorMode = transport::ucx_wires::ErrorMode::Auto;
  size_t shmSlotBytes = 256 * 1024;
  int shmSlots = 8;
  size_t tcpChunkBytes = 256 * 1024;  // measured: keeps the kernel's socket pages cache-hot
  size_t tcpSocketBufferBytes = 4 * 1024 * 1024;
  int64_t yieldNs = -1;                  // <0: chosen from cores vs local ranks
  int64_t spinNs = -1;           // <0: chosen from cores vs local ranks
  std::string hostId;            // override the detected host identity
  size_t smallMessageBytes = 0;  // 0: automatic (below it: recursive doubling)
  size_t devicePieceBytes = size_t{1} << 20;  // GYRE_DEVICE_PIECE_BYTES (0: stage whole)
  bool deviceDirect = true;  // GYRE_DEVICE_DIRECT: stream calls on one host read peers' device buffers
  bool mappedBuffers = false;   // GYRE_MAPPED_BUFFERS: the program's buffers come from gyreMemAlloc
  bool calibrate = false;        // measure the cost model's numbers at creation
  std::string tunerFile;         // or load them from here
  std::string tunerDumpFile;     // rank 0 writes the model in use here
  bool tunerOnline = false;      // time the model's best candidates per (operation, size class)
  uint64_t retuneCalls = 1000;   // trials' worth of a size class's calls between those measurements (0: once)
  bool checkRoots = true;        // rooted operations check the ranks agree on the root
  bool traceSteps = false;       // GYRE_TRACE_STEPS: the trace (GYRE_TRACE_FILE) shows every call's plan steps
  bool blocking = true;          // false: init connects in the background (config only)

  // Defaults, then GYRE_* environment, then the user's struct (may be null).
  static Config resolve(const gyreConfig_t* user);
};

struct ParamInfo {
  const char* env;
  const char* defaultText;
  const char* help;
};
std::span<const ParamInfo> parameterTable();

}  // namespace gyre::core
