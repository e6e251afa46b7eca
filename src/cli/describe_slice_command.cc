// tessera describe-slice --accelerator TPU-V6E --topology 4x4 [--chips-per-host N] [--json]
#include <algorithm>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/string_util.h"
#include "cli/commands.h"
#include "vocabulary/slice_shape.h"

namespace tessera::cli {
namespace {

nlohmann::json SliceJson(const SliceShape& s) {
  return {{"accelerator_type", s.accelerator_type},
          {"topology", s.topology.ToString()},
          {"chips", s.chips},
          {"hosts", s.hosts},
          {"chips_per_host", s.chips_per_host},
          {"pod_type", s.pod_type},
          {"worker_grid", s.worker_grid},
          {"host_bounds", s.host_bounds},
          {"chips_per_host_bounds", s.chips_per_host_bounds},
          {"cores_per_chip", s.cores_per_chip},
          {"resources_per_chip", s.resources_per_chip},
          {"tpu_resources_per_host", s.chips_per_host * s.resources_per_chip},
          {"multi_host", s.multi_host()},
          {"gke_accelerator", s.gke_accelerator}};
}

std::string SliceText(const SliceShape& s) {
  constexpr size_t kColumn = 28;  // wider than the longest key, TPU_CHIPS_PER_HOST_BOUNDS
  std::string out;
  auto row = [&out](std::string_view key, const std::string& value) {
    absl::StrAppend(&out, ToAbsl(key),
                    std::string(kColumn - std::min(key.size(), kColumn - 1), ' '), value, "\n");
  };
  row("accelerator type", s.accelerator_type);
  row("topology", s.topology.ToString());
  row("pod type", s.pod_type);
  row("chips", std::to_string(s.chips));
  row("hosts", std::to_string(s.hosts));
  row("chips per host", std::to_string(s.chips_per_host));
  row("worker grid", absl::StrJoin(s.worker_grid, "x"));
  row("TPU_HOST_BOUNDS", s.host_bounds);
  row("TPU_CHIPS_PER_HOST_BOUNDS", s.chips_per_host_bounds);
  row("cores per chip", std::to_string(s.cores_per_chip));
  row("TPU resources per host", absl::StrCat(s.chips_per_host * s.resources_per_chip, " (",
                                             s.resources_per_chip, " per chip)"));
  if (!s.gke_accelerator.empty()) row("GKE accelerator", s.gke_accelerator);
  return out;
}

}  // namespace

void AddDescribeSliceCommand(CLI::App& app, int& exit_code) {
  struct Args {
    std::string accelerator;
    std::string topology;
    std::optional<int> chips_per_host;
    bool json = false;
  };
  auto args = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand(
      "describe-slice", "Show the shape of a TPU slice: chips, hosts, pod type, worker grid");
  cmd->add_option("--accelerator", args->accelerator,
                  "Generation (TPU-V6E, v5e, ...) or accelerator type (v6e-16)")
      ->required();
  cmd->add_option("--topology", args->topology, "Chip grid, e.g. 4x4 or 2x2x2")->required();
  cmd->add_option("--chips-per-host", args->chips_per_host,
                  "Chips per host where a shape allows several (v5e/v6e 2x4: 8 or 4)");
  cmd->add_flag("--json", args->json, "Print JSON for programs");
  cmd->callback([args, &exit_code] {
    auto shape = ParseSliceShape(args->accelerator, args->topology, args->chips_per_host);
    if (!shape.ok()) {
      exit_code = ReportError(ToStd(shape.status().message()));
      return;
    }
    if (args->json) {
      std::cout << SliceJson(*shape).dump(2) << "\n";
    } else {
      std::cout << SliceText(*shape);
    }
    exit_code = 0;
  });
}

}  // namespace tessera::cli
