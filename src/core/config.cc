#include "core/config.h"

#include <strings.h>
#include <sys/socket.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <initializer_list>
#include <utility>
#include <vector>

#include "base/error.h"
#include "base/parse.h"
#include "core/stall_report.h"

namespace gyre::core {

namespace {

using Setter = void (*)(Config&, const std::string&, const char* name);

struct Param {
  ParamInfo info;
  Setter set;  // null: read elsewhere (logging, bootstrap)
};

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// The transport `v` names among `allowed` ("" is auto); anything else is an
// error listing them.
TransportChoice transportNamed(const std::string& v, const char* name, std::initializer_list<TransportChoice> allowed) {
  static constexpr std::pair<const char*, TransportChoice> kNames[] = {
      {"auto", TransportChoice::Auto}, {"shm", TransportChoice::Shm}, {"tcp", TransportChoice::Tcp},
      {"ucx", TransportChoice::Ucx},   {"net", TransportChoice::Net}, {"verbs", TransportChoice::Verbs}};
  const std::string s = v.empty() ? "auto" : lower(v);
  std::string list;
  for (const auto& [n, t] : kNames) {
    if (std::find(allowed.begin(), allowed.end(), t) == allowed.end()) continue;
    if (s == n) return t;
    list += (list.empty() ? "" : ", ") + std::string(n);
  }
  throwError(gyreInvalidArgument, std::string(name) + "=" + v + " is not one of " + list);
}

void setTransport(Config& c, const std::string& v, const char* name) {
  c.transport = transportNamed(v, name,
                               {TransportChoice::Auto, TransportChoice::Shm, TransportChoice::Tcp, TransportChoice::Ucx,
                                TransportChoice::Net, TransportChoice::Verbs});
}

const Param kParams[] = {
    {{"GYRE_DEBUG", "WARN", "log level: NONE, WARN, INFO, TRACE"}, nullptr},
    {{"GYRE_DEBUG_FILE", "", "log to this file instead of stderr (%h host, %p pid)"}, nullptr},
    {{"GYRE_TIMEOUT_MS", "600000", "fail a call that makes no progress for this long (0: never)"},
     [](Config& c, const std::string& v, const char* n) {
       c.timeoutMs = parseInt(v, n, 0, INT64_MAX / 1000000);
     }},
    {{"GYRE_STALL_REPORT_MS", "auto",
      "a call that waits this long logs, on every rank, which ranks have not reached which call, and goes on "
      "waiting (auto: a tenth of GYRE_TIMEOUT_MS, at most 30000; 0: never)"},
     [](Config& c, const std::string& v, const char* n) {
       c.stallReportMs = lower(v) == "auto" ? -1 : parseInt(v, n, 0, INT64_MAX / 1000000);
     }},
    {{"GYRE_TRACE_STEPS", "0",
      "1: the trace (GYRE_TRACE_FILE) shows each call's plan steps (send, recv, reduce, copy ...: peer, bytes, "
      "start and end) nested under the call"},
     [](Config& c, const std::string& v, const char* n) { c.traceSteps = parseInt(v, n, 0, 1) == 1; }},
    {{"GYRE_TRANSPORT", "auto",
      "auto (shm within a host; across hosts GYRE_NET_TRANSPORT's, by default the GYRE_NET_PLUGIN plugin if set, "
      "else tcp), or one for every "
      "peer: shm, tcp, ucx, verbs, or net (the GYRE_NET_PLUGIN plugin)"},
     setTransport},
    {{"GYRE_NET_TRANSPORT", "auto",
      "with GYRE_TRANSPORT=auto, what reaches the other hosts while shared memory serves each host: auto (the "
      "GYRE_NET_PLUGIN plugin if set, else tcp), tcp, ucx or verbs; one that cannot start fails init on every "
      "rank, naming why"},
     [](Config& c, const std::string& v, const char* n) {
       c.netTransport = transportNamed(
           v, n, {TransportChoice::Auto, TransportChoice::Tcp, TransportChoice::Ucx, TransportChoice::Verbs});
     }},
    {{"GYRE_NET_PLUGIN", "",
      "an NCCL net plugin (ncclNetPlugin_v8 to _v12) to reach other hosts through: a path, or NAME for "
      "libgyre-net-NAME.so or libnccl-net-NAME.so (socket: gyre's own); one that cannot be used is "
      "named and the built-in transports take over"},
     [](Config& c, const std::string& v, const char*) { c.netPlugin = lower(v) == "none" ? "" : v; }},
    {{"GYRE_NET_DEVICE", "auto", "the net plugin's device to use (auto: the rank's place on its host, modulo the devices)"},
     [](Config& c, const std::string& v, const char* n) {
       c.netDevice = lower(v) == "auto" ? -1 : static_cast<int>(parseInt(v, n, 0, 1023));
     }},
    {{"GYRE_IB_HCA", "",
      "verbs: RDMA devices and ports to use, as NCCL_IB_HCA: mlx5_0:1,mlx5_1 (name prefixes, :port), "
      "^ to exclude, = for exact names (empty: the first active port)"},
     [](Config& c, const std::string& v, const char*) { c.ibHca = v; }},
    {{"GYRE_IB_GID_INDEX", "auto",
      "verbs on RoCE: the GID table index to use (auto: the port's RoCE v2 GID of an IPv4 address)"},
     [](Config& c, const std::string& v, const char* n) {
       c.ibGidIndex = lower(v) == "auto" || v.empty() ? -1 : static_cast<int>(parseInt(v, n, 0, 255));
     }},
    {{"GYRE_IB_QPS_PER_CONNECTION", "1",
      "verbs: queue pairs per peer (1-16); a large message's RDMA read is split across them, as "
      "NCCL_IB_QPS_PER_CONNECTION (RoCE fabrics that spread flows by queue pair)"},
     [](Config& c, const std::string& v, const char* n) {
       c.ibQpsPerConnection = static_cast<int>(parseInt(v, n, 1, 16));
     }},
    {{"GYRE_UCX_ERROR_MODE", "auto",
      "ucx: peer (UCX reports a dead peer; over tcp and shared memory its large messages then take a copy more "
      "each side), or none (zero-copy rendezvous everywhere, UCX's shared memory alone usable, as Open MPI runs "
      "UCX; gyre's bootstrap watches the peers); auto: none, or peer where UCX may use RDMA. Set it alike on "
      "every rank"},
     [](Config& c, const std::string& v, const char* n) {
       using transport::ucx_wires::ErrorMode;
       const std::string m = lower(v);
       if (m == "auto" || m.empty())
         c.ucxErrorMode = ErrorMode::Auto;
       else if (m == "peer")
         c.ucxErrorMode = ErrorMode::Peer;
       else if (m == "none")
         c.ucxErrorMode = ErrorMode::None;
       else
         throwError(gyreInvalidArgument, std::string(n) + "=" + v + " is not auto, peer or none");
     }},
    {{"GYRE_SHM_DISABLE", "0", "1: never use shared memory between ranks (peers on one host talk TCP)"},
     [](Config& c, const std::string& v, const char* n) { c.shmDisable = parseInt(v, n, 0, 1) == 1; }},
    {{"GYRE_TCP_DISABLE", "0",
      "1: never use TCP between ranks (a peer that no other transport reaches fails init, named)"},
     [](Config& c, const std::string& v, const char* n) { c.tcpDisable = parseInt(v, n, 0, 1) == 1; }},
    {{"GYRE_ALGO", "", "algorithm per operation and size range, e.g. allreduce:recursive_doubling@0-64K,ring@64K-"},
     [](Config& c, const std::string& v, const char*) { c.algo = v; }},
    {{"GYRE_SOCKET_IFNAME", "",
      "interfaces to use: prefixes (eth,ib), ^ to exclude, = for exact names"},
     [](Config& c, const std::string& v, const char*) { c.socketIfname = v; }},
    {{"GYRE_SOCKET_FAMILY", "", "AF_INET or AF_INET6 to restrict addresses to one family"},
     [](Config& c, const std::string& v, const char* n) {
       if (v == "AF_INET")
         c.socketFamily = AF_INET;
       else if (v == "AF_INET6")
         c.socketFamily = AF_INET6;
       else if (!v.empty())
         throwError(gyreInvalidArgument, std::string(n) + "=" + v + " is not AF_INET or AF_INET6");
     }},
    {{"GYRE_NSOCKS_PERPEER", "1", "TCP sockets per peer (1-16); chunks are striped across them"},
     [](Config& c, const std::string& v, const char* n) {
       c.socketsPerPeer = static_cast<int>(parseInt(v, n, 1, 16));
     }},
    {{"GYRE_SHM_SLOT_BYTES", "256K", "size of one shared-memory FIFO slot (4K-64M)"},
     [](Config& c, const std::string& v, const char* n) {
       c.shmSlotBytes = parseSize(v, n);
       if (c.shmSlotBytes < 4096 || c.shmSlotBytes > (64u << 20) || c.shmSlotBytes % 64)
         throwError(gyreInvalidArgument,
                    std::string(n) + "=" + v + " must be a multiple of 64 between 4K and 64M");
     }},
    {{"GYRE_SHM_SLOTS", "8", "slots per shared-memory FIFO (2-64)"},
     [](Config& c, const std::string& v, const char* n) {
       c.shmSlots = static_cast<int>(parseInt(v, n, 2, 64));
     }},
    {{"GYRE_TCP_CHUNK_BYTES", "256K", "largest piece sent over TCP at once (4K-64M)"},
     [](Config& c, const std::string& v, const char* n) {
       c.tcpChunkBytes = parseSize(v, n);
       if (c.tcpChunkBytes < 4096 || c.tcpChunkBytes > (64u << 20) || c.tcpChunkBytes % 64)
         throwError(gyreInvalidArgument,
                    std::string(n) + "=" + v + " must be a multiple of 64 between 4K and 64M");
     }},
    {{"GYRE_TCP_BUFFER_BYTES", "4M",
      "socket send/receive buffer size asked of the kernel, by gyre's TCP and UCX's tcp unless UCX_TCP_SNDBUF/RCVBUF is set (0: kernel autotuning; the kernel caps it at net.core.wmem_max and rmem_max)"},
     [](Config& c, const std::string& v, const char* n) {
       c.tcpSocketBufferBytes = parseSize(v, n);
     }},
    {{"GYRE_SPIN_NS", "auto",
      "busy-poll this long before sleeping (auto: 50us; 0 when ranks outnumber cores, which yield the core at once)"},
     [](Config& c, const std::string& v, const char* n) {
       c.spinNs = lower(v) == "auto" ? -1 : parseInt(v, n, 0, 10'000'000'000LL);
     }},
    {{"GYRE_YIELD_NS", "auto",
      "after spinning, yield the core this long before sleeping (auto: 1 ms when ranks outnumber "
      "cores or the wait is on UCX, else 0)"},
     [](Config& c, const std::string& v, const char* n) {
       c.yieldNs = lower(v) == "auto" ? -1 : parseInt(v, n, 0, 10'000'000'000LL);
     }},
    {{"GYRE_HOSTID", "",
      "override this process's host identity (ranks with equal ids share memory)"},
     [](Config& c, const std::string& v, const char*) { c.hostId = v; }},
    {{"GYRE_TUNER", "builtin",
      "where the tuner's cost model gets its numbers: builtin (fixed defaults: the same choices on "
      "every run) or calibrate (a short measurement when the communicator is created)"},
     [](Config& c, const std::string& v, const char* n) {
       const std::string m = lower(v);
       if (m != "calibrate" && m != "builtin")
         throwError(gyreInvalidArgument, std::string(n) + "=" + v + " must be calibrate or builtin");
       c.calibrate = m == "calibrate";
     }},
    {{"GYRE_TUNER_ONLINE", "0",
      "1: the calls choose among the cost model's best candidates: the first calls of each "
      "(operation, size class) try each in turn, and the fastest (the slowest rank's median) is kept"},
     [](Config& c, const std::string& v, const char* n) { c.tunerOnline = parseInt(v, n, 0, 1) == 1; }},
    {{"GYRE_TUNER_RETUNE", "1000",
      "with GYRE_TUNER_ONLINE=1: measure a size class's candidates again after this many trials' worth "
      "of its calls (a trial: 1 call of 500 us or more, else as many as fill 500 us, up to 1024; 0: measure once)"},
     [](Config& c, const std::string& v, const char* n) {
       c.retuneCalls = static_cast<uint64_t>(parseInt(v, n, 0, INT64_MAX));
     }},
    {{"GYRE_TUNER_FILE", "",
      "load the cost model's numbers from this file instead (key = value lines, as "
      "GYRE_TUNER_DUMP_FILE writes them)"},
     [](Config& c, const std::string& v, const char*) { c.tunerFile = v; }},
    {{"GYRE_TUNER_DUMP_FILE", "", "rank 0 writes the cost model it uses to this file"},
     [](Config& c, const std::string& v, const char*) { c.tunerDumpFile = v; }},
    {{"GYRE_SMALL_MSG_BYTES", "auto", "AllReduce up to this size uses recursive doubling (auto: the cost model decides)"},
     [](Config& c, const std::string& v, const char* n) {
       c.smallMessageBytes = lower(v) == "auto" ? 0 : parseSize(v, n);
     }},
    {{"GYRE_DEVICE_PIECE_BYTES", "1M",
      "a call on a CUDA stream copies its staged input in, and its output out, in pieces of at "
      "least this size (at most 16 pieces) once they are twice it, overlapping the copies with "
      "the call; 0: whole"},
     [](Config& c, const std::string& v, const char* n) { c.devicePieceBytes = parseSize(v, n); }},
    {{"GYRE_DEVICE_DIRECT", "1",
      "1: where every rank shares one host, calls on CUDA streams run the single-copy algorithms, "
      "each rank's GPU reading its peers' device buffers through CUDA IPC (docs/gpu.md); 0: they are "
      "staged through host memory like calls across hosts. The same on every rank"},
     [](Config& c, const std::string& v, const char* n) { c.deviceDirect = parseInt(v, n, 0, 1) != 0; }},
    {{"GYRE_DEVICE_GATE", "wait",
      "how a call on a CUDA stream holds the caller's stream until gyre is done: wait (the GPU waits "
      "on a word of host memory, a stream memory operation) or host (a host function on the stream "
      "waits; no GPU work is pending meanwhile). Read once per process, by the CUDA backend"},
     [](Config&, const std::string& v, const char* n) {
       const std::string m = lower(v);
       if (m != "wait" && m != "host") throwError(gyreInvalidArgument, std::string(n) + "=" + v + " must be wait or host");
     }},
    {{"GYRE_MAPPED_BUFFERS", "0",
      "1: the program's buffers come from gyreMemAlloc on every rank, so the tuner prices "
      "single-copy algorithms at the speed of reading peers' mapped memory (a rank whose buffer "
      "is not mapped is still read correctly, more slowly)"},
     [](Config& c, const std::string& v, const char* n) { c.mappedBuffers = parseInt(v, n, 0, 1) != 0; }},
    {{"GYRE_CHECK_ROOTS", "1",
      "1: rooted operations check that every rank names the same root (an extra empty message "
      "each way per call); 0: trust the caller"},
     [](Config& c, const std::string& v, const char* n) { c.checkRoots = parseInt(v, n, 0, 1) != 0; }},
    {{"GYRE_TOPO_FILE", "", "load this host's topology (gyre or NCCL XML, or JSON) instead of detecting it"},
     nullptr},
    {{"GYRE_TOPO_DUMP_FILE", "", "write the topology in use here (XML, or JSON when the name ends in .json)"},
     nullptr},
    {{"GYRE_TOPO_AFFINITY", "1",
      "1: bind the progress thread and shared memory to the NUMA node nearest the rank's GPU; 0: leave them"},
     nullptr},
    {{"GYRE_COMM_ID", "", "host:port of the rendezvous root for init from the environment"},
     nullptr},
    {{"GYRE_SECRET", "", "64 hex digits the rendezvous root requires (gyrerun sets a random one; without it torchrun and Slurm jobs use one derived from public facts: docs/reliability.md)"}, nullptr},
    {{"GYRE_RANK", "", "this process's rank (init from the environment)"}, nullptr},
    {{"GYRE_WORLD_SIZE", "", "number of ranks (init from the environment)"}, nullptr},
};

}  // namespace

std::span<const ParamInfo> parameterTable() {
  static const auto table = [] {
    std::vector<ParamInfo> v;
    for (const Param& p : kParams) v.push_back(p.info);
    return v;
  }();
  return table;
}

Config Config::resolve(const gyreConfig_t* user) {
  Config c;
  for (const Param& p : kParams) {
    if (!p.set) continue;
    const char* v = std::getenv(p.info.env);
    if (v && *v) p.set(c, v, p.info.env);
  }
  if (!user) {
    if (c.stallReportMs < 0) c.stallReportMs = defaultStallReportMs(c.timeoutMs);
    return c;
  }
  if (user->magic != GYRE_CONFIG_MAGIC || user->size < sizeof(size_t) + 2 * sizeof(unsigned))
    throwError(gyreInvalidArgument,
               "config was not initialised with GYRE_CONFIG_INITIALIZER (bad magic or size)");
  // Fields exist only up to the size the caller was compiled with.
  auto has = [&](size_t offset, size_t bytes) { return offset + bytes <= user->size; };
  if (has(offsetof(gyreConfig_t, timeoutMs), sizeof(int)) &&
      user->timeoutMs != GYRE_CONFIG_UNDEF_INT) {
    if (user->timeoutMs < 0) throwError(gyreInvalidArgument, "config.timeoutMs must be >= 0");
    c.timeoutMs = user->timeoutMs;
  }
  if (c.stallReportMs < 0) c.stallReportMs = defaultStallReportMs(c.timeoutMs);
  if (has(offsetof(gyreConfig_t, transport), sizeof(char*)) && user->transport)
    setTransport(c, user->transport, "config.transport");
  if (has(offsetof(gyreConfig_t, algo), sizeof(char*)) && user->algo) c.algo = user->algo;
  if (has(offsetof(gyreConfig_t, commName), sizeof(char*)) && user->commName)
    c.commName = user->commName;
  if (has(offsetof(gyreConfig_t, blocking), sizeof(int)) && user->blocking != GYRE_CONFIG_UNDEF_INT)
    c.blocking = user->blocking != 0;
  if (has(offsetof(gyreConfig_t, tunerOnline), sizeof(int)) && user->tunerOnline != GYRE_CONFIG_UNDEF_INT) {
    if (user->tunerOnline != 0 && user->tunerOnline != 1)
      throwError(gyreInvalidArgument, "config.tunerOnline=" + std::to_string(user->tunerOnline) + " must be 0 or 1");
    c.tunerOnline = user->tunerOnline == 1;
  }
  return c;
}

}  // namespace gyre::core
