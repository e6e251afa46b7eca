#include "scheduling/task_scheduler.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "base/string_util.h"
#include "scheduling/explanation.h"
#include "scheduling/resource_families.h"

namespace tessera {
namespace {

// Label-index candidates are examined one by one when there are at most this many, or when
// their count squared is at most the anchor index's size (a scan of the utilization order would
// expect to visit index/candidates nodes before finding one).
constexpr size_t kSmallCandidateSet = 16;

const std::vector<LabelSelector>& AnySelector() {
  static const std::vector<LabelSelector> kAny = {LabelSelector()};
  return kAny;
}

const std::vector<LabelSelector>& Options(const SchedulingRequest& request) {
  return request.selectors.empty() ? AnySelector() : request.selectors.options();
}

}  // namespace

std::string_view ScheduleStatusName(ScheduleStatus status) {
  switch (status) {
    case ScheduleStatus::kPlaced: return "PLACED";
    case ScheduleStatus::kPending: return "PENDING";
    case ScheduleStatus::kInfeasible: return "INFEASIBLE";
  }
  return "UNKNOWN";
}

TaskScheduler::TaskScheduler(ClusterView* cluster, SchedulerOptions options)
    : cluster_(cluster),
      pack_threshold_ppm_(std::llround(options.pack_threshold * 1'000'000)),
      avoid_accelerator_nodes_(options.avoid_accelerator_nodes) {}

bool TaskScheduler::Usable(NodeIndex node, const LabelSelector& selector,
                           const ResourceSet& demand) const {
  const NodeRecord& record = cluster_->node(node);
  return !record.removed && record.state == NodeState::kAlive &&
         std::find(excluded_.begin(), excluded_.end(), node) == excluded_.end() &&
         selector.Matches(record.labels) && cluster_->FitsNow(node, demand);
}

bool TaskScheduler::InPool(NodeIndex node, Pool pool) const {
  return pool == Pool::kAll || !cluster_->node(node).carries_accelerators;
}

std::optional<NodeIndex> TaskScheduler::PickForSelector(const LabelSelector& selector,
                                                        const ResourceSet& demand,
                                                        NodeRanking strategy, Pool pool) {
  return strategy == NodeRanking::kSpread ? SpreadPick(selector, demand, pool)
                                          : PackPick(selector, demand, pool);
}

namespace {

// The smallest order that holds every node that could take `demand`: the pool's, or that of the
// demanded resource the fewest nodes carry (nodes without it never fit); nullptr when no node can.
template <typename Order, typename ByResource>
const Order* SmallestOrder(const Order* pool_order, const ResourceSet& demand,
                           ByResource by_resource) {
  const Order* order = pool_order;
  for (const auto& [resource, q] : demand) {
    const Order* carrying = by_resource(resource);
    if (carrying == nullptr || carrying->empty()) return nullptr;
    if (order == nullptr || carrying->size() < order->size()) order = carrying;
  }
  return order == nullptr || order->empty() ? nullptr : order;
}

}  // namespace

std::optional<NodeIndex> TaskScheduler::PackPick(const LabelSelector& selector,
                                                 const ResourceSet& demand, Pool pool) const {
  const UtilizationIndex* order =
      SmallestOrder(pool == Pool::kAll ? cluster_->UtilizationOrder("")
                                       : &cluster_->UtilizationOrderWithoutAccelerators(),
                    demand, [&](const auto& r) { return cluster_->UtilizationOrder(r); });
  if (order == nullptr) return std::nullopt;
  auto usable = [&](NodeIndex n) { return InPool(n, pool) && Usable(n, selector, demand); };

  const std::optional<size_t> count = cluster_->SelectorCandidateCount(selector);
  if (count && (*count <= kSmallCandidateSet || *count * *count <= order->size())) {
    std::optional<std::pair<int64_t, NodeIndex>> best_below, least;
    const std::vector<NodeIndex> candidates = *cluster_->SelectorCandidates(selector);
    for (NodeIndex n : candidates) {
      if (!usable(n)) continue;
      const std::pair<int64_t, NodeIndex> key(cluster_->node(n).utilization_ppm, n);
      if (key.first < pack_threshold_ppm_ && (!best_below || key > *best_below)) best_below = key;
      if (!least || key < *least) least = key;
    }
    if (!least) return std::nullopt;
    return best_below ? best_below->second : least->second;
  }
  // The most utilized node below the threshold; then the least utilized above it.
  const auto split = order->lower_bound({pack_threshold_ppm_, INT_MIN});
  for (auto it = split; it != order->begin();) {
    --it;
    if (usable(it->second)) return it->second;
  }
  for (auto it = split; it != order->end(); ++it) {
    if (usable(it->second)) return it->second;
  }
  return std::nullopt;
}

std::optional<NodeIndex> TaskScheduler::SpreadPick(const LabelSelector& selector,
                                                   const ResourceSet& demand, Pool pool) {
  const NodeOrder* order = SmallestOrder(
      pool == Pool::kAll ? cluster_->IndexOrder("") : &cluster_->IndexOrderWithoutAccelerators(),
      demand, [&](const auto& r) { return cluster_->IndexOrder(r); });
  if (order == nullptr) return std::nullopt;
  auto usable = [&](NodeIndex n) { return InPool(n, pool) && Usable(n, selector, demand); };
  // The first usable node after the cursor, else the first from the start: round robin.
  auto next = [&](const auto& nodes) -> std::optional<NodeIndex> {
    // The set's own search: std::upper_bound would walk a btree's iterators one by one.
    const auto after = [&] {
      if constexpr (requires { nodes.upper_bound(spread_cursor_); }) {
        return nodes.upper_bound(spread_cursor_);
      } else {
        return std::upper_bound(nodes.begin(), nodes.end(), spread_cursor_);
      }
    }();
    for (auto it = after; it != nodes.end(); ++it) {
      if (usable(*it)) return *it;
    }
    for (auto it = nodes.begin(); it != after; ++it) {
      if (usable(*it)) return *it;
    }
    return std::nullopt;
  };
  std::optional<NodeIndex> found;
  const std::optional<size_t> count = cluster_->SelectorCandidateCount(selector);
  if (count && (*count <= kSmallCandidateSet || *count * *count <= order->size())) {
    found = next(*cluster_->SelectorCandidates(selector));
  } else {
    found = next(*order);
  }
  if (found) spread_cursor_ = *found;
  return found;
}

TaskScheduler::Outcome TaskScheduler::Pick(const SchedulingRequest& request,
                                           std::optional<NodeIndex> preferred) {
  const std::vector<LabelSelector>& options = Options(request);
  const bool hard = request.affinity && request.affinity->kind == AffinityKind::kHard;
  bool avoid = avoid_accelerator_nodes_;
  for (const auto& [resource, q] : request.resources) {
    avoid = avoid && !IsAcceleratorResource(resource);
  }
  // A node named by affinity is taken as asked; the submitter's own node (local_node) is passed
  // over for a node without accelerators when the work asks for none.
  const bool local_is_avoided =
      preferred && avoid && !request.affinity && cluster_->node(*preferred).carries_accelerators;
  for (size_t i = 0; i < options.size(); ++i) {
    const bool preferred_fits = preferred && Usable(*preferred, options[i], request.resources);
    if (preferred_fits && !local_is_avoided) return {preferred, i};
    if (hard) continue;
    if (avoid) {
      if (auto node = PickForSelector(options[i], request.resources, request.strategy,
                                      Pool::kWithoutAccelerators)) {
        return {node, i};
      }
    }
    if (preferred_fits) return {preferred, i};
    if (auto node = PickForSelector(options[i], request.resources, request.strategy, Pool::kAll)) {
      return {node, i};
    }
  }
  return {};
}

ScheduleResult TaskScheduler::Explain(const SchedulingRequest& request,
                                      std::span<const NodeIndex> nodes,
                                      std::string_view prefix) const {
  const std::vector<LabelSelector>& options = Options(request);
  bool feasible = false;
  std::vector<std::string> texts;
  for (size_t i = 0; i < options.size(); ++i) {
    Diagnosis d = Diagnose(*cluster_, options[i], request.resources, nodes);
    feasible = feasible || d.feasible;
    texts.push_back(options.size() == 1 ? d.text : absl::StrCat("option ", i, ": ", d.text));
  }
  ScheduleResult result;
  result.status = feasible ? ScheduleStatus::kPending : ScheduleStatus::kInfeasible;
  result.explanation = absl::StrCat(ToAbsl(prefix), absl::StrJoin(texts, "; "));
  return result;
}

ScheduleResult TaskScheduler::ExplainHardAffinity(const SchedulingRequest& request) const {
  const std::string& id = request.affinity->node.value();
  const std::optional<NodeIndex> node = cluster_->Find(request.affinity->node);
  ScheduleResult result;
  result.status = ScheduleStatus::kInfeasible;
  if (!node) {
    result.explanation = absl::StrCat("affinity node ", id, " is not in the cluster");
  } else if (cluster_->node(*node).state != NodeState::kAlive) {
    result.explanation = absl::StrCat("affinity node ", id, " is ",
                                      ToAbsl(NodeStateName(cluster_->node(*node).state)));
  } else {
    const NodeIndex only[] = {*node};
    result = Explain(request, only, absl::StrCat("affinity node ", id, ": "));
  }
  return result;
}

bool TaskScheduler::FeasibleOnNode(const SchedulingRequest& request, NodeIndex node) const {
  const NodeRecord& record = cluster_->node(node);
  if (record.removed || record.state != NodeState::kAlive) return false;
  if (request.affinity && request.affinity->kind == AffinityKind::kHard &&
      request.affinity->node != record.id) {
    return false;
  }
  for (const LabelSelector& selector : Options(request)) {
    if (selector.Matches(record.labels) && cluster_->FeasibleOn(node, request.resources))
      return true;
  }
  return false;
}

absl::StatusOr<ScheduleResult> TaskScheduler::Schedule(const SchedulingRequest& request) {
  return Decide(request, Commit::kAllocate);
}

absl::StatusOr<ScheduleResult> TaskScheduler::Advise(const SchedulingRequest& request) {
  return Decide(request, Commit::kAdviseOnly);
}

absl::StatusOr<ScheduleResult> TaskScheduler::Decide(const SchedulingRequest& request,
                                                     Commit commit) {
  TESSERA_RETURN_IF_ERROR(ValidateSchedulingRequest(request));
  if (request.bundle_target.has_value()) {
    return absl::InvalidArgumentError(
        "the request targets a placement group bundle: its reservation serves it, not the free "
        "nodes");
  }
  excluded_.clear();
  for (const NodeId& id : request.excluded_nodes) {
    if (std::optional<NodeIndex> node = cluster_->Find(id)) excluded_.push_back(*node);
  }
  auto alive = [&](const NodeId& id) -> std::optional<NodeIndex> {
    std::optional<NodeIndex> node = cluster_->Find(id);
    if (node && cluster_->node(*node).state == NodeState::kAlive &&
        std::find(excluded_.begin(), excluded_.end(), *node) == excluded_.end()) {
      return node;
    }
    return std::nullopt;
  };
  std::optional<NodeIndex> preferred;
  const bool hard = request.affinity && request.affinity->kind == AffinityKind::kHard;
  if (request.affinity) {
    preferred = alive(request.affinity->node);
  } else if (request.local_node && request.strategy == NodeRanking::kDefault) {
    preferred = alive(*request.local_node);
  }

  ScheduleResult result;
  const Outcome outcome = (hard && !preferred) ? Outcome{} : Pick(request, preferred);
  if (outcome.node && commit == Commit::kAdviseOnly) {
    const NodeRecord& record = cluster_->node(*outcome.node);
    result.placement = Placement{record.id, Allocation{}, outcome.option};
    result.placement->allocation.node = record.id;
    return result;
  }
  if (outcome.node) {
    absl::StatusOr<Allocation> allocation =
        cluster_->Allocate(*outcome.node, request.resources,
                           request.holder.kind == HolderKind::kUnknown
                               ? Holder{HolderKind::kTask, absl::StrCat(request.id.value())}
                               : request.holder);
    if (!allocation.ok()) {
      return absl::InternalError(
          absl::StrCat("allocation on a node that fit failed: ", allocation.status().message()));
    }
    result.placement = Placement{allocation->node, *std::move(allocation), outcome.option};
    parked_.erase(request.id.value());
    return result;
  }
  if (hard) {
    result = ExplainHardAffinity(request);
  } else {
    std::vector<NodeIndex> nodes;
    if (const UtilizationIndex* all = cluster_->UtilizationOrder("")) {
      nodes.reserve(all->size());
      for (const auto& [utilization, node] : *all) {
        if (std::find(excluded_.begin(), excluded_.end(), node) == excluded_.end()) {
          nodes.push_back(node);
        }
      }
    }
    std::sort(nodes.begin(), nodes.end());
    const size_t tried = request.excluded_nodes.size();
    result = Explain(request, nodes,
                     tried == 0 ? std::string()
                                : absl::StrCat("besides the ", tried,
                                               tried == 1 ? " node" : " nodes", " tried: "));
    // A node that was tried may take it later: what fits only there is pending, not infeasible.
    if (result.status == ScheduleStatus::kInfeasible && !excluded_.empty()) {
      for (NodeIndex node : excluded_) {
        if (FeasibleOnNode(request, node)) {
          result.status = ScheduleStatus::kPending;
          break;
        }
      }
    }
  }
  if (commit == Commit::kAdviseOnly) return result;
  if (result.status == ScheduleStatus::kInfeasible) {
    parked_.insert_or_assign(request.id.value(), request);
  } else {
    parked_.erase(request.id.value());
  }
  return result;
}

std::vector<RequestId> TaskScheduler::OnClusterChanged() {
  const std::vector<NodeIndex>& log = cluster_->feasibility_log();
  if (log_cursor_ == log.size()) return {};
  std::vector<NodeIndex> changed(log.begin() + static_cast<std::ptrdiff_t>(log_cursor_), log.end());
  log_cursor_ = log.size();
  std::vector<RequestId> ready;
  if (parked_.empty()) return ready;
  std::sort(changed.begin(), changed.end());
  changed.erase(std::unique(changed.begin(), changed.end()), changed.end());
  for (auto it = parked_.begin(); it != parked_.end();) {
    bool feasible = false;
    for (NodeIndex node : changed) {
      ++reexamined_pairs_;
      if (FeasibleOnNode(it->second, node)) {
        feasible = true;
        break;
      }
    }
    if (feasible) {
      ready.push_back(RequestId(it->first));
      it = parked_.erase(it);
    } else {
      ++it;
    }
  }
  return ready;
}

}  // namespace tessera
