#include "hardware/plugins/common/quantity_rules.h"

#include "gtest/gtest.h"

namespace tessera {
namespace {

Quantity Q(std::string_view s) { return *Quantity::Parse(s); }

TEST(QuantityRulesTest, FractionOrWhole) {
  for (auto ok : {"0", "0.25", "0.9999", "1", "8"}) {
    EXPECT_TRUE(ValidateFractionOrWholeQuantity("GPU", Q(ok)).ok()) << ok;
  }
  for (auto bad : {"1.5", "2.0001"}) {
    auto s = ValidateFractionOrWholeQuantity("GPU", Q(bad));
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find("GPU"), std::string::npos);
  }
  EXPECT_FALSE(ValidateFractionOrWholeQuantity("GPU", Quantity::FromInt(-1)).ok());
}

TEST(QuantityRulesTest, WholeOnly) {
  EXPECT_TRUE(ValidateWholeQuantity("HPU", Q("0")).ok());
  EXPECT_TRUE(ValidateWholeQuantity("HPU", Q("4")).ok());
  EXPECT_EQ(ValidateWholeQuantity("HPU", Q("0.5")).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ValidateWholeQuantity("HPU", Q("1.5")).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(ValidateWholeQuantity("HPU", Quantity::FromInt(-2)).ok());
}

}  // namespace
}  // namespace tessera
