// The two quantity rules of reference §6 that the families share: GPUs (nvidia, amd, intel-gpu)
// take a fraction below one or whole devices; neuron_cores and HPU take whole numbers only.
// Both refuse zero and negative requests. Part of tessera_plugin_support.
// Thread-safe: free functions without state.
#pragma once

#include <string_view>

#include "absl/status/status.h"
#include "resources/quantity.h"

namespace tessera {

// OK for 0 < q < 1 (shares one device) and whole q >= 1; InvalidArgument for q <= 0 and for
// non-integers above one ("GPU: 1.5 ...").
absl::Status ValidateFractionOrWholeQuantity(std::string_view resource, const Quantity& quantity);

// OK for whole q >= 1; InvalidArgument otherwise.
absl::Status ValidateWholeQuantity(std::string_view resource, const Quantity& quantity);

}  // namespace tessera
