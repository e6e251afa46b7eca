// yaml-cpp behind a no-exceptions wall for this module's parsers: loading text and reading a
// flat map of scalars, with errors that name the YAML line.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "yaml-cpp/yaml.h"

namespace tessera::labels_internal {

// "line N" (1-based) for a node, or "" when yaml-cpp does not know its position.
std::string LineOf(const YAML::Node& node);

// Parses YAML (JSON is YAML). An empty document is a null node. A syntax error becomes
// InvalidArgument "line N: <yaml-cpp's words>".
absl::StatusOr<YAML::Node> LoadYaml(std::string_view text);

// One entry of a flat string map, with the line of its key for error messages.
struct FlatEntry {
  std::string key;
  std::string value;
  std::string line;  // "line N", or "" when unknown
};

// Reads `node` as a map of scalar keys to scalar values, in document order. Errors (a non-map,
// a list or map or null as a key or value, a repeated key) start with "line N: ".
absl::StatusOr<std::vector<FlatEntry>> ReadFlatStringMap(const YAML::Node& node);

}  // namespace tessera::labels_internal
