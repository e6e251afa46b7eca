#include "vocabulary/tpu_topology.h"

#include <algorithm>
#include <array>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/string_util.h"

namespace tessera {
namespace {

struct ExplicitShapes {
  TpuGeneration generation;
  std::vector<std::string> shapes;
};

// Ray's VALID_TPU_TOPOLOGY, plus 2x2 for v2/v3: single-host v2-8 and v3-8 machines exist although
// Ray's list omits them (§7.3).
const std::vector<ExplicitShapes>& ShapeTable() {
  static const auto* const table = new std::vector<ExplicitShapes>{
      {TpuGeneration::kV2, {"2x2", "4x4", "4x8", "8x8", "8x16", "16x16"}},
      {TpuGeneration::kV3, {"2x2", "4x4", "4x8", "8x8", "8x16", "16x16", "16x32", "32x32"}},
      {TpuGeneration::kV4, {"2x2x1", "2x2x2", "2x2x4", "2x4x4"}},
      {TpuGeneration::kV5p, {"2x2x1", "2x2x2", "2x2x4", "2x4x4"}},
      {TpuGeneration::kV5litepod,
       {"1x1", "2x2", "2x4", "2x8", "4x4", "4x8", "8x8", "8x16", "16x16"}},
      {TpuGeneration::kV6e, {"1x1", "2x2", "2x4", "2x8", "4x4", "4x8", "8x8", "8x16", "16x16"}},
      {TpuGeneration::kV7x,
       {"2x2x1", "2x2x2", "2x2x4", "2x4x4", "4x4x4", "4x4x8", "4x8x8", "8x8x8", "8x8x16",
        "8x16x16"}},
  };
  return *table;
}

const std::vector<std::string>& ExplicitShapesOf(TpuGeneration generation) {
  for (const ExplicitShapes& row : ShapeTable()) {
    if (row.generation == generation) return row.shapes;
  }
  static const std::vector<std::string> kNone;
  return kNone;
}

// v4: AxBxC with A,B in {4,8,12} and C in {4,8,12,16}; v5p: A,B in {4,8,12,16}, C in {4,...,24}.
bool MatchesLargeSliceRule(TpuGeneration generation, const TpuTopology& t) {
  if (t.dims.size() != 3) return false;
  int max_ab = 0, max_c = 0;
  if (generation == TpuGeneration::kV4) {
    max_ab = 12;
    max_c = 16;
  } else if (generation == TpuGeneration::kV5p) {
    max_ab = 16;
    max_c = 24;
  } else {
    return false;
  }
  auto step4 = [](int v, int max) { return v >= 4 && v <= max && v % 4 == 0; };
  return step4(t.dims[0], max_ab) && step4(t.dims[1], max_ab) && step4(t.dims[2], max_c);
}

absl::StatusOr<int> ParseDim(std::string_view text, std::string_view part) {
  if (part.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("topology ", Quote(text), " has an empty dimension (expected e.g. 4x4)"));
  }
  if (part.size() > 4 || !std::all_of(part.begin(), part.end(), absl::ascii_isdigit)) {
    const bool digits = std::all_of(part.begin(), part.end(), absl::ascii_isdigit);
    return absl::InvalidArgumentError(
        digits ? absl::StrCat("topology ", Quote(text), ": dimension ", ToAbsl(part.substr(0, 12)),
                              part.size() > 12 ? "..." : "", " is larger than ", kMaxTopologyDim)
               : absl::StrCat("topology ", Quote(text), ": dimension ", Quote(part),
                              " is not a positive integer"));
  }
  int value = 0;
  for (char c : part) value = value * 10 + (c - '0');
  if (value == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("topology ", Quote(text), " has a zero dimension"));
  }
  if (value > kMaxTopologyDim) {
    return absl::InvalidArgumentError(absl::StrCat("topology ", Quote(text), ": dimension ", value,
                                                   " is larger than ", kMaxTopologyDim));
  }
  return value;
}

}  // namespace

int TpuTopology::chips() const {
  int product = 1;
  for (int d : dims) product *= d;
  return product;
}

std::string TpuTopology::ToString() const { return absl::StrJoin(dims, "x"); }

absl::StatusOr<TpuTopology> ParseTpuTopology(std::string_view text) {
  const std::string_view trimmed = Trim(text);
  if (trimmed.empty()) return absl::InvalidArgumentError("topology is empty (expected e.g. 4x4)");
  TpuTopology topology;
  size_t start = 0;
  while (true) {
    size_t x = start;
    while (x < trimmed.size() && trimmed[x] != 'x' && trimmed[x] != 'X') ++x;
    auto dim = ParseDim(text, trimmed.substr(start, x - start));
    if (!dim.ok()) return dim.status();
    topology.dims.push_back(*dim);
    if (topology.dims.size() > 3) {
      return absl::InvalidArgumentError(
          absl::StrCat("topology ", Quote(text), " has more than 3 dimensions"));
    }
    if (x == trimmed.size()) break;
    start = x + 1;
  }
  if (topology.dims.size() < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "topology ", Quote(text), " has 1 dimension; expected 2 or 3 (e.g. 4x4 or 2x2x2)"));
  }
  return topology;
}

absl::Status ValidateTopology(TpuGeneration generation, const TpuTopology& topology) {
  const TpuGenerationInfo& info = GenerationInfo(generation);
  if (static_cast<int>(topology.dims.size()) != info.dims) {
    return absl::InvalidArgumentError(
        absl::StrCat("topology ", Quote(topology.ToString()), " is ", topology.dims.size(),
                     "D, but ", ToAbsl(info.name), " slices are ", info.dims, "D (e.g. ",
                     ExplicitShapesOf(generation).front(), ")"));
  }
  const std::string shape = topology.ToString();
  const auto& shapes = ExplicitShapesOf(generation);
  if (std::find(shapes.begin(), shapes.end(), shape) != shapes.end()) return absl::OkStatus();
  if (MatchesLargeSliceRule(generation, topology)) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("topology ", Quote(shape), " is not a valid ", ToAbsl(info.name),
                   " slice; valid: ", ValidTopologiesText(generation)));
}

absl::StatusOr<TpuTopology> ParseTpuTopologyFor(TpuGeneration generation, std::string_view text) {
  auto topology = ParseTpuTopology(text);
  if (!topology.ok()) return topology.status();
  absl::Status valid = ValidateTopology(generation, *topology);
  if (!valid.ok()) return valid;
  return topology;
}

std::string ValidTopologiesText(TpuGeneration generation) {
  std::string text = absl::StrJoin(ExplicitShapesOf(generation), ", ");
  if (generation == TpuGeneration::kV4) {
    absl::StrAppend(&text, ", and AxBxC with A,B in {4,8,12}, C in {4,8,12,16}");
  } else if (generation == TpuGeneration::kV5p) {
    absl::StrAppend(&text, ", and AxBxC with A,B in {4,8,12,16}, C in {4,8,...,24}");
  }
  return text;
}

}  // namespace tessera
