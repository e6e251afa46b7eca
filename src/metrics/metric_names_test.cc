// Name rules and the UTF-8 check the registry and parser share.
#include "metrics/metric_names.h"

#include "gtest/gtest.h"

namespace tessera::metrics {
namespace {

TEST(MetricNamesTest, MetricNamesFollowTheRegex) {
  EXPECT_TRUE(ValidateMetricName("tessera_tasks_total").ok());
  EXPECT_TRUE(ValidateMetricName(":recorded:rule").ok());
  EXPECT_FALSE(ValidateMetricName("").ok());
  EXPECT_FALSE(ValidateMetricName("9lives").ok());
  EXPECT_FALSE(ValidateMetricName("a.b").ok());
  EXPECT_FALSE(ValidateMetricName("__name__").ok());
}

TEST(MetricNamesTest, LabelNamesFollowTheRegexWithoutColons) {
  EXPECT_TRUE(ValidateLabelName("tessera_io_cluster").ok());
  EXPECT_FALSE(ValidateLabelName("a:b").ok());
  EXPECT_FALSE(ValidateLabelName("tessera.io/cluster").ok());
  EXPECT_FALSE(ValidateLabelName("__meta").ok());
}

TEST(MetricNamesTest, Utf8IsCheckedStrictly) {
  EXPECT_TRUE(IsValidUtf8(""));
  EXPECT_TRUE(IsValidUtf8("plain"));
  EXPECT_TRUE(IsValidUtf8("n\xc5\x93ud \xe2\x82\xac \xf0\x9f\x98\x80"));  // œ € 😀
  EXPECT_FALSE(IsValidUtf8("\x80"));              // a continuation byte first
  EXPECT_FALSE(IsValidUtf8("\xc0\xaf"));          // overlong '/'
  EXPECT_FALSE(IsValidUtf8("\xed\xa0\x80"));      // a surrogate
  EXPECT_FALSE(IsValidUtf8("\xf4\x90\x80\x80"));  // past U+10FFFF
  EXPECT_FALSE(IsValidUtf8("\xe2\x82"));          // cut short
  EXPECT_EQ(FirstInvalidUtf8("ab\xff"), 2u);
  EXPECT_EQ(FirstInvalidUtf8("ab"), std::string_view::npos);
}

}  // namespace
}  // namespace tessera::metrics
