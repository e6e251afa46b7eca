#include "scheduling/domain_group_scheduler.h"

#include <algorithm>
#include <limits>
#include <set>
#include <tuple>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/ignore_status.h"
#include "base/string_util.h"
#include "hardware/node_label_keys.h"
#include "scheduling/explanation.h"
#include "vocabulary/slice_shape.h"
#include "vocabulary/sub_slice.h"

namespace tessera {
namespace {

constexpr std::string_view kTpu = "TPU";
constexpr size_t kMaxNamed = 5;  // problems named in one explanation line

// "v6e 4x4"; v5litepod reads as users write it, "v5e".
std::string ShapeLabel(TpuGeneration generation, const std::vector<int>& dims) {
  const std::string_view name =
      generation == TpuGeneration::kV5litepod ? "v5e" : GenerationInfo(generation).name;
  return absl::StrCat(ToAbsl(name), " ", absl::StrJoin(dims, "x"));
}

// A host's worker id as its registration gave it, for messages.
std::string WorkerIdText(const std::optional<int>& worker) {
  return worker.has_value() ? absl::StrCat(*worker) : std::string("none");
}

std::string Plural(size_t n, std::string_view one, std::string_view many) {
  return absl::StrCat(n, " ", ToAbsl(n == 1 ? one : many));
}

// Why restored bundles cannot be taken back: InvalidArgument "<where>: <parts>".
template <typename... Parts>
absl::Status RestoreRefusal(const std::string& where, const Parts&... parts) {
  return absl::InvalidArgumentError(absl::StrCat(where, ": ", parts...));
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

std::string DomainAlternative::FilterText() const {
  std::string text;
  if (!domain.empty()) absl::StrAppend(&text, " named ", domain);
  if (!selector.empty()) {
    absl::StrAppend(&text,
                    !shape.has_value() ? " with hosts matching " : " with every host matching ",
                    selector.ToString());
  }
  return text;
}

bool DomainGroupScheduler::Filters(const DomainAlternative& alt) {
  return !alt.domain.empty() || !alt.selector.empty();
}

bool DomainGroupScheduler::IdleHostsFit(const DomainAlternative& alt) {
  return alt.per_host.Get(kTpu).IsZero();
}

bool DomainGroupScheduler::Admits(const Slice& slice, const DomainAlternative& alt) const {
  if (!alt.domain.empty() && slice.name != alt.domain) return false;
  if (alt.selector.empty()) return true;
  for (const auto& [w, registrations] : slice.workers) {
    for (NodeIndex n : registrations) {
      const NodeRecord& record = cluster_->node(n);
      if (!record.removed && !alt.selector.Matches(record.labels)) return false;
    }
  }
  return true;
}

void DomainGroupScheduler::Catalog() {
  for (; catalogued_ < cluster_->slot_count(); ++catalogued_) {
    const NodeRecord& record = cluster_->node(catalogued_);
    const FabricMembership& f = record.fabric;
    // Labels were read into types when the host registered: a host whose labels are missing,
    // do not parse or disagree is no slice's host.
    if (!f.tpu_slice_name.empty() && f.tpu_slice.has_value() && f.tpu_worker_id.has_value()) {
      const ShapeKey key{f.tpu_slice->generation, f.tpu_slice->topology.dims};
      Slice& slice = slices_[key][f.tpu_slice_name];
      slice.name = f.tpu_slice_name;
      slice.workers[*f.tpu_worker_id].push_back(catalogued_);
      slice.host_tpu = std::max(slice.host_tpu, record.total.Get(kTpu).WholePart());
    }
    auto kind = record.labels.find(labels::kFabricKind);
    if (!f.fabric_domain.empty() && kind != record.labels.end() && kind->second == "nvlink") {
      nvlink_domains_[f.fabric_domain].push_back(catalogued_);
    }
  }
}

inline std::optional<NodeIndex> DomainGroupScheduler::Registered(const Slice& slice, int w) const {
  auto it = slice.workers.find(w);
  if (it == slice.workers.end()) return std::nullopt;
  // The newest registration that is not removed (a host re-registers with a new index).
  for (auto n = it->second.rbegin(); n != it->second.rend(); ++n) {
    if (!cluster_->node(*n).removed) return *n;
  }
  return std::nullopt;
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
    const std::optional<NodeIndex> registered = Registered(slice, w);
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

bool DomainGroupScheduler::HostsIdle(const std::vector<NodeIndex>& hosts,
                                     const DomainAlternative& alt, int64_t* score) const {
  bool idle = true;
  *score = 0;
  for (NodeIndex n : hosts) {
    idle = idle && !TpuBusy(n) && (alt.per_host.empty() || cluster_->FitsNow(n, alt.per_host));
    *score += cluster_->node(n).utilization_ppm;
  }
  return idle;
}

bool DomainGroupScheduler::TpuBusy(NodeIndex node) const {
  const NodeRecord& record = cluster_->node(node);
  if (record.allocations.empty()) return false;  // the common idle host: no lookups
  return record.available.Get(kTpu) != record.total.Get(kTpu);
}

std::string DomainGroupScheduler::Holders(const std::vector<NodeIndex>& hosts,
                                          const DomainAlternative& alt) const {
  std::vector<std::string> resources;
  if (alt.shape.has_value()) resources.emplace_back(kTpu);
  for (const auto& [resource, q] : alt.per_host) resources.push_back(resource);
  return DescribeHolders(HoldersOn(*cluster_, hosts, resources));
}

std::optional<std::string> DomainGroupScheduler::HostsMisfit(const std::vector<NodeIndex>& hosts,
                                                             const DomainAlternative& alt) const {
  for (NodeIndex n : hosts) {
    if (std::optional<std::string> why = HostMisfit(n, alt)) return why;
  }
  return std::nullopt;
}

bool DomainGroupScheduler::PassOver(const std::vector<NodeIndex>& hosts,
                                    const DomainAlternative& alt, bool hosts_idle, bool idle_fits,
                                    PassedOver& passed) const {
  if (!(hosts_idle && idle_fits)) {
    if (std::optional<std::string> why = HostsMisfit(hosts, alt)) {
      ++passed.misfits;
      if (!passed.misfit.has_value()) passed.misfit = std::move(why);
      return true;
    }
  }
  if (hosts_idle) return false;
  ++passed.busy;
  passed.busy_hosts.insert(passed.busy_hosts.end(), hosts.begin(), hosts.end());
  return true;
}

void DomainGroupScheduler::AppendBusyAndMisfits(std::string& text, size_t total,
                                                const PassedOver& passed,
                                                const DomainAlternative& alt) const {
  const size_t busy = passed.busy;
  const size_t misfits = passed.misfits;
  if (busy > 0) {
    absl::StrAppend(&text, "; ", busy == total ? "all" : absl::StrCat(busy),
                    busy == 1 && total != 1 ? " is" : " are", " busy (held by ",
                    Holders(passed.busy_hosts, alt), ")");
  }
  if (misfits > 0) {
    absl::StrAppend(&text, "; ", misfits == total ? "none" : absl::StrCat(misfits),
                    misfits == total ? " can" : " cannot", " hold ",
                    alt.per_host.empty() ? "the request" : alt.per_host.ToString(),
                    " per host beside its TPU (", passed.misfit.value_or(""), ")");
  }
}

std::optional<std::string> DomainGroupScheduler::HostMisfit(NodeIndex node,
                                                            const DomainAlternative& alt) const {
  const NodeRecord& record = cluster_->node(node);
  ResourceSet demand = alt.per_host;
  if (alt.shape.has_value()) demand.Set(std::string(kTpu), record.total.Get(kTpu));
  if (cluster_->FeasibleOn(node, demand)) return std::nullopt;
  for (const auto& [resource, q] : demand) {
    const Quantity has = record.total.Get(resource);
    if (has < q) {
      return has.IsZero() ? absl::StrCat("its hosts have no ", resource)
                          : absl::StrCat("its hosts have ", resource, "=", has.ToString());
    }
  }
  return absl::StrCat("its hosts cannot hold ", demand.ToString());
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
      parts.push_back(absl::StrCat(live, " ", ShapeLabel(key.generation, key.dims)));
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
    if (!alt.shape.has_value()) {
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
    for (size_t i = out.size(); i > start; --i) {
      IgnoreStatus(cluster_->Release(out[i - 1].allocation.id),
                   "cannot fail: this attempt took it");
    }
    out.resize(start);
  }
  return ok;
}

void DomainGroupScheduler::TakeDomains(
    const std::vector<std::pair<std::string, std::vector<NodeIndex>>>& chosen,
    const DomainAlternative& alt, const ResolvedShape& shape, std::string_view noun,
    Outcome& outcome) {
  for (const auto& [domain, hosts] : chosen) {
    std::vector<int> workers(hosts.size());
    for (size_t w = 0; w < workers.size(); ++w) workers[w] = static_cast<int>(w);
    if (!Take(hosts, domain, workers, alt, shape.resources_per_chip, outcome.bundles)) {
      for (auto it = outcome.bundles.rbegin(); it != outcome.bundles.rend(); ++it) {
        IgnoreStatus(cluster_->Release(it->allocation.id), "cannot fail: this attempt took it");
      }
      outcome.bundles.clear();
      outcome.domains.clear();
      outcome.explanation = absl::StrCat(ToAbsl(noun), " ", domain, " could not be reserved");
      return;
    }
    outcome.domains.push_back(domain);
  }
  outcome.placed = true;
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
  std::vector<std::string> broken;
  PassedOver passed;
  size_t existing = 0;
  std::vector<NodeIndex> hosts;
  const bool filtered = Filters(alt);
  const bool idle_fits = IdleHostsFit(alt);
  if (found != slices_.end()) {
    for (const auto& [name, slice] : found->second) {
      if (filtered && !Admits(slice, alt)) continue;
      std::string problem;
      if (!SliceHosts(slice, shape, hosts, problem)) {
        // A slice every host of which was removed exists no more; the others are not intact.
        bool any = false;
        for (const auto& [w, registrations] : slice.workers) {
          for (NodeIndex n : registrations) any = any || !cluster_->node(n).removed;
        }
        if (!any) continue;
        ++existing;
        broken.push_back(absl::StrCat(name, ": ", problem));
        continue;
      }
      ++existing;  // every host is there and alive
      int64_t score = 0;
      const bool hosts_idle = HostsIdle(hosts, alt, &score);
      if (PassOver(hosts, alt, hosts_idle, idle_fits, passed)) continue;
      idle.push_back(Candidate{score, &slice});
    }
  }
  const size_t intact = existing - broken.size() - passed.misfits;
  outcome.feasible = intact >= k;
  if (idle.size() >= k) {
    // Busiest hosts first: idle slices on empty hosts stay whole.
    std::partial_sort(idle.begin(), idle.begin() + static_cast<long>(k), idle.end(),
                      [](const Candidate& a, const Candidate& b) {
                        return std::tie(b.score, a.slice->name) < std::tie(a.score, b.slice->name);
                      });
    std::vector<std::pair<std::string, std::vector<NodeIndex>>> chosen;
    for (size_t i = 0; i < k; ++i) {
      std::string problem;
      SliceHosts(*idle[i].slice, shape, hosts, problem);  // true: it was when listed idle
      chosen.emplace_back(idle[i].slice->name, hosts);
    }
    TakeDomains(chosen, alt, shape, "slice", outcome);
    return outcome;
  }
  const std::string filter = alt.FilterText();
  if (existing == 0) {
    outcome.explanation = absl::StrCat("no ", shape.label, " slice", filter,
                                       " exists (slices: ", ExistingSlices(), ")");
    return outcome;
  }
  std::string text = absl::StrCat(existing, " ", shape.label, existing == 1 ? " slice" : " slices",
                                  filter, existing == 1 ? " exists" : " exist");
  if (existing < k) absl::StrAppend(&text, "; ", k, " needed");
  AppendBusyAndMisfits(text, existing, passed, alt);
  if (!broken.empty()) {
    absl::StrAppend(&text, "; ", broken.size(), broken.size() == 1 ? " is" : " are",
                    " not intact (", JoinLimited(broken), ")");
  }
  if (!idle.empty() && existing >= k)
    absl::StrAppend(&text, "; ", idle.size(), " idle, ", k, " needed");
  outcome.explanation = text;
  return outcome;
}

const DomainGroupScheduler::Slice* DomainGroupScheduler::FindSlice(const std::string& name,
                                                                   ShapeKey* key) const {
  for (const auto& [shape, by_name] : slices_) {
    auto it = by_name.find(name);
    if (it == by_name.end()) continue;
    if (key != nullptr) *key = shape;
    return &it->second;
  }
  return nullptr;
}

std::optional<std::vector<std::vector<int>>> DomainGroupScheduler::SubBlocks(
    const Slice& slice, const ShapeKey& key, const ResolvedShape& shape) const {
  if (slice.host_tpu <= 0 || slice.host_tpu % shape.resources_per_chip != 0) return std::nullopt;
  if (key.generation != shape.generation) return std::nullopt;
  const int chips_per_host = static_cast<int>(slice.host_tpu / shape.resources_per_chip);
  absl::StatusOr<SliceShape> parent =
      MakeSliceShape(key.generation, TpuTopology{key.dims}, chips_per_host);
  if (!parent.ok()) return std::nullopt;
  absl::StatusOr<SliceShape> sub = MakeSliceShape(shape.generation, shape.topology, chips_per_host);
  if (!sub.ok()) return std::nullopt;
  absl::StatusOr<std::vector<std::vector<int>>> blocks = SubSliceBlocks(*parent, *sub);
  if (!blocks.ok()) return std::nullopt;
  return *std::move(blocks);
}

DomainGroupScheduler::Outcome DomainGroupScheduler::TrySubSlices(const DomainAlternative& alt,
                                                                 const ResolvedShape& shape) {
  Outcome outcome;
  const size_t k = static_cast<size_t>(alt.count);
  struct Block {
    int64_t parent_tpu;  // the parent's TPU in all: smaller parents first
    int64_t score;       // the parent's summed utilization: busier parents first
    const Slice* slice;
    size_t index;
    std::vector<NodeIndex> hosts;
  };
  std::vector<Block> idle;
  PassedOver passed;
  size_t blocks = 0, broken = 0, parents = 0;
  const bool idle_fits = IdleHostsFit(alt);
  for (const auto& [key, by_name] : slices_) {
    for (const auto& [name, slice] : by_name) {
      if (!Admits(slice, alt)) continue;
      const std::optional<std::vector<std::vector<int>>> layout = SubBlocks(slice, key, shape);
      if (!layout.has_value()) continue;
      int64_t score = 0, parent_hosts = 0;
      for (const auto& [w, registrations] : slice.workers) {
        if (std::optional<NodeIndex> n = Registered(slice, w)) {
          score += cluster_->node(*n).utilization_ppm;
          ++parent_hosts;
        }
      }
      if (parent_hosts == 0) continue;
      ++parents;
      for (size_t b = 0; b < layout->size(); ++b) {
        ++blocks;
        std::vector<NodeIndex> hosts;
        for (int w : (*layout)[b]) {
          std::optional<NodeIndex> n = Registered(slice, w);
          if (!n.has_value() || cluster_->node(*n).state != NodeState::kAlive) break;
          hosts.push_back(*n);
        }
        if (hosts.size() != (*layout)[b].size()) {
          ++broken;
          continue;
        }
        int64_t ignored_score = 0;
        const bool hosts_idle = HostsIdle(hosts, alt, &ignored_score);
        if (PassOver(hosts, alt, hosts_idle, idle_fits, passed)) continue;
        idle.push_back(Block{slice.host_tpu * parent_hosts, score, &slice, b, std::move(hosts)});
      }
    }
  }
  outcome.feasible = blocks - broken - passed.misfits >= k;
  if (idle.size() >= k) {
    std::sort(idle.begin(), idle.end(), [](const Block& a, const Block& b) {
      return std::tie(a.parent_tpu, b.score, a.slice->name, a.index) <
             std::tie(b.parent_tpu, a.score, b.slice->name, b.index);
    });
    std::vector<std::pair<std::string, std::vector<NodeIndex>>> chosen;
    for (size_t i = 0; i < k; ++i) {
      chosen.emplace_back(absl::StrCat(idle[i].slice->name, "/", idle[i].index), idle[i].hosts);
    }
    TakeDomains(chosen, alt, shape, "block", outcome);
    return outcome;
  }
  const std::string filter = alt.FilterText();
  if (blocks == 0) {
    outcome.explanation = absl::StrCat("no slice", filter, " holds a ", shape.label,
                                       " block (slices: ", ExistingSlices(), ")");
    return outcome;
  }
  std::string text = absl::StrCat(Plural(blocks, shape.label + " block", shape.label + " blocks"),
                                  " in ", Plural(parents, "slice", "slices"), filter);
  if (blocks < k) absl::StrAppend(&text, "; ", k, " needed");
  AppendBusyAndMisfits(text, blocks, passed, alt);
  if (broken > 0) {
    absl::StrAppend(&text, "; ", broken, broken == 1 ? " has" : " have", " a missing or dead host");
  }
  if (!idle.empty() && blocks >= k) {
    absl::StrAppend(&text, "; ", idle.size(), " idle, ", k, " needed");
  }
  outcome.explanation = text;
  return outcome;
}

std::string DomainGroupScheduler::SubSliceHostMismatch(NodeIndex node, const DomainBundle& bundle,
                                                       const ResolvedShape& shape,
                                                       const RestoredLayout& layout) const {
  const FabricMembership& f = cluster_->node(node).fabric;
  const size_t slash = bundle.domain.rfind('/');
  size_t block = 0;
  if (slash == std::string::npos ||
      !absl::SimpleAtoi(ToAbsl(std::string_view(bundle.domain).substr(slash + 1)), &block)) {
    return absl::StrCat("its domain ", bundle.domain, " is not <slice>/<block>");
  }
  const std::string slice_name = bundle.domain.substr(0, slash);
  if (f.tpu_slice_name != slice_name) {
    return absl::StrCat("it registered as ",
                        f.tpu_slice_name.empty() ? std::string("no slice's host")
                                                 : absl::StrCat("a host of ", f.tpu_slice_name),
                        ", not of ", slice_name);
  }
  ShapeKey key;
  const Slice* slice = FindSlice(slice_name, &key);
  const std::optional<std::vector<std::vector<int>>> blocks =
      slice == nullptr ? std::nullopt : SubBlocks(*slice, key, shape);
  if (!blocks.has_value() || block >= blocks->size() || bundle.worker < 0 ||
      static_cast<size_t>(bundle.worker) >= (*blocks)[block].size()) {
    return absl::StrCat(
        "slice ", slice_name, " (",
        slice == nullptr ? std::string("no valid shape") : ShapeLabel(key.generation, key.dims),
        ") has no ", shape.label, " block ", block, " with a worker ", bundle.worker);
  }
  const int parent_worker = (*blocks)[block][bundle.worker];
  if (f.tpu_worker_id != parent_worker) {
    return absl::StrCat("it registered as ", slice_name, " worker ", WorkerIdText(f.tpu_worker_id),
                        ", not worker ", parent_worker, " (block ", block, " worker ",
                        bundle.worker, ")");
  }
  const int64_t tpu = layout.host_tpu.at(bundle.domain);
  if (cluster_->node(node).total.Get(kTpu) != Quantity::FromInt(tpu)) {
    return absl::StrCat("it has TPU=", cluster_->node(node).total.Get(kTpu).ToString(),
                        "; the block's hosts held TPU=", tpu);
  }
  return "";
}

DomainGroupScheduler::Outcome DomainGroupScheduler::TryNvLink(const DomainAlternative& alt) {
  Outcome outcome;
  const size_t n_hosts = static_cast<size_t>(alt.count);
  std::optional<std::tuple<size_t, std::string, std::vector<NodeIndex>>> best;
  size_t largest_feasible = 0, feasible_domains = 0;
  std::vector<NodeIndex> busy_hosts;
  size_t admitted = 0;
  for (const auto& [domain, members] : nvlink_domains_) {
    if (!alt.domain.empty() && domain != alt.domain) continue;
    ++admitted;
    std::vector<NodeIndex> usable;
    size_t feasible = 0;
    for (NodeIndex n : members) {
      const NodeRecord& record = cluster_->node(n);
      if (record.removed || record.state != NodeState::kAlive) continue;
      if (!alt.selector.Matches(record.labels)) continue;
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
  const std::string filter = alt.FilterText();
  if (admitted == 0) {
    outcome.explanation = absl::StrCat("no NVLink domain", alt.domain.empty() ? "" : " named ",
                                       alt.domain, " exists");
  } else if (feasible_domains == 0) {
    outcome.explanation =
        absl::StrCat("no NVLink domain", filter, " has ", n_hosts, " hosts that could fit ", demand,
                     " (largest: ", largest_feasible, ")");
  } else {
    outcome.explanation =
        absl::StrCat(Plural(feasible_domains, "NVLink domain", "NVLink domains"), filter,
                     " could hold ", n_hosts, " hosts of ", demand, "; none has ", n_hosts,
                     " free now (held by ", Holders(busy_hosts, alt), ")");
  }
  return outcome;
}

absl::StatusOr<std::vector<std::optional<DomainGroupScheduler::ResolvedShape>>>
DomainGroupScheduler::CheckRequest(const DomainGroupRequest& request) const {
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
    if (!alt.shape.has_value()) {
      if (alt.sub_slice) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": sub_slice needs a TPU slice shape"));
      }
      if (alt.granularity == BundleGranularity::kPerChip || alt.per_host.empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": an NVLink alternative needs a per-host demand, per host"));
      }
      shapes.emplace_back();
      continue;
    }
    // Built again from its generation and topology (checked, not parsed): a shape filled in by
    // hand, its derived fields unset, reads as the one MakeSliceShape makes.
    absl::StatusOr<SliceShape> shape = MakeSliceShape(alt.shape->generation, alt.shape->topology);
    if (!shape.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": ", shape.status().message()));
    }
    shapes.push_back(ResolvedShape{ShapeKey{shape->generation, shape->topology.dims},
                                   ShapeLabel(shape->generation, shape->topology.dims),
                                   shape->chips, std::max(1, shape->resources_per_chip),
                                   shape->generation, shape->topology});
  }
  return shapes;
}

absl::StatusOr<DomainGroupResult> DomainGroupScheduler::ReserveSlices(
    const DomainGroupRequest& request) {
  absl::StatusOr<std::vector<std::optional<ResolvedShape>>> checked = CheckRequest(request);
  if (!checked.ok()) return checked.status();
  const std::vector<std::optional<ResolvedShape>>& shapes = *checked;
  Catalog();
  DomainGroupResult result;
  bool feasible = false;
  std::vector<std::string> reasons;
  for (size_t i = 0; i < request.alternatives.size(); ++i) {
    const DomainAlternative& alt = request.alternatives[i];
    Outcome outcome = !shapes[i].has_value() ? TryNvLink(alt)
                      : alt.sub_slice        ? TrySubSlices(alt, *shapes[i])
                                             : TrySlices(alt, *shapes[i]);
    if (outcome.placed) {
      const int64_t id = next_id_++;
      for (const DomainBundle& b : outcome.bundles) {
        IgnoreStatus(
            cluster_->SetHolder(b.allocation.id, Holder{HolderKind::kSliceGroup, request.name}),
            "cannot fail: the allocation was just made");
      }
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

absl::StatusOr<DomainGroupScheduler::RestoredLayout> DomainGroupScheduler::CheckRestoredBundles(
    const std::string& where, const DomainAlternative& alt,
    const std::optional<ResolvedShape>& shape, std::span<const DomainBundle> bundles) {
  if (bundles.empty()) return RestoreRefusal(where, "no bundles to restore");
  RestoredLayout layout;
  // Each host is one (domain, worker) and, in a slice, each (domain, worker) one host.
  std::map<std::string, std::pair<std::string, int>> host_of;  // node -> (domain, worker)
  std::map<std::pair<std::string, int>, std::string> node_of;
  std::map<std::string, std::map<int, std::vector<size_t>>>
      by_domain;  // domain -> worker -> bundles
  for (size_t i = 0; i < bundles.size(); ++i) {
    const DomainBundle& b = bundles[i];
    if (b.node.value().empty()) return RestoreRefusal(where, "bundle ", i, " has no node");
    if (b.domain.empty())
      return RestoreRefusal(where, "bundle ", i, " (host ", b.node.value(), ") has no domain");
    if (shape.has_value() ? b.worker < 0 : b.worker != -1) {
      return RestoreRefusal(where, "bundle ", i, " (host ", b.node.value(), ") has worker id ",
                            b.worker,
                            shape.has_value() ? " (TPU hosts have worker ids from 0)"
                                              : " (NVLink hosts have none, -1)");
    }
    const std::pair<std::string, int> host(b.domain, b.worker);
    auto [seen, fresh] = host_of.emplace(b.node.value(), host);
    if (!fresh && seen->second != host) {
      return RestoreRefusal(where, "host ", b.node.value(), " appears as two hosts (",
                            seen->second.first, " worker ", seen->second.second, " and ", b.domain,
                            " worker ", b.worker, ")");
    }
    auto [known, first] = node_of.emplace(host, b.node.value());
    if (shape.has_value() && !first && known->second != b.node.value()) {
      return RestoreRefusal(where, b.domain, " worker ", b.worker, " is on two hosts (",
                            known->second, " and ", b.node.value(), ")");
    }
    if (!by_domain.contains(b.domain)) layout.domains.push_back(b.domain);
    by_domain[b.domain][b.worker].push_back(i);
  }
  if (!shape.has_value()) {
    if (absl::Status s = CheckRestoredNvLinkHosts(where, alt, layout, host_of.size(), bundles);
        !s.ok()) {
      return s;
    }
    return layout;
  }
  if (layout.domains.size() != static_cast<size_t>(alt.count)) {
    return RestoreRefusal(where, "the bundles are on ",
                          Plural(layout.domains.size(), "slice", "slices"), "; the alternative is ",
                          alt.count);
  }
  const int64_t per_bundle = shape->resources_per_chip;
  for (const auto& [domain, workers] : by_domain) {
    // Every host of a slice takes all its TPU: what one host's bundles take is the host's TPU.
    absl::StatusOr<int64_t> host_tpu = RestoredHostTpu(where, domain, workers, bundles);
    if (!host_tpu.ok()) return host_tpu.status();
    const int64_t tpu = *host_tpu;
    const int64_t hosts = std::max<int64_t>(1, shape->chips * per_bundle / tpu);
    std::vector<std::string> given;
    for (const auto& [worker, indices] : workers) given.push_back(absl::StrCat(worker));
    if (static_cast<int64_t>(workers.size()) != hosts || workers.rbegin()->first != hosts - 1) {
      return RestoreRefusal(where, "slice ", domain, " has workers ", absl::StrJoin(given, ", "),
                            "; a ", shape->label, " slice of hosts with TPU=", tpu,
                            " has workers 0..", hosts - 1);
    }
    for (const auto& [worker, indices] : workers) {
      if (absl::Status s = CheckRestoredHostBundles(where, alt, per_bundle, tpu, domain, worker,
                                                    indices, bundles);
          !s.ok()) {
        return s;
      }
    }
    layout.host_tpu[domain] = tpu;
  }
  return layout;
}

absl::Status DomainGroupScheduler::CheckRestoredNvLinkHosts(const std::string& where,
                                                            const DomainAlternative& alt,
                                                            const RestoredLayout& layout,
                                                            size_t hosts,
                                                            std::span<const DomainBundle> bundles) {
  if (layout.domains.size() != 1) {
    return RestoreRefusal(where, "the hosts are in ", layout.domains.size(),
                          " NVLink domains (an NVLink group is in one)");
  }
  if (hosts != static_cast<size_t>(alt.count) || bundles.size() != hosts) {
    return RestoreRefusal(where, Plural(bundles.size(), "bundle", "bundles"), " on ",
                          Plural(hosts, "host", "hosts"), "; the alternative is ",
                          Plural(static_cast<size_t>(alt.count), "host", "hosts"),
                          " with one bundle each");
  }
  for (size_t i = 0; i < bundles.size(); ++i) {
    if (bundles[i].allocation.resources != alt.per_host) {
      return RestoreRefusal(where, "host ", bundles[i].node.value(), " holds ",
                            bundles[i].allocation.resources.ToString(), ", not the per-host ",
                            alt.per_host.ToString());
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> DomainGroupScheduler::RestoredHostTpu(
    const std::string& where, const std::string& domain,
    const std::map<int, std::vector<size_t>>& workers, std::span<const DomainBundle> bundles) {
  std::optional<Quantity> host_tpu;
  for (const auto& [worker, indices] : workers) {
    __int128 raw = 0;  // wide: restored input is not trusted to be small
    for (size_t i : indices) raw += bundles[i].allocation.resources.Get(kTpu).raw();
    if (raw > std::numeric_limits<int64_t>::max()) {
      return RestoreRefusal(where, domain, " worker ", worker, " holds more TPU than any host has");
    }
    const Quantity tpu = Quantity::FromRaw(static_cast<int64_t>(raw));
    if (!tpu.IsInteger() || tpu.WholePart() <= 0) {
      return RestoreRefusal(where, domain, " worker ", worker, " holds TPU=", tpu.ToString(),
                            " (a host's bundles take a whole number of chips)");
    }
    if (host_tpu.has_value() && *host_tpu != tpu) {
      return RestoreRefusal(where, domain, " has hosts holding TPU=", host_tpu->ToString(),
                            " and TPU=", tpu.ToString(),
                            " (every host of a slice holds all its chips)");
    }
    host_tpu = tpu;
  }
  return host_tpu->WholePart();
}

absl::Status DomainGroupScheduler::CheckRestoredHostBundles(const std::string& where,
                                                            const DomainAlternative& alt,
                                                            int64_t per_bundle, int64_t tpu,
                                                            const std::string& domain, int worker,
                                                            const std::vector<size_t>& indices,
                                                            std::span<const DomainBundle> bundles) {
  // The bundles Take makes for the host, in order.
  std::vector<ResourceSet> expected;
  if (alt.granularity == BundleGranularity::kPerHost) {
    ResourceSet demand = alt.per_host;
    demand.Set(std::string(kTpu), Quantity::FromInt(tpu));
    expected.push_back(std::move(demand));
  } else {
    for (int64_t c = 0; c < tpu / per_bundle; ++c) {
      ResourceSet demand = c == 0 ? alt.per_host : ResourceSet();
      demand.Set(std::string(kTpu), Quantity::FromInt(per_bundle));
      expected.push_back(std::move(demand));
    }
  }
  bool same = expected.size() == indices.size();
  for (size_t k = 0; same && k < indices.size(); ++k) {
    same = bundles[indices[k]].allocation.resources == expected[k];
  }
  if (!same) {
    std::vector<std::string> held, wanted;
    for (size_t i : indices) held.push_back(bundles[i].allocation.resources.ToString());
    for (const ResourceSet& r : expected) wanted.push_back(r.ToString());
    return RestoreRefusal(where, domain, " worker ", worker, " holds [", absl::StrJoin(held, " "),
                          "]; the alternative reserves [", absl::StrJoin(wanted, " "),
                          "] per host");
  }
  return absl::OkStatus();
}

std::string DomainGroupScheduler::HostMismatch(NodeIndex node, const DomainBundle& bundle,
                                               const std::optional<ResolvedShape>& shape,
                                               bool sub_slice, const RestoredLayout& layout) const {
  const NodeRecord& record = cluster_->node(node);
  const FabricMembership& f = record.fabric;
  if (!shape.has_value()) {
    auto kind = record.labels.find(labels::kFabricKind);
    if (f.fabric_domain != bundle.domain || kind == record.labels.end() ||
        kind->second != "nvlink") {
      return absl::StrCat("it is not in NVLink domain ", bundle.domain,
                          " (its domain: ", f.fabric_domain.empty() ? "none" : f.fabric_domain,
                          ")");
    }
    return "";
  }
  if (sub_slice) return SubSliceHostMismatch(node, bundle, *shape, layout);
  const std::string wanted = absl::StrCat(bundle.domain, " worker ", bundle.worker);
  if (f.tpu_slice_name != bundle.domain || f.tpu_worker_id != bundle.worker) {
    return absl::StrCat("it registered as ",
                        f.tpu_slice_name.empty() ? std::string("no slice's host")
                                                 : absl::StrCat(f.tpu_slice_name, " worker ",
                                                                WorkerIdText(f.tpu_worker_id)),
                        ", not ", wanted);
  }
  if (!f.tpu_slice.has_value()) {
    return absl::StrCat("its labels name no valid slice shape, not a ", shape->label);
  }
  if (ShapeKey{f.tpu_slice->generation, f.tpu_slice->topology.dims} != shape->key) {
    return absl::StrCat("its slice is a ",
                        ShapeLabel(f.tpu_slice->generation, f.tpu_slice->topology.dims), ", not a ",
                        shape->label);
  }
  const int64_t tpu = layout.host_tpu.at(bundle.domain);
  if (record.total.Get(kTpu) != Quantity::FromInt(tpu)) {
    return absl::StrCat("it has TPU=", record.total.Get(kTpu).ToString(),
                        "; the slice's hosts held TPU=", tpu);
  }
  return "";
}

std::string_view DomainRestoreStatusName(DomainRestoreStatus status) {
  switch (status) {
    case DomainRestoreStatus::kRestored: return "RESTORED";
    case DomainRestoreStatus::kBroken: return "BROKEN";
    case DomainRestoreStatus::kRefused: return "REFUSED";
  }
  return "UNKNOWN";
}

absl::StatusOr<DomainGroupRestoreResult> DomainGroupScheduler::Restore(
    const DomainGroupRequest& request, size_t alternative, std::span<const DomainBundle> bundles) {
  absl::StatusOr<std::vector<std::optional<ResolvedShape>>> checked = CheckRequest(request);
  if (!checked.ok()) return checked.status();
  const std::string where = absl::StrCat("domain group ", request.name);
  if (alternative >= request.alternatives.size()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": alternative ", alternative + 1,
                                                   " does not exist (the request has ",
                                                   request.alternatives.size(), ")"));
  }
  const DomainAlternative& alt = request.alternatives[alternative];
  const std::optional<ResolvedShape>& shape = (*checked)[alternative];
  absl::StatusOr<RestoredLayout> layout = CheckRestoredBundles(
      absl::StrCat(where, " alternative ", alternative + 1), alt, shape, bundles);
  if (!layout.ok()) return layout.status();
  Catalog();

  DomainGroupRestoreResult result;
  result.alternative = alternative;
  std::vector<std::string> missing;  // "host (why)"
  std::vector<std::optional<NodeIndex>> present(bundles.size());
  for (size_t i = 0; i < bundles.size(); ++i) {
    const DomainBundle& b = bundles[i];
    const std::optional<NodeIndex> node = cluster_->Find(b.node);
    if (!node.has_value() || cluster_->node(*node).state == NodeState::kDead) {
      // A host with several bundles (one per chip) is named once.
      if (std::find(result.missing.begin(), result.missing.end(), b.node) == result.missing.end()) {
        result.missing.push_back(b.node);
        missing.push_back(
            absl::StrCat(b.node.value(), node.has_value() ? " (dead)" : " (not in the cluster)"));
      }
      continue;
    }
    present[i] = *node;
  }
  // Take every present host's bundles, all or nothing.
  std::vector<Allocation> taken(bundles.size());
  auto refuse = [&](size_t i, std::string why) {
    for (size_t k = i; k > 0; --k) {
      if (present[k - 1].has_value()) {
        IgnoreStatus(cluster_->Release(taken[k - 1].id), "cannot fail: this restore took it");
      }
    }
    const DomainBundle& b = bundles[i];
    DomainGroupRestoreResult refused;
    refused.status = DomainRestoreStatus::kRefused;
    refused.alternative = alternative;
    refused.explanation = absl::StrCat(
        "host ", b.node.value(), " (", shape.has_value() ? "worker " : "NVLink domain ",
        shape.has_value() ? absl::StrCat(b.worker, " of slice ", b.domain) : b.domain,
        ") cannot take its bundle back: ", why);
    return refused;
  };
  for (size_t i = 0; i < bundles.size(); ++i) {
    if (!present[i].has_value()) continue;
    const DomainBundle& b = bundles[i];
    if (std::string why = HostMismatch(*present[i], b, shape, alt.sub_slice, *layout);
        !why.empty()) {
      return refuse(i, std::move(why));
    }
    absl::StatusOr<Allocation> allocation =
        cluster_->RestoreExact(*present[i], b.allocation.resources, b.allocation.devices);
    if (!allocation.ok()) return refuse(i, std::string(allocation.status().message()));
    taken[i] = *std::move(allocation);
  }
  const int64_t id = next_id_++;
  for (size_t i = 0; i < bundles.size(); ++i) {
    DomainBundle b = bundles[i];
    if (present[i].has_value()) {
      b.allocation = taken[i];
      IgnoreStatus(
          cluster_->SetHolder(b.allocation.id, Holder{HolderKind::kSliceGroup, request.name}),
          "cannot fail: the allocation was just restored");
    } else {
      b.allocation.id = AllocationId();
      b.allocation.node = b.node;
    }
    result.bundles.push_back(std::move(b));
  }
  result.domains = layout->domains;
  result.id = DomainGroupId(id);
  if (!missing.empty()) {
    result.status = DomainRestoreStatus::kBroken;
    const bool one = missing.size() == 1;
    result.explanation =
        absl::StrCat(one ? "host " : "hosts ", JoinLimited(missing), one ? " is" : " are",
                     " missing; the group is broken until ", one ? "it is" : "they are", " back");
  }
  groups_[id] = Group{request.name, result.bundles};
  by_name_[request.name] = id;
  return result;
}

absl::StatusOr<std::vector<Allocation>> DomainGroupScheduler::Release(DomainGroupId id) {
  auto it = groups_.find(id.value());
  if (it == groups_.end()) {
    return absl::NotFoundError(absl::StrCat("no domain group ", id.value()));
  }
  std::vector<Allocation> released;
  for (const DomainBundle& b : it->second.bundles) {
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
