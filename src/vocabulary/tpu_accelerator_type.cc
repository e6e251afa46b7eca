#include "vocabulary/tpu_accelerator_type.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "base/string_util.h"

namespace tessera {

std::string TpuAcceleratorType::ToString() const {
  return absl::StrCat(ToAbsl(GenerationInfo(generation).name), "-", tensorcores);
}

std::string TpuPodType(TpuGeneration generation, int chips) {
  return TpuAcceleratorType{generation, chips * GenerationInfo(generation).cores_per_chip}
      .ToString();
}

absl::StatusOr<TpuAcceleratorType> ParseTpuAcceleratorType(std::string_view text) {
  const std::string name = NormalizeTpuName(text);
  const auto shape_error = [&] {
    return absl::InvalidArgumentError(absl::StrCat(
        "TPU accelerator type ", Quote(text),
        " is malformed (expected <generation>-<tensorcores>, e.g. v6e-16 or v5litepod-8)"));
  };
  // v<digits><letters>-<digits>
  const size_t dash = name.rfind('-');
  if (dash == std::string::npos || name.size() < 2 || name[0] != 'v') return shape_error();
  const std::string_view gen(name.data(), dash);
  const std::string_view count(name.data() + dash + 1, name.size() - dash - 1);
  size_t i = 1;
  while (i < gen.size() && absl::ascii_isdigit(gen[i])) ++i;
  if (i == 1) return shape_error();
  while (i < gen.size() && absl::ascii_isalpha(gen[i])) ++i;
  if (i != gen.size()) return shape_error();
  if (count.empty() || !std::all_of(count.begin(), count.end(), absl::ascii_isdigit)) {
    return shape_error();
  }
  auto generation = ParseTpuGeneration(gen);
  if (!generation.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("TPU accelerator type ", Quote(text), ": ", generation.status().message()));
  }
  if (count.size() > 7) {
    return absl::InvalidArgumentError(absl::StrCat("TPU accelerator type ", Quote(text),
                                                   ": count is larger than ", kMaxTensorCores));
  }
  int cores = 0;
  for (char c : count) cores = cores * 10 + (c - '0');
  if (cores == 0 || cores > kMaxTensorCores) {
    return absl::InvalidArgumentError(absl::StrCat(
        "TPU accelerator type ", Quote(text), ": count must be between 1 and ", kMaxTensorCores));
  }
  const int per_chip = GenerationInfo(*generation).cores_per_chip;
  if (cores % per_chip != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "TPU accelerator type ", Quote(text), ": ", cores, " TensorCores is not a whole number of ",
        ToAbsl(GenerationInfo(*generation).name), " chips (", per_chip, " cores each)"));
  }
  return TpuAcceleratorType{*generation, cores};
}

}  // namespace tessera
