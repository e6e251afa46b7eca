// Which accelerator family owns a resource name, for the per-device rules of unit-instance
// resources (GPU, TPU, neuron_cores, HPU, ...). Thread-safe: reads the immutable plugin registry.
#pragma once

#include <string_view>

#include "hardware/accelerator_plugin.h"

namespace tessera {

// The first family in claim priority order whose resource_name() is `resource`, or nullptr.
const AcceleratorPlugin* FamilyOwningResource(std::string_view resource);

// Tracked per device instance (capacity 1 each): owned by a family whose unit_instance() is true.
bool IsUnitInstanceResource(std::string_view resource);

// Whether the resource is an accelerator's: owned by some family (GPU, TPU, neuron_cores, HPU,
// ...), or a type marker (accelerator_type:H100).
bool IsAcceleratorResource(std::string_view resource);

}  // namespace tessera
