#include "scheduling/scheduling_request.h"

#include "absl/strings/str_cat.h"
#include "base/string_util.h"
#include "scheduling/resource_families.h"

namespace tessera {

absl::Status ValidateSchedulingRequest(const SchedulingRequest& request) {
  for (const auto& [resource, quantity] : request.resources) {
    if (absl::Status s = ValidateResourceName(resource); !s.ok()) return s;
    const AcceleratorPlugin* family = FamilyOwningResource(resource);
    if (family == nullptr || !family->unit_instance()) continue;
    if (absl::Status s = family->ValidateQuantity(quantity); !s.ok()) {
      return absl::InvalidArgumentError(s.message());
    }
    // Whatever the family allows, a device is shared only below one whole device.
    if (!quantity.IsInteger() && quantity > Quantity::FromInt(1)) {
      return absl::InvalidArgumentError(absl::StrCat(
          resource, ": ", quantity.ToString(),
          " must be a whole number of devices or a fraction below 1 (one shared device)"));
    }
  }
  if (request.bundle_target.has_value()) {
    if (request.bundle_target->group.empty()) {
      return absl::InvalidArgumentError("bundle target: the placement group is empty");
    }
    if (request.bundle_target->bundle < -1) {
      return absl::InvalidArgumentError(
          absl::StrCat("bundle target: bundle index ", request.bundle_target->bundle,
                       " must be -1 (any bundle) or a bundle's index"));
    }
  }
  return absl::OkStatus();
}

}  // namespace tessera
