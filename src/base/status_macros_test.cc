#include "base/status_macros.h"

#include <gtest/gtest.h>

#include "base/strong_id.h"

namespace tessera {
namespace {

absl::StatusOr<int> Half(int x) {
  if (x % 2 != 0) return absl::InvalidArgumentError("odd");
  return x / 2;
}

absl::StatusOr<int> Quarter(int x) {
  TESSERA_ASSIGN_OR_RETURN(int half, Half(x));
  TESSERA_ASSIGN_OR_RETURN(auto quarter, Half(half));
  return quarter;
}

absl::Status CheckEven(int x) {
  TESSERA_RETURN_IF_ERROR(Half(x).status());
  return absl::OkStatus();
}

TEST(StatusMacrosTest, AssignOrReturnPropagatesErrorsAndValues) {
  EXPECT_EQ(*Quarter(8), 2);
  EXPECT_EQ(Quarter(6).status().message(), "odd");
  EXPECT_EQ(Quarter(3).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(StatusMacrosTest, ReturnIfErrorStopsAtFirstError) {
  EXPECT_TRUE(CheckEven(2).ok());
  EXPECT_EQ(CheckEven(1).message(), "odd");
}

TEST(StrongIdTest, ComparesByValueWithinOneTag) {
  EXPECT_EQ(NodeId("a"), NodeId("a"));
  EXPECT_LT(NodeId("a"), NodeId("b"));
  EXPECT_EQ(DeviceIndex(3).value(), 3);
  static_assert(!std::is_convertible_v<NodeId, std::string>);
  static_assert(!std::is_constructible_v<DeviceIndex, NodeId>);
}

}  // namespace
}  // namespace tessera
