// The intel-gpu accelerator family: discrete Intel GPUs (intel_gpu_detection.h), resource "GPU",
// mask ONEAPI_DEVICE_SELECTOR in the form "level_zero:0,1", device figures from the i915 / xe hwmon
// (intel_gpu_telemetry.h).
#pragma once

#include <memory>

#include "hardware/accelerator_plugin.h"

namespace tessera {

std::unique_ptr<AcceleratorPlugin> MakeIntelGpuPlugin();

}  // namespace tessera
