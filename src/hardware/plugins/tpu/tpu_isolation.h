// TPU chip masks and the libtpu bounds variables for a worker (reference/accelerators.md §7.9).
// Devices are TPU resource units: with r units per chip, device c*r+k is unit k of chip c, and
// masks name chips, so unit ids collapse to chips on write and expand on read. Bounds come from
// the chips' coordinates in the host's chip grid (device attribute "host_coords"), never from a
// table. Pure functions; thread-safe.
#pragma once

#include <span>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "hardware/accelerator_plugin.h"
#include "hardware/device.h"

namespace tessera {

inline constexpr std::string_view kTpuVisibleChips = "TPU_VISIBLE_CHIPS";
inline constexpr std::string_view kTpuChipsPerHostBounds = "TPU_CHIPS_PER_HOST_BOUNDS";
inline constexpr std::string_view kTpuHostBounds = "TPU_HOST_BOUNDS";

// The chip of a device: its "chip" attribute, else index / r (r from "resources_per_chip", 1 when
// absent).
int ChipOfDevice(const Device& device);

// Sorted, distinct chips of the devices with the given indices.
std::vector<int> ChipsOfIndices(std::span<const int> indices, const std::vector<Device>& devices);

// Reads a TPU_VISIBLE_CHIPS value (chip list) into device indices: every unit of each named chip,
// in mask order. "" and "NoDevFiles" mean none. A chip with no detected device maps to
// c*r..c*r+r-1, so callers can report it as not found.
absl::StatusOr<std::vector<int>> ParseTpuMask(std::string_view value,
                                              const std::vector<Device>& devices);

// The worker environment for `assigned` device indices out of the host's `devices`:
//  - every chip of the host: unset TPU_VISIBLE_CHIPS and both bounds variables, so libtpu uses
//    its slice-wide defaults (required on multi-host slices);
//  - a set of chips that fills a box of the host grid: TPU_VISIBLE_CHIPS, TPU_CHIPS_PER_HOST_BOUNDS
//    = the box (1 chip "1,1,1"; 2 neighbours "2,1,1" or "1,2,1"; a 2x2 of 8 "2,2,1") and
//    TPU_HOST_BOUNDS=1,1,1;
//  - any other set: TPU_VISIBLE_CHIPS only, and both bounds unset. No box describes such a set,
//    and a host-wide value inherited from GKE (e.g. 2,2,1) would contradict the mask.
EnvChanges TpuIsolationEnv(std::span<const int> assigned, const std::vector<Device>& devices);

}  // namespace tessera
