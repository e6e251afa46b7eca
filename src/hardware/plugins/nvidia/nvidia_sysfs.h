// NVIDIA GPUs found without NVML: from the PCI inventory and /proc/driver/nvidia, for hosts where
// the driver's user-space library is missing or broken (containers without the NVIDIA runtime
// hook, a driver/library version mismatch). Memory is unknown there. Pure reads through the
// sysroot; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "hardware/pci.h"
#include "hardware/sysroot.h"

namespace tessera {

// The fields of /proc/driver/nvidia/gpus/<bdf>/information that detection uses.
struct ProcGpuInformation {
  std::string model;         // "Model:"        NVIDIA H100 80GB HBM3
  std::string uuid;          // "GPU UUID:"     GPU-...
  std::string bus_location;  // "Bus Location:" 0000:1b:00.0
};
ProcGpuInformation ParseProcGpuInformation(std::string_view text);

// "570.133.20" from /proc/driver/nvidia/version's "NVRM version:" line; "" when absent.
std::string ParseNvrmVersion(std::string_view text);

struct SysfsGpu {
  std::string bus_id;
  std::string model;  // "" when /proc/driver/nvidia has no information file
  std::string uuid;
  int numa_node = -1;
  uint16_t device_id = 0;       // PCI device id, 0 without sysfs
  std::string pci_description;  // "10de:2330 class 0x030200 driver nvidia", "" without sysfs
};

struct SysfsGpuScan {
  std::vector<SysfsGpu> gpus;  // in PCI bus id order (= NVML / CUDA PCI_BUS_ID order)
  std::string driver_version;
  std::vector<std::string> evidence;
};

// A GPU is an NVIDIA function of class 0x0300 or 0x0302 bound to the "nvidia" driver or listed
// under /proc/driver/nvidia/gpus/. With no PCI bus in sysfs at all (some containers), the
// /proc/driver/nvidia/gpus/ entries alone are used.
SysfsGpuScan ScanNvidiaSysfs(const Sysroot& sysroot, const PciInventory& pci);

// True for a function the scan above would count.
bool IsSysfsNvidiaGpu(const Sysroot& sysroot, const PciFunction& f);

}  // namespace tessera
