#include "hardware/plugins/common/quantity_rules.h"

#include "absl/strings/str_cat.h"
#include "base/string_util.h"

namespace tessera {
namespace {

// A request names only resources it wants: zero is refused rather than read as "none", so a
// typo such as GPU=0 for GPU=0.5 is caught where it is made.
absl::Status RequirePositive(std::string_view resource, const Quantity& quantity) {
  if (quantity.IsNegative()) {
    return absl::InvalidArgumentError(
        absl::StrCat(ToAbsl(resource), ": ", quantity.ToString(), " is negative"));
  }
  if (quantity.IsZero()) {
    return absl::InvalidArgumentError(
        absl::StrCat(ToAbsl(resource), ": ", quantity.ToString(),
                     " is not a positive quantity; omit the resource to request none"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateFractionOrWholeQuantity(std::string_view resource, const Quantity& quantity) {
  if (absl::Status s = RequirePositive(resource, quantity); !s.ok()) return s;
  if (quantity.IsInteger() || quantity < Quantity::FromInt(1)) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(ToAbsl(resource), ": ", quantity.ToString(),
                   " must be a whole number of devices or a fraction below 1 (one shared device)"));
}

absl::Status ValidateWholeQuantity(std::string_view resource, const Quantity& quantity) {
  if (absl::Status s = RequirePositive(resource, quantity); !s.ok()) return s;
  if (quantity.IsInteger()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(ToAbsl(resource), ": ", quantity.ToString(),
                                                 " must be a whole number (no fractions)"));
}

}  // namespace tessera
