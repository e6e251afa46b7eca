#include "vocabulary/sub_slice.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/string_util.h"
#include "vocabulary/chip_grid.h"

namespace tessera {
namespace {

std::string Label(const SliceShape& s) {
  return absl::StrCat(s.pod_type, " ", s.topology.ToString());
}

int IndexOfCoord(const ChipCoord& c, const ChipCoord& extent) {
  return c[0] + extent[0] * (c[1] + extent[1] * c[2]);
}

}  // namespace

absl::StatusOr<std::vector<std::vector<int>>> SubSliceBlocks(const SliceShape& parent,
                                                             const SliceShape& sub) {
  auto refuse = [&](auto&&... why) -> absl::Status {
    return absl::InvalidArgumentError(
        absl::StrCat(Label(sub), " is not a block of ", Label(parent), ": ", why...));
  };
  if (parent.generation != sub.generation) return refuse("another generation");
  if (parent.topology.dims.size() != sub.topology.dims.size()) {
    return refuse("another number of dimensions");
  }
  if (parent.host_block != sub.host_block) {
    return refuse("their hosts hold ", BoundsString(sub.host_block), " and ",
                  BoundsString(parent.host_block), " chips");
  }
  const ChipCoord outer = PadExtent(parent.worker_grid);
  const ChipCoord inner = PadExtent(sub.worker_grid);
  ChipCoord blocks{};
  for (int k = 0; k < 3; ++k) {
    if (inner[k] <= 0 || outer[k] % inner[k] != 0) {
      return refuse("a host grid of ", BoundsString(inner), " does not divide ",
                    BoundsString(outer));
    }
    blocks[k] = outer[k] / inner[k];
  }
  std::vector<std::vector<int>> out;
  const int block_count = blocks[0] * blocks[1] * blocks[2];
  const int hosts = inner[0] * inner[1] * inner[2];
  for (int b = 0; b < block_count; ++b) {
    const ChipCoord block = CoordOfIndex(b, blocks);
    std::vector<int> workers;
    for (int w = 0; w < hosts; ++w) {
      const ChipCoord local = CoordOfIndex(w, inner);
      const ChipCoord at{block[0] * inner[0] + local[0], block[1] * inner[1] + local[1],
                         block[2] * inner[2] + local[2]};
      workers.push_back(IndexOfCoord(at, outer));
    }
    out.push_back(std::move(workers));
  }
  return out;
}

}  // namespace tessera
