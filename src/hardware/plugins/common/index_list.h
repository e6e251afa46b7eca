// Parsing the small integer lists that sysfs files and mask variables hold: "1, 3, 4, 12"
// (Neuron connected_devices), "0-3,6" (NEURON_RT_VISIBLE_CORES ranges), and numbered entry
// names ("accel3", "renderD128"). Part of tessera_plugin_support. Thread-safe: free functions.
#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace tessera {

struct IndexListOptions {
  // Accept "a-b" (inclusive, a <= b) as every index from a to b.
  bool allow_ranges = false;
  // Separators besides ','; e.g. " " for whitespace-separated sysfs lists.
  std::string_view extra_separators;
};

// Non-negative integers in order; empty text is an empty list. InvalidArgument quoting the bad
// piece otherwise. Duplicates are kept (the caller decides whether they matter).
absl::StatusOr<std::vector<int>> ParseIndexList(std::string_view text,
                                                const IndexListOptions& options);

// N when `name` is exactly `prefix` followed by decimal digits ("accel3" -> 3); nullopt for
// "accel", "accel_controlD3" or "accel3x".
std::optional<int> NumberedEntry(std::string_view name, std::string_view prefix);

}  // namespace tessera
