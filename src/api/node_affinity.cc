#include "api/node_affinity.h"

#include "absl/strings/str_cat.h"
#include "base/string_util.h"
#include "labels/label.h"

namespace tessera::api {

absl::Status ApplyNodeAffinity(const TaskOptions& options, v1::ResourceRequest* request) {
  if (options.node_affinity.empty()) {
    if (options.node_affinity_soft) {
      return absl::InvalidArgumentError("node affinity: soft without a node id");
    }
    return absl::OkStatus();
  }
  if (absl::Status valid = ValidateLabelValue(options.node_affinity); !valid.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "node affinity ", Quote(options.node_affinity), ": not a node id: ", valid.message()));
  }
  if (!options.placement_group.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "node affinity ", Quote(options.node_affinity), " with placement group ",
        Quote(options.placement_group), ": the bundle's node is fixed by the group"));
  }
  request->set_affinity_node_id(options.node_affinity);
  request->set_affinity_soft(options.node_affinity_soft);
  return absl::OkStatus();
}

std::string NodeAffinityKey(const TaskOptions& options) {
  if (options.node_affinity.empty()) return "";
  return absl::StrCat(options.node_affinity_soft ? "|node~=" : "|node=", options.node_affinity);
}

}  // namespace tessera::api
