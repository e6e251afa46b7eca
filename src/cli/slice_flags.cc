#include "cli/slice_flags.h"

#include <optional>

#include "absl/strings/str_cat.h"
#include "base/string_util.h"
#include "vocabulary/tpu_accelerator_type.h"
#include "vocabulary/tpu_generation.h"

namespace tessera::cli {

absl::StatusOr<SliceShape> ParseSliceFlags(std::string_view what, std::string_view accelerator,
                                           std::string_view topology) {
  auto prefixed = [&](const absl::Status& status) {
    return absl::InvalidArgumentError(absl::StrCat(ToAbsl(what), ": ", status.message()));
  };
  // Neither a generation nor a pod type: the generation's error names the known ones.
  absl::StatusOr<TpuGeneration> generation = ParseTpuGeneration(accelerator);
  if (!generation.ok() && !ParseTpuAcceleratorType(accelerator).ok()) {
    return prefixed(generation.status());
  }
  absl::StatusOr<SliceShape> shape = ParseSliceShape(accelerator, topology, std::nullopt);
  if (!shape.ok()) return prefixed(shape.status());
  return shape;
}

}  // namespace tessera::cli
