// Quantity: the amount of one resource, fixed point with 4 decimal places (1 unit = 0.0001), so
// sums and differences are exact (0.1 + 0.2 == 0.3) and every node agrees on the same numbers.
#pragma once

#include <compare>
#include <cstdint>
#include <limits>
#include <ostream>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace tessera {

// Not thread-safe; copyable value.
class Quantity {
 public:
  // Raw units per whole unit: the smallest quantity is 1 / kScale = 0.0001.
  static constexpr int64_t kScale = 10000;
  static constexpr int kDecimalPlaces = 4;
  // The largest whole number a Quantity holds: 922337203685477 (raw INT64_MAX / kScale).
  static constexpr int64_t kMaxWhole = std::numeric_limits<int64_t>::max() / kScale;

  constexpr Quantity() = default;

  // Parses a non-negative decimal: "2.5", "8", "0.0001", "007" (surrounding spaces are trimmed).
  // More than 4 significant decimal places ("0.00001") is an error, never rounded; trailing
  // zeros past the 4th place ("1.50000") are exact and accepted. Negative numbers, NaN/inf,
  // signs, exponents, empty text, garbage and values above kMaxWhole are errors whose message
  // quotes the offending text.
  static absl::StatusOr<Quantity> Parse(std::string_view text);

  // `whole` must lie in [-kMaxWhole, kMaxWhole]; outside it aborts (a programming error). Use
  // FromIntChecked for numbers that come from outside.
  static Quantity FromInt(int64_t whole);
  static absl::StatusOr<Quantity> FromIntChecked(int64_t whole);
  static constexpr Quantity FromRaw(int64_t raw) { return Quantity(raw); }
  // A number a program computed (Python's num_gpus=0.5, the C++ API's {"GPU", 0.5}): NaN,
  // infinities, negatives, values above kMaxWhole and more than 4 decimal places (beyond what a
  // double's rounding explains: 0.1 is 0.1) are errors naming the number. Exact for every value
  // a Quantity holds that a double writes exactly to 4 places.
  static absl::StatusOr<Quantity> FromDouble(double value);

  // Exact arithmetic; an int64 overflow of the raw value is an error, never a wrap.
  static absl::StatusOr<Quantity> CheckedAdd(Quantity a, Quantity b);
  static absl::StatusOr<Quantity> CheckedSub(Quantity a, Quantity b);

  constexpr int64_t raw() const { return raw_; }
  constexpr bool IsZero() const { return raw_ == 0; }
  constexpr bool IsNegative() const { return raw_ < 0; }
  constexpr bool IsInteger() const { return raw_ % kScale == 0; }
  // The integer part, truncated toward zero (2.5 -> 2).
  constexpr int64_t WholePart() const { return raw_ / kScale; }
  // For display and ratios only; decisions use the exact raw value.
  double ToDouble() const { return static_cast<double>(raw_) / kScale; }

  // Shortest exact decimal: "2.5", "8", "0.0001", "-1.25". Parse(ToString()) returns the same
  // value for every non-negative Quantity.
  std::string ToString() const;

  friend constexpr auto operator<=>(Quantity a, Quantity b) = default;
  friend constexpr bool operator==(Quantity a, Quantity b) = default;
  friend std::ostream& operator<<(std::ostream& os, Quantity q) { return os << q.ToString(); }
  template <typename H>
  friend H AbslHashValue(H h, Quantity q) {
    return H::combine(std::move(h), q.raw_);
  }

 private:
  constexpr explicit Quantity(int64_t raw) : raw_(raw) {}

  int64_t raw_ = 0;
};

}  // namespace tessera
