// Finds a host's TPU chips on disk: /dev/accel<N> character devices of the TPU driver, else VFIO
// groups /dev/vfio/<group> whose IOMMU group holds a Google TPU function. Every candidate is
// mapped to its PCI function and counted only when vendor 0x1ae0 and a TPU device id agree
// (reference/accelerators.md §3, §8); a read error never counts a device (fail closed).
// Pure function of its inputs; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "hardware/pci.h"
#include "hardware/sysroot.h"
#include "vocabulary/tpu_generation.h"

namespace tessera {

struct TpuChip {
  std::string bus_id;  // "0000:00:04.0"
  uint16_t device_id = 0;
  TpuGeneration generation = TpuGeneration::kV6e;
  int numa_node = -1;
  std::string driver;       // bound PCI driver, "" when unknown
  std::string device_node;  // "/dev/accel0" or "/dev/vfio/12"
};

struct TpuChipScan {
  std::vector<TpuChip> chips;  // sorted by PCI bus id: chip index = position
  std::string probe;           // "accel", "vfio", or "" when neither found a chip
  std::vector<std::string> warnings;
  std::vector<std::string> evidence;
};

// `env_generation` (from TPU_ACCELERATOR_TYPE) lets a Google function with an unknown device id
// and a non-network class count as a chip of that generation, with a warning; without it such a
// function is not counted.
TpuChipScan ScanTpuChips(const Sysroot& sysroot, const PciInventory& pci,
                         std::optional<TpuGeneration> env_generation);

}  // namespace tessera
