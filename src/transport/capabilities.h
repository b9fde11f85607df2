// What a transport's connections can do, as flags the layers above test,
// instead of one boolean hint per feature: the executor picks its copies by
// them, the planner its single-copy algorithms, the communicator how to
// drive progress and where failures are reported.
#pragma once

#include <cstdint>

namespace gyre::transport {

using Capabilities = uint32_t;

enum Capability : Capabilities {
  // Sending from and receiving into the caller's memory (trySendFrom,
  // tryRecvInto) saves a copy against the buffer form (sockets). Without it
  // the transport's own buffers are peer-visible memory (shared memory), and
  // writing straight into them is cheapest.
  kDirectIO = 1u << 0,
  // Connection::get: a one-sided copy from a range the peer registered (the
  // kernel's process_vm_readv for shared memory; RDMA read later).
  kPeerRead = 1u << 1,
  // Connection::map: a registered gyreMemAlloc buffer can be mapped by the
  // peer and read in place.
  kPeerMap = 1u << 2,
  // Queued output moves only when progress() is called (user-space send
  // queues over sockets): waiters must keep calling it.
  kNeedsProgress = 1u << 3,
  // Peers on this transport report failures through it (peerReport): a
  // flag in shared memory, read with a load at each call's start.
  kReportsFailures = 1u << 4,
  // Reaches peers of this host only.
  kSameHostOnly = 1u << 5,
  // Connection::put: a one-sided copy into a range the peer registered
  // (process_vm_writev; RDMA write later).
  kPeerWrite = 1u << 6,
  // trySendRunsFrom and tryRecvRunsInto move a message that is several runs
  // of the caller's memory (a strided slice) straight from and into them,
  // as kDirectIO's forms do one run (sockets' sendmsg and readv of an
  // iovec). Without it those forms pack through the buffer form.
  kGatherIO = 1u << 7,
  // Each message costs a system call or more on each side (sockets): what
  // runs at once overlaps its wire latency but not that CPU time, so the
  // tuner counts every message of an all-at-once exchange (pairwise
  // AllToAll: n-1 of them against Bruck's log2 n). Not for shared memory or
  // RDMA, where a message is a store or a posted work request.
  kMessageSyscalls = 1u << 8,
  // A large message lands in the receiver's buffer straight from the wire
  // once its receive is posted (UCX's zero-copy rendezvous), where a smaller
  // one passes through the transport's own buffers: one-way exchanges send
  // fewer, larger pieces (PlanEnv::inPlaceMessageBytes). Agreed by every
  // rank, so both ends of a connection cut alike.
  kLargeInPlace = 1u << 9,
  // A message's payload may lie in device memory (acceptDeviceMessages,
  // trySendDeviceBuffer, tryRecvMessage): the receiver's device slots, which
  // the sender's device writes (shared memory: through CUDA IPC), so a
  // ring's or a send's pieces go device to device, never through host
  // memory.
  kDeviceMessages = 1u << 10,
};

}  // namespace gyre::transport
