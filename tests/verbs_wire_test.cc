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

}  // namespace
}  // namespace gyre::transport::verbs_wire
