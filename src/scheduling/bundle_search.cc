#include "scheduling/bundle_search.h"

#include <algorithm>
#include <limits>
#include <map>
#include <numeric>
#include <tuple>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/ignore_status.h"
#include "scheduling/resource_families.h"

namespace tessera {
namespace {

// Label-index candidates are examined one by one when few (as TaskScheduler does).
constexpr size_t kSmallCandidateSet = 16;
// Node names an explanation lists before it says "...".
constexpr size_t kNamesShown = 5;

bool Alive(const ClusterView& cluster, NodeIndex n) {
  const NodeRecord& record = cluster.node(n);
  return !record.removed && record.state == NodeState::kAlive;
}

// Whether the bundle could go on the node: now (free amounts) or ever (totals).
bool Holds(const ClusterView& cluster, NodeIndex n, const BundleOption& option, int b, bool now) {
  const NodeRecord& record = cluster.node(n);
  if (!Alive(cluster, n) || !BundleSelector(option, b).Matches(record.labels)) return false;
  return now ? cluster.FitsNow(n, option.bundles[b]) : cluster.FeasibleOn(n, option.bundles[b]);
}

// The nodes each bundle of `todo` may use, by position in `todo`: the first n that hold it (n =
// bundles to place; see the header for why that is enough), plus, for PACK and SPREAD, the
// group's own nodes that hold it (PACK first, SPREAD last).
std::vector<std::vector<NodeIndex>> Candidates(const ClusterView& cluster,
                                               const BundleSearchRequest& request, bool now) {
  const BundleOption& option = *request.option;
  const bool strict_spread = request.strategy == PlacementStrategy::kStrictSpread;
  std::vector<std::vector<NodeIndex>> out;
  out.reserve(request.todo.size());
  for (int b : request.todo) {
    // Alike bundles (same demand, same selector) have alike candidates: computed once.
    auto alike = std::find_if(request.todo.begin(), request.todo.begin() + out.size(), [&](int e) {
      return option.bundles[e] == option.bundles[b] &&
             BundleSelector(option, e) == BundleSelector(option, b);
    });
    if (alike != request.todo.begin() + out.size()) {
      out.push_back(out[alike - request.todo.begin()]);
      continue;
    }
    std::vector<NodeIndex> nodes =
        FirstAcceptedNodes(cluster, BundleSelector(option, b), option.bundles[b],
                           request.todo.size(), [&](NodeIndex n) {
                             return request.used.count(n) == 0 && Holds(cluster, n, option, b, now);
                           });
    if (!strict_spread) {
      std::vector<NodeIndex> own;
      for (NodeIndex n : request.used) {
        if (Holds(cluster, n, option, b, now)) own.push_back(n);
      }
      nodes.insert(request.strategy == PlacementStrategy::kPack ? nodes.begin() : nodes.end(),
                   own.begin(), own.end());
    }
    out.push_back(std::move(nodes));
  }
  return out;
}

// Positions of `todo`, most constrained first: fewest candidates, then scarcest demand.
std::vector<size_t> MostConstrainedFirst(const BundleOption& option, const std::vector<int>& todo,
                                         const std::vector<std::vector<NodeIndex>>& candidates) {
  const std::vector<int> scarce = ScarcestFirst(option, todo);
  std::map<int, size_t> scarcity_rank;
  for (size_t i = 0; i < scarce.size(); ++i) scarcity_rank[scarce[i]] = i;
  std::vector<size_t> order(todo.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) {
    return std::make_pair(candidates[x].size(), scarcity_rank[todo[x]]) <
           std::make_pair(candidates[y].size(), scarcity_rank[todo[y]]);
  });
  return order;
}

// A bound before any search: for every resource, what the bundles ask in all is at most what
// their candidate nodes have free in all.
bool FreeSumSuffices(const ClusterView& cluster, const BundleSearchRequest& request,
                     const std::vector<std::vector<NodeIndex>>& candidates) {
  ResourceSet demand;
  for (int b : request.todo) {
    absl::StatusOr<ResourceSet> more = demand.Plus(request.option->bundles[b]);
    if (!more.ok()) return true;  // too large to sum: let the search decide
    demand = *std::move(more);
  }
  std::set<NodeIndex> nodes;
  for (const std::vector<NodeIndex>& c : candidates) nodes.insert(c.begin(), c.end());
  ResourceSet free;
  for (NodeIndex n : nodes) {
    absl::StatusOr<ResourceSet> more = free.Plus(cluster.node(n).available);
    if (!more.ok()) return true;
    free = *std::move(more);
  }
  return free.Contains(demand);
}

void ReleaseAll(ClusterView& cluster, std::vector<std::pair<int, Allocation>>& taken) {
  for (auto it = taken.rbegin(); it != taken.rend(); ++it) {
    IgnoreStatus(cluster.Release(it->second.id), "cannot fail: this search took it");
  }
  taken.clear();
}

// STRICT_SPREAD: bundles to distinct nodes by augmenting paths (Kuhn), most constrained first.
class Matching {
 public:
  explicit Matching(const std::vector<std::vector<NodeIndex>>& candidates)
      : candidates_(candidates), node_of_(candidates.size(), -1) {}

  // The positions left unmatched by a maximum matching, in the order given.
  std::vector<size_t> Run(const std::vector<size_t>& order) {
    std::vector<size_t> unmatched;
    for (size_t position : order) {
      absl::flat_hash_set<NodeIndex> visited;
      if (!Augment(position, visited)) unmatched.push_back(position);
    }
    return unmatched;
  }
  NodeIndex node_of(size_t position) const { return node_of_[position]; }

  // From the unmatched positions, the positions reachable by alternating paths and their nodes:
  // every one of those nodes is matched within the set, so the positions (more than the nodes)
  // cannot all get a node of their own.
  std::pair<std::vector<size_t>, std::vector<NodeIndex>> Obstacle(
      const std::vector<size_t>& unmatched) const {
    std::set<size_t> positions(unmatched.begin(), unmatched.end());
    std::set<NodeIndex> nodes;
    std::vector<size_t> queue = unmatched;
    while (!queue.empty()) {
      const size_t p = queue.back();
      queue.pop_back();
      for (NodeIndex n : candidates_[p]) {
        if (!nodes.insert(n).second) continue;
        auto it = holder_.find(n);
        if (it != holder_.end() && positions.insert(it->second).second) queue.push_back(it->second);
      }
    }
    return {std::vector<size_t>(positions.begin(), positions.end()),
            std::vector<NodeIndex>(nodes.begin(), nodes.end())};
  }

 private:
  bool Augment(size_t position, absl::flat_hash_set<NodeIndex>& visited) {
    for (NodeIndex n : candidates_[position]) {
      if (!visited.insert(n).second) continue;
      auto it = holder_.find(n);
      if (it == holder_.end() || Augment(it->second, visited)) {
        holder_[n] = position;
        node_of_[position] = n;
        return true;
      }
    }
    return false;
  }

  const std::vector<std::vector<NodeIndex>>& candidates_;
  std::vector<NodeIndex> node_of_;                 // by position; -1 unmatched
  absl::flat_hash_map<NodeIndex, size_t> holder_;  // node -> position
};

// PACK and SPREAD: depth-first over the bundles in `order`, each trying its candidates.
class Backtracking {
 public:
  Backtracking(ClusterView& cluster, const BundleSearchRequest& request,
               const std::vector<std::vector<NodeIndex>>& candidates,
               const std::vector<size_t>& order)
      : cluster_(cluster),
        request_(request),
        candidates_(candidates),
        order_(order),
        chosen_(order.size(), 0),
        twin_(order.size(), -1) {
    const BundleOption& option = *request.option;
    for (size_t level = 0; level < order.size(); ++level) {
      const int b = request.todo[order[level]];
      for (size_t earlier = level; earlier-- > 0;) {
        const int e = request.todo[order[earlier]];
        if (option.bundles[e] == option.bundles[b] &&
            BundleSelector(option, e) == BundleSelector(option, b)) {
          twin_[level] = static_cast<int>(earlier);
          break;
        }
      }
      for (NodeIndex n : candidates[order[level]]) watchers_[n].push_back(level);
    }
    for (NodeIndex n : request.used) ++on_node_[n];
  }

  SearchOutcome Run() {
    if (Go(0)) return SearchOutcome::kFound;
    return gave_up_ ? SearchOutcome::kGaveUp : SearchOutcome::kNone;
  }
  std::vector<std::pair<int, Allocation>>& taken() { return taken_; }
  int64_t steps() const { return steps_; }

 private:
  const ResourceSet& Demand(size_t level) const {
    return request_.option->bundles[request_.todo[order_[level]]];
  }

  bool Go(size_t level) {
    if (level == order_.size()) return true;
    const std::vector<NodeIndex>& nodes = candidates_[order_[level]];
    // Identical bundles take their candidates in one order only (any assignment can be permuted
    // among them into that order).
    const size_t first = twin_[level] >= 0 ? chosen_[twin_[level]] : 0;
    std::vector<size_t> tries;
    for (size_t i = first; i < nodes.size(); ++i) tries.push_back(i);
    const bool pack = request_.strategy == PlacementStrategy::kPack;
    std::stable_partition(tries.begin(), tries.end(), [&](size_t i) {
      auto it = on_node_.find(nodes[i]);
      const bool holds_group = it != on_node_.end() && it->second > 0;
      return pack ? holds_group : !holds_group;
    });
    for (size_t i : tries) {
      const NodeIndex n = nodes[i];
      if (!cluster_.FitsNow(n, Demand(level))) continue;
      if (++steps_ > request_.max_steps) {
        gave_up_ = true;
        return false;
      }
      absl::StatusOr<Allocation> allocation = cluster_.Allocate(n, Demand(level));
      if (!allocation.ok()) continue;
      taken_.emplace_back(request_.todo[order_[level]], *allocation);
      chosen_[level] = i;
      ++on_node_[n];
      if (OthersStillFit(level, n) && Go(level + 1)) return true;
      --on_node_[n];
      IgnoreStatus(cluster_.Release(taken_.back().second.id), "cannot fail: this search took it");
      taken_.pop_back();
      if (gave_up_) return false;
    }
    return false;
  }

  // Forward checking: every later bundle that could use `n` still has a candidate with room.
  bool OthersStillFit(size_t level, NodeIndex n) const {
    auto it = watchers_.find(n);
    if (it == watchers_.end()) return true;
    for (size_t later : it->second) {
      if (later <= level) continue;
      bool any = false;
      for (NodeIndex m : candidates_[order_[later]]) {
        if (cluster_.FitsNow(m, Demand(later))) {
          any = true;
          break;
        }
      }
      if (!any) return false;
    }
    return true;
  }

  ClusterView& cluster_;
  const BundleSearchRequest& request_;
  const std::vector<std::vector<NodeIndex>>& candidates_;
  const std::vector<size_t>& order_;
  std::vector<size_t> chosen_;  // by level: the candidate index taken
  std::vector<int> twin_;       // by level: the last earlier level with an identical bundle
  absl::flat_hash_map<NodeIndex, std::vector<size_t>> watchers_;  // node -> levels using it
  absl::flat_hash_map<NodeIndex, int> on_node_;  // the group's bundles on each node
  std::vector<std::pair<int, Allocation>> taken_;
  int64_t steps_ = 0;
  bool gave_up_ = false;
};

BundleSearchResult SearchStrictSpread(ClusterView& cluster, const BundleSearchRequest& request) {
  BundleSearchResult result;
  const std::vector<std::vector<NodeIndex>> candidates = Candidates(cluster, request, true);
  const std::vector<size_t> order = MostConstrainedFirst(*request.option, request.todo, candidates);
  Matching matching(candidates);
  const std::vector<size_t> unmatched = matching.Run(order);
  if (!unmatched.empty()) {
    result.failed_bundle = request.todo[unmatched.front()];
    return result;
  }
  for (size_t position : order) {
    const int b = request.todo[position];
    ++result.steps;
    absl::StatusOr<Allocation> allocation =
        cluster.Allocate(matching.node_of(position), request.option->bundles[b]);
    if (!allocation.ok()) {  // each node holds one bundle that fits it alone: not expected
      ReleaseAll(cluster, result.taken);
      result.failed_bundle = b;
      return result;
    }
    result.taken.emplace_back(b, *std::move(allocation));
  }
  result.outcome = SearchOutcome::kFound;
  return result;
}

BundleSearchResult SearchStrictPack(ClusterView& cluster, const BundleSearchRequest& request) {
  BundleSearchResult result;
  const BundleOption& option = *request.option;
  const std::vector<int> order = ScarcestFirst(option, request.todo);  // whole devices first
  ResourceSet sum;
  for (int b : order) {
    absl::StatusOr<ResourceSet> more = sum.Plus(option.bundles[b]);
    if (!more.ok()) return result;
    sum = *std::move(more);
  }
  // Collected first: allocating reorders the utilization index being walked.
  const std::vector<NodeIndex> nodes =
      FirstAcceptedNodes(cluster, BundleSelector(option, order[0]), sum,
                         std::numeric_limits<size_t>::max(), [&](NodeIndex n) {
                           if (!Alive(cluster, n) || !cluster.node(n).available.Contains(sum))
                             return false;
                           for (int b : order) {
                             if (!Holds(cluster, n, option, b, /*now=*/true)) return false;
                           }
                           return true;
                         });
  for (NodeIndex n : nodes) {
    bool all = true;
    for (int b : order) {
      if (++result.steps > request.max_steps) {
        ReleaseAll(cluster, result.taken);
        result.outcome = SearchOutcome::kGaveUp;
        return result;
      }
      absl::StatusOr<Allocation> allocation = cluster.Allocate(n, option.bundles[b]);
      if (!allocation.ok()) {
        all = false;
        break;
      }
      result.taken.emplace_back(b, *std::move(allocation));
    }
    if (all) {
      result.outcome = SearchOutcome::kFound;
      return result;
    }
    ReleaseAll(cluster, result.taken);
  }
  return result;
}

std::string NodeNames(const ClusterView& cluster, const std::vector<NodeIndex>& nodes) {
  std::vector<std::string> names;
  for (size_t i = 0; i < nodes.size() && i < kNamesShown; ++i) {
    names.push_back(cluster.node(nodes[i]).id.value());
  }
  if (nodes.size() > kNamesShown) names.push_back("...");
  return absl::StrJoin(names, ", ");
}

// "bundles 0, 1 (GPU=1 with selector zone=a), 2 (CPU=1)": alike bundles share one description;
// more than 4 alike ones are shortened to "0, 1, ..., 6".
std::string DescribeBundles(const BundleOption& option, std::vector<int> bundles) {
  std::sort(bundles.begin(), bundles.end());
  std::vector<std::pair<std::string, std::vector<int>>> kinds;  // description -> its bundles
  for (int b : bundles) {
    std::string text = DescribeBundle(option, b);
    auto it =
        std::find_if(kinds.begin(), kinds.end(), [&](const auto& k) { return k.first == text; });
    if (it == kinds.end()) {
      kinds.emplace_back(std::move(text), std::vector<int>{b});
    } else {
      it->second.push_back(b);
    }
  }
  std::vector<std::string> parts;
  for (const auto& [text, indices] : kinds) {
    const std::string list =
        indices.size() <= 4 ? absl::StrJoin(indices, ", ")
                            : absl::StrCat(indices[0], ", ", indices[1], ", ..., ", indices.back());
    parts.push_back(absl::StrCat(list, " (", text, ")"));
  }
  return absl::StrCat(bundles.size() == 1 ? "bundle " : "bundles ", absl::StrJoin(parts, ", "));
}

// An idle copy of the given nodes of `cluster` (same ids, totals, labels, devices).
struct IdleCopy {
  ClusterView view;
  absl::flat_hash_map<NodeIndex, NodeIndex> to_copy;  // cluster index -> copy index
};

void AddIdle(const ClusterView& cluster, NodeIndex n, IdleCopy& copy) {
  if (copy.to_copy.contains(n)) return;
  const NodeRecord& record = cluster.node(n);
  NodeSpec spec;
  spec.id = record.id;
  spec.resources = record.total;
  spec.labels = record.labels;
  spec.fabric = record.fabric;  // read from the labels when the node registered
  for (const DeviceInstances& d : record.devices) spec.devices.emplace(d.resource, d.topology);
  absl::StatusOr<NodeIndex> index = copy.view.AddNode(std::move(spec));
  if (index.ok()) copy.to_copy.emplace(n, *index);
}

// The search on an idle copy of the nodes that could ever hold the bundles.
SearchOutcome SearchIdle(const ClusterView& cluster, const BundleSearchRequest& request) {
  IdleCopy copy;
  const BundleOption& option = *request.option;
  if (request.strategy == PlacementStrategy::kStrictPack) {
    ResourceSet sum;
    for (int b : request.todo) sum = sum.Plus(option.bundles[b]).value_or(sum);
    // Nodes alike in totals and device topologies decide alike: one of each shape is enough.
    std::set<std::string> shapes;
    // Run for `accept`, which copies each new shape and accepts none: nothing is returned.
    FirstAcceptedNodes(cluster, BundleSelector(option, request.todo[0]), sum,
                       std::numeric_limits<size_t>::max(), [&](NodeIndex n) {
                         const NodeRecord& record = cluster.node(n);
                         if (!Alive(cluster, n) || !record.total.Contains(sum)) return false;
                         for (int b : request.todo) {
                           if (!Holds(cluster, n, option, b, /*now=*/false)) return false;
                         }
                         std::string shape = record.total.ToString();
                         for (const DeviceInstances& d : record.devices) {
                           absl::StrAppend(&shape, "|",
                                           reinterpret_cast<uintptr_t>(d.topology.get()));
                         }
                         if (shapes.insert(std::move(shape)).second) AddIdle(cluster, n, copy);
                         return false;
                       });
  } else {
    for (const std::vector<NodeIndex>& nodes : Candidates(cluster, request, /*now=*/false)) {
      for (NodeIndex n : nodes) AddIdle(cluster, n, copy);
    }
  }
  BundleSearchRequest idle = request;
  idle.used.clear();
  for (NodeIndex n : request.used) {
    auto it = copy.to_copy.find(n);
    if (it != copy.to_copy.end()) idle.used.insert(it->second);
  }
  BundleSearchResult result = SearchBundles(copy.view, idle);
  return result.outcome;
}

}  // namespace

std::vector<int> ScarcestFirst(const BundleOption& option, const std::vector<int>& todo) {
  using Key = std::tuple<int64_t, int64_t, int64_t, int64_t>;
  auto key = [&](int b) {
    int64_t accel = 0, custom = 0, memory = 0, cpu = 0;
    for (const auto& [name, q] : option.bundles[b]) {
      if (IsUnitInstanceResource(name)) {
        accel += q.raw();
      } else if (name == "CPU") {
        cpu += q.raw();
      } else if (name == "memory" || name == "object_store_memory") {
        memory += q.raw();
      } else {
        custom += q.raw();
      }
    }
    return Key(accel, custom, memory, cpu);
  };
  std::vector<std::pair<Key, int>> keyed;
  keyed.reserve(todo.size());
  for (int b : todo) keyed.emplace_back(key(b), b);
  std::stable_sort(keyed.begin(), keyed.end(),
                   [](const auto& x, const auto& y) { return x.first > y.first; });
  std::vector<int> order;
  order.reserve(keyed.size());
  for (const auto& [k, b] : keyed) order.push_back(b);
  return order;
}

std::vector<NodeIndex> FirstAcceptedNodes(const ClusterView& cluster, const LabelSelector& selector,
                                          const ResourceSet& demand, size_t limit,
                                          absl::FunctionRef<bool(NodeIndex)> accept) {
  std::vector<NodeIndex> out;
  if (limit == 0) return out;
  // Anchor on the demanded resource the fewest nodes carry: nodes without it never fit.
  const UtilizationIndex* order = cluster.UtilizationOrder("");
  for (const auto& [resource, q] : demand) {
    const UtilizationIndex* by_resource = cluster.UtilizationOrder(resource);
    if (by_resource == nullptr || by_resource->empty()) return out;
    if (order == nullptr || by_resource->size() < order->size()) order = by_resource;
  }
  if (order == nullptr || order->empty()) return out;
  const std::optional<size_t> count = cluster.SelectorCandidateCount(selector);
  if (count && (*count <= kSmallCandidateSet || *count * *count <= order->size())) {
    // The same nodes in the same order as the walk below: by (utilization, index).
    std::vector<std::pair<int64_t, NodeIndex>> keyed;
    const std::vector<NodeIndex> candidates = *cluster.SelectorCandidates(selector);
    for (NodeIndex n : candidates) {
      if (Alive(cluster, n)) keyed.emplace_back(cluster.node(n).utilization_ppm, n);
    }
    std::sort(keyed.begin(), keyed.end());
    for (const auto& [utilization, n] : keyed) {
      if (accept(n)) out.push_back(n);
      if (out.size() == limit) break;
    }
    return out;
  }
  for (const auto& [utilization, n] : *order) {
    if (accept(n)) out.push_back(n);
    if (out.size() == limit) break;
  }
  return out;
}

BundleSearchResult SearchBundles(ClusterView& cluster, const BundleSearchRequest& request) {
  BundleSearchResult result;
  if (request.todo.empty()) {
    result.outcome = SearchOutcome::kFound;
    return result;
  }
  switch (request.strategy) {
    case PlacementStrategy::kStrictSpread: return SearchStrictSpread(cluster, request);
    case PlacementStrategy::kStrictPack: return SearchStrictPack(cluster, request);
    case PlacementStrategy::kPack:
    case PlacementStrategy::kSpread: break;
  }
  const std::vector<std::vector<NodeIndex>> candidates = Candidates(cluster, request, true);
  for (size_t position = 0; position < candidates.size(); ++position) {
    if (candidates[position].empty()) {
      result.failed_bundle = request.todo[position];
      return result;
    }
  }
  if (!FreeSumSuffices(cluster, request, candidates)) return result;
  const std::vector<size_t> order = MostConstrainedFirst(*request.option, request.todo, candidates);
  Backtracking search(cluster, request, candidates, order);
  result.outcome = search.Run();
  result.steps = search.steps();
  if (result.outcome == SearchOutcome::kFound) result.taken = std::move(search.taken());
  return result;
}

IdleFeasibility CheckIdleFeasibility(const ClusterView& cluster,
                                     const BundleSearchRequest& request) {
  IdleFeasibility out;
  const BundleOption& option = *request.option;
  if (request.strategy == PlacementStrategy::kStrictSpread) {
    // Distinct nodes, each holding one bundle alone: a matching over what the nodes could hold.
    const std::vector<std::vector<NodeIndex>> candidates = Candidates(cluster, request, false);
    const std::vector<size_t> order = MostConstrainedFirst(option, request.todo, candidates);
    Matching matching(candidates);
    const std::vector<size_t> unmatched = matching.Run(order);
    if (unmatched.empty()) {
      out.outcome = SearchOutcome::kFound;
      return out;
    }
    const auto [positions, nodes] = matching.Obstacle(unmatched);
    std::vector<int> bundles;
    for (size_t p : positions) bundles.push_back(request.todo[p]);
    const bool one = bundles.size() == 1;
    out.why = absl::StrCat("STRICT_SPREAD: ", DescribeBundles(option, bundles),
                           one ? " needs 1 node" : absl::StrCat(" need ", bundles.size(), " nodes"),
                           "; only ", nodes.size(), one ? " can hold it" : " can hold any of them");
    if (!nodes.empty()) absl::StrAppend(&out.why, " (", NodeNames(cluster, nodes), ")");
    if (!request.used.empty()) {
      absl::StrAppend(&out.why, " besides the ", request.used.size(),
                      request.used.size() == 1 ? " node" : " nodes",
                      " holding the group's other bundles");
    }
    return out;
  }
  out.outcome = SearchIdle(cluster, request);
  if (out.outcome != SearchOutcome::kNone || request.strategy == PlacementStrategy::kStrictPack) {
    return out;
  }
  // The fewest bundles that still cannot go together (drop each one that is not needed), and the
  // nodes they could use.
  BundleSearchRequest core = request;
  if (static_cast<int>(core.todo.size()) <= kCompleteSearchBundles) {
    for (size_t i = core.todo.size(); i-- > 0 && core.todo.size() > 1;) {
      BundleSearchRequest without = core;
      without.todo.erase(without.todo.begin() + static_cast<std::ptrdiff_t>(i));
      if (SearchIdle(cluster, without) == SearchOutcome::kNone) core = std::move(without);
    }
  }
  std::set<NodeIndex> could;
  bool all_listed = true;
  constexpr size_t kNodesLooked = 64;
  for (int b : core.todo) {
    const std::vector<NodeIndex> nodes =
        FirstAcceptedNodes(cluster, BundleSelector(option, b), option.bundles[b], kNodesLooked,
                           [&](NodeIndex n) { return Holds(cluster, n, option, b, false); });
    all_listed = all_listed && nodes.size() < kNodesLooked;
    could.insert(nodes.begin(), nodes.end());
  }
  const std::vector<NodeIndex> nodes(could.begin(), could.end());
  const std::string bundles = DescribeBundles(option, core.todo);
  if (all_listed && nodes.size() <= 3) {
    std::vector<std::string> names;
    for (NodeIndex n : nodes) names.push_back(cluster.node(n).id.value());
    out.why = absl::StrCat(bundles, " can only go on ", absl::StrJoin(names, " and "),
                           ", which cannot hold them together");
  } else {
    out.why = absl::StrCat(bundles, " do not fit together on the nodes that could hold them (",
                           NodeNames(cluster, nodes), ")");
  }
  return out;
}

std::string DescribeBundle(const BundleOption& option, int bundle) {
  const LabelSelector& selector = BundleSelector(option, bundle);
  std::string text = option.bundles[bundle].ToString();
  if (!selector.empty()) absl::StrAppend(&text, " with selector ", selector.ToString());
  return text;
}

}  // namespace tessera
