// Requests files: an ordered list of events for the scheduling simulator (`tessera schedule`):
// task and actor submissions, finishing them, and nodes joining, failing and draining. The
// format is documented in docs/scheduling-formats.md. Errors are one line,
// "<file>:<line>:<col>: <field path>: <problem>"; references (a finish of an unknown name, a
// fail_node of an unknown node) are checked here, so a file that parses replays cleanly.
// Thread-safe: pure functions of their inputs (no I/O; callers read the file).
#pragma once

#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "labels/fallback.h"
#include "labels/label_selector.h"
#include "resources/resource_set.h"
#include "scheduling/cluster_file.h"
#include "scheduling/domain_group_scheduler.h"
#include "scheduling/placement_group_spec.h"
#include "scheduling/scheduling_request.h"

namespace tessera {

enum class SimulatedStrategy { kDefault, kSpread };

struct SimulatedNodeAffinity {
  std::string node;
  bool soft = false;  // soft: prefer the node, run elsewhere when it cannot take the request
};

// The retry budgets a submission gets when it names none.
inline constexpr int kDefaultTaskMaxRetries = 3;
inline constexpr int kDefaultActorMaxRestarts = 0;
// The largest budget a file may give (-1 gives an endless one).
inline constexpr int kMaxRetryBudget = 1000;

// One task or actor submission.
struct SimulatedRequest {
  std::string name;  // unique within the file
  bool actor = false;
  ResourceSet resources;
  LabelSelector label_selector;
  std::vector<LabelSelector> fallbacks;  // tried in order after label_selector
  SimulatedStrategy strategy = SimulatedStrategy::kDefault;
  std::optional<SimulatedNodeAffinity> node_affinity;
  std::optional<std::string> local_node;  // the submitter's node (preferred by DEFAULT)
  // Set: served from this placement group's bundle (group by name); the fields above that
  // choose a node are then empty.
  std::optional<BundleTarget> bundle_target;
  // How often work lost with its node (or its bundle) is submitted again; -1 without end.
  // `max_retries` of a task (default 3) or `max_restarts` of an actor (default 0), as in Ray.
  int max_retries = kDefaultTaskMaxRetries;
};

enum class SimulatedEventKind {
  kSubmit,
  kFinish,
  kAddNodes,
  kFailNode,
  kDrainNode,
  kCreatePlacementGroup,
  kRemovePlacementGroup,
  kReserveSlices,
  kReleaseSlices,
};

struct SimulatedEvent {
  SimulatedEventKind kind = SimulatedEventKind::kSubmit;
  int line = 0;              // 1-based line of the event in the file
  SimulatedRequest request;  // kSubmit
  // kFinish: a request name; kFailNode/kDrainNode: a node id; kRemovePlacementGroup: a group
  // name; kReleaseSlices: a slice reservation name
  std::string target;
  std::vector<ClusterNode> nodes;  // kAddNodes
  PlacementGroupSpec group;        // kCreatePlacementGroup (validated; its name is unique)
  DomainGroupRequest slices;       // kReserveSlices (shapes checked; its name is unique)
};

// Parses a requests file: a map with key `events`, a list of one-key maps. `cluster_node_ids`
// are the nodes the cluster starts with (for node references); ids added by add_nodes must not
// clash with them.
absl::StatusOr<std::vector<SimulatedEvent>> ParseRequestsFile(
    std::string_view yaml, std::string_view source_name,
    const std::set<std::string>& cluster_node_ids);

}  // namespace tessera
