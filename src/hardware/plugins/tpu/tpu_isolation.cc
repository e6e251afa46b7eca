#include "hardware/plugins/tpu/tpu_isolation.h"

#include <algorithm>
#include <map>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/string_util.h"
#include "vocabulary/chip_grid.h"

namespace tessera {
namespace {

int AttributeInt(const Device& d, const std::string& key, int fallback) {
  auto it = d.attributes.find(key);
  int value = 0;
  if (it != d.attributes.end() && absl::SimpleAtoi(it->second, &value) && value >= 0) return value;
  return fallback;
}

int ResourcesPerChip(const std::vector<Device>& devices) {
  return devices.empty() ? 1 : std::max(1, AttributeInt(devices.front(), "resources_per_chip", 1));
}

const Device* FindDevice(const std::vector<Device>& devices, int index) {
  for (const Device& d : devices) {
    if (d.index == index) return &d;
  }
  return nullptr;
}

}  // namespace

int ChipOfDevice(const Device& device) {
  const int r = std::max(1, AttributeInt(device, "resources_per_chip", 1));
  return AttributeInt(device, "chip", device.index / r);
}

std::vector<int> ChipsOfIndices(std::span<const int> indices, const std::vector<Device>& devices) {
  const int r = ResourcesPerChip(devices);
  std::set<int> chips;
  for (int index : indices) {
    const Device* d = FindDevice(devices, index);
    chips.insert(d != nullptr ? ChipOfDevice(*d) : index / r);
  }
  return std::vector<int>(chips.begin(), chips.end());
}

absl::StatusOr<std::vector<int>> ParseTpuMask(std::string_view value,
                                              const std::vector<Device>& devices) {
  std::vector<int> indices;
  const std::string_view trimmed = Trim(value);
  if (MaskSelectsNoDevice(trimmed)) return indices;
  const int r = ResourcesPerChip(devices);
  for (absl::string_view part : absl::StrSplit(ToAbsl(trimmed), ',')) {
    int chip = 0;
    if (!absl::SimpleAtoi(part, &chip) || chip < 0) {
      return absl::InvalidArgumentError(absl::StrCat(ToAbsl(kTpuVisibleChips), "=", Quote(value),
                                                     ": ", Quote(ToStd(part)),
                                                     " is not a chip index"));
    }
    bool found = false;
    for (const Device& d : devices) {
      if (ChipOfDevice(d) == chip) {
        indices.push_back(d.index);
        found = true;
      }
    }
    if (!found) {
      for (int k = 0; k < r; ++k) indices.push_back(chip * r + k);
    }
  }
  return indices;
}

EnvChanges TpuIsolationEnv(std::span<const int> assigned, const std::vector<Device>& devices) {
  const std::vector<int> chips = ChipsOfIndices(assigned, devices);
  std::set<int> host_chips;
  for (const Device& d : devices) host_chips.insert(ChipOfDevice(d));
  const bool all = !host_chips.empty() &&
                   std::includes(chips.begin(), chips.end(), host_chips.begin(), host_chips.end());
  if (all) {
    return {{std::string(kTpuVisibleChips), std::nullopt},
            {std::string(kTpuChipsPerHostBounds), std::nullopt},
            {std::string(kTpuHostBounds), std::nullopt}};
  }
  EnvChanges changes = {{std::string(kTpuVisibleChips), absl::StrJoin(chips, ",")}};

  // Each chip's place in the host grid; without it (devices not from detection) fall back to the
  // grid a host of this many chips has.
  std::map<int, ChipCoord> coords;
  for (const Device& d : devices) {
    auto it = d.attributes.find("host_coords");
    if (it == d.attributes.end()) continue;
    if (auto c = ParseCoord(it->second)) coords[ChipOfDevice(d)] = *c;
  }
  const std::optional<ChipCoord> block = HostChipBlock(static_cast<int>(host_chips.size()));
  std::vector<ChipCoord> assigned_coords;
  for (int chip : chips) {
    if (auto it = coords.find(chip); it != coords.end()) {
      assigned_coords.push_back(it->second);
    } else if (block.has_value()) {
      assigned_coords.push_back(CoordOfIndex(chip, *block));
    }
  }
  const std::optional<ChipCoord> box =
      assigned_coords.size() == chips.size() ? RectangleExtent(assigned_coords) : std::nullopt;
  if (box.has_value()) {
    changes.push_back({std::string(kTpuChipsPerHostBounds), BoundsString(*box)});
    changes.push_back({std::string(kTpuHostBounds), "1,1,1"});
  } else {
    changes.push_back({std::string(kTpuChipsPerHostBounds), std::nullopt});
    changes.push_back({std::string(kTpuHostBounds), std::nullopt});
  }
  return changes;
}

}  // namespace tessera
