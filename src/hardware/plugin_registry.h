// The one list of accelerator families. Order is claim priority: when two families advertise the
// same resource name ("GPU"), the earlier one owns it on a node (documented in docs/hardware.md).
// Thread-safe: the list is built once and never changes.
#pragma once

#include <string_view>
#include <vector>

#include "hardware/accelerator_plugin.h"

namespace tessera {

// nvidia, amd, intel-gpu, tpu, neuron, gaudi — in that order.
const std::vector<const AcceleratorPlugin*>& AcceleratorPlugins();

// The plugin of `family`, or nullptr.
const AcceleratorPlugin* FindAcceleratorPlugin(std::string_view family);

}  // namespace tessera
