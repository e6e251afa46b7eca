// Chip grids: where a chip sits in its host's block of chips and in its slice, as 3-value
// coordinates (x, y, z; a 2D topology has z = 0 and extent 1). The one place that fixes the
// numbering convention: chip and worker indices run x fastest, then y, then z, so chips 0-3 of an
// 8-chip 2x4 host form a 2x2 block (the split Google documents for two 4-chip processes).
// Pure functions; thread-safe.
#pragma once

#include <array>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tessera {

using ChipCoord = std::array<int, 3>;

// The block of chips one host owns: 1 -> 1x1x1, 4 -> 2x2x1, 8 -> 2x4x1; nullopt for other counts.
std::optional<ChipCoord> HostChipBlock(int chips_per_host);

// Pads a 2D or 3D extent to three values with 1s: {4,4} -> {4,4,1}.
ChipCoord PadExtent(const std::vector<int>& dims);

// Coordinates of index `i` in a grid of `extent`, x fastest: {2,2,1}: 0->(0,0,0), 1->(1,0,0),
// 2->(0,1,0). `i` must lie in the grid.
ChipCoord CoordOfIndex(int i, const ChipCoord& extent);

// True when two chips are ICI neighbours inside a host block: one step along one axis.
bool AreAdjacent(const ChipCoord& a, const ChipCoord& b);

// When `coords` (distinct) fill their bounding box exactly, the box's extent, e.g. {(0,0,0),
// (1,0,0)} -> {2,1,1}; nullopt for an empty set, duplicates or a non-rectangular set.
std::optional<ChipCoord> RectangleExtent(std::span<const ChipCoord> coords);

// "2,2,1": the form of TPU_HOST_BOUNDS and TPU_CHIPS_PER_HOST_BOUNDS.
std::string BoundsString(const ChipCoord& extent);
// "1,0,0": the form of chip coordinates in device attributes. ParseCoord reverses it.
std::string CoordString(const ChipCoord& coord);
std::optional<ChipCoord> ParseCoord(std::string_view text);

}  // namespace tessera
