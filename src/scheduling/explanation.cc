#include "scheduling/explanation.h"

#include <algorithm>
#include <functional>
#include <map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/string_util.h"

namespace tessera {
namespace {

// Availability figures listed in a pending explanation; more are summarized as "...".
constexpr size_t kMaxListed = 8;
// Holders named in an explanation; more are counted by kind.
constexpr size_t kMaxHoldersNamed = 5;

std::string Nodes(size_t n) { return absl::StrCat(n, n == 1 ? " node" : " nodes"); }

std::string ConstraintGap(const LabelConstraint& c) {
  const std::string values = absl::StrCat("(", absl::StrJoin(c.values, ", "), ")");
  switch (c.op) {
    case SelectorOperator::kIn: return absl::StrCat("no node has ", c.key, " in ", values);
    case SelectorOperator::kNotIn: return absl::StrCat("every node has ", c.key, " in ", values);
    case SelectorOperator::kExists: return absl::StrCat("no node has label ", c.key);
    case SelectorOperator::kDoesNotExist: return absl::StrCat("every node has label ", c.key);
  }
  return "";
}

// What a node offers of one demanded resource, in the unit the demand is judged by: whole free
// devices for a whole-device demand, the largest free share of one device for a fraction, else
// the amount. `now` picks available over total.
Quantity Offered(const NodeRecord& record, const std::string& resource, Quantity demand, bool now) {
  if (const DeviceInstances* d = record.FindDevices(resource)) {
    if (demand.IsInteger()) {
      return Quantity::FromInt(now ? d->FullyFree() : static_cast<int64_t>(d->available.size()));
    }
    if (now) return d->LargestFree();
    return d->available.empty() ? Quantity() : Quantity::FromInt(1);
  }
  return now ? record.available.Get(resource) : record.total.Get(resource);
}

}  // namespace

Diagnosis Diagnose(const ClusterView& cluster, const LabelSelector& selector,
                   const ResourceSet& demand, std::span<const NodeIndex> nodes) {
  std::vector<NodeIndex> matching;
  for (NodeIndex n : nodes) {
    if (selector.Matches(cluster.node(n).labels)) matching.push_back(n);
  }
  if (matching.empty()) {
    if (nodes.empty()) return {false, "no node is alive"};
    for (const LabelConstraint& c : selector.constraints()) {
      const bool anyone = std::any_of(nodes.begin(), nodes.end(), [&](NodeIndex n) {
        return c.Matches(cluster.node(n).labels);
      });
      if (!anyone) return {false, ConstraintGap(c)};
    }
    return {false, absl::StrCat("no node matches ", selector.ToString())};
  }

  std::vector<NodeIndex> feasible;
  for (NodeIndex n : matching) {
    if (cluster.FeasibleOn(n, demand)) feasible.push_back(n);
  }
  const std::string scope =
      selector.empty() ? "" : absl::StrCat(Nodes(matching.size()), " match the selector; ");
  if (feasible.empty()) {
    for (const auto& [resource, q] : demand) {
      Quantity largest;
      for (NodeIndex n : matching) {
        largest = std::max(largest, Offered(cluster.node(n), resource, q, /*now=*/false));
      }
      if (largest >= q) continue;
      if (!selector.empty())
        return {false, absl::StrCat(scope, "none has ", resource, " >= ", q.ToString())};
      if (largest.IsZero()) return {false, absl::StrCat("no node has ", resource)};
      return {false, absl::StrCat("no node has ", q.ToString(), " ", resource,
                                  " (largest: ", largest.ToString(), ")")};
    }
    return {false, absl::StrCat(selector.empty() ? "no single node" : scope + "none", " has ",
                                demand.ToString())};
  }

  // Busy: name the demanded resource that blocks the most feasible nodes (first by name on ties).
  std::string blocking;
  size_t blocked_most = 0;
  for (const auto& [resource, q] : demand) {
    size_t blocked = 0;
    for (NodeIndex n : feasible) blocked += Offered(cluster.node(n), resource, q, /*now=*/true) < q;
    if (blocked > blocked_most) {
      blocked_most = blocked;
      blocking = resource;
    }
  }
  std::string text = absl::StrCat(
      selector.empty() ? "" : Nodes(matching.size()) + " match the selector and ",
      selector.empty() ? Nodes(feasible.size()) + " could"
                       : absl::StrCat(feasible.size(), " could"),
      " fit ", demand.ToString(), "; ", feasible.size() == 1 ? "it is busy" : "all are busy");
  if (!blocking.empty()) {
    const Quantity q = demand.Get(blocking);
    std::vector<Quantity> offered;
    for (NodeIndex n : feasible)
      offered.push_back(Offered(cluster.node(n), blocking, q, /*now=*/true));
    std::sort(offered.begin(), offered.end(), std::greater<>());
    std::vector<std::string> shown;
    for (size_t i = 0; i < offered.size() && i < kMaxListed; ++i)
      shown.push_back(offered[i].ToString());
    if (offered.size() > kMaxListed) shown.push_back("...");
    const std::string resources[] = {blocking};
    absl::StrAppend(&text, " (available ", blocking, ": ", absl::StrJoin(shown, ", "), "; held by ",
                    DescribeHolders(HoldersOn(cluster, feasible, resources)), ")");
  }
  return {true, text};
}

std::vector<Holder> HoldersOn(const ClusterView& cluster, std::span<const NodeIndex> nodes,
                              std::span<const std::string> resources) {
  std::vector<Holder> holders;
  for (NodeIndex n : nodes) {
    for (int64_t id : cluster.node(n).allocations) {
      const AllocationId allocation(id);
      if (!resources.empty()) {
        const Allocation* a = cluster.FindAllocation(allocation);
        if (a == nullptr || std::none_of(resources.begin(), resources.end(), [&](const auto& r) {
              return !a->resources.Get(r).IsZero();
            })) {
          continue;
        }
      }
      holders.push_back(cluster.HolderOf(allocation));
    }
  }
  std::sort(holders.begin(), holders.end());
  holders.erase(std::unique(holders.begin(), holders.end()), holders.end());
  return holders;
}

std::string DescribeHolders(std::span<const Holder> holders) {
  if (holders.empty()) return "nothing";
  std::vector<Holder> distinct(holders.begin(), holders.end());
  std::sort(distinct.begin(), distinct.end());
  distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
  // Unknown holders sort first; they read best last.
  const bool other = distinct.front().kind == HolderKind::kUnknown;
  if (other) distinct.erase(distinct.begin());
  std::vector<std::string> parts;
  if (distinct.size() + (other ? 1 : 0) <= kMaxHoldersNamed) {
    for (const Holder& h : distinct) parts.push_back(h.ToString());
  } else {
    std::map<HolderKind, size_t> counts;
    for (const Holder& h : distinct) ++counts[h.kind];
    for (const auto& [kind, n] : counts) {
      parts.push_back(n == 1 ? absl::StrCat(1, " ", ToAbsl(HolderKindName(kind)))
                             : absl::StrCat(n, " ", ToAbsl(HolderKindPlural(kind))));
    }
  }
  if (other) parts.push_back("other work");
  return absl::StrJoin(parts, ", ");
}

}  // namespace tessera
