// GYRE_IB_HCA's syntax (NCCL_IB_HCA's): device and port selection, tested
// without any RDMA device.
#include "transport/verbs/ib_device_select.h"

#include <gtest/gtest.h>

#include "base/error.h"

namespace gyre::transport {
namespace {

TEST(IbHcaFilter, EmptyAllowsEverything) {
  const HcaFilter f = parseHcaFilter("");
  EXPECT_TRUE(hcaAllows(f, "mlx5_0", 1));
  EXPECT_TRUE(hcaAllows(f, "rxe0", 2));
}

TEST(IbHcaFilter, NamesArePrefixesAndPortsOptional) {
  const HcaFilter f = parseHcaFilter("mlx5_0:1,mlx5_1");
  ASSERT_EQ(f.entries.size(), 2u);
  EXPECT_EQ(f.entries[0].device, "mlx5_0");
  EXPECT_EQ(f.entries[0].port, 1);
  EXPECT_EQ(f.entries[1].port, -1);
  EXPECT_TRUE(hcaAllows(f, "mlx5_0", 1));
  EXPECT_FALSE(hcaAllows(f, "mlx5_0", 2));
  EXPECT_TRUE(hcaAllows(f, "mlx5_1", 2));
  EXPECT_TRUE(hcaAllows(f, "mlx5_10", 1));  // a prefix of it
  EXPECT_FALSE(hcaAllows(f, "mlx4_0", 1));
  EXPECT_FALSE(hcaAllows(f, "rxe0", 1));
}

TEST(IbHcaFilter, EqualsMatchesWholeNames) {
  const HcaFilter f = parseHcaFilter("=mlx5_1");
  EXPECT_TRUE(f.exact);
  EXPECT_TRUE(hcaAllows(f, "mlx5_1", 1));
  EXPECT_FALSE(hcaAllows(f, "mlx5_10", 1));
}

TEST(IbHcaFilter, CaretExcludes) {
  const HcaFilter f = parseHcaFilter("^mlx5_1,rxe0:2");
  EXPECT_TRUE(f.exclude);
  EXPECT_FALSE(hcaAllows(f, "mlx5_1", 1));
  EXPECT_FALSE(hcaAllows(f, "mlx5_12", 1));
  EXPECT_TRUE(hcaAllows(f, "mlx5_0", 1));
  EXPECT_TRUE(hcaAllows(f, "rxe0", 1));
  EXPECT_FALSE(hcaAllows(f, "rxe0", 2));
}

TEST(IbHcaFilter, CaretEqualsExcludesWholeNamesOnly) {
  const HcaFilter f = parseHcaFilter("^=mlx5_1");
  EXPECT_TRUE(f.exclude && f.exact);
  EXPECT_FALSE(hcaAllows(f, "mlx5_1", 1));
  EXPECT_TRUE(hcaAllows(f, "mlx5_10", 1));
}

TEST(IbHcaFilter, MalformedEntriesAreNamedErrors) {
  for (const char* bad :
       {"mlx5_0:x", "mlx5_0:0", "mlx5_0:", ",mlx5_0", "mlx5_0,,rxe0", "^", "^=", ":1"}) {
    try {
      parseHcaFilter(bad);
      ADD_FAILURE() << bad << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), gyreInvalidArgument) << bad;
      EXPECT_NE(std::string(e.what()).find("GYRE_IB_HCA"), std::string::npos)
          << bad << ": " << e.what();
    }
  }
}

}  // namespace
}  // namespace gyre::transport
