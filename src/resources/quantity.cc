#include "resources/quantity.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/string_util.h"
#include "resources/decimal.h"

namespace tessera {

absl::StatusOr<Quantity> Quantity::Parse(std::string_view text) {
  const std::string_view number = Trim(text);
  auto digits = resources_internal::ScanDecimal(number, text);
  if (!digits.ok()) return digits.status();
  if (digits->fraction.size() > static_cast<size_t>(kDecimalPlaces)) {
    return absl::InvalidArgumentError(absl::StrCat(
        Quote(text), " has more than 4 decimal places (the smallest quantity is 0.0001)"));
  }
  // 15 integer digits is the most kMaxWhole (922337203685477) can have; checking the length
  // first keeps the accumulation below from overflowing.
  constexpr size_t kMaxIntegerDigits = 15;
  if (digits->integer.size() > kMaxIntegerDigits) {
    return absl::InvalidArgumentError(
        absl::StrCat(Quote(text), " is too large (at most ", kMaxWhole, ".5807)"));
  }
  int64_t whole = 0;
  for (char c : digits->integer) whole = whole * 10 + (c - '0');
  int64_t fraction = 0;
  for (size_t i = 0; i < static_cast<size_t>(kDecimalPlaces); ++i) {
    fraction = fraction * 10 + (i < digits->fraction.size() ? digits->fraction[i] - '0' : 0);
  }
  if (whole > kMaxWhole ||
      (whole == kMaxWhole && fraction > std::numeric_limits<int64_t>::max() % kScale)) {
    return absl::InvalidArgumentError(
        absl::StrCat(Quote(text), " is too large (at most ", kMaxWhole, ".5807)"));
  }
  return Quantity(whole * kScale + fraction);
}

Quantity Quantity::FromInt(int64_t whole) {
  if (whole > kMaxWhole || whole < -kMaxWhole) {
    std::fprintf(stderr, "Quantity::FromInt(%lld): out of range\n", static_cast<long long>(whole));
    std::abort();
  }
  return Quantity(whole * kScale);
}

absl::StatusOr<Quantity> Quantity::FromIntChecked(int64_t whole) {
  if (whole > kMaxWhole || whole < -kMaxWhole) {
    return absl::InvalidArgumentError(
        absl::StrCat("quantity ", whole, " is out of range (at most ", kMaxWhole, ")"));
  }
  return Quantity(whole * kScale);
}

absl::StatusOr<Quantity> Quantity::FromDouble(double value) {
  if (std::isnan(value) || std::isinf(value)) {
    return absl::InvalidArgumentError(absl::StrCat("quantity ", value, " is not a number"));
  }
  if (value < 0)
    return absl::InvalidArgumentError(absl::StrCat("quantity ", value, " is negative"));
  if (value > static_cast<double>(kMaxWhole)) {
    return absl::InvalidArgumentError(
        absl::StrCat("quantity ", value, " is out of range (at most ", kMaxWhole, ")"));
  }
  const double scaled = value * kScale;
  const double units = std::round(scaled);
  // A double is exact to about 15 significant digits: what lies further from a whole number of
  // units than its own rounding can explain was written with more than 4 decimal places.
  if (std::fabs(scaled - units) > std::max(1e-6, std::fabs(scaled) * 1e-12)) {
    return absl::InvalidArgumentError(absl::StrCat("quantity ", value, " has more than ",
                                                   kDecimalPlaces,
                                                   " decimal places (the smallest "
                                                   "amount is 0.0001)"));
  }
  return Quantity(static_cast<int64_t>(units));
}

absl::StatusOr<Quantity> Quantity::CheckedAdd(Quantity a, Quantity b) {
  int64_t sum = 0;
  if (__builtin_add_overflow(a.raw_, b.raw_, &sum)) {
    return absl::OutOfRangeError(
        absl::StrCat("quantity overflow: ", a.ToString(), " + ", b.ToString()));
  }
  return Quantity(sum);
}

absl::StatusOr<Quantity> Quantity::CheckedSub(Quantity a, Quantity b) {
  int64_t difference = 0;
  if (__builtin_sub_overflow(a.raw_, b.raw_, &difference)) {
    return absl::OutOfRangeError(
        absl::StrCat("quantity overflow: ", a.ToString(), " - ", b.ToString()));
  }
  return Quantity(difference);
}

std::string Quantity::ToString() const {
  // Work on the unsigned magnitude so INT64_MIN prints too.
  const uint64_t magnitude =
      raw_ < 0 ? uint64_t{0} - static_cast<uint64_t>(raw_) : static_cast<uint64_t>(raw_);
  std::string out = raw_ < 0 ? "-" : "";
  absl::StrAppend(&out, magnitude / kScale);
  uint64_t fraction = magnitude % kScale;
  if (fraction != 0) {
    std::string digits = absl::StrCat(fraction + kScale).substr(1);  // zero-padded to 4 places
    while (digits.back() == '0') digits.pop_back();
    absl::StrAppend(&out, ".", digits);
  }
  return out;
}

}  // namespace tessera
