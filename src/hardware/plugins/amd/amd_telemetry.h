// The amd family's telemetry reader: amdgpu's sysfs attributes of each GPU's PCI function
// (/sys/bus/pci/devices/<bus>/, what /sys/class/drm/cardN/device points at) and its "amdgpu"
// hwmon directory, read afresh on every Read (no state between readings):
//   gpu_busy_percent, mem_busy_percent (%)     -> utilization_ratio, memory_busy_ratio
//   mem_info_vram_used, mem_info_vram_total   -> memory_used_bytes, memory_total_bytes
//   hwmon power1_average, else power1_input (µW; products may lack one) -> power_watts
//   hwmon temp "edge" (temp1), else "junction" (temp2, products without an edge sensor such as
//   MI300) (m°C)                              -> temperature_celsius
//   hwmon temp "mem" (temp3)                  -> memory_temperature_celsius
// amdgpu's sysfs has no energy counter, duty cycle or tensor activity: those stay absent.
// Not thread-safe (one reader, one caller); a Read is a dozen small file reads per GPU.
#pragma once

#include <memory>

#include "hardware/telemetry_reader.h"

namespace tessera {

std::unique_ptr<TelemetryReader> MakeAmdTelemetryReader(const TelemetryContext& context);

}  // namespace tessera
