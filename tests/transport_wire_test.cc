// The checks the TCP, shared-memory and net-plugin transports make of what a
// peer sends them (tcp_wire.h, shm_checks.h, net_wire.h), without peers:
// each answer to garbage is a named error, and the two bugs fuzzing found
// stay fixed (an abort report's origin outside the communicator; a plugin
// reporting more bytes than the slot it filled).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "transport/net/net_wire.h"
#include "transport/shm/shm_checks.h"
#include "transport/shm/shm_segment.h"
#include "transport/tcp/tcp_wire.h"

namespace gyre::transport {
namespace {

// Runs f, which must throw E whose message holds `words`; returns its code.
template <typename E, typename F>
gyreResult_t expectThrows(F f, const std::string& words) {
  try {
    f();
  } catch (const E& e) {
    EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    return e.code();
  }
  ADD_FAILURE() << "no error; expected one saying \"" << words << "\"";
  return gyreSuccess;
}

const MessageTag kTag{{1, 2, 3}};

// ---- TCP ----

TEST(TcpWire, AcceptsTheHeaderItsSenderWrites) {
  const tcp_wire::PartHeader h{tcp_wire::kPartMagic, 2, 1000, kTag};
  tcp_wire::checkPartHeader(h, {2, true, 1000, kTag, 4096}, 1, "rank 1");
  tcp_wire::checkPartHeader(h, {2, false, 0, {}, 4096}, 1, "rank 1");  // read ahead
}

TEST(TcpWire, RefusesCorruptOversizedAndOtherCallsHeaders) {
  const tcp_wire::PartHeader h{tcp_wire::kPartMagic, 0, 5000, kTag};
  auto check = [&](tcp_wire::PartHeader x, tcp_wire::PartExpectation want) {
    return [=] { tcp_wire::checkPartHeader(x, want, 1, "rank 1"); };
  };
  tcp_wire::PartHeader bad = h;
  bad.magic ^= 1;
  EXPECT_EQ(expectThrows<ConnectionError>(check(bad, {0, false, 0, {}, 8192}),
                                          "rank 1 sent a corrupt message header"),
            gyreRemoteError);
  EXPECT_EQ(
      expectThrows<ConnectionError>(check(h, {1, false, 0, {}, 8192}), "corrupt message header"),
      gyreRemoteError);  // another lane's header
  EXPECT_EQ(expectThrows<ConnectionError>(check(h, {0, false, 0, {}, 4096}),
                                          "larger than the chunk size"),
            gyreRemoteError);
  expectThrows<MessageMismatch>(check(h, {0, true, 4999, kTag, 8192}), "message mismatch");
  expectThrows<MessageMismatch>(check(h, {0, true, 5000, MessageTag{{1, 2, 4}}, 8192}),
                                "message mismatch");
}

TEST(TcpWire, PartsCoverTheMessageExactly) {
  for (size_t lanes : {1, 2, 3, 8})
    for (size_t total : {0, 1, 63, 64, 65, 1000, 4096}) {
      size_t at = 0;
      for (size_t k = 0; k < lanes; ++k) {
        size_t offset, length;
        tcp_wire::partRange(total, lanes, k, offset, length);
        EXPECT_EQ(offset, at) << lanes << " lanes, " << total << " bytes, lane " << k;
        at += length;
      }
      EXPECT_EQ(at, total) << lanes << " lanes";
    }
}

// ---- shared memory ----

TEST(ShmChecks, ASegmentNameMustEndAndBeGyres) {
  char field[64] = "/gyre-123-0a0b0c0d0e0f";
  EXPECT_EQ(shm::segmentName(field, sizeof field, "rank 1"), "/gyre-123-0a0b0c0d0e0f");
  char empty[64] = {};
  EXPECT_EQ(shm::segmentName(empty, sizeof empty, "rank 1"), "");  // alone on its host
  char endless[64];
  std::memset(endless, 'a', sizeof endless);  // read past its field before
  EXPECT_EQ(expectThrows<Error>([&] { shm::segmentName(endless, sizeof endless, "rank 1"); },
                                "without its end"),
            gyreRemoteError);
  for (const char* name : {"/etc/passwd", "gyre-1", "/gyre-", "/gyre-1/../x", "/other"}) {
    char f[64] = {};
    std::strcpy(f, name);
    expectThrows<Error>([&] { shm::segmentName(f, sizeof f, "rank 1"); },
                        "not a gyre shared-memory name");
  }
}

TEST(ShmChecks, ASegmentHeaderMustBeItsOwners) {
  shm::SegmentHeader h{};
  h.magic = shm::kSegmentMagic;
  h.ownerRank = 3;
  shm::checkSegmentHeader(h, 3, "rank 3", "/gyre-x");
  expectThrows<Error>([&] { shm::checkSegmentHeader(h, 2, "rank 2", "/gyre-x"); },
                      "is not rank 2's");
  h.magic = 0;
  expectThrows<Error>([&] { shm::checkSegmentHeader(h, 3, "rank 3", "/gyre-x"); },
                      "is not rank 3's");
}

// The fix for the first bug: the origin indexes the reader's peer list.
TEST(ShmChecks, AnAbortOriginOutsideTheCommunicatorIsTheReportersOwn) {
  const char text[] = "the stream failed";
  PeerReport r = shm::abortReport(2, text, sizeof text, 1, 4);
  EXPECT_EQ(r.origin, 2);
  EXPECT_EQ(r.message, "the stream failed");
  for (int origin : {4, -1, 1 << 30}) {
    r = shm::abortReport(origin, text, sizeof text, 1, 4);
    EXPECT_EQ(r.origin, 1) << origin;
    EXPECT_NE(r.message.find("began at rank " + std::to_string(origin) +
                             ", which is not a rank of this "
                             "communicator of 4: the stream failed"),
              std::string::npos)
        << r.message;
  }
  char endless[8];
  std::memset(endless, 'z', sizeof endless);
  EXPECT_EQ(shm::abortReport(0, endless, sizeof endless, 1, 4).message, std::string(8, 'z'));
}

TEST(ShmChecks, ASlotIsWaitingPublishedOrCorrupt) {
  using shm::SlotState;
  EXPECT_EQ(shm::slotState(0, 0, 4), SlotState::Waiting);  // first lap: never written
  EXPECT_EQ(shm::slotState(1, 0, 4), SlotState::Published);
  EXPECT_EQ(shm::slotState(2, 5, 4), SlotState::Waiting);  // message 1's, the previous lap
  EXPECT_EQ(shm::slotState(6, 5, 4), SlotState::Published);
  EXPECT_EQ(shm::slotState(0, 5, 4), SlotState::Corrupt);
  EXPECT_EQ(shm::slotState(99, 5, 4), SlotState::Corrupt);
  EXPECT_EQ(shm::slotState(7, 3, 4), SlotState::Corrupt);  // the sender cannot be a lap ahead
  shm::checkSlotMessage(100, kTag, 100, kTag, 1);
  expectThrows<MessageMismatch>([] { shm::checkSlotMessage(101, kTag, 100, kTag, 1); },
                                "message mismatch");
}

// A peer's segment smaller than the layout maps, then SIGBUSes when touched.
TEST(ShmChecks, ASegmentSmallerThanTheLayoutIsRefused) {
  const std::string name = "/gyre-test-small-" + std::to_string(getpid());
  const int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, 4096), 0);
  close(fd);
  expectThrows<Error>([&] { ShmSegment::open(name, 1 << 20); },
                      "holds 4096 bytes, fewer than the 1048576");
  ShmSegment fits = ShmSegment::open(name, 4096);
  EXPECT_NE(fits.data(), nullptr);
  shm_unlink(name.c_str());
}

// Whether this process's page table maps the page at p (/proc/self/pagemap:
// bit 63 of its entry; readable without privileges, the frame numbers are not).
bool mapped(const void* p) {
  const long page = sysconf(_SC_PAGESIZE);
  const int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  uint64_t entry = 0;
  const off_t at = static_cast<off_t>(reinterpret_cast<uintptr_t>(p) / uintptr_t(page) * sizeof(entry));
  const bool ok = pread(fd, &entry, sizeof(entry), at) == sizeof(entry);
  close(fd);
  return ok && (entry >> 63) != 0;
}

// A FIFO's pages are mapped before its first message (its first calls paid a
// fault per 4 KiB, 2-8x their later time), on the creator's side and a
// peer's, and mapping them changes no byte. (Pages beside the range may be
// mapped too: the kernel maps a large folio's pages together.)
TEST(ShmSegmentPrefault, MapsTheRangeAskedAndKeepsItsBytes) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE)), bytes = 64 * page;
  ShmSegment own = ShmSegment::create(bytes);
  auto* data = static_cast<unsigned char*>(own.data());
  for (size_t i = 0; i < 8 * page; ++i) data[i] = static_cast<unsigned char>(i * 7 + 1);
  ShmSegment peer = ShmSegment::open(own.name(), bytes);
  auto* seen = static_cast<const unsigned char*>(peer.data());
  // Fresh: the peer's mapping has no page yet.
  for (size_t k = 0; k < 64; ++k) ASSERT_FALSE(mapped(seen + k * page)) << "page " << k;
  peer.prefault(2 * page + 100, 5 * page);  // pages 2 to 7 (its end falls inside page 7)
  for (size_t k = 2; k <= 7; ++k) EXPECT_TRUE(mapped(seen + k * page)) << "page " << k;
  for (size_t i = 0; i < 8 * page; ++i)
    ASSERT_EQ(seen[i], static_cast<unsigned char>(i * 7 + 1)) << "byte " << i;
  // Past the end, or empty: nothing, no fault.
  peer.prefault(bytes, page);
  peer.prefault(bytes - page, 10 * page);
  EXPECT_TRUE(mapped(seen + 63 * page));
  own.unlink();
}

// ---- net plugins ----

// A slot as NetConnection's: the header, then the payload.
std::vector<uint8_t> slotWith(uint64_t bytes, const MessageTag& tag, size_t room) {
  std::vector<uint8_t> s(sizeof(net_wire::Header) + room, 0);
  const net_wire::Header h{bytes, tag};
  std::memcpy(s.data(), &h, sizeof h);
  return s;
}

TEST(NetWire, AcceptsWhatItsSenderSent) {
  const auto s = slotWith(100, kTag, 256);
  EXPECT_EQ(net_wire::checkArrived(s.data(), s.size(), 132, 100, kTag, 1, "rank 1", "p").bytes,
            100u);
}

// The fix for the second bug: the size the plugin reports was trusted.
TEST(NetWire, ASizeLargerThanTheSlotIsRefused) {
  // The header agrees with the reported size, as a payload running past
  // the slot would make it; so does the caller (a buffer larger than it).
  const auto s = slotWith(1000, kTag, 256);
  EXPECT_EQ(expectThrows<ConnectionError>(
                [&] {
                  net_wire::checkArrived(s.data(), s.size(), 1032, 1000, kTag, 1, "rank 1",
                                         "plugin p");
                },
                "plugin p reported 1032 bytes received from rank 1 into a slot of 288"),
            gyreSystemError);
  // An int's -1 as a size_t.
  expectThrows<ConnectionError>(
      [&] {
        net_wire::checkArrived(s.data(), s.size(), size_t(-1), 100, kTag, 1, "rank 1", "plugin p");
      },
      "into a slot of 288");
}

TEST(NetWire, RefusesMalformedAndOtherCallsMessages) {
  const auto s = slotWith(100, kTag, 256);
  expectThrows<ConnectionError>(
      [&] { net_wire::checkArrived(s.data(), s.size(), 31, 100, kTag, 1, "rank 1", "p"); },
      "malformed message (31 bytes)");
  expectThrows<ConnectionError>(
      [&] { net_wire::checkArrived(s.data(), s.size(), 140, 100, kTag, 1, "rank 1", "p"); },
      "its header says 100");
  expectThrows<MessageMismatch>(
      [&] { net_wire::checkArrived(s.data(), s.size(), 132, 99, kTag, 1, "rank 1", "p"); },
      "message mismatch");
}

}  // namespace
}  // namespace gyre::transport
