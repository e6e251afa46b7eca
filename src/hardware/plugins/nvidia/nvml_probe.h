// ReadNvml: one NVML session (init, queries, shutdown) turned into plain values, so everything
// after it (PCI claim check, link building, labels) is ordinary code testable without a driver.
// Thread-safe: no shared state; NVML reference-counts init/shutdown.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace tessera {

// What is at the far end of one NVLink.
enum class NvLinkRemote {
  kGpu,
  kSwitch,
  kOther,    // IBM NPU (POWER9 CPUs) or a type NVML reports as unknown
  kUnknown,  // the driver lacks nvmlDeviceGetNvLinkRemoteDeviceType; decide from the bus id
};

struct NvmlLink {
  unsigned int link = 0;      // link number on the device
  std::string remote_bus_id;  // sysfs form "0000:05:00.0", "" when NVML did not say
  NvLinkRemote remote = NvLinkRemote::kUnknown;
  unsigned int version = 0;  // nvmlNvlinkVersion_t, 0 when unknown
};

// A multi-host NVLink domain membership (GB200 NVL72 and the like).
struct NvmlFabric {
  std::string cluster_uuid;  // "8-4-4-4-12" lower-case hex
  unsigned int clique_id = 0;
};

struct NvmlGpu {
  int index = 0;     // NVML index = CUDA ordinal under CUDA_DEVICE_ORDER=PCI_BUS_ID
  std::string name;  // "NVIDIA H100 80GB HBM3"
  std::string uuid;  // "GPU-..."
  uint64_t memory_bytes = 0;
  std::string bus_id;           // sysfs form "0000:1b:00.0"
  uint32_t pci_device_id = 0;   // NVML's (device << 16) | vendor
  std::vector<NvmlLink> links;  // active links only
  std::optional<NvmlFabric> fabric;
};

struct NvmlSnapshot {
  std::string library;                // what was opened
  std::string driver_version;         // "570.133.20"
  std::vector<NvmlGpu> gpus;          // NVML index order
  std::vector<std::string> warnings;  // a device NVML could not describe, ...
  std::vector<std::string> evidence;  // entry points missing on an older driver, ...
};

// Loads `library`, reads every device and shuts NVML down again. An error (library missing,
// entry point missing, nvmlInit_v2 or nvmlDeviceGetCount_v2 failing) carries the reason the
// caller puts into its "NVML not available (<reason>)" warning.
absl::StatusOr<NvmlSnapshot> ReadNvml(const std::string& library);

// NVML's "00000000:1B:00.0" (or the legacy "0000:1B:00.0") in sysfs form, "0000:1b:00.0".
// Returns "" when `nvml_bus_id` is not a bus id.
std::string NormalizeNvmlBusId(std::string_view nvml_bus_id);

}  // namespace tessera
