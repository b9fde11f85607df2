// The verbs transport's immediates carry counters modulo 2^30 (verbs_wire.h);
// the receiver widens them against its own count. Tested without RDMA.
#include <gtest/gtest.h>

#include "transport/verbs/verbs_wire.h"

namespace gyre::transport::verbs_wire {
namespace {

TEST(VerbsWire, NoticesSayTheirKindAndCounter) {
  EXPECT_EQ(noticeKind(notice(kMessage, 5)), kMessage);
  EXPECT_EQ(noticeKind(notice(kCredit, 5)), kCredit);
  EXPECT_EQ(noticeKind(notice(kFin, kCounterMask)), kFin);
  EXPECT_EQ(notice(kFin, 7) & kCounterMask, 7u);
}

TEST(VerbsWire, CountersWidenAcrossTheWrap) {
  const uint64_t big = (uint64_t{3} << kCounterBits) + kCounterMask - 1;  // just below a wrap
  EXPECT_EQ(widen(notice(kMessage, big), big), big);
  EXPECT_EQ(widen(notice(kCredit, big + 2), big), big + 2);  // past the wrap: low bits are 0
  EXPECT_EQ(widen(notice(kCredit, big + 1000), big), big + 1000);
  EXPECT_EQ(widen(notice(kCredit, 0), 0), 0u);
  // A counter behind the known one is read as far ahead (the caller's
  // checks refuse it: a message number must equal its own count).
  EXPECT_NE(widen(notice(kMessage, 9), 10), 10u);
}

TEST(VerbsWire, ARingHeaderMustBeItsSlotsMessage) {
  Header h{};
  h.seq = 7;
  h.kind = kEager;
  h.bytes = 100;
  EXPECT_TRUE(ringHeaderValid(h, 7, 100));
  EXPECT_FALSE(ringHeaderValid(h, 7, 99));  // an eager payload past its slot
  EXPECT_FALSE(ringHeaderValid(h, 8, 100));
  h.kind = kRendezvous;
  h.bytes = uint64_t{1} << 40;  // its size is the caller's to check
  EXPECT_TRUE(ringHeaderValid(h, 7, 100));
  h.kind = 3;
  EXPECT_FALSE(ringHeaderValid(h, 7, 100));
}

TEST(VerbsWire, NoticesDecodeAgainstTheCounts) {
  NoticeCounts c;
  c.arrived = 5;
  c.peerReleased = 2;
  c.sent = 6;
  c.finsReceived = 1;
  c.rendezvousPosted = 2;
  EXPECT_EQ(decodeNotice(notice(kMessage, 5), c).what, DecodedNotice::kNextMessage);
  EXPECT_EQ(decodeNotice(notice(kMessage, 6), c).what, DecodedNotice::kGarbage);
  const DecodedNotice credit = decodeNotice(notice(kCredit, 4), c);
  EXPECT_EQ(credit.what, DecodedNotice::kReleased);
  EXPECT_EQ(credit.counter, 4u);
  EXPECT_EQ(decodeNotice(notice(kCredit, 7), c).what, DecodedNotice::kGarbage);  // more than was sent
  EXPECT_EQ(decodeNotice(notice(kFin, 1), c).what, DecodedNotice::kNextFin);
  c.finsReceived = 2;  // every rendezvous answered: one more FIN is garbage
  EXPECT_EQ(decodeNotice(notice(kFin, 2), c).what, DecodedNotice::kGarbage);
  EXPECT_EQ(decodeNotice(3u << kCounterBits, c).what, DecodedNotice::kGarbage);  // no such kind
}

}  // namespace
}  // namespace gyre::transport::verbs_wire
