// The flow network against closed forms: one flow takes bytes/bandwidth,
// flows sharing a link share it equally, a flow held back elsewhere leaves
// its share to the others (max-min fairness), and every byte a flow carries
// is counted once on every link of its path.
#include <gtest/gtest.h>

#include <random>

#include "base/error.h"
#include "sim/flow_network.h"

namespace gyre::sim {
namespace {

TEST(FlowNetwork, OneFlowTakesItsBytesOverTheBandwidth) {
  EventLoop loop;
  FlowNetwork net(loop);
  const int a = net.addLink("a", 1e9, 1e-6), b = net.addLink("b", 2e9, 3e-6);
  Time done = -1;
  net.start({a, b}, 1e6, [&] { done = loop.now(); });
  loop.run();
  EXPECT_DOUBLE_EQ(done, 1e-3);  // the slower link, 1 GB/s
  EXPECT_DOUBLE_EQ(net.latencyOf({a, b}), 4e-6);
  EXPECT_DOUBLE_EQ(net.link(a).carried, 1e6);
  EXPECT_DOUBLE_EQ(net.link(b).carried, 1e6);
}

TEST(FlowNetwork, FlowsOnOneLinkShareItAndTheLastSpeedsUpWhenOneEnds) {
  EventLoop loop;
  FlowNetwork net(loop);
  const int l = net.addLink("l", 1e9, 0);
  Time small = -1, big = -1;
  net.start({l}, 1e6, [&] { small = loop.now(); });
  net.start({l}, 3e6, [&] { big = loop.now(); });
  loop.run();
  // Both at 0.5 GB/s until the small one ends at 2 ms (1 MB each moved);
  // then the big one's last 2 MB at 1 GB/s: 4 ms in all.
  EXPECT_NEAR(small, 2e-3, 1e-12);
  EXPECT_NEAR(big, 4e-3, 1e-12);
}

TEST(FlowNetwork, AFlowLimitedElsewhereLeavesItsShareToTheOthers) {
  EventLoop loop;
  FlowNetwork net(loop);
  const int wide = net.addLink("wide", 1e9, 0), narrow = net.addLink("narrow", 0.25e9, 0);
  Time a = -1, b = -1;
  net.start({wide}, 0.75e6, [&] { a = loop.now(); });          // gets 0.75 GB/s
  net.start({wide, narrow}, 0.25e6, [&] { b = loop.now(); });  // held to 0.25 GB/s
  loop.run();
  EXPECT_NEAR(a, 1e-3, 1e-12);
  EXPECT_NEAR(b, 1e-3, 1e-12);
}

TEST(FlowNetwork, EveryByteIsCountedOnceOnEveryLinkOfItsPath) {
  EventLoop loop;
  FlowNetwork net(loop);
  std::mt19937 rng(7);
  for (int i = 0; i < 12; ++i) net.addLink("l" + std::to_string(i), 1e8 * (1 + rng() % 20), 1e-6);
  std::vector<double> expected(12, 0);
  double total = 0;
  int finished = 0;
  for (int f = 0; f < 300; ++f) {
    std::vector<int> path;
    for (int l = 0; l < 12; ++l)
      if (rng() % 4 == 0) path.push_back(l);
    if (path.empty()) path.push_back(static_cast<int>(rng() % 12));
    const double bytes = 1.0 + rng() % 5'000'000;
    for (int l : path) expected[static_cast<size_t>(l)] += bytes;
    total += bytes;
    // Flows start at different times: from the callbacks of earlier ones.
    const Time when = 1e-4 * (rng() % 100);
    loop.at(when, [&net, path, bytes, &finished] { net.start(path, bytes, [&finished] { ++finished; }); });
  }
  loop.run();
  EXPECT_EQ(finished, 300);
  EXPECT_EQ(net.active(), 0u);
  for (size_t l = 0; l < 12; ++l) EXPECT_NEAR(net.link(static_cast<int>(l)).carried, expected[l], 1e-6 * expected[l] + 1e-3) << l;
  EXPECT_GT(total, 0);
}

TEST(FlowNetwork, BadLinksAreErrorsNamingThem) {
  EventLoop loop;
  FlowNetwork net(loop);
  try {
    net.addLink("nic 3", 0, 0);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("link nic 3: bandwidth must be positive"), std::string::npos) << e.what();
  }
  EXPECT_THROW(net.addLink("x", 1e9, -1), Error);
}

}  // namespace
}  // namespace gyre::sim
