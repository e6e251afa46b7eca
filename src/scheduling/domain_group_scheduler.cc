#include "scheduling/domain_group_scheduler.h"

#include <algorithm>
#include <set>
#include <tuple>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/string_util.h"
#include "hardware/node_label_keys.h"
#include "hardware/tpu/slice_shape.h"

namespace tessera {
namespace {

constexpr std::string_view kTpu = "TPU";
constexpr size_t kMaxNamed = 5;  // holders / problems named in one explanation line

// "v6e" from "v6e-16"; v5litepod reads as users write it, "v5e".
std::string GenerationOf(std::string_view pod_type) {
  std::string generation(pod_type.substr(0, pod_type.find('-')));
  return generation == "v5litepod" ? "v5e" : generation;
}

std::string Plural(size_t n, std::string_view one, std::string_view many) {
  return absl::StrCat(n, " ", ToAbsl(n == 1 ? one : many));
}

// "a, b, c +2 more"
std::string JoinLimited(const std::vector<std::string>& items) {
  std::vector<std::string> shown(
      items.begin(), items.begin() + static_cast<long>(std::min(items.size(), kMaxNamed)));
  std::string out = absl::StrJoin(shown, ", ");
  if (items.size() > kMaxNamed) absl::StrAppend(&out, " +", items.size() - kMaxNamed, " more");
  return out;
}

}  // namespace

void DomainGroupScheduler::Catalog() {
  for (; catalogued_ < cluster_->slot_count(); ++catalogued_) {
    const NodeRecord& record = cluster_->node(catalogued_);
    const FabricMembership& f = record.fabric;
    int worker = 0;
    if (!f.tpu_slice_name.empty() && !f.tpu_pod_type.empty() && !f.tpu_topology.empty() &&
        absl::SimpleAtoi(ToAbsl(f.tpu_worker_id), &worker) && worker >= 0) {
      Slice& slice = slices_[ShapeKey{f.tpu_pod_type, f.tpu_topology}][f.tpu_slice_name];
      slice.name = f.tpu_slice_name;
      slice.workers[worker].push_back(catalogued_);
      slice.host_tpu = std::max(slice.host_tpu, record.total.Get(kTpu).WholePart());
    }
    auto kind = record.labels.find(labels::kFabricKind);
    if (!f.fabric_domain.empty() && kind != record.labels.end() && kind->second == "nvlink") {
      nvlink_domains_[f.fabric_domain].push_back(catalogued_);
    }
  }
}

bool DomainGroupScheduler::SliceHosts(const Slice& slice, const ResolvedShape& shape,
                                      std::vector<NodeIndex>& out, std::string& problem) const {
  out.clear();
  // Hosts come from the chips per host the registered hosts carry (the ambiguous v5e/v6e 2x4 is
  // one host of 8 chips or two of 4).
  const int64_t host_tpu = slice.host_tpu;
  if (host_tpu <= 0) {
    problem = "its hosts have no TPU";
    return false;
  }
  const int64_t hosts = std::max<int64_t>(1, shape.chips * shape.resources_per_chip / host_tpu);
  for (int w = 0; w < hosts; ++w) {
    auto it = slice.workers.find(w);
    std::optional<NodeIndex> registered;
    if (it != slice.workers.end()) {
      for (NodeIndex n : it->second) {
        if (cluster_->node(n).removed) continue;
        registered = n;
      }
    }
    if (!registered.has_value()) {
      problem = absl::StrCat("missing worker ", w);
      return false;
    }
    const NodeRecord& record = cluster_->node(*registered);
    if (record.state != NodeState::kAlive) {
      problem = absl::StrCat("worker ", w, " is ", ToAbsl(NodeStateName(record.state)));
      return false;
    }
    out.push_back(*registered);
  }
  return true;
}

bool DomainGroupScheduler::TpuBusy(NodeIndex node) const {
  const NodeRecord& record = cluster_->node(node);
  if (record.allocations.empty()) return false;  // the common idle host: no lookups
  return record.available.Get(kTpu) != record.total.Get(kTpu);
}

std::string DomainGroupScheduler::Holders(const std::vector<NodeIndex>& hosts) const {
  std::set<int64_t> groups;
  bool other = false;
  for (NodeIndex n : hosts) {
    for (int64_t allocation : cluster_->node(n).allocations) {
      auto owner = allocation_owner_.find(allocation);
      if (owner == allocation_owner_.end()) {
        other = true;
      } else {
        groups.insert(owner->second);
      }
    }
  }
  std::vector<std::string> names;
  for (int64_t g : groups) names.push_back(groups_.at(g).name);
  if (other) names.push_back("other work");
  return JoinLimited(names);
}

std::string DomainGroupScheduler::ExistingSlices() const {
  std::vector<std::string> parts;
  for (const auto& [key, slices] : slices_) {
    size_t live = 0;
    for (const auto& [name, slice] : slices) {
      bool any = false;
      for (const auto& [w, registrations] : slice.workers) {
        for (NodeIndex n : registrations) any = any || !cluster_->node(n).removed;
      }
      if (any) ++live;
    }
    if (live > 0) {
      parts.push_back(absl::StrCat(live, " ", GenerationOf(key.pod_type), " ", key.topology));
    }
  }
  return parts.empty() ? "none" : absl::StrJoin(parts, ", ");
}

bool DomainGroupScheduler::Take(const std::vector<NodeIndex>& hosts, const std::string& domain,
                                const std::vector<int>& workers, const DomainAlternative& alt,
                                int chips_per_bundle, std::vector<DomainBundle>& out) {
  const size_t start = out.size();
  auto take = [&](NodeIndex n, int worker, const ResourceSet& demand) {
    absl::StatusOr<Allocation> allocation = cluster_->Allocate(n, demand);
    if (!allocation.ok()) return false;
    out.push_back(DomainBundle{cluster_->node(n).id, domain, worker, *std::move(allocation)});
    return true;
  };
  bool ok = true;
  for (size_t i = 0; ok && i < hosts.size(); ++i) {
    const NodeIndex n = hosts[i];
    const int64_t tpu = cluster_->node(n).total.Get(kTpu).WholePart();
    if (alt.accelerator.empty()) {
      ok = take(n, -1, alt.per_host);
    } else if (alt.granularity == BundleGranularity::kPerHost) {
      ResourceSet demand = alt.per_host;
      demand.Set(std::string(kTpu), Quantity::FromInt(tpu));
      ok = take(n, workers[i], demand);
    } else {
      // One bundle per chip; the per-host extra rides on the host's first chip.
      for (int64_t c = 0; ok && c < tpu / chips_per_bundle; ++c) {
        ResourceSet demand = c == 0 ? alt.per_host : ResourceSet();
        demand.Set(std::string(kTpu), Quantity::FromInt(chips_per_bundle));
        ok = take(n, workers[i], demand);
      }
    }
  }
  if (!ok) {
    for (size_t i = out.size(); i > start; --i) (void)cluster_->Release(out[i - 1].allocation.id);
    out.resize(start);
  }
  return ok;
}

DomainGroupScheduler::Outcome DomainGroupScheduler::TrySlices(const DomainAlternative& alt,
                                                              const ResolvedShape& shape) {
  Outcome outcome;
  const size_t k = static_cast<size_t>(alt.count);
  auto found = slices_.find(shape.key);
  struct Candidate {
    int64_t score;
    const Slice* slice;
  };
  std::vector<Candidate> idle;
  std::vector<NodeIndex> busy_hosts;
  std::vector<std::string> broken;
  size_t existing = 0, busy = 0;
  std::vector<NodeIndex> hosts;
  if (found != slices_.end()) {
    for (const auto& [name, slice] : found->second) {
      std::string problem;
      bool any = false;
      for (const auto& [w, registrations] : slice.workers) {
        for (NodeIndex n : registrations) any = any || !cluster_->node(n).removed;
      }
      if (!any) continue;
      ++existing;
      if (!SliceHosts(slice, shape, hosts, problem)) {
        broken.push_back(absl::StrCat(name, ": ", problem));
        continue;
      }
      bool free = true;
      int64_t score = 0;
      for (NodeIndex n : hosts) {
        free = free && !TpuBusy(n) && (alt.per_host.empty() || cluster_->FitsNow(n, alt.per_host));
        score += cluster_->node(n).utilization_ppm;
      }
      if (free) {
        idle.push_back(Candidate{score, &slice});
      } else {
        ++busy;
        busy_hosts.insert(busy_hosts.end(), hosts.begin(), hosts.end());
      }
    }
  }
  const size_t intact = existing - broken.size();
  outcome.feasible = intact >= k;
  if (idle.size() >= k) {
    // Busiest hosts first: idle slices on empty hosts stay whole.
    std::partial_sort(idle.begin(), idle.begin() + static_cast<long>(k), idle.end(),
                      [](const Candidate& a, const Candidate& b) {
                        return std::tie(b.score, a.slice->name) < std::tie(a.score, b.slice->name);
                      });
    for (size_t i = 0; i < k; ++i) {
      std::string problem;
      const std::string& name = idle[i].slice->name;
      (void)SliceHosts(*idle[i].slice, shape, hosts, problem);
      std::vector<int> workers;
      for (size_t w = 0; w < hosts.size(); ++w) workers.push_back(static_cast<int>(w));
      if (!Take(hosts, name, workers, alt, shape.resources_per_chip, outcome.bundles)) {
        for (auto it = outcome.bundles.rbegin(); it != outcome.bundles.rend(); ++it) {
          (void)cluster_->Release(it->allocation.id);
        }
        outcome.bundles.clear();
        outcome.domains.clear();
        outcome.explanation = absl::StrCat("slice ", name, " could not be reserved");
        return outcome;
      }
      outcome.domains.push_back(name);
    }
    outcome.placed = true;
    return outcome;
  }
  if (existing == 0) {
    outcome.explanation =
        absl::StrCat("no ", shape.label, " slice exists (slices: ", ExistingSlices(), ")");
    return outcome;
  }
  std::string text =
      absl::StrCat(existing, " ", shape.label, existing == 1 ? " slice exists" : " slices exist");
  if (existing < k) absl::StrAppend(&text, "; ", k, " needed");
  if (busy > 0) {
    absl::StrAppend(&text, "; ", busy == existing ? "all" : absl::StrCat(busy),
                    busy == 1 && existing != 1 ? " is" : " are", " busy (held by ",
                    Holders(busy_hosts), ")");
  }
  if (!broken.empty()) {
    absl::StrAppend(&text, "; ", broken.size(), broken.size() == 1 ? " is" : " are",
                    " not intact (", JoinLimited(broken), ")");
  }
  if (!idle.empty() && existing >= k)
    absl::StrAppend(&text, "; ", idle.size(), " idle, ", k, " needed");
  outcome.explanation = text;
  return outcome;
}

DomainGroupScheduler::Outcome DomainGroupScheduler::TryNvLink(const DomainAlternative& alt) {
  Outcome outcome;
  const size_t n_hosts = static_cast<size_t>(alt.count);
  std::optional<std::tuple<size_t, std::string, std::vector<NodeIndex>>> best;
  size_t largest_feasible = 0, feasible_domains = 0;
  std::vector<NodeIndex> busy_hosts;
  for (const auto& [domain, members] : nvlink_domains_) {
    std::vector<NodeIndex> usable;
    size_t feasible = 0;
    for (NodeIndex n : members) {
      const NodeRecord& record = cluster_->node(n);
      if (record.removed || record.state != NodeState::kAlive) continue;
      if (!cluster_->FeasibleOn(n, alt.per_host)) continue;
      ++feasible;
      if (cluster_->FitsNow(n, alt.per_host)) {
        usable.push_back(n);
      } else {
        busy_hosts.push_back(n);
      }
    }
    largest_feasible = std::max(largest_feasible, feasible);
    if (feasible >= n_hosts) ++feasible_domains;
    // Best fit: the domain with the fewest usable hosts that still holds the request.
    if (usable.size() >= n_hosts && (!best.has_value() || usable.size() < std::get<0>(*best))) {
      best.emplace(usable.size(), domain, usable);
    }
  }
  outcome.feasible = feasible_domains > 0;
  if (best.has_value()) {
    auto& [count, domain, usable] = *best;
    usable.resize(n_hosts);
    if (Take(usable, domain, std::vector<int>(n_hosts, -1), alt, 1, outcome.bundles)) {
      outcome.placed = true;
      outcome.domains.push_back(domain);
      return outcome;
    }
    outcome.explanation = absl::StrCat("NVLink domain ", domain, " could not be reserved");
    return outcome;
  }
  const std::string demand = alt.per_host.ToString();
  if (nvlink_domains_.empty()) {
    outcome.explanation = "no NVLink domain exists";
  } else if (feasible_domains == 0) {
    outcome.explanation = absl::StrCat("no NVLink domain has ", n_hosts, " hosts that could fit ",
                                       demand, " (largest: ", largest_feasible, ")");
  } else {
    outcome.explanation = absl::StrCat(Plural(feasible_domains, "NVLink domain", "NVLink domains"),
                                       " could hold ", n_hosts, " hosts of ", demand,
                                       "; none has ", n_hosts, " free now (held by ",
                                       Holders(busy_hosts), ")");
  }
  return outcome;
}

absl::StatusOr<DomainGroupResult> DomainGroupScheduler::ReserveSlices(
    const DomainGroupRequest& request) {
  if (request.name.empty()) return absl::InvalidArgumentError("a domain group needs a name");
  if (request.alternatives.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("domain group ", request.name, " has no alternatives"));
  }
  if (by_name_.contains(request.name)) {
    return absl::AlreadyExistsError(absl::StrCat("domain group ", request.name, " already exists"));
  }
  std::vector<std::optional<ResolvedShape>> shapes;
  for (size_t i = 0; i < request.alternatives.size(); ++i) {
    const DomainAlternative& alt = request.alternatives[i];
    const std::string where = absl::StrCat("domain group ", request.name, " alternative ", i + 1);
    if (alt.count < 1) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": count must be at least 1"));
    }
    if (alt.accelerator.empty()) {
      if (alt.granularity == BundleGranularity::kPerChip || alt.per_host.empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": an NVLink alternative needs a per-host demand, per host"));
      }
      shapes.emplace_back();
      continue;
    }
    absl::StatusOr<SliceShape> shape = DescribeSlice(alt.accelerator, alt.topology, std::nullopt);
    if (!shape.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": ", shape.status().message()));
    }
    shapes.push_back(
        ResolvedShape{ShapeKey{shape->pod_type, shape->topology.ToString()},
                      absl::StrCat(GenerationOf(shape->pod_type), " ", shape->topology.ToString()),
                      shape->chips, std::max(1, shape->resources_per_chip)});
  }
  Catalog();
  DomainGroupResult result;
  bool feasible = false;
  std::vector<std::string> reasons;
  for (size_t i = 0; i < request.alternatives.size(); ++i) {
    const DomainAlternative& alt = request.alternatives[i];
    Outcome outcome = shapes[i].has_value() ? TrySlices(alt, *shapes[i]) : TryNvLink(alt);
    if (outcome.placed) {
      const int64_t id = next_id_++;
      for (const DomainBundle& b : outcome.bundles) allocation_owner_[b.allocation.id.value()] = id;
      groups_[id] = Group{request.name, outcome.bundles};
      by_name_[request.name] = id;
      result.status = ScheduleStatus::kPlaced;
      result.id = DomainGroupId(id);
      result.alternative = i;
      result.domains = std::move(outcome.domains);
      result.bundles = std::move(outcome.bundles);
      return result;
    }
    feasible = feasible || outcome.feasible;
    reasons.push_back(request.alternatives.size() == 1
                          ? outcome.explanation
                          : absl::StrCat("alternative ", i + 1, ": ", outcome.explanation));
  }
  result.status = feasible ? ScheduleStatus::kPending : ScheduleStatus::kInfeasible;
  result.explanation = absl::StrJoin(reasons, "; ");
  return result;
}

absl::StatusOr<std::vector<Allocation>> DomainGroupScheduler::Release(DomainGroupId id) {
  auto it = groups_.find(id.value());
  if (it == groups_.end()) {
    return absl::NotFoundError(absl::StrCat("no domain group ", id.value()));
  }
  std::vector<Allocation> released;
  for (const DomainBundle& b : it->second.bundles) {
    allocation_owner_.erase(b.allocation.id.value());
    if (cluster_->FindAllocation(b.allocation.id) == nullptr) continue;  // lost with its node
    absl::StatusOr<Allocation> r = cluster_->Release(b.allocation.id);
    if (r.ok()) released.push_back(*std::move(r));
  }
  by_name_.erase(it->second.name);
  groups_.erase(it);
  return released;
}

std::optional<DomainGroupId> DomainGroupScheduler::FindByName(std::string_view name) const {
  auto it = by_name_.find(name);
  if (it == by_name_.end()) return std::nullopt;
  return DomainGroupId(it->second);
}

const std::vector<DomainBundle>* DomainGroupScheduler::Bundles(DomainGroupId id) const {
  auto it = groups_.find(id.value());
  return it == groups_.end() ? nullptr : &it->second.bundles;
}

}  // namespace tessera
