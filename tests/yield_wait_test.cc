// The waiter's yielding phase (core/yield_wait.h): the core is given away
// only right after a look at the transports that moved nothing.
#include "core/yield_wait.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace {

using gyre::core::yieldUntilReady;

// Runs the wait against scripted answers: ready() is false `looks` times and
// then true; progress() answers from `moved` in turn (false once it runs
// out). Returns what happened, one letter a call: r(eady), p (progress that
// moved bytes), n (progress that moved nothing), y(ield).
std::string run(int looks, std::vector<bool> moved, int limit = 100) {
  std::string log;
  int readies = 0;
  size_t progresses = 0;
  int rounds = 0;
  const bool done = yieldUntilReady(
      [&] {
        log += 'r';
        return readies++ == looks;
      },
      [&] {
        const bool m = progresses < moved.size() && moved[progresses];
        ++progresses;
        log += m ? 'p' : 'n';
        return m;
      },
      [&] { log += 'y'; }, [&] { return rounds++ < limit; });
  if (!done) log += '!';
  return log;
}

TEST(YieldWait, ReadyAtOnceNeitherLooksNorYields) { EXPECT_EQ(run(0, {}), "r"); }

TEST(YieldWait, YieldsOnlyAfterALookThatMovedNothing) {
  // Nothing moving: look, yield, every round.
  EXPECT_EQ(run(2, {}), "rnyrnyr");
  // A look that took in part of a message keeps the core for the next look
  // at once; the yield comes only after one that found nothing.
  EXPECT_EQ(run(4, {true, true, false, true}), "rprprnyrpr");
}

TEST(YieldWait, TheLookJustBeforeDecidesNotThePreviousOne) {
  // A first look that finds nothing is followed by a yield, though nothing
  // had been looked at before the wait began (the old order yielded first
  // and looked after, on the previous look's word).
  EXPECT_EQ(run(1, {false}), "rnyr");
  // And bytes that moved in one look do not spare the yield after the next
  // look that found nothing.
  EXPECT_EQ(run(2, {true, false}), "rprnyr");
}

TEST(YieldWait, EndsWhenTheWaitMayNotGoOn) {
  EXPECT_EQ(run(1000, {}, 2), "rnyrny!");
  EXPECT_EQ(run(0, {}, 0), "!");
}

}  // namespace
