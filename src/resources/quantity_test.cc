#include "resources/quantity.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace tessera {
namespace {

using ::testing::HasSubstr;

Quantity Q(std::string_view text) {
  auto q = Quantity::Parse(text);
  EXPECT_TRUE(q.ok()) << q.status();
  return q.value_or(Quantity());
}

std::string ParseError(std::string_view text) {
  auto q = Quantity::Parse(text);
  EXPECT_FALSE(q.ok()) << text << " parsed as " << *q;
  return q.ok() ? "" : std::string(q.status().message());
}

TEST(QuantityTest, ParsesDecimalsExactly) {
  EXPECT_EQ(Q("2.5").raw(), 25000);
  EXPECT_EQ(Q("8").raw(), 80000);
  EXPECT_EQ(Q("0.0001").raw(), 1);
  EXPECT_EQ(Q("007").raw(), 70000);
  EXPECT_EQ(Q("0").raw(), 0);
  EXPECT_EQ(Q("0.0").raw(), 0);
  EXPECT_EQ(Q(" 3 ").raw(), 30000);
  EXPECT_EQ(Q("1.50000").raw(), 15000);  // zeros past the 4th place lose nothing
  EXPECT_EQ(Q("922337203685477.5807").raw(), std::numeric_limits<int64_t>::max());
}

TEST(QuantityTest, RejectsEveryBadInputNamingIt) {
  EXPECT_EQ(ParseError("0.00001"),
            "\"0.00001\" has more than 4 decimal places (the smallest quantity is 0.0001)");
  EXPECT_EQ(ParseError("1.23456"),
            "\"1.23456\" has more than 4 decimal places (the smallest quantity is 0.0001)");
  EXPECT_EQ(ParseError("-1"), "\"-1\" is negative");
  EXPECT_EQ(ParseError("-0.5"), "\"-0.5\" is negative");
  EXPECT_EQ(ParseError("nan"), "\"nan\" is not a finite number");
  EXPECT_EQ(ParseError("-Inf"), "\"-Inf\" is not a finite number");
  EXPECT_EQ(ParseError("infinity"), "\"infinity\" is not a finite number");
  EXPECT_EQ(ParseError(""), "\"\" is empty; expected a number like 2.5");
  EXPECT_EQ(ParseError("  "), "\"  \" is empty; expected a number like 2.5");
  const std::string garbage =
      " is not a decimal number (expected digits with an optional fraction, like 2.5)";
  EXPECT_EQ(ParseError("abc"), "\"abc\"" + garbage);
  EXPECT_EQ(ParseError("1e3"), "\"1e3\"" + garbage);
  EXPECT_EQ(ParseError("+1"), "\"+1\"" + garbage);
  EXPECT_EQ(ParseError(".5"), "\".5\"" + garbage);
  EXPECT_EQ(ParseError("5."), "\"5.\"" + garbage);
  EXPECT_EQ(ParseError("1.2.3"), "\"1.2.3\"" + garbage);
  EXPECT_EQ(ParseError("1 2"), "\"1 2\"" + garbage);
  EXPECT_EQ(ParseError("0x10"), "\"0x10\"" + garbage);
  EXPECT_EQ(ParseError("922337203685477.5808"),
            "\"922337203685477.5808\" is too large (at most 922337203685477.5807)");
  EXPECT_EQ(ParseError("922337203685478"),
            "\"922337203685478\" is too large (at most 922337203685477.5807)");
  EXPECT_EQ(ParseError("99999999999999999999999999"),
            "\"99999999999999999999999999\" is too large (at most 922337203685477.5807)");
}

TEST(QuantityTest, ToStringIsShortestExactForm) {
  EXPECT_EQ(Q("2.5").ToString(), "2.5");
  EXPECT_EQ(Q("8").ToString(), "8");
  EXPECT_EQ(Q("0.0001").ToString(), "0.0001");
  EXPECT_EQ(Q("0.1200").ToString(), "0.12");
  EXPECT_EQ(Quantity().ToString(), "0");
  EXPECT_EQ(Quantity::FromRaw(-12500).ToString(), "-1.25");
  EXPECT_EQ(Quantity::FromRaw(std::numeric_limits<int64_t>::min()).ToString(),
            "-922337203685477.5808");
}

TEST(QuantityTest, ParseOfToStringRoundTrips) {
  for (int64_t raw : {int64_t{0}, int64_t{1}, int64_t{9999}, int64_t{10000}, int64_t{10001},
                      int64_t{123456789}, std::numeric_limits<int64_t>::max()}) {
    const Quantity q = Quantity::FromRaw(raw);
    EXPECT_EQ(Q(q.ToString()), q) << raw;
  }
}

TEST(QuantityTest, ArithmeticIsExact) {
  auto sum = Quantity::CheckedAdd(Q("0.1"), Q("0.2"));
  ASSERT_TRUE(sum.ok());
  EXPECT_EQ(*sum, Q("0.3"));
  auto difference = Quantity::CheckedSub(Q("1"), Q("0.0001"));
  ASSERT_TRUE(difference.ok());
  EXPECT_EQ(difference->ToString(), "0.9999");
  Quantity total;
  for (int i = 0; i < 10; ++i) total = *Quantity::CheckedAdd(total, Q("0.1"));
  EXPECT_EQ(total, Quantity::FromInt(1));
}

TEST(QuantityTest, OverflowIsAnErrorNotAWrap) {
  const Quantity max = Quantity::FromRaw(std::numeric_limits<int64_t>::max());
  auto sum = Quantity::CheckedAdd(max, Quantity::FromRaw(1));
  ASSERT_FALSE(sum.ok());
  EXPECT_EQ(sum.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(sum.status().message(), "quantity overflow: 922337203685477.5807 + 0.0001");
  auto difference =
      Quantity::CheckedSub(Quantity::FromRaw(std::numeric_limits<int64_t>::min()), Q("1"));
  ASSERT_FALSE(difference.ok());
  EXPECT_EQ(difference.status().message(), "quantity overflow: -922337203685477.5808 - 1");
  // Going below zero is fine for a Quantity; ResourceSet is what forbids it.
  EXPECT_EQ(Quantity::CheckedSub(Q("1"), Q("2"))->ToString(), "-1");
}

TEST(QuantityTest, FromIntAndAccessors) {
  EXPECT_EQ(Quantity::FromInt(3).raw(), 30000);
  EXPECT_TRUE(Quantity::FromInt(3).IsInteger());
  EXPECT_FALSE(Q("2.5").IsInteger());
  EXPECT_EQ(Q("2.5").WholePart(), 2);
  EXPECT_EQ(Quantity::FromRaw(-25000).WholePart(), -2);
  EXPECT_DOUBLE_EQ(Q("2.5").ToDouble(), 2.5);
  EXPECT_TRUE(Quantity().IsZero());
  EXPECT_FALSE(Q("0.0001").IsZero());
  EXPECT_TRUE(Quantity::FromIntChecked(Quantity::kMaxWhole).ok());
  auto too_big = Quantity::FromIntChecked(Quantity::kMaxWhole + 1);
  ASSERT_FALSE(too_big.ok());
  EXPECT_EQ(too_big.status().message(),
            "quantity 922337203685478 is out of range (at most 922337203685477)");
}

TEST(QuantityTest, ComparesByValue) {
  EXPECT_LT(Q("0.5"), Q("1"));
  EXPECT_GT(Q("1.0001"), Q("1"));
  EXPECT_EQ(Q("1.0"), Quantity::FromInt(1));
  EXPECT_NE(Q("1"), Q("1.0001"));
}

TEST(QuantityDeathTest, FromIntOutOfRangeAborts) {
  EXPECT_DEATH(Quantity::FromInt(Quantity::kMaxWhole + 1), "out of range");
}

TEST(QuantityTest, FromDoubleIsExactToFourPlacesAndRefusesTheRest) {
  EXPECT_EQ(Quantity::FromDouble(0.5).value(), Quantity::Parse("0.5").value());
  EXPECT_EQ(Quantity::FromDouble(0.1).value(), Quantity::Parse("0.1").value());
  EXPECT_EQ(Quantity::FromDouble(0.0001).value(), Quantity::FromRaw(1));
  EXPECT_EQ(Quantity::FromDouble(8).value(), Quantity::FromInt(8));
  EXPECT_EQ(Quantity::FromDouble(2.3456).value(), Quantity::Parse("2.3456").value());
  EXPECT_EQ(Quantity::FromDouble(1e12).value(), Quantity::FromInt(1000000000000));
  EXPECT_EQ(Quantity::FromDouble(0).value(), Quantity());
  for (double bad : {-1.0, 0.00001, 1.23456, std::nan(""), HUGE_VAL, 1e18}) {
    auto got = Quantity::FromDouble(bad);
    ASSERT_FALSE(got.ok()) << bad;
    EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(got.status().message(), HasSubstr("quantity ")) << bad;
  }
}

}  // namespace
}  // namespace tessera
