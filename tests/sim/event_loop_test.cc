// The event loop against a sort: callbacks run in time order, ties in the
// order they were scheduled, what is scheduled for now while now runs after
// what the heap holds for now; and its callbacks, kept in place or on the
// heap by their size, run and are destroyed once each. And the arrays in
// huge pages that the loop, the flow network and the runner keep.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "sim/event_loop.h"
#include "sim/huge_pages.h"

namespace gyre::sim {
namespace {

TEST(EventLoop, CallbacksRunInTimeOrderTiesInTheOrderScheduled) {
  EventLoop loop;
  std::mt19937 rng(11);
  struct Scheduled {
    Time t;
    int id;
  };
  std::vector<Scheduled> expected;
  std::vector<int> ran;
  // Few distinct times, so that most events tie; enough of them for a heap
  // several levels deep.
  for (int id = 0; id < 5000; ++id) {
    const Time t = 1e-6 * static_cast<double>(rng() % 50);
    expected.push_back({t, id});
    loop.at(t, [&ran, id] { ran.push_back(id); });
  }
  EXPECT_EQ(loop.run(), 5000u);
  std::stable_sort(expected.begin(), expected.end(), [](const Scheduled& a, const Scheduled& b) { return a.t < b.t; });
  ASSERT_EQ(ran.size(), expected.size());
  for (size_t i = 0; i < ran.size(); ++i) ASSERT_EQ(ran[i], expected[i].id) << i;
}

TEST(EventLoop, WhatIsScheduledForNowRunsAfterTheHeapsEventsForNow) {
  EventLoop loop;
  std::vector<int> ran;
  loop.at(1, [&] {
    ran.push_back(1);
    loop.at(loop.now(), [&] { ran.push_back(3); });  // for now, from now: after 2
    loop.after(1, [&] { ran.push_back(4); });
  });
  loop.at(1, [&] { ran.push_back(2); });
  loop.run();
  EXPECT_EQ(ran, (std::vector<int>{1, 2, 3, 4}));
  EXPECT_EQ(loop.now(), 2);
}

TEST(EventLoop, CallbacksInPlaceAndOnTheHeapRunAndAreDestroyedOnce) {
  auto token = std::make_shared<int>(0);
  {
    EventLoop loop;
    std::array<double, 16> big{};  // 128 bytes: beyond Callback::kInline
    big[15] = 5;
    for (int i = 0; i < 100; ++i) {
      loop.at(i % 7, [token] { ++*token; });
      loop.at(i % 5, [token, big] { *token += static_cast<int>(big[15]); });
    }
    EXPECT_EQ(token.use_count(), 201);
    loop.run();
    EXPECT_EQ(*token, 600);
    EXPECT_EQ(token.use_count(), 1);  // every copy gone once it ran
    Callback moved([token] { ++*token; });
    Callback into = std::move(moved);
    EXPECT_FALSE(moved);
    into();
    EXPECT_EQ(*token, 601);
    loop.at(3, std::move(into));  // never run: destroyed with the loop
    EXPECT_EQ(token.use_count(), 2);
  }
  EXPECT_EQ(token.use_count(), 1);
}

TEST(HugeVector, LargeBlocksAreAlignedToAHugePageAndKeepTheirValuesAsTheyGrow) {
  HugeVector<uint64_t> v;
  for (uint64_t i = 0; i < 1'000'000; ++i) v.push_back(i * 7);  // 8 MB: grows through both kinds
  EXPECT_EQ(reinterpret_cast<uintptr_t>(v.data()) % kHugePage, 0u);
  for (uint64_t i = 0; i < v.size(); ++i) ASSERT_EQ(v[i], i * 7) << i;
  HugeVector<uint64_t> small(10, 3);  // plain allocation below a huge page
  EXPECT_EQ(small[9], 3u);
  v = std::move(small);
  EXPECT_EQ(v.size(), 10u);
}

TEST(HugeArena, ArraysFromItKeepTheirValuesAsTheyGrowSideBySide) {
  HugeArena arena;
  using Vec = std::vector<uint64_t, ArenaAllocator<uint64_t>>;
  Vec a{ArenaAllocator<uint64_t>(&arena)}, b{ArenaAllocator<uint64_t>(&arena)};
  for (uint64_t i = 0; i < 3'000'000; ++i) {  // 24 MB each, interleaved: several blocks
    a.push_back(i);
    b.push_back(2 * i);
  }
  for (uint64_t i = 0; i < a.size(); ++i) ASSERT_TRUE(a[i] == i && b[i] == 2 * i) << i;
  void* big = arena.take(size_t{100} << 20, 64);  // beyond a block
  EXPECT_EQ(reinterpret_cast<uintptr_t>(big) % 64, 0u);
  std::memset(big, 1, size_t{100} << 20);
  EXPECT_EQ(a.back(), 2'999'999u);
  Vec heap;  // no arena: the heap's
  heap.assign(10, 4);
  a = std::move(heap);  // the arena's memory is the arena's to free
  EXPECT_EQ(a.size(), 10u);
}

}  // namespace
}  // namespace gyre::sim
