// Whether UCX may carry gyre's messages over RDMA from this host, which
// decides gyre's default for UCX's rendezvous threshold (ucx_transport.cc).
// Over RDMA a large message's rendezvous is a zero-copy read; over UCX's
// tcp it is a round trip more per message and nothing saved, which cost a
// ring of 256 KiB pieces 12-14% of a 1 Gbit/s link
// (docs/PERFORMANCE-transports.md, table 5). No UCX header needed: tested
// without UCX.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace gyre::transport::ucx_wires {

// Whether UCX_TLS as the user set it (tls; null: unset) lets UCX use a
// transport that `pick` accepts: unset, empty or an exclusion ("^...") lets
// it use all; a list, those it names.
template <typename Pick>
bool tlsAllowsAny(const char* tls, Pick pick) {
  if (!tls || !*tls || tls[0] == '^') return true;  // all, or all but some
  std::string_view rest(tls);
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    const std::string_view name = rest.substr(0, comma);
    if (!name.empty() && pick(name)) return true;
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return false;
}

template <size_t N>
bool isOneOf(std::string_view name, const std::string_view (&names)[N]) {
  for (std::string_view n : names)
    if (name == n) return true;
  return false;
}

// tls: as tlsAllowsAny's; rdmaDevices: RDMA devices on this host
// (/sys/class/infiniband's entries). A list may use RDMA unless every name
// is one of UCX's wires without it.
inline bool mayUseRdma(const char* tls, int rdmaDevices) {
  if (rdmaDevices <= 0) return false;
  static constexpr std::string_view kNoRdma[] = {"tcp",  "self", "sm",  "shm",       "posix",    "sysv",
                                                 "cma",  "mm",   "knem", "xpmem",    "cuda_copy", "cuda_ipc",
                                                 "rocm_copy", "rocm_ipc"};
  return tlsAllowsAny(tls, [](std::string_view name) { return !isOneOf(name, kNoRdma); });
}

// Whether UCX may reach a peer on this host through shared memory (tls: as
// tlsAllowsAny's), without its peer error handling (with it, UCX 1.13's
// shared memory reaches nobody).
inline bool mayUseSharedMemory(const char* tls) {
  static constexpr std::string_view kShared[] = {"all", "sm", "shm", "mm", "posix", "sysv", "cma", "knem", "xpmem"};
  return tlsAllowsAny(tls, [](std::string_view name) { return isOneOf(name, kShared); });
}

// Whether UCX may open its tcp transport (tls: as tlsAllowsAny's; an
// exclusion that names tcp leaves it out). gyre sets tcp's own options
// (its segment, its socket buffers) only then: UCX warns at every worker's
// start of an option that no transport it opened took.
inline bool mayUseTcp(const char* tls) {
  const auto isTcp = [](std::string_view name) { return name == "tcp" || name == "all"; };
  if (tls && tls[0] == '^') return !tls[1] || !tlsAllowsAny(tls + 1, [](std::string_view name) { return name == "tcp"; });
  return tlsAllowsAny(tls, isTcp);
}

// Whether gyre's endpoints ask UCX for peer failure handling
// (UCP_ERR_HANDLING_MODE_PEER; GYRE_UCX_ERROR_MODE). With it, UCX 1.13 gives
// its tcp and shared-memory transports no zero-copy lanes: a large
// message's rendezvous then goes through UCX's own buffers, a copy more on
// each side, and UCX_TLS naming only shared memory reaches nobody. Without
// it (none, as Open MPI and UCC run UCX) large messages go zero-copy, but
// UCX says nothing of a dead peer on those endpoints: the bootstrap watches
// each peer instead (Bootstrap::watchPeer: its process on this host, a
// connection of its own on another). auto: none where UCX may not use RDMA,
// peer where it may (RDMA's lanes are zero-copy either way, and UCX then
// reports a dead peer itself, a host that went down included).
enum class ErrorMode { Auto, Peer, None };
inline bool peerErrorHandling(ErrorMode mode, bool mayUseRdma) {
  return mode == ErrorMode::Peer || (mode == ErrorMode::Auto && mayUseRdma);
}
// And whether a large message then lands in its receiver's buffer straight
// from the wire (a zero-copy rendezvous: tcp's put, shared memory's cma,
// RDMA's read), once its receive is posted.
inline bool largeMessagesInPlace(ErrorMode mode, bool mayUseRdma) {
  return mayUseRdma || !peerErrorHandling(mode, mayUseRdma);
}

// The rendezvous threshold gyre gives UCX where it may not use RDMA and the
// user set none: a shared-memory piece (256 KiB) or a TCP piece goes eager.
// Where UCX's rendezvous is zero-copy (no peer error handling), from
// 512 KiB up it goes by rendezvous instead (a 4-rank AllToAll of 2 MiB, its
// blocks of 512 KiB, 0.62-0.90 of the time eager; 256 KiB pieces stay
// eager: by rendezvous they took 1.4-1.5x as long).
inline const char* rendezvousThreshold(bool zeroCopy) { return zeroCopy ? "512k" : "1m"; }
// With that threshold, the largest message gyre sends as one UCP message
// (its payload and a 32-byte header, below the threshold).
constexpr size_t onePartBytes(bool zeroCopy) { return (zeroCopy ? size_t{512} << 10 : size_t{1} << 20) - 64; }
// The largest of them, whatever each rank's mode.
inline constexpr size_t kTcpOnePartBytes = onePartBytes(false);

// The segment UCX's tcp reads a socket into (UCX's default 64 KiB), unless
// the user set UCX_TCP_RX_SEG_SIZE or UCX_TCP_TX_SEG_SIZE.
inline constexpr const char* kTcpReceiveSegment = "512k";

// The socket buffer size gyre gives UCX's tcp (UCX_TCP_SNDBUF and
// UCX_TCP_RCVBUF), as text for ucp_config_modify: gyre's own TCP's
// (GYRE_TCP_BUFFER_BYTES), unless it is 0 (the kernel's autotuning, UCX's
// default) or the user set either of UCX's (userSend, userReceive: the
// variables' values, null when unset); "" leaves UCX's setting alone.
inline std::string tcpSocketBuffer(size_t gyreBytes, const char* userSend, const char* userReceive) {
  if (!gyreBytes || userSend || userReceive) return "";
  return std::to_string(gyreBytes);
}

}  // namespace gyre::transport::ucx_wires
