// Sub-slices: ICI-contiguous blocks of hosts inside a larger TPU slice (reference scheduling.md
// §6.4), e.g. a v6e 2x4 (two hosts of 2x2 chips) inside a 4x4 (four hosts). The parent's host
// grid is cut into equal blocks of the sub-slice's host grid, in its orientation; blocks are
// numbered x fastest, then y, then z, and a block's hosts are listed in the sub-slice's own
// worker order (x fastest), so sub-slice worker 0 is the block's corner host.
// Pure functions; thread-safe.
#pragma once

#include <vector>

#include "absl/status/statusor.h"
#include "vocabulary/slice_shape.h"

namespace tessera {

// The blocks of `sub` inside `parent`: blocks[b][w] is the parent worker id of sub-slice worker
// w in block b. InvalidArgument, naming both shapes, when they are of different generations or
// dimensionality, their hosts hold different chip blocks, or the sub-slice's host grid does not
// divide the parent's on every axis.
absl::StatusOr<std::vector<std::vector<int>>> SubSliceBlocks(const SliceShape& parent,
                                                             const SliceShape& sub);

}  // namespace tessera
