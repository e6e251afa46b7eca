// The intel-gpu family's telemetry reader: the card's hwmon directory (named after its driver,
// "i915" or "xe"; per-tile "i915_gt<N>" directories are not the card's) under its PCI function:
//   energy1_input (µJ; i915 from Linux 6.2, xe from 6.5)  -> energy_joules
//   ΔE/Δt between this Read and the previous one         -> power_watts (absent on the first
//                                                            reading; power1_max is a limit and is
//                                                            never read as power)
//   xe temp "pkg" (temp2) and "vram" (temp3), m°C (6.15+) -> temperature_celsius,
//                                                            memory_temperature_celsius
// Utilization, memory use and, on i915, temperatures need Level Zero (zesEngineGetActivity,
// zesMemoryGetState, zesTemperatureGetState), which Tessera does not load: those stay absent.
// Not thread-safe: one reader (it keeps each card's previous energy sample), one caller.
#pragma once

#include <memory>

#include "hardware/telemetry_reader.h"

namespace tessera {

std::unique_ptr<TelemetryReader> MakeIntelGpuTelemetryReader(const TelemetryContext& context);

}  // namespace tessera
