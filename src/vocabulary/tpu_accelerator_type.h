// TPU accelerator types ("v6e-16", "v5litepod-8", "tpu7x-16"): a generation and a TensorCore
// count (reference/accelerators.md §7.2). Pure functions; TpuAcceleratorType is a copyable value.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "vocabulary/tpu_generation.h"

namespace tessera {

// Far above the largest slice (v5p-17920 has 8960 chips x 2 cores).
inline constexpr int kMaxTensorCores = 1 << 20;

struct TpuAcceleratorType {
  TpuGeneration generation = TpuGeneration::kV6e;
  int tensorcores = 0;  // the number after the dash: chips x cores per chip

  int chips() const { return tensorcores / GenerationInfo(generation).cores_per_chip; }
  // Canonical spelling, the pod type: "v6e-16", "v5litepod-8", "v7x-16".
  std::string ToString() const;
  friend bool operator==(const TpuAcceleratorType&, const TpuAcceleratorType&) = default;
};

// Parses after NormalizeTpuName: "v6e-16", "V6E-16", "tpu7x-16", "tpu-v4-8", "v5e-4" (alias of
// v5litepod). The shape must be `v<digits><letters>-<digits>` (§7.2) with a known generation and a
// positive count that is a multiple of the generation's cores per chip. One-line errors.
absl::StatusOr<TpuAcceleratorType> ParseTpuAcceleratorType(std::string_view text);

// The pod type of `chips` chips: "<gen>-<chips x cores_per_chip>", e.g. v6e 16 chips -> "v6e-16",
// v4 8 chips -> "v4-16".
std::string TpuPodType(TpuGeneration generation, int chips);

}  // namespace tessera
