#include "vocabulary/tpu_generation.h"

#include <array>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "base/string_util.h"

namespace tessera {
namespace {

constexpr std::array<int, 1> kFourChips = {4};
constexpr std::array<int, 3> kLiteChips = {1, 4, 8};

// ICI per link and direction = per-chip ICI bandwidth (Google Cloud "TPU versions" pages, in
// Gbps, both directions, all links) / 8 bits / links per chip / 2 directions. Links per chip: 4 in
// a 2D torus, 6 in a 3D torus. Per-chip figures: v4 2400, v5e 1600, v5p 4800, v6e 3584, v7x
// 1.2 TB/s (9600 Gbps). v2 (496) and v3 (656) are older, less certain figures. Estimates only:
// the scheduler compares bandwidth classes, not exact numbers.
constexpr double IciPerLink(double chip_gbps, int links) { return chip_gbps / 8 / links / 2; }

// HBM per chip (GiB): v2 16, v3 32, v4 32, v5p 95, v5e 16, v6e 32, v7x 192.
constexpr std::array<TpuGenerationInfo, 7> kGenerations = {{
    {TpuGeneration::kV2, "v2", 2, 4, kFourChips, 2, "", 1, IciPerLink(496, 4), 16},
    {TpuGeneration::kV3, "v3", 2, 4, kFourChips, 2, "tpu-v3-slice", 1, IciPerLink(656, 4), 32},
    {TpuGeneration::kV4, "v4", 2, 4, kFourChips, 3, "tpu-v4-podslice", 1, IciPerLink(2400, 6), 32},
    {TpuGeneration::kV5p, "v5p", 2, 4, kFourChips, 3, "tpu-v5p-slice", 1, IciPerLink(4800, 6), 95},
    {TpuGeneration::kV5litepod, "v5litepod", 1, 4, kLiteChips, 2, "tpu-v5-lite-podslice", 1,
     IciPerLink(1600, 4), 16},
    {TpuGeneration::kV6e, "v6e", 1, 4, kLiteChips, 2, "tpu-v6e-slice", 1, IciPerLink(3584, 4), 32},
    {TpuGeneration::kV7x, "v7x", 2, 4, kFourChips, 3, "tpu7x", 2, IciPerLink(9600, 6), 192},
}};

}  // namespace

std::span<const TpuGenerationInfo> TpuGenerations() { return kGenerations; }

const TpuGenerationInfo& GenerationInfo(TpuGeneration generation) {
  return kGenerations[static_cast<size_t>(generation)];
}

std::string NormalizeTpuName(std::string_view text) {
  std::string s = absl::AsciiStrToLower(ToAbsl(Trim(text)));
  if (s.rfind("tpu", 0) == 0) {
    size_t skip = 3;
    if (skip < s.size() && s[skip] == '-') ++skip;
    if (skip < s.size() && s[skip] == 'v') ++skip;
    s = "v" + s.substr(skip);
  }
  return s;
}

absl::StatusOr<TpuGeneration> ParseTpuGeneration(std::string_view text) {
  std::string name = NormalizeTpuName(text);
  if (name == "v5e" || name == "v5lite") name = "v5litepod";
  for (const TpuGenerationInfo& info : kGenerations) {
    if (info.name == name) return info.generation;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown TPU generation ", Quote(text),
                   " (known: v2, v3, v4, v5p, v5litepod (v5e), v6e, v7x, also spelled TPU-V6E)"));
}

std::string TpuTypeString(TpuGeneration generation) {
  return absl::StrCat("TPU-", absl::AsciiStrToUpper(ToAbsl(GenerationInfo(generation).name)));
}

}  // namespace tessera
