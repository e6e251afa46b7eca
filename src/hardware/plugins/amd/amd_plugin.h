// The amd accelerator family: AMD Instinct / Radeon GPUs found through the KFD topology
// (amd_detection.h), resource "GPU", mask HIP_VISIBLE_DEVICES (ordinals, or GPU-<uuid> entries),
// device figures from amdgpu sysfs and hwmon (amd_telemetry.h), RAS error counters for failure
// reasons (amd_error_reader.h).
#pragma once

#include <memory>

#include "hardware/accelerator_plugin.h"

namespace tessera {

std::unique_ptr<AcceleratorPlugin> MakeAmdPlugin();

}  // namespace tessera
