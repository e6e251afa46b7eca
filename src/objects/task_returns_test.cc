#include "objects/task_returns.h"

#include <gtest/gtest.h>

namespace tessera {
namespace {

TEST(TaskReturnsTest, RoundTripsValuesOfAnySize) {
  const std::vector<std::string> values = {"", "a", std::string(70000, 'x'),
                                           std::string("\0\xc6", 2)};
  auto decoded = DecodeTaskReturns(EncodeTaskReturns(values), values.size());
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(*decoded, values);
}

TEST(TaskReturnsTest, RefusesAnotherCountTruncationAndTrailingBytes) {
  const std::string encoded = EncodeTaskReturns({"one", "two"});
  EXPECT_EQ(DecodeTaskReturns(encoded, 3).status().message(),
            "a task's 3 return values are malformed: it holds 2 values");
  for (size_t cut = 0; cut < encoded.size(); ++cut) {
    EXPECT_FALSE(DecodeTaskReturns(encoded.substr(0, cut), 2).ok()) << cut;
  }
  EXPECT_FALSE(DecodeTaskReturns(encoded + "x", 2).ok());
  // A length larger than the input is refused before anything is allocated.
  std::string huge = encoded;
  huge[6] = '\x7f';
  EXPECT_FALSE(DecodeTaskReturns(huge, 2).ok());
}

}  // namespace
}  // namespace tessera
