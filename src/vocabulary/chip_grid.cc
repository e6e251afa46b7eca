#include "vocabulary/chip_grid.h"

#include <algorithm>
#include <cstdlib>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/string_util.h"

namespace tessera {

std::optional<ChipCoord> HostChipBlock(int chips_per_host) {
  switch (chips_per_host) {
    case 1: return ChipCoord{1, 1, 1};
    case 4: return ChipCoord{2, 2, 1};
    case 8: return ChipCoord{2, 4, 1};
    default: return std::nullopt;
  }
}

ChipCoord PadExtent(const std::vector<int>& dims) {
  ChipCoord out{1, 1, 1};
  for (size_t i = 0; i < dims.size() && i < 3; ++i) out[i] = dims[i];
  return out;
}

ChipCoord CoordOfIndex(int i, const ChipCoord& extent) {
  return ChipCoord{i % extent[0], (i / extent[0]) % extent[1], i / (extent[0] * extent[1])};
}

bool AreAdjacent(const ChipCoord& a, const ChipCoord& b) {
  int distance = 0;
  for (int k = 0; k < 3; ++k) distance += std::abs(a[k] - b[k]);
  return distance == 1;
}

std::optional<ChipCoord> RectangleExtent(std::span<const ChipCoord> coords) {
  if (coords.empty()) return std::nullopt;
  const std::set<ChipCoord> distinct(coords.begin(), coords.end());
  if (distinct.size() != coords.size()) return std::nullopt;
  ChipCoord lo = coords[0], hi = coords[0];
  for (const ChipCoord& c : coords) {
    for (int k = 0; k < 3; ++k) {
      lo[k] = std::min(lo[k], c[k]);
      hi[k] = std::max(hi[k], c[k]);
    }
  }
  const ChipCoord extent{hi[0] - lo[0] + 1, hi[1] - lo[1] + 1, hi[2] - lo[2] + 1};
  // Distinct points inside the box that are as many as its cells fill it.
  if (static_cast<size_t>(extent[0]) * extent[1] * extent[2] != coords.size()) return std::nullopt;
  return extent;
}

std::string BoundsString(const ChipCoord& extent) { return absl::StrJoin(extent, ","); }
std::string CoordString(const ChipCoord& coord) { return absl::StrJoin(coord, ","); }

std::optional<ChipCoord> ParseCoord(std::string_view text) {
  std::vector<absl::string_view> parts = absl::StrSplit(ToAbsl(text), ',');
  if (parts.size() != 3) return std::nullopt;
  ChipCoord out{};
  for (int k = 0; k < 3; ++k) {
    if (!absl::SimpleAtoi(parts[k], &out[k]) || out[k] < 0) return std::nullopt;
  }
  return out;
}

}  // namespace tessera
