#include "scheduling/placement_group_scheduler.h"

#include <algorithm>
#include <optional>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/ignore_status.h"
#include "base/status_macros.h"
#include "base/string_util.h"
#include "scheduling/bundle_search.h"
#include "scheduling/explanation.h"

namespace tessera {
namespace {

std::vector<NodeIndex> AliveNodes(const ClusterView& cluster) {
  std::vector<NodeIndex> nodes;
  if (const UtilizationIndex* all = cluster.UtilizationOrder("")) {
    nodes.reserve(all->size());
    for (const auto& [utilization, node] : *all) nodes.push_back(node);
  }
  std::sort(nodes.begin(), nodes.end());
  return nodes;
}

}  // namespace

std::string_view PlacementGroupStateName(PlacementGroupState state) {
  switch (state) {
    case PlacementGroupState::kCreated: return "CREATED";
    case PlacementGroupState::kRescheduling: return "RESCHEDULING";
  }
  return "UNKNOWN";
}

bool PlacementGroupScheduler::Usable(NodeIndex node, const LabelSelector& selector,
                                     const ResourceSet& demand) const {
  const NodeRecord& record = cluster_->node(node);
  return !record.removed && record.state == NodeState::kAlive && selector.Matches(record.labels) &&
         cluster_->FitsNow(node, demand);
}

std::optional<NodeIndex> PlacementGroupScheduler::FirstNode(
    const LabelSelector& selector, const ResourceSet& demand, const std::set<NodeIndex>& excluded,
    const std::vector<const LabelSelector*>& also_match) const {
  const std::vector<NodeIndex> first =
      FirstAcceptedNodes(*cluster_, selector, demand, 1, [&](NodeIndex n) {
        if (excluded.count(n) != 0 || !Usable(n, selector, demand)) return false;
        for (const LabelSelector* s : also_match) {
          if (!s->Matches(cluster_->node(n).labels)) return false;
        }
        return true;
      });
  if (first.empty()) return std::nullopt;
  return first.front();
}

PlacementGroupScheduler::Attempt PlacementGroupScheduler::Place(const BundleOption& option,
                                                                PlacementStrategy strategy,
                                                                const std::vector<int>& todo,
                                                                const std::set<NodeIndex>& used) {
  Attempt attempt = Greedy(option, strategy, todo, used);
  if (attempt.placed) return attempt;
  // The greedy pass can strand bundles (one took the only node another could use): search.
  BundleSearchRequest request;
  request.option = &option;
  request.strategy = strategy;
  request.todo = todo;
  request.used = used;
  BundleSearchResult found = SearchBundles(*cluster_, request);
  if (found.outcome == SearchOutcome::kFound) {
    attempt.placed = true;
    attempt.taken = std::move(found.taken);
    attempt.failed_bundle = -1;
    return attempt;
  }
  attempt.gave_up = found.outcome == SearchOutcome::kGaveUp;
  if (found.failed_bundle >= 0) attempt.failed_bundle = found.failed_bundle;
  return attempt;
}

PlacementGroupScheduler::Attempt PlacementGroupScheduler::Greedy(const BundleOption& option,
                                                                 PlacementStrategy strategy,
                                                                 const std::vector<int>& todo,
                                                                 const std::set<NodeIndex>& used) {
  Attempt attempt;
  std::set<NodeIndex> used_now = used;
  auto take = [&](int b, NodeIndex n) {
    absl::StatusOr<Allocation> allocation = cluster_->Allocate(n, option.bundles[b]);
    if (!allocation.ok()) return false;
    attempt.taken.emplace_back(b, *std::move(allocation));
    used_now.insert(n);
    return true;
  };
  // All or nothing: the first bundle that finds no node undoes every allocation of this attempt.
  auto fail = [&](int b) {
    for (auto it = attempt.taken.rbegin(); it != attempt.taken.rend(); ++it) {
      IgnoreStatus(cluster_->Release(it->second.id), "cannot fail: this attempt took it");
    }
    attempt.taken.clear();
    attempt.failed_bundle = b;
    return attempt;
  };
  const std::vector<int> order = ScarcestFirst(option, todo);
  static const std::set<NodeIndex> kNone;
  switch (strategy) {
    case PlacementStrategy::kStrictPack: {
      ResourceSet sum;
      std::vector<const LabelSelector*> others;
      for (int b : order) {
        absl::StatusOr<ResourceSet> more = sum.Plus(option.bundles[b]);
        if (!more.ok()) return fail(-1);
        sum = *std::move(more);
        others.push_back(&BundleSelector(option, b));
      }
      const std::optional<NodeIndex> node =
          FirstNode(BundleSelector(option, order[0]), sum, kNone, others);
      if (!node) return fail(-1);
      for (int b : order) {
        if (!take(b, *node)) return fail(b);
      }
      break;
    }
    case PlacementStrategy::kStrictSpread:
      for (int b : order) {
        const std::optional<NodeIndex> node =
            FirstNode(BundleSelector(option, b), option.bundles[b], used_now, {});
        if (!node || !take(b, *node)) return fail(b);
      }
      break;
    case PlacementStrategy::kSpread:
      for (int b : order) {
        // A node of its own when one fits, else share one the group already uses.
        std::optional<NodeIndex> node =
            FirstNode(BundleSelector(option, b), option.bundles[b], used_now, {});
        if (!node) node = FirstNode(BundleSelector(option, b), option.bundles[b], kNone, {});
        if (!node || !take(b, *node)) return fail(b);
      }
      break;
    case PlacementStrategy::kPack: {
      // Reference §4.3: the scarcest unplaced bundle picks a node (one the group already uses
      // first), every other remaining bundle that fits joins it, then the next node.
      std::vector<int> remaining = order;
      std::set<NodeIndex> dropped;
      while (!remaining.empty()) {
        const int b = remaining.front();
        const LabelSelector& selector = BundleSelector(option, b);
        std::optional<NodeIndex> node;
        for (NodeIndex n : used_now) {
          if (dropped.count(n) == 0 && Usable(n, selector, option.bundles[b])) {
            node = n;
            break;
          }
        }
        if (!node) node = FirstNode(selector, option.bundles[b], dropped, {});
        if (!node || !take(b, *node)) return fail(b);
        remaining.erase(remaining.begin());
        for (auto it = remaining.begin(); it != remaining.end();) {
          if (Usable(*node, BundleSelector(option, *it), option.bundles[*it]) && take(*it, *node)) {
            it = remaining.erase(it);
          } else {
            ++it;
          }
        }
        dropped.insert(*node);
      }
      break;
    }
  }
  attempt.placed = true;
  return attempt;
}

Diagnosis PlacementGroupScheduler::Explain(const BundleOption& option, PlacementStrategy strategy,
                                           const std::vector<int>& todo,
                                           const std::set<NodeIndex>& used,
                                           const Attempt& attempt) const {
  const std::vector<NodeIndex> alive = AliveNodes(*cluster_);
  const size_t n = todo.size();
  BundleSearchRequest request;
  request.option = &option;
  request.strategy = strategy;
  request.todo = todo;
  request.used = used;
  Diagnosis d;
  if (strategy == PlacementStrategy::kStrictPack) return ExplainStrictPack(option, alive, request);
  const bool strict_spread = strategy == PlacementStrategy::kStrictSpread;
  for (int b : todo) {
    bool anywhere = false;
    for (NodeIndex node : alive) {
      if (BundleSelector(option, b).Matches(cluster_->node(node).labels) &&
          cluster_->FeasibleOn(node, option.bundles[b])) {
        anywhere = true;
        break;
      }
    }
    if (!anywhere) {
      d.text = absl::StrCat(
          "bundle ", b, ": ",
          Diagnose(*cluster_, BundleSelector(option, b), option.bundles[b], alive).text);
      return d;
    }
  }
  // Each bundle fits some node; whether they fit together, on an idle cluster.
  IdleFeasibility idle = CheckIdleFeasibility(*cluster_, request);
  if (idle.outcome == SearchOutcome::kNone) {
    d.text = std::move(idle.why);
    return d;
  }
  d.feasible = true;
  if (attempt.gave_up) {
    d.text = absl::StrCat("no placement of the ", n, " bundles found within ", kMaxSearchSteps,
                          " tries (", ToAbsl(PlacementStrategyName(strategy)), ")");
    return d;
  }
  const int b = attempt.failed_bundle >= 0 ? attempt.failed_bundle : todo.front();
  bool fits_alone = false;
  for (NodeIndex node : alive) {
    if ((!strict_spread || used.count(node) == 0) &&
        Usable(node, BundleSelector(option, b), option.bundles[b])) {
      fits_alone = true;
      break;
    }
  }
  if (!fits_alone) {
    d.text =
        absl::StrCat("bundle ", b, ": ",
                     Diagnose(*cluster_, BundleSelector(option, b), option.bundles[b], alive).text);
  } else {
    d.text = absl::StrCat("bundle ", b, " (", option.bundles[b].ToString(), "): no node has room ",
                          "for it alongside the group's other bundles (",
                          ToAbsl(PlacementStrategyName(strategy)), ")");
  }
  return d;
}

Diagnosis PlacementGroupScheduler::ExplainStrictPack(const BundleOption& option,
                                                     const std::vector<NodeIndex>& alive,
                                                     const BundleSearchRequest& request) const {
  const std::vector<int>& todo = request.todo;
  const size_t n = todo.size();
  Diagnosis d;
  ResourceSet sum;
  for (int b : todo) sum = sum.Plus(option.bundles[b]).value_or(sum);
  std::vector<NodeIndex> matching;
  for (NodeIndex node : alive) {
    bool all = true;
    for (int b : todo) all = all && BundleSelector(option, b).Matches(cluster_->node(node).labels);
    if (all) matching.push_back(node);
  }
  const std::string together = absl::StrCat("the ", n, n == 1 ? " bundle" : " bundles");
  if (matching.empty()) {
    d.text = absl::StrCat("no node matches the selectors of ", together, " (STRICT_PACK)");
    return d;
  }
  if (CheckIdleFeasibility(*cluster_, request).outcome == SearchOutcome::kNone) {
    std::string shortest;
    for (const auto& [name, need] : sum) {
      Quantity largest;
      for (NodeIndex node : matching) {
        largest = std::max(largest, cluster_->node(node).total.Get(name));
      }
      if (largest < need && shortest.empty()) {
        shortest = absl::StrCat("; largest node has ", FormatResourceAmount(name, largest));
        shortest = absl::StrCat(name, "=", FormatResourceAmount(name, need), shortest);
      }
    }
    d.text = absl::StrCat("no node can hold ", together, " together (STRICT_PACK needs ",
                          shortest.empty() ? sum.ToString() : shortest, ")");
    return d;
  }
  // Nodes with the totals for the sum and the devices for each bundle.
  size_t could = 0;
  for (NodeIndex node : matching) {
    bool holds = cluster_->node(node).total.Contains(sum);
    for (int b : todo) holds = holds && cluster_->FeasibleOn(node, option.bundles[b]);
    could += holds ? 1 : 0;
  }
  d.feasible = true;
  d.text = absl::StrCat(could, could == 1 ? " node could hold " : " nodes could hold ", together,
                        " together (STRICT_PACK needs ", sum.ToString(), "); none has room now");
  return d;
}

std::vector<std::pair<std::string, std::vector<NodeIndex>>> PlacementGroupScheduler::LabelValues(
    const PlacementGroupSpec& spec, const std::optional<std::string>& pinned) const {
  std::vector<std::pair<std::string, std::vector<NodeIndex>>> values =
      cluster_->NodesByLabelValue(spec.same_label);
  if (pinned.has_value()) {
    std::erase_if(values, [&](const auto& v) { return v.first != *pinned; });
  }
  std::stable_sort(values.begin(), values.end(),
                   [](const auto& a, const auto& b) { return a.second.size() < b.second.size(); });
  return values;
}

namespace {

ResourceSet SummedDemand(const BundleOption& option, const std::vector<int>& todo) {
  ResourceSet demand;
  for (int b : todo) demand = demand.Plus(option.bundles[b]).value_or(demand);
  return demand;
}

// Whether what the nodes hold in all (`now`: free now) covers `demand`.
bool Covers(const ClusterView& cluster, const std::vector<NodeIndex>& nodes,
            const ResourceSet& demand, bool now) {
  ResourceSet sum;
  for (NodeIndex n : nodes) {
    const NodeRecord& r = cluster.node(n);
    sum = sum.Plus(now ? r.available : r.total).value_or(sum);
  }
  return sum.Contains(demand);
}

// `option` with every bundle's selector also requiring key=value; nullopt when no selector can
// say that (an empty value: a selector's values are never empty). Such a value is skipped, not
// tried unconfined, which could spread the group over other values of the label.
std::optional<BundleOption> Confine(const BundleOption& option, const std::string& key,
                                    const std::string& value) {
  BundleOption confined = option;
  confined.selectors.resize(confined.bundles.size());
  for (LabelSelector& selector : confined.selectors) {
    if (!selector.AddConstraint(LabelConstraint{key, SelectorOperator::kIn, {value}}).ok()) {
      return std::nullopt;
    }
  }
  return confined;
}

}  // namespace

PlacementGroupScheduler::Attempt PlacementGroupScheduler::PlaceGroup(
    const PlacementGroupSpec& spec, const BundleOption& option, const std::vector<int>& todo,
    const std::set<NodeIndex>& used, const std::optional<std::string>& pinned) {
  if (spec.same_label.empty()) return Place(option, spec.strategy, todo, used);
  const ResourceSet demand = SummedDemand(option, todo);
  Attempt attempt;
  for (const auto& [value, nodes] : LabelValues(spec, pinned)) {
    if (!Covers(*cluster_, nodes, demand, /*now=*/true)) continue;
    const std::optional<BundleOption> confined = Confine(option, spec.same_label, value);
    if (!confined.has_value()) continue;
    attempt = Place(*confined, spec.strategy, todo, used);
    if (attempt.placed) return attempt;
  }
  return attempt;
}

Diagnosis PlacementGroupScheduler::ExplainGroup(const PlacementGroupSpec& spec,
                                                const BundleOption& option,
                                                const std::vector<int>& todo,
                                                const std::set<NodeIndex>& used,
                                                const std::optional<std::string>& pinned,
                                                const Attempt& attempt) const {
  if (spec.same_label.empty()) return Explain(option, spec.strategy, todo, used, attempt);
  const std::string& key = spec.same_label;
  const std::vector<std::pair<std::string, std::vector<NodeIndex>>> values =
      LabelValues(spec, pinned);
  Diagnosis why;
  if (values.empty()) {
    why.text = pinned.has_value() ? absl::StrCat("no alive node has ", key, "=", *pinned,
                                                 ", where the group's other bundles are")
                                  : absl::StrCat("no alive node has label ", key);
    return why;
  }
  // PENDING when some value could hold the group on an idle cluster: the first such value is
  // shown, else the first that could hold its summed demand.
  const ResourceSet demand = SummedDemand(option, todo);
  std::optional<std::pair<std::string, Diagnosis>> shown;
  for (const auto& [value, nodes] : values) {
    if (!Covers(*cluster_, nodes, demand, /*now=*/false)) continue;
    const std::optional<BundleOption> confined = Confine(option, key, value);
    if (!confined.has_value()) continue;
    Diagnosis d = Explain(*confined, spec.strategy, todo, used, Attempt{});
    if (!shown.has_value() || (d.feasible && !shown->second.feasible)) shown.emplace(value, d);
    if (d.feasible) break;
  }
  if (!shown.has_value()) {
    why.text =
        absl::StrCat("no value of ", key, " has nodes that could ever hold ", demand.ToString(),
                     " together (", values.size(), values.size() == 1 ? " value)" : " values)");
    return why;
  }
  const std::string where =
      pinned.has_value() ? absl::StrCat(key, "=", *pinned, " (where the group's other bundles are)")
                         : absl::StrCat("one value of ", key);
  why.feasible = shown->second.feasible;
  why.text =
      absl::StrCat("confined to ", where, ": ", key, "=", shown->first, ": ", shown->second.text);
  return why;
}

std::optional<std::string> PlacementGroupScheduler::PinnedValue(const PlacementGroup& group) const {
  if (group.spec.same_label.empty()) return std::nullopt;
  for (const std::optional<BundlePlacement>& bundle : group.bundles) {
    if (!bundle) continue;
    const std::optional<NodeIndex> n = cluster_->Find(bundle->node);
    if (!n.has_value()) continue;
    const LabelSet& labels = cluster_->node(*n).labels;
    auto it = labels.find(group.spec.same_label);
    if (it != labels.end()) return it->second;
  }
  return std::nullopt;
}

void PlacementGroupScheduler::Own(PlacementGroup& group, int bundle, const Allocation& allocation) {
  group.bundles[bundle] = BundlePlacement{allocation.node, allocation};
  owners_[allocation.id.value()] = {group.id.value(), bundle};
  IgnoreStatus(cluster_->SetHolder(allocation.id,
                                   Holder{HolderKind::kPlacementGroup,
                                          group.spec.name.empty() ? absl::StrCat(group.id.value())
                                                                  : group.spec.name}),
               "cannot fail: the allocation was just taken");
}

absl::StatusOr<PlacementGroupResult> PlacementGroupScheduler::Create(
    const PlacementGroupSpec& spec) {
  TESSERA_RETURN_IF_ERROR(ValidatePlacementGroupSpec(spec));
  if (!spec.name.empty() && by_name_.contains(spec.name)) {
    return absl::AlreadyExistsError(
        absl::StrCat("a placement group named ", Quote(spec.name), " exists"));
  }
  const std::vector<const BundleOption*> options = OptionsInOrder(spec);
  std::vector<Attempt> failed(options.size());
  for (size_t i = 0; i < options.size(); ++i) {
    std::vector<int> todo(options[i]->bundles.size());
    for (size_t b = 0; b < todo.size(); ++b) todo[b] = static_cast<int>(b);
    Attempt attempt = PlaceGroup(spec, *options[i], todo, {}, std::nullopt);
    if (!attempt.placed) {
      failed[i] = std::move(attempt);
      continue;
    }
    PlacementGroup group;
    group.id = PlacementGroupId(next_id_++);
    group.spec = spec;
    group.option = i;
    group.bundles.resize(todo.size());
    for (const auto& [b, allocation] : attempt.taken) Own(group, b, allocation);
    PlacementGroupResult result;
    result.id = group.id;
    result.option = i;
    for (const auto& placement : group.bundles) result.bundles.push_back(*placement);
    if (!spec.name.empty()) by_name_.emplace(spec.name, group.id.value());
    groups_.emplace(group.id.value(), std::move(group));
    return result;
  }
  PlacementGroupResult result;
  bool feasible = false;
  std::vector<std::string> texts;
  for (size_t i = 0; i < options.size(); ++i) {
    std::vector<int> todo(options[i]->bundles.size());
    for (size_t b = 0; b < todo.size(); ++b) todo[b] = static_cast<int>(b);
    const Diagnosis d = ExplainGroup(spec, *options[i], todo, {}, std::nullopt, failed[i]);
    feasible = feasible || d.feasible;
    texts.push_back(options.size() == 1 ? d.text : absl::StrCat("option ", i, ": ", d.text));
  }
  result.status = feasible ? ScheduleStatus::kPending : ScheduleStatus::kInfeasible;
  result.explanation = absl::StrJoin(texts, "; ");
  return result;
}

absl::StatusOr<PlacementGroupRestoreResult> PlacementGroupScheduler::Restore(
    const PlacementGroupSpec& spec, size_t option, std::span<const RestoredBundle> bundles) {
  TESSERA_RETURN_IF_ERROR(ValidatePlacementGroupSpec(spec));
  const std::string what = spec.name.empty() ? std::string("an anonymous placement group")
                                             : absl::StrCat("placement group ", Quote(spec.name));
  if (!spec.name.empty() && by_name_.contains(spec.name)) {
    return absl::AlreadyExistsError(
        absl::StrCat("a placement group named ", Quote(spec.name), " exists"));
  }
  const std::vector<const BundleOption*> options = OptionsInOrder(spec);
  if (option >= options.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": option ", option, " does not exist (the spec has ", options.size(), ")"));
  }
  const BundleOption& chosen = *options[option];
  if (bundles.size() != chosen.bundles.size()) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", bundles.size(),
                                                   " restored bundles for the ",
                                                   chosen.bundles.size(), " of option ", option));
  }
  PlacementGroup group;
  group.id = PlacementGroupId(next_id_++);
  group.spec = spec;
  group.option = option;
  group.bundles.resize(bundles.size());
  PlacementGroupRestoreResult result;
  result.id = group.id;
  result.option = option;
  std::vector<int> waiting;  // given without a node
  for (size_t b = 0; b < bundles.size(); ++b) {
    const RestoredBundle& restored = bundles[b];
    const int index = static_cast<int>(b);
    if (!restored.node.has_value()) {
      waiting.push_back(index);
      continue;
    }
    auto refuse = [&](std::string reason) {
      result.refused.push_back(UnrestoredBundle{index, std::move(reason)});
    };
    const std::optional<NodeIndex> node = cluster_->Find(*restored.node);
    if (!node.has_value()) {
      refuse(absl::StrCat("node ", restored.node->value(), " is not in the cluster"));
      continue;
    }
    if (restored.resources != chosen.bundles[b]) {
      refuse(absl::StrCat("its allocation ", restored.resources.ToString(),
                          " is not the bundle's demand ", chosen.bundles[b].ToString()));
      continue;
    }
    // RestoreExact refuses a dead node, more than is free, and grants that do not match.
    absl::StatusOr<Allocation> allocation =
        cluster_->RestoreExact(*node, restored.resources, restored.devices);
    if (!allocation.ok()) {
      refuse(std::string(allocation.status().message()));
      continue;
    }
    Own(group, index, *allocation);
  }
  for (const UnrestoredBundle& r : result.refused) {
    if (!result.explanation.empty()) absl::StrAppend(&result.explanation, "; ");
    absl::StrAppend(&result.explanation, "bundle ", r.bundle, ": ", r.reason);
  }
  const bool complete = result.refused.empty() && waiting.empty();
  group.state = complete ? PlacementGroupState::kCreated : PlacementGroupState::kRescheduling;
  if (!result.explanation.empty()) {
    group.explanation = absl::StrCat("not restored: ", result.explanation);
  } else if (!complete) {
    group.explanation =
        absl::StrCat(waiting.size() == 1 ? "bundle " : "bundles ", absl::StrJoin(waiting, ", "),
                     waiting.size() == 1 ? " has" : " have", " no node yet");
  }
  result.state = group.state;
  result.bundles = group.bundles;
  if (!spec.name.empty()) by_name_.emplace(spec.name, group.id.value());
  groups_.emplace(group.id.value(), std::move(group));
  return result;
}

absl::StatusOr<std::vector<Allocation>> PlacementGroupScheduler::Remove(PlacementGroupId id) {
  auto it = groups_.find(id.value());
  if (it == groups_.end()) {
    return absl::NotFoundError(absl::StrCat("no placement group ", id.value()));
  }
  std::vector<Allocation> released;
  for (const std::optional<BundlePlacement>& bundle : it->second.bundles) {
    if (!bundle) continue;
    owners_.erase(bundle->allocation.id.value());
    absl::StatusOr<Allocation> r = cluster_->Release(bundle->allocation.id);
    if (r.ok()) released.push_back(*std::move(r));
  }
  if (!it->second.spec.name.empty()) by_name_.erase(it->second.spec.name);
  groups_.erase(it);
  return released;
}

RescheduleReport PlacementGroupScheduler::Replace(PlacementGroup& group) {
  const BundleOption& option = *OptionsInOrder(group.spec)[group.option];
  if (group.spec.strategy == PlacementStrategy::kStrictPack) {
    // STRICT_PACK keeps every bundle on one node, and the lost node is gone: the survivors are
    // released and the whole group is placed again together (reference §4.7).
    for (std::optional<BundlePlacement>& bundle : group.bundles) {
      if (!bundle) continue;
      owners_.erase(bundle->allocation.id.value());
      IgnoreStatus(cluster_->Release(bundle->allocation.id),
                   "a bundle on the lost node went with it (NotFound): nothing to give back");
      bundle.reset();
    }
  }
  std::vector<int> todo;
  std::set<NodeIndex> used;
  for (size_t b = 0; b < group.bundles.size(); ++b) {
    if (!group.bundles[b]) {
      todo.push_back(static_cast<int>(b));
    } else if (std::optional<NodeIndex> n = cluster_->Find(group.bundles[b]->node)) {
      used.insert(*n);
    }
  }
  RescheduleReport report;
  report.id = group.id;
  report.name = group.spec.name;
  report.bundles = todo;
  if (todo.empty()) {
    report.placed = true;
    group.state = PlacementGroupState::kCreated;
    return report;
  }
  // The group keeps the option it was created with (its bundle shapes and selectors), and its
  // label value while any bundle is placed.
  const std::optional<std::string> pinned = PinnedValue(group);
  const Attempt attempt = PlaceGroup(group.spec, option, todo, used, pinned);
  if (attempt.placed) {
    for (const auto& [b, allocation] : attempt.taken) Own(group, b, allocation);
    group.state = PlacementGroupState::kCreated;
    group.explanation.clear();
    report.placed = true;
    return report;
  }
  group.state = PlacementGroupState::kRescheduling;
  group.explanation = ExplainGroup(group.spec, option, todo, used, pinned, attempt).text;
  report.explanation = group.explanation;
  return report;
}

std::vector<RescheduleReport> PlacementGroupScheduler::OnNodeFailed(
    const NodeId& node, std::span<const Allocation> lost) {
  std::set<int64_t> affected;
  auto clear = [&](int64_t allocation) {
    auto it = owners_.find(allocation);
    if (it == owners_.end()) return;
    const auto [group, bundle] = it->second;
    groups_.at(group).bundles[bundle].reset();
    owners_.erase(it);
    affected.insert(group);
  };
  for (const Allocation& a : lost) clear(a.id.value());
  // Bundles the caller did not list but that sat on the node are lost just the same.
  for (auto& [id, group] : groups_) {
    for (std::optional<BundlePlacement>& bundle : group.bundles) {
      if (bundle && bundle->node == node) clear(bundle->allocation.id.value());
    }
  }
  std::vector<RescheduleReport> reports;
  for (int64_t id : affected) reports.push_back(Replace(groups_.at(id)));
  return reports;
}

std::vector<RescheduleReport> PlacementGroupScheduler::OnClusterChanged() {
  std::vector<RescheduleReport> reports;
  for (auto& [id, group] : groups_) {
    if (group.state == PlacementGroupState::kRescheduling) reports.push_back(Replace(group));
  }
  return reports;
}

const PlacementGroup* PlacementGroupScheduler::Find(PlacementGroupId id) const {
  auto it = groups_.find(id.value());
  return it == groups_.end() ? nullptr : &it->second;
}

std::optional<PlacementGroupId> PlacementGroupScheduler::FindByName(std::string_view name) const {
  auto it = by_name_.find(name);
  if (it == by_name_.end()) return std::nullopt;
  return PlacementGroupId(it->second);
}

}  // namespace tessera
