// DeviceTelemetry: one reading of one accelerator's live figures (utilization, memory, power,
// temperature, activity), in base units, each optional. A figure the family cannot measure, or
// could not read this time, is absent (nullopt), never 0: 0 means "measured, and zero".
// Ratios are in [0, 1] (Prometheus' convention for percentages); readers divide the drivers'
// percents by 100 and drop values outside the range with a warning.
// Plain values, copyable, not thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tessera {

struct DeviceTelemetry {
  std::string family;  // the device's family, e.g. "nvidia"
  int index = 0;       // its physical index (Device::index)
  // Where the figures came from: "nvml", "sysfs", "libtpu", "simulated"; "" when none was read.
  std::string source;

  // Share of the last sample window in which the device was running work (NVML
  // utilization.gpu, amdgpu gpu_busy_percent): busy time, not how much of the chip was used.
  std::optional<double> utilization_ratio;
  // Share of time the TensorCores ran a program (TPU duty cycle).
  std::optional<double> duty_cycle_ratio;
  // Average share of the streaming multiprocessors that were busy (NVIDIA GPM SM_UTIL).
  std::optional<double> sm_activity_ratio;
  // Share of time tensor / matrix units ran (NVIDIA GPM ANY_TENSOR_UTIL).
  std::optional<double> tensor_activity_ratio;
  // Share of time device memory was being read or written (NVML utilization.memory, amdgpu
  // mem_busy_percent).
  std::optional<double> memory_busy_ratio;
  // Memory bandwidth used over the theoretical peak (NVIDIA GPM DRAM_BW_UTIL, TPU HBM
  // utilization).
  std::optional<double> memory_bandwidth_ratio;

  std::optional<uint64_t> memory_used_bytes;
  std::optional<uint64_t> memory_total_bytes;

  std::optional<double> power_watts;
  // Power as a share of the device's maximum (AWS Neuron, which reports nothing in watts).
  std::optional<double> power_ratio;
  // Energy since the driver loaded: a counter (Prometheus prefers rate() of joules to a watts
  // gauge). May restart from 0 when the driver reloads.
  std::optional<double> energy_joules;

  // The die sensor: NVML's GPU sensor, amdgpu "edge" (else "junction" where a product has no
  // edge sensor), xe "pkg".
  std::optional<double> temperature_celsius;
  std::optional<double> memory_temperature_celsius;

  // What went wrong reading this device (a read error, a value out of range); not omissions
  // that are normal for the family.
  std::vector<std::string> warnings;

  // True when at least one figure is present.
  bool HasAnyFigure() const;
};

// One reading of a family's devices.
struct FamilyTelemetry {
  std::vector<DeviceTelemetry> devices;  // one per requested device, in request order
  // About the source as a whole ("NVML not available (...)"), said once rather than per device;
  // without the family's name (NodeTelemetry adds it).
  std::vector<std::string> warnings;
};

}  // namespace tessera
