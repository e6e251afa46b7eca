#include "cli/cluster_command_start.h"

#include <gtest/gtest.h>

namespace tessera::cli {
namespace {

TEST(ParseWaitFlagTest, EmptyMeansTheCommandsDefault) {
  EXPECT_EQ(*ParseWaitFlag("", absl::ZeroDuration()), absl::ZeroDuration());
  EXPECT_EQ(*ParseWaitFlag("", absl::InfiniteDuration()), absl::InfiniteDuration());
}

TEST(ParseWaitFlagTest, ReadsDurationsAndNamesTheFlagOnError) {
  EXPECT_EQ(*ParseWaitFlag("30s", absl::ZeroDuration()), absl::Seconds(30));
  const auto bad = ParseWaitFlag("soon", absl::ZeroDuration());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("--wait"), absl::string_view::npos);
}

TEST(StartClusterCommandTest, ABadWaitFlagIsReportedBeforeConnecting) {
  CommonClusterArgs common;
  common.state_dir = "/nonexistent/tessera-state";
  const auto start = StartClusterCommand(common, "soon", absl::ZeroDuration());
  ASSERT_FALSE(start.ok());
  EXPECT_NE(start.status().message().find("--wait"), absl::string_view::npos);
}

}  // namespace
}  // namespace tessera::cli
