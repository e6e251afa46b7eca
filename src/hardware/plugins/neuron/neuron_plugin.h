// The neuron accelerator family: AWS NeuronCores (neuron_detection.h), resource "neuron_cores",
// whole numbers only, mask NEURON_RT_VISIBLE_CORES (global core ids; "0-3" ranges accepted),
// device memory in use and power share from the driver's sysfs (neuron_telemetry.h), its error
// counters for failure reasons (neuron_error_reader.h).
#pragma once

#include <memory>

#include "hardware/accelerator_plugin.h"

namespace tessera {

std::unique_ptr<AcceleratorPlugin> MakeNeuronPlugin();

}  // namespace tessera
