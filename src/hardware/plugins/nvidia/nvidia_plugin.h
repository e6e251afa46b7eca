// The nvidia accelerator family: resource "GPU", mask CUDA_VISIBLE_DEVICES.
//   Detect: NVML (dlopen'd) with a PCI claim check, else sysfs + /proc/driver/nvidia
//           (nvidia_detect.h).
//   ValidateQuantity: 0 < q < 1 (a share of one GPU) or a whole number (the shared rule).
//   ParseMask: ordinals and GPU-<uuid> entries; MIG-<uuid> entries are refused for now.
//   IsolationEnv: CUDA_VISIBLE_DEVICES plus CUDA_DEVICE_ORDER=PCI_BUS_ID.
//   OpenTelemetry: NVML utilization, memory, power, energy, temperature, GPM activity
//                  (nvidia_telemetry.h).
//   OpenErrorWatch: Xid records of the kernel log (nvidia_error_reader.h).
// Thread-safe: stateless.
#pragma once

#include <memory>

#include "hardware/accelerator_plugin.h"

namespace tessera {

std::unique_ptr<AcceleratorPlugin> MakeNvidiaPlugin();

}  // namespace tessera
