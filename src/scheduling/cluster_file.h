// Cluster files: a YAML description of a whole simulated cluster as node groups (count copies of
// one hardware description, or whole TPU slices whose hosts the file generates), expanded into
// the nodes hardware discovery would report for each host. The format is documented in
// docs/scheduling-formats.md. Errors are one line, "<file>:<line>:<col>: <field path>: <problem>".
// Thread-safe: pure functions of their inputs (no I/O; callers read the file).
#pragma once

#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "hardware/node_discovery.h"
#include "hardware/simulated/description_reader.h"

namespace tessera {

// One node of a cluster file or of a requests file's add_nodes event.
struct ClusterNode {
  std::string id;     // "<group>-<k>", or "<group>-<slice>-w<worker>" for slice hosts
  std::string group;  // the node group's name
  NodeHardware hardware;
};

// The largest node count one file may describe (a guard against typos such as count: 1000000).
inline constexpr int64_t kMaxClusterNodes = 100000;

// Parses a whole cluster file: a map with key `node_groups`, a non-empty list of groups. Node ids
// are unique across the file.
absl::StatusOr<std::vector<ClusterNode>> ParseClusterFile(std::string_view yaml,
                                                          std::string_view source_name);

// Expands one node group of an already loaded document (the cluster file's groups, a requests
// file's add_nodes). `taken_ids` holds the ids already in the cluster: a generated id that is
// taken is an error; the new ids are added to it.
absl::StatusOr<std::vector<ClusterNode>> ExpandNodeGroup(const simulated::DescriptionReader& reader,
                                                         const simulated::Field& group,
                                                         std::set<std::string>& taken_ids);

}  // namespace tessera
