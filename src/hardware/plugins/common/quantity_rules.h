// The two quantity rules of reference §6 that these families share: GPUs take a fraction below
// one or whole devices; neuron_cores and HPU take whole numbers only. Part of
// tessera_plugin_support. Thread-safe: free functions without state.
#pragma once

#include <string_view>

#include "absl/status/status.h"
#include "resources/quantity.h"

namespace tessera {

// OK for 0 < q < 1 (shares one device) and whole q; InvalidArgument for negative q and for
// non-integers above one ("GPU: 1.5 ...").
absl::Status ValidateFractionOrWholeQuantity(std::string_view resource, const Quantity& quantity);

// OK for whole, non-negative q; InvalidArgument otherwise.
absl::Status ValidateWholeQuantity(std::string_view resource, const Quantity& quantity);

}  // namespace tessera
