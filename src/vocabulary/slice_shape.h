// SliceShape: everything derived from a TPU generation and topology (reference/accelerators.md
// §7.5-§7.6): chips, hosts, chips per host, pod type, the worker (host) grid, the libtpu bounds
// variables, and where each host's chips sit in the slice. Pure functions; copyable values.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "vocabulary/chip_grid.h"
#include "vocabulary/tpu_generation.h"
#include "vocabulary/tpu_topology.h"

namespace tessera {

struct SliceShape {
  TpuGeneration generation = TpuGeneration::kV6e;
  std::string accelerator_type;       // "TPU-V6E"
  std::string gke_accelerator;        // "tpu-v6e-slice" ("" when GKE has none)
  TpuTopology topology;               // {4, 4}
  int chips = 0;                      // 16
  int hosts = 0;                      // 4
  int chips_per_host = 0;             // 4
  std::string pod_type;               // "v6e-16"
  std::vector<int> worker_grid;       // {2, 2}: hosts along each topology axis
  ChipCoord host_block{};             // {2, 2, 1}: one host's chips along each axis
  std::string host_bounds;            // "2,2,1" (TPU_HOST_BOUNDS)
  std::string chips_per_host_bounds;  // "2,2,1" (TPU_CHIPS_PER_HOST_BOUNDS)
  int cores_per_chip = 0;             // 1
  int resources_per_chip = 0;         // `TPU` units per chip by default: 1, or 2 on v7x

  bool multi_host() const { return hosts > 1; }
};

// The default chips per host of a shape: v5e/v6e single-host shapes (1x1, 2x2, 2x4) put every chip
// on one host; every other slice has 4 chips per host.
int DefaultChipsPerHost(TpuGeneration generation, const TpuTopology& topology);

// Builds the shape of a valid `topology` of `generation`. `chips_per_host` overrides the default
// (the ambiguous v5e/v6e 2x4: 8 = one host, 4 = two hosts); it must be a chip count the
// generation's hosts have (a single host holding the whole slice, or the multi-host value).
// Errors name the problem: invalid shape for the generation, bad override, a shape the hosts'
// chip blocks do not tile.
absl::StatusOr<SliceShape> MakeSliceShape(TpuGeneration generation, const TpuTopology& topology,
                                          std::optional<int> chips_per_host = std::nullopt);

// What `tessera describe-slice --accelerator TPU-V6E --topology 4x4` prints. `accelerator` is a
// generation ("TPU-V6E", "v6e", "v5e") or an accelerator type ("v6e-16", whose chip count must
// then match the topology).
absl::StatusOr<SliceShape> ParseSliceShape(std::string_view accelerator, std::string_view topology,
                                           std::optional<int> chips_per_host);

// The host (worker) coordinates of `worker_id` in shape.worker_grid, x fastest (padded to 3).
absl::StatusOr<ChipCoord> WorkerCoordinates(const SliceShape& shape, int worker_id);

// The slice coordinates of the chips of host `worker_id`, in local chip order (x fastest within
// the host block). InvalidArgument when worker_id is not in [0, hosts).
absl::StatusOr<std::vector<ChipCoord>> HostChipCoordinates(const SliceShape& shape, int worker_id);

}  // namespace tessera
