#include "resources/decimal.h"

#include <string>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "base/string_util.h"

namespace tessera::resources_internal {
namespace {

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

bool AllDigits(std::string_view s) {
  for (char c : s) {
    if (!IsDigit(c)) return false;
  }
  return true;
}

}  // namespace

absl::StatusOr<DecimalDigits> ScanDecimal(std::string_view number, std::string_view token) {
  if (Trim(token).empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(Quote(token), " is empty; expected a number like 2.5"));
  }
  if (!number.empty() && number[0] == '-' && number.size() > 1 &&
      (IsDigit(number[1]) || number[1] == '.')) {
    return absl::InvalidArgumentError(absl::StrCat(Quote(token), " is negative"));
  }
  std::string lower = absl::AsciiStrToLower(ToAbsl(number));
  if (!lower.empty() && (lower[0] == '+' || lower[0] == '-')) lower.erase(0, 1);
  if (lower == "nan" || lower == "inf" || lower == "infinity") {
    return absl::InvalidArgumentError(absl::StrCat(Quote(token), " is not a finite number"));
  }
  const size_t dot = number.find('.');
  std::string_view integer = number.substr(0, dot);
  std::string_view fraction =
      dot == std::string_view::npos ? std::string_view() : number.substr(dot + 1);
  const bool well_formed =
      !integer.empty() && AllDigits(integer) &&
      (dot == std::string_view::npos || (!fraction.empty() && AllDigits(fraction)));
  if (!well_formed) {
    return absl::InvalidArgumentError(absl::StrCat(
        Quote(token),
        " is not a decimal number (expected digits with an optional fraction, like 2.5)"));
  }
  while (!integer.empty() && integer.front() == '0') integer.remove_prefix(1);
  while (!fraction.empty() && fraction.back() == '0') fraction.remove_suffix(1);
  return DecimalDigits{integer, fraction};
}

}  // namespace tessera::resources_internal
