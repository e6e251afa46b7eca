// NVIDIA detection: NVML when it loads and initialises, else sysfs and /proc/driver/nvidia, with
// every NVML device checked against the PCI inventory before it is counted.
// Thread-safe: no shared state (each call opens and closes its own NVML session).
#pragma once

#include <optional>
#include <string>

#include "hardware/accelerator_plugin.h"

namespace tessera {

// The NVML library detection opens: DetectionOptions::nvml_library, else the variable
// TESSERA_NVML_LIBRARY, else on the live machine the soname "libnvidia-ml.so.1", else (a fake
// tree) "<root>/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1" when the tree has one — never the
// host's own NVML for a fake tree. nullopt with `why_none` set when there is none to try.
std::optional<std::string> NvmlLibraryFor(const DetectionContext& context, std::string* why_none);
// The same search with `configured` in the place of DetectionOptions::nvml_library (the
// telemetry reader's TelemetryOptions::nvml_library).
std::optional<std::string> NvmlLibraryFor(const Sysroot& sysroot, const Environment& env,
                                          const std::string& configured, std::string* why_none);

// The "nvidia" family's Detect (see nvidia_plugin.h).
Detection DetectNvidia(const DetectionContext& context);

}  // namespace tessera
