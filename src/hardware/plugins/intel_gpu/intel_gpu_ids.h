// The allow-list of discrete Intel GPUs (vendor 0x8086) that the intel-gpu family counts, with
// their Level Zero device names and memory. Integrated GPUs and unknown ids are absent on
// purpose: Tessera schedules discrete GPUs only. Thread-safe: constant data.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace tessera {

struct IntelDiscreteGpu {
  uint16_t device_id;
  std::string_view name;  // as Level Zero reports it: "Intel(R) Data Center GPU Max 1550"
  uint64_t memory_bytes;  // device-local memory of the SKU
};

// nullptr when the id is not a known discrete GPU.
const IntelDiscreteGpu* FindIntelDiscreteGpu(uint16_t device_id);

// "Intel-GPU-" + the last two words of the device name joined by '-' (reference §2):
// "Intel(R) Data Center GPU Max 1550" -> "Intel-GPU-Max-1550".
std::string IntelGpuType(std::string_view device_name);

}  // namespace tessera
