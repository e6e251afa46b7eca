// Simulated hardware: a YAML description of one machine (host, NICs, accelerators, labels) turned
// into exactly what discovery would report for it, so tests and local simulated clusters run the
// same code paths as real machines. The format is documented in docs/hardware-description.md.
// The description may be a whole document or a node nested in a bigger one (cluster files).
// Thread-safe: pure functions of their inputs.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "hardware/accelerator_plugin.h"
#include "hardware/host/host_topology.h"
#include "labels/label.h"
#include "yaml-cpp/yaml.h"

namespace tessera {

struct SimulatedHardware {
  HostTopology host;  // source = "simulated"
  // Per family with devices, what that family's Detect would return (probe = "simulated").
  std::map<std::string, Detection, std::less<>> families;
  LabelSet labels;  // user labels from the description (validated as LabelOrigin::kUser)
};

// Parses a description. `source_name` (a file name) prefixes every error; `known_families` are
// the accelerator family names the description may use (the plugin registry's list: this
// library sits below the registry). Errors are InvalidArgument, one line:
//   "h100.yaml:7:12: accelerators[0].count: must be a positive integer, got 0"
absl::StatusOr<SimulatedHardware> ParseHardwareDescription(
    std::string_view yaml, std::string_view source_name,
    const std::vector<std::string>& known_families);

// The same for a node of an already loaded document, e.g. cluster["nodes"][2]["hardware"];
// positions in errors are those of the enclosing document.
absl::StatusOr<SimulatedHardware> ParseHardwareDescriptionFromNode(
    const YAML::Node& node, std::string_view source_name,
    const std::vector<std::string>& known_families);

}  // namespace tessera
