// Whole TPU detection for one host: chips (tpu_chip_scan.h), their devices (r resource units per
// chip), ICI links inside the host's chip grid, and the slice labels and markers from the
// environment (hardware/tpu/tpu_identity.h). Total: problems are warnings, never failures.
// Pure function of its context; thread-safe.
#pragma once

#include <string_view>

#include "hardware/accelerator_plugin.h"

namespace tessera {

// Positive integer; default from the generation (2 on v7x, else 1).
inline constexpr std::string_view kTpuResourcePerChipEnv = "TESSERA_TPU_RESOURCE_PER_CHIP";
// Upper bound for kTpuResourcePerChipEnv: no TPU has more TensorCores per chip than this.
inline constexpr int kMaxTpuResourcesPerChip = 8;

Detection DetectTpus(const DetectionContext& context);

}  // namespace tessera
