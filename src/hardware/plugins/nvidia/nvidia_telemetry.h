// The nvidia family's telemetry reader: one NVML session (opened by the first Read, kept until
// the reader is destroyed, reopened after NVML reports itself uninitialised) read per GPU:
//   nvmlDeviceGetUtilizationRates   -> utilization_ratio (gpu), memory_busy_ratio (memory)
//   nvmlDeviceGetMemoryInfo         -> memory_used_bytes, memory_total_bytes
//   nvmlDeviceGetPowerUsage (mW)    -> power_watts
//   nvmlDeviceGetTotalEnergyConsumption (mJ) -> energy_joules
//   nvmlDeviceGetTemperatureV, else nvmlDeviceGetTemperature (NVML_TEMPERATURE_GPU, °C)
//                                   -> temperature_celsius
//   GPM (Hopper and newer; nvmlGpmQueryDeviceSupport): one sample per Read, metrics between the
//   previous sample and this one when they are >= 100 ms apart (so from the second Read on):
//   SM_UTIL, ANY_TENSOR_UTIL, DRAM_BW_UTIL -> sm_activity_ratio, tensor_activity_ratio,
//   memory_bandwidth_ratio.
// A query that returns NVML_ERROR_NOT_SUPPORTED (or an entry point an older driver lacks)
// leaves its figures absent silently; any other error leaves them absent with a warning.
// Devices are matched to NVML by PCI bus id, else UUID. Not thread-safe (one reader, one caller).
#pragma once

#include <memory>

#include "hardware/telemetry_reader.h"

namespace tessera {

// The library is found as detection finds it (NvmlLibraryFor), with
// TelemetryOptions::nvml_library in the place of DetectionOptions::nvml_library.
std::unique_ptr<TelemetryReader> MakeNvidiaTelemetryReader(const TelemetryContext& context);

}  // namespace tessera
