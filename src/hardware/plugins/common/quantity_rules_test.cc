#include "hardware/plugins/common/quantity_rules.h"

#include "gtest/gtest.h"

namespace tessera {
namespace {

Quantity Q(std::string_view s) { return *Quantity::Parse(s); }

TEST(QuantityRulesTest, FractionOrWhole) {
  for (auto ok : {"0.0001", "0.25", "0.9999", "1", "8"}) {
    EXPECT_TRUE(ValidateFractionOrWholeQuantity("GPU", Q(ok)).ok()) << ok;
  }
  for (auto bad : {"1.5", "2.0001"}) {
    auto s = ValidateFractionOrWholeQuantity("GPU", Q(bad));
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_EQ(s.message(), std::string("GPU: ") + bad +
                               " must be a whole number of devices or a fraction below 1 (one "
                               "shared device)");
  }
  EXPECT_EQ(ValidateFractionOrWholeQuantity("GPU", Quantity::FromInt(-1)).message(),
            "GPU: -1 is negative");
}

TEST(QuantityRulesTest, WholeOnly) {
  EXPECT_TRUE(ValidateWholeQuantity("HPU", Q("1")).ok());
  EXPECT_TRUE(ValidateWholeQuantity("HPU", Q("4")).ok());
  EXPECT_EQ(ValidateWholeQuantity("HPU", Q("0.5")).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ValidateWholeQuantity("HPU", Q("1.5")).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ValidateWholeQuantity("HPU", Quantity::FromInt(-2)).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(QuantityRulesTest, ZeroIsRefusedByBothRules) {
  for (const auto& rule : {ValidateFractionOrWholeQuantity, ValidateWholeQuantity}) {
    const absl::Status s = rule("GPU", Quantity::FromInt(0));
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(s.message(), "GPU: 0 is not a positive quantity; omit the resource to request none");
  }
}

}  // namespace
}  // namespace tessera
