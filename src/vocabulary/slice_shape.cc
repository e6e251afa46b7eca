#include "vocabulary/slice_shape.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "base/string_util.h"
#include "vocabulary/tpu_accelerator_type.h"

namespace tessera {
namespace {

bool IsSingleHostLiteShape(const TpuTopology& t) {
  const std::string s = t.ToString();
  return s == "1x1" || s == "2x2" || s == "2x4";
}

bool IsLite(TpuGeneration g) { return g == TpuGeneration::kV5litepod || g == TpuGeneration::kV6e; }

absl::Status CheckChipsPerHost(const TpuGenerationInfo& info, const TpuTopology& topology,
                               int chips_per_host) {
  const auto& options = info.single_host_chip_options;
  const bool whole_slice_on_one_host =
      chips_per_host == topology.chips() &&
      std::find(options.begin(), options.end(), chips_per_host) != options.end();
  if (whole_slice_on_one_host || chips_per_host == info.chips_per_multi_host) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "chips per host ", chips_per_host, " does not fit a ", ToAbsl(info.name), " ",
      topology.ToString(), " slice: hosts of a multi-host slice have ", info.chips_per_multi_host,
      " chips, and a single host holds ", absl::StrJoin(options, ", "), " chips"));
}

}  // namespace

int DefaultChipsPerHost(TpuGeneration generation, const TpuTopology& topology) {
  if (IsLite(generation) && IsSingleHostLiteShape(topology)) return topology.chips();
  return GenerationInfo(generation).chips_per_multi_host;
}

absl::StatusOr<SliceShape> MakeSliceShape(TpuGeneration generation, const TpuTopology& topology,
                                          std::optional<int> chips_per_host) {
  TESSERA_RETURN_IF_ERROR(ValidateTopology(generation, topology));
  const TpuGenerationInfo& info = GenerationInfo(generation);
  const int per_host = chips_per_host.value_or(DefaultChipsPerHost(generation, topology));
  TESSERA_RETURN_IF_ERROR(CheckChipsPerHost(info, topology, per_host));
  const std::optional<ChipCoord> block = HostChipBlock(per_host);
  if (!block.has_value()) {
    return absl::InvalidArgumentError(
        absl::StrCat("no known host chip layout for ", per_host, " chips per host"));
  }
  SliceShape shape;
  shape.generation = generation;
  shape.accelerator_type = TpuTypeString(generation);
  shape.gke_accelerator = std::string(info.gke_accelerator);
  shape.topology = topology;
  shape.chips = topology.chips();
  shape.chips_per_host = per_host;
  shape.hosts = std::max(1, shape.chips / per_host);
  shape.pod_type = TpuPodType(generation, shape.chips);
  shape.host_block = *block;
  shape.cores_per_chip = info.cores_per_chip;
  shape.resources_per_chip = info.default_resources_per_chip;
  // Each host owns one block; the worker grid is the topology divided by the block, per axis.
  const ChipCoord extent = PadExtent(topology.dims);
  ChipCoord grid{};
  for (int k = 0; k < 3; ++k) {
    if (extent[k] % shape.host_block[k] != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "topology ", topology.ToString(), " is not tiled by hosts of ",
          BoundsString(shape.host_block), " chips (axis ", k + 1, " has ", extent[k], ")"));
    }
    grid[k] = extent[k] / shape.host_block[k];
  }
  shape.worker_grid.assign(grid.begin(), grid.begin() + topology.dims.size());
  if (grid[0] * grid[1] * grid[2] != shape.hosts) {
    return absl::InvalidArgumentError(absl::StrCat("topology ", topology.ToString(),
                                                   " does not tile into ", shape.hosts,
                                                   " hosts of ", per_host, " chips"));
  }
  shape.host_bounds = BoundsString(grid);
  shape.chips_per_host_bounds = BoundsString(shape.host_block);
  return shape;
}

absl::StatusOr<SliceShape> ParseSliceShape(std::string_view accelerator, std::string_view topology,
                                           std::optional<int> chips_per_host) {
  std::optional<TpuAcceleratorType> type;
  TpuGeneration generation;
  if (auto gen = ParseTpuGeneration(accelerator); gen.ok()) {
    generation = *gen;
  } else {
    auto parsed = ParseTpuAcceleratorType(accelerator);
    if (!parsed.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "accelerator ", Quote(accelerator),
          " is neither a TPU generation (e.g. TPU-V6E) nor an accelerator type (e.g. v6e-16)"));
    }
    type = *parsed;
    generation = type->generation;
  }
  TESSERA_ASSIGN_OR_RETURN(TpuTopology parsed_topology, ParseTpuTopologyFor(generation, topology));
  if (type.has_value() && type->chips() != parsed_topology.chips()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "accelerator type ", type->ToString(), " has ", type->chips(), " chips, but topology ",
        parsed_topology.ToString(), " has ", parsed_topology.chips()));
  }
  return MakeSliceShape(generation, parsed_topology, chips_per_host);
}

absl::StatusOr<ChipCoord> WorkerCoordinates(const SliceShape& shape, int worker_id) {
  if (worker_id < 0 || worker_id >= shape.hosts) {
    return absl::InvalidArgumentError(absl::StrCat(
        "worker id ", worker_id, " is not a host of ", shape.pod_type, " ",
        shape.topology.ToString(), " (", shape.hosts, " hosts: 0..", shape.hosts - 1, ")"));
  }
  return CoordOfIndex(worker_id, PadExtent(shape.worker_grid));
}

absl::StatusOr<std::vector<ChipCoord>> HostChipCoordinates(const SliceShape& shape, int worker_id) {
  TESSERA_ASSIGN_OR_RETURN(ChipCoord host, WorkerCoordinates(shape, worker_id));
  std::vector<ChipCoord> coords;
  for (int chip = 0; chip < shape.chips_per_host; ++chip) {
    const ChipCoord local = CoordOfIndex(chip, shape.host_block);
    coords.push_back(ChipCoord{host[0] * shape.host_block[0] + local[0],
                               host[1] * shape.host_block[1] + local[1],
                               host[2] * shape.host_block[2] + local[2]});
  }
  return coords;
}

}  // namespace tessera
