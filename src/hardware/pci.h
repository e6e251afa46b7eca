// PCI inventory read from sysfs: every function under /sys/bus/pci/devices with the attributes
// that device claiming needs (vendor, class, bound driver, IOMMU group, NUMA node) and its place
// in the PCI hierarchy (for device-to-NIC locality). Not thread-safe; copyable value.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hardware/sysroot.h"

namespace tessera {

inline constexpr uint16_t kPciVendorNvidia = 0x10de;
inline constexpr uint16_t kPciVendorAmd = 0x1002;
inline constexpr uint16_t kPciVendorIntel = 0x8086;
inline constexpr uint16_t kPciVendorGoogle = 0x1ae0;
inline constexpr uint16_t kPciVendorHabana = 0x1da3;
inline constexpr uint16_t kPciVendorAmazon = 0x1d0f;

struct PciFunction {
  std::string bus_id;  // "0000:18:00.0"
  uint16_t vendor_id = 0;
  uint16_t device_id = 0;
  uint32_t class_code = 0;  // 24 bits, e.g. 0x030200 (3D controller)
  std::string driver;       // name of the bound driver, "" when none
  int numa_node = -1;       // -1 when the platform does not say
  std::optional<int> iommu_group;
  // Resolved sysfs path, e.g. "/sys/devices/pci0000:17/0000:17:00.0/0000:18:00.0": the chain of
  // bridges above the function, used to find devices behind the same PCIe switch.
  std::string sysfs_path;

  uint8_t base_class() const { return static_cast<uint8_t>(class_code >> 16); }
  // Display controllers (0x03xxxx) and processing accelerators (0x12xxxx).
  bool IsDisplayOrAccelerator() const { return base_class() == 0x03 || base_class() == 0x12; }
  bool IsNetworkController() const { return base_class() == 0x02; }
};

class PciInventory {
 public:
  PciInventory() = default;
  explicit PciInventory(std::vector<PciFunction> functions);

  // Reads /sys/bus/pci/devices. A function whose attributes cannot be read is skipped and a
  // warning explains why; a missing PCI bus (containers, VMs) is an empty inventory.
  static PciInventory Scan(const Sysroot& sysroot, std::vector<std::string>* warnings);

  const std::vector<PciFunction>& functions() const { return functions_; }
  const PciFunction* Find(std::string_view bus_id) const;
  std::vector<const PciFunction*> ByVendor(uint16_t vendor_id) const;

 private:
  std::vector<PciFunction> functions_;  // sorted by bus_id
};

// Number of leading path components two sysfs paths share: the deeper, the closer in the PCI
// tree (same root port < same switch < same device).
int PciPathAffinity(std::string_view a, std::string_view b);

// Formats a vendor or device id the way lspci does: "10de".
std::string HexId(uint32_t id, int width = 4);

}  // namespace tessera
