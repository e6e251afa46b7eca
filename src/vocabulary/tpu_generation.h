// The TPU generations Tessera knows and their fixed facts (reference/accelerators.md §7.2-§7.3,
// §7.7): TensorCores per chip, chips per host, topology dimensionality, GKE node label and the
// default number of `TPU` resource units per chip. Pure data; thread-safe (immutable).
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace tessera {

enum class TpuGeneration { kV2, kV3, kV4, kV5p, kV5litepod, kV6e, kV7x };

struct TpuGenerationInfo {
  TpuGeneration generation;
  std::string_view name;  // canonical lower-case name: "v6e", "v5litepod", "v7x"
  int cores_per_chip;     // TensorCores per chip (the unit of an accelerator type's count)
  // Chips per host in a multi-host slice; every host owns a 2x2 (or 2x2x1) block of chips.
  int chips_per_multi_host;
  // Chip counts a single-host slice may have (v5e/v6e: 1, 4 or 8; others: 4).
  std::span<const int> single_host_chip_options;
  int dims;                          // 2 or 3: the dimensionality of the topology string
  std::string_view gke_accelerator;  // cloud.google.com/gke-tpu-accelerator value, "" when none
  int default_resources_per_chip;    // `TPU` units per chip: 2 on v7x (one per TensorCore), else 1
  // Estimated ICI bandwidth per link and direction in GB/s (see tpu_generation.cc for sources).
  double ici_gigabytes_per_second;
  double hbm_gib_per_chip;  // HBM per chip, for Device::memory_bytes
};

// Every known generation, oldest first.
std::span<const TpuGenerationInfo> TpuGenerations();
const TpuGenerationInfo& GenerationInfo(TpuGeneration generation);

// Parses a generation as users and the environment spell it: "TPU-V6E", "v6e", "V6E", "tpu7x",
// "tpu-v4", "v5e" (an alias of v5litepod), "TPU-V5LITEPOD". InvalidArgument naming the known
// generations otherwise.
absl::StatusOr<TpuGeneration> ParseTpuGeneration(std::string_view text);

// The accelerator type string users see and labels carry: "TPU-V6E", "TPU-V5LITEPOD".
std::string TpuTypeString(TpuGeneration generation);

// Lower-cases and rewrites a leading "tpu-?v?" to "v" (§7.2): "TPU-V7X" -> "v7x",
// "tpu7x-8" -> "v7x-8", "v6e-16" unchanged.
std::string NormalizeTpuName(std::string_view text);

}  // namespace tessera
