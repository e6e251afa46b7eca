#include "hardware/plugins/common/quantity_rules.h"

#include "absl/strings/str_cat.h"
#include "base/string_util.h"

namespace tessera {

absl::Status ValidateFractionOrWholeQuantity(std::string_view resource, const Quantity& quantity) {
  if (quantity.IsNegative()) {
    return absl::InvalidArgumentError(
        absl::StrCat(ToAbsl(resource), ": ", quantity.ToString(), " is negative"));
  }
  if (quantity.IsInteger() || quantity < Quantity::FromInt(1)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      ToAbsl(resource), ": ", quantity.ToString(),
      " must be a whole number of devices or a fraction below 1 (one shared device)"));
}

absl::Status ValidateWholeQuantity(std::string_view resource, const Quantity& quantity) {
  if (quantity.IsNegative()) {
    return absl::InvalidArgumentError(
        absl::StrCat(ToAbsl(resource), ": ", quantity.ToString(), " is negative"));
  }
  if (quantity.IsInteger()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      ToAbsl(resource), ": ", quantity.ToString(), " must be a whole number (no fractions)"));
}

}  // namespace tessera
