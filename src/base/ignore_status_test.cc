#include "base/ignore_status.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace tessera {
namespace {

// Statuses only: the overload for any other type is deleted.
template <typename T>
concept Ignorable = requires(const T& value) {
  IgnoreStatus(value, "a reason");
};

static_assert(Ignorable<absl::Status>);
static_assert(Ignorable<absl::StatusOr<int>>);
static_assert(Ignorable<absl::StatusOr<std::vector<std::string>>>);
static_assert(!Ignorable<bool>);
static_assert(!Ignorable<int>);
static_assert(!Ignorable<std::string>);

int evaluated = 0;

absl::Status Counted(absl::Status status) {
  ++evaluated;
  return status;
}

TEST(IgnoreStatusTest, EvaluatesTheExpressionOnceWhateverItsOutcome) {
  evaluated = 0;
  IgnoreStatus(Counted(absl::OkStatus()), "a test: the outcome does not matter");
  IgnoreStatus(Counted(absl::NotFoundError("gone")), "a test: the outcome does not matter");
  EXPECT_EQ(evaluated, 2);
}

TEST(IgnoreStatusTest, LeavesAHeldStatusOrAsItWas) {
  const absl::StatusOr<std::vector<int>> held = std::vector<int>{1, 2};
  IgnoreStatus(held, "a test: the value stays with its holder");
  ASSERT_TRUE(held.ok());
  EXPECT_EQ(held->size(), 2u);
  IgnoreStatus(absl::StatusOr<std::string>(absl::InternalError("lost")),
               "a test: an error of a temporary");
}

}  // namespace
}  // namespace tessera
