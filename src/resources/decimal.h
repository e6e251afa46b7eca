// Scanner for the plain decimals every numeric parser in this module accepts ("2.5", "8",
// "0.0001"), so quantities and byte sizes reject the same inputs with the same words.
#pragma once

#include <string_view>

#include "absl/status/statusor.h"

namespace tessera::resources_internal {

// The significant digits of a non-negative decimal. Views into the scanned text.
struct DecimalDigits {
  std::string_view integer;   // without leading zeros; empty when the integer part is 0
  std::string_view fraction;  // without trailing zeros; empty when the number is whole
};

// Scans `number`, which must be digits with an optional '.' and more digits (no sign, exponent,
// or surrounding space). Errors quote `token`, the text the user wrote (it may carry a unit).
absl::StatusOr<DecimalDigits> ScanDecimal(std::string_view number, std::string_view token);

}  // namespace tessera::resources_internal
