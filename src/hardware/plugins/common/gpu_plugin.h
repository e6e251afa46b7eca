// GpuPlugin: what the plugins of the GPU families (nvidia, amd, intel-gpu) share. Their devices
// count toward the "GPU" resource, and a task may ask for a fraction of one GPU below 1 (sharing
// it) or for whole GPUs above it (quantity_rules.h). Part of tessera_plugin_support.
// Thread-safe: stateless.
#pragma once

#include <string_view>

#include "absl/status/status.h"
#include "hardware/accelerator_plugin.h"
#include "hardware/plugins/common/quantity_rules.h"
#include "resources/quantity.h"

namespace tessera {

class GpuPlugin : public AcceleratorPlugin {
 public:
  std::string_view resource_name() const override { return "GPU"; }

  absl::Status ValidateQuantity(const Quantity& quantity) const override {
    return ValidateFractionOrWholeQuantity(resource_name(), quantity);
  }
};

}  // namespace tessera
