// The TPU slice a command's flags name (`--accelerator TPU-V6E --topology 4x4`, and a
// `--fallback`'s TYPE:TOPOLOGY): parsed here, once, into the vocabulary's SliceShape, which the
// request then carries as numbers (client::TpuSliceAlternative). Pure functions.
#pragma once

#include <string_view>

#include "absl/status/statusor.h"
#include "vocabulary/slice_shape.h"

namespace tessera::cli {

// `accelerator` is a generation ("TPU-V6E", "v6e", "v5e") or a pod type ("v6e-16", whose chip
// count must match the topology); `topology` must be a slice of its generation. A one-line
// InvalidArgument prefixed by `what` ("--accelerator/--topology: ..."): an accelerator that is
// neither says which generations are known.
absl::StatusOr<SliceShape> ParseSliceFlags(std::string_view what, std::string_view accelerator,
                                           std::string_view topology);

}  // namespace tessera::cli
