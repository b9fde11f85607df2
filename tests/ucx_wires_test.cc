// When gyre may leave UCX's rendezvous threshold to UCX (RDMA possible) and
// when it raises it (tcp and shared memory only), and the socket buffers it
// gives UCX's tcp: ucx_wires.h, no UCX needed.
#include <gtest/gtest.h>

#include "transport/ucx/ucx_wires.h"

namespace gyre::transport::ucx_wires {
namespace {

TEST(UcxWires, WithoutAnRdmaDeviceThereIsNoRdma) {
  EXPECT_FALSE(mayUseRdma(nullptr, 0));
  EXPECT_FALSE(mayUseRdma("rc,ud,tcp", 0));
}

TEST(UcxWires, WithADeviceEveryTransportOrAnExclusionMayUseIt) {
  EXPECT_TRUE(mayUseRdma(nullptr, 1));
  EXPECT_TRUE(mayUseRdma("", 2));
  EXPECT_TRUE(mayUseRdma("^tcp", 1));
  EXPECT_TRUE(mayUseRdma("all", 1));
}

TEST(UcxWires, AListMayUseRdmaWhenItNamesAnythingButPlainWires) {
  EXPECT_FALSE(mayUseRdma("tcp", 1));
  EXPECT_FALSE(mayUseRdma("tcp,self", 1));
  EXPECT_FALSE(mayUseRdma("posix,cma,self,tcp", 1));
  EXPECT_FALSE(mayUseRdma("sm,,tcp,", 1));
  EXPECT_TRUE(mayUseRdma("rc,sm,self", 1));
  EXPECT_TRUE(mayUseRdma("tcp,dc_x", 1));
  EXPECT_TRUE(mayUseRdma("ib", 1));
}

// Eager below 1 MiB, or 512 KiB where UCX's rendezvous is zero-copy; a
// message and its header as one UCP message below that; the receivers'
// overflow covers the larger.
TEST(UcxWires, RendezvousFromHalfAMebibyteWhereItCopiesNothing) {
  EXPECT_STREQ(rendezvousThreshold(false), "1m");
  EXPECT_STREQ(rendezvousThreshold(true), "512k");
  EXPECT_EQ(onePartBytes(false), (size_t{1} << 20) - 64);
  EXPECT_EQ(onePartBytes(true), (size_t{512} << 10) - 64);
  EXPECT_GE(kTcpOnePartBytes, onePartBytes(false));
  EXPECT_GE(kTcpOnePartBytes, onePartBytes(true));
}

// Whether UCX may carry messages to this host's peers through its shared
// memory (then they are no system calls, for the tuner).
TEST(UcxWires, SharedMemoryUnlessTheListNamesNone) {
  EXPECT_TRUE(mayUseSharedMemory(nullptr));
  EXPECT_TRUE(mayUseSharedMemory(""));
  EXPECT_TRUE(mayUseSharedMemory("^tcp"));
  EXPECT_TRUE(mayUseSharedMemory("all"));
  EXPECT_TRUE(mayUseSharedMemory("sm,self"));
  EXPECT_TRUE(mayUseSharedMemory("tcp,posix"));
  EXPECT_TRUE(mayUseSharedMemory("self,cma,"));
  EXPECT_FALSE(mayUseSharedMemory("tcp,self"));
  EXPECT_FALSE(mayUseSharedMemory("rc,ud,self"));
  EXPECT_FALSE(mayUseSharedMemory("smx,posixx"));
}

// gyre's TCP buffer size goes to UCX's tcp, unless it is the kernel's
// autotuning (0) or the user set either of UCX's own.
TEST(UcxWires, SocketBuffersAreGyresUnlessTheUserSetUcxs) {
  EXPECT_EQ(tcpSocketBuffer(4 << 20, nullptr, nullptr), "4194304");
  EXPECT_EQ(tcpSocketBuffer(0, nullptr, nullptr), "");
  EXPECT_EQ(tcpSocketBuffer(4 << 20, "1m", nullptr), "");
  EXPECT_EQ(tcpSocketBuffer(4 << 20, nullptr, "auto"), "");
}

// tcp's options go to UCX only where it may open tcp: UCX warns of an
// option no transport took, at every start.
TEST(UcxWires, TcpUnlessTheListLeavesItOut) {
  EXPECT_TRUE(mayUseTcp(nullptr));
  EXPECT_TRUE(mayUseTcp(""));
  EXPECT_TRUE(mayUseTcp("all"));
  EXPECT_TRUE(mayUseTcp("tcp,self"));
  EXPECT_TRUE(mayUseTcp("sm,tcp"));
  EXPECT_TRUE(mayUseTcp("^sm"));
  EXPECT_TRUE(mayUseTcp("^"));
  EXPECT_FALSE(mayUseTcp("^tcp"));
  EXPECT_FALSE(mayUseTcp("^sm,tcp"));
  EXPECT_FALSE(mayUseTcp("sm,self"));
  EXPECT_FALSE(mayUseTcp("posix,cma,self"));
  EXPECT_FALSE(mayUseTcp("tcpx,rc"));
}

}  // namespace
}  // namespace gyre::transport::ucx_wires

// GYRE_UCX_ERROR_MODE: auto asks UCX for peer failure handling only where
// it may use RDMA (its tcp and shared memory would lose their zero-copy
// lanes; the bootstrap watches the peers instead); without it, or with
// RDMA, large messages land in place.
TEST(UcxWires, PeerFailureHandlingWithRdmaOrWhenAsked) {
  using gyre::transport::ucx_wires::ErrorMode;
  using gyre::transport::ucx_wires::largeMessagesInPlace;
  using gyre::transport::ucx_wires::peerErrorHandling;
  EXPECT_FALSE(peerErrorHandling(ErrorMode::Auto, false));
  EXPECT_TRUE(peerErrorHandling(ErrorMode::Auto, true));
  EXPECT_TRUE(peerErrorHandling(ErrorMode::Peer, false));
  EXPECT_TRUE(peerErrorHandling(ErrorMode::Peer, true));
  EXPECT_FALSE(peerErrorHandling(ErrorMode::None, false));
  EXPECT_FALSE(peerErrorHandling(ErrorMode::None, true));
  EXPECT_TRUE(largeMessagesInPlace(ErrorMode::Auto, false));
  EXPECT_TRUE(largeMessagesInPlace(ErrorMode::Auto, true));
  EXPECT_TRUE(largeMessagesInPlace(ErrorMode::None, false));
  EXPECT_TRUE(largeMessagesInPlace(ErrorMode::Peer, true));
  EXPECT_FALSE(largeMessagesInPlace(ErrorMode::Peer, false));  // tcp's rendezvous through UCX's buffers
}
