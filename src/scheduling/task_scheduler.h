// TaskScheduler: places one task or actor request on a node of a ClusterView, or says in one line
// why it cannot (INFEASIBLE: no node could ever fit; PENDING: some node could, none can now).
// Infeasible requests are parked and re-examined only against the nodes whose change could help
// them (added, undrained, totals raised), so releases and allocations never re-scan them.
//
// Policies: kDefault packs onto the most utilized node below the pack threshold, then takes the
// least utilized; kSpread goes round robin, in node order, over the nodes whose free amounts of
// the requested resources fit (what else a node holds does not count). Either way, work that asks
// for no accelerator tries the nodes without accelerators first (SchedulerOptions).
//
// Cost per decision: O(log n) through the cluster view's per-resource utilization and index
// orders and label index, plus the nodes a choice passes over that cannot take the request;
// explanations (the failure path) scan the considered nodes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "scheduling/cluster_view.h"
#include "scheduling/scheduling_request.h"

namespace tessera {

enum class ScheduleStatus { kPlaced, kPending, kInfeasible };
std::string_view ScheduleStatusName(ScheduleStatus status);

struct Placement {
  NodeId node;
  Allocation allocation;  // its DeviceGrants name the chosen device instances per resource
  size_t option = 0;      // which selector option placed it: 0 primary, then fallbacks in order
  int bundle = -1;        // the placement group bundle that serves it (BundleLedger), else -1
};

struct ScheduleResult {
  ScheduleStatus status = ScheduleStatus::kPlaced;
  std::optional<Placement> placement;  // set when kPlaced
  std::string explanation;             // set otherwise: one line
};

struct SchedulerOptions {
  // kDefault packs onto nodes whose utilization is below this fraction, then spreads.
  double pack_threshold = 0.5;
  // Work that asks for no accelerator resource goes to a node without accelerators while one can
  // take it, and to an accelerator node only when none can, so CPU work does not block a later
  // accelerator request while CPU nodes stand idle. A node named by affinity is still honoured.
  // false: every node is judged alike.
  bool avoid_accelerator_nodes = true;
};

// Not thread-safe: one owner calls it; it mutates the cluster view it was given (which must
// outlive it) only through Allocate.
class TaskScheduler {
 public:
  explicit TaskScheduler(ClusterView* cluster, SchedulerOptions options = {});

  // InvalidArgument for a request ValidateSchedulingRequest refuses. An infeasible request is
  // parked under its id until OnClusterChanged reports it; a placed or pending one is not.
  absl::StatusOr<ScheduleResult> Schedule(const SchedulingRequest& request);

  // The same decision without taking anything and without parking: kPlaced names the node (its
  // placement's allocation is empty), otherwise the explanation. For a caller that only routes
  // the request to the node that will take it (the head's PickNode).
  absl::StatusOr<ScheduleResult> Advise(const SchedulingRequest& request);

  // The parked requests that some node changed since the last call could now fit (ascending
  // ids); they leave the parking lot and should be scheduled again. Only those changed nodes are
  // examined, and nothing at all when no node changed in a way that could help.
  std::vector<RequestId> OnClusterChanged();

  size_t parked_count() const { return parked_.size(); }
  // (request, node) pairs OnClusterChanged has examined so far: shows re-examination cost.
  int64_t reexamined_pairs() const { return reexamined_pairs_; }

 private:
  struct Outcome {
    std::optional<NodeIndex> node;
    size_t option = 0;
  };
  enum class Commit { kAllocate, kAdviseOnly };
  absl::StatusOr<ScheduleResult> Decide(const SchedulingRequest& request, Commit commit);
  Outcome Pick(const SchedulingRequest& request, std::optional<NodeIndex> preferred);
  // Which nodes a choice considers: all alive ones, or only those without accelerators.
  enum class Pool { kAll, kWithoutAccelerators };
  std::optional<NodeIndex> PickForSelector(const LabelSelector& selector, const ResourceSet& demand,
                                           NodeRanking strategy, Pool pool);
  std::optional<NodeIndex> PackPick(const LabelSelector& selector, const ResourceSet& demand,
                                    Pool pool) const;
  std::optional<NodeIndex> SpreadPick(const LabelSelector& selector, const ResourceSet& demand,
                                      Pool pool);
  bool InPool(NodeIndex node, Pool pool) const;
  bool Usable(NodeIndex node, const LabelSelector& selector, const ResourceSet& demand) const;
  ScheduleResult Explain(const SchedulingRequest& request, std::span<const NodeIndex> nodes,
                         std::string_view prefix) const;
  ScheduleResult ExplainHardAffinity(const SchedulingRequest& request) const;
  bool FeasibleOnNode(const SchedulingRequest& request, NodeIndex node) const;

  ClusterView* cluster_;
  int64_t pack_threshold_ppm_;
  bool avoid_accelerator_nodes_;
  NodeIndex spread_cursor_ = -1;  // the last spread pick: the next one starts after it
  std::map<int64_t, SchedulingRequest> parked_;
  // The current decision's excluded nodes (SchedulingRequest::excluded_nodes), as indices.
  std::vector<NodeIndex> excluded_;
  size_t log_cursor_ = 0;
  int64_t reexamined_pairs_ = 0;
};

}  // namespace tessera
