#include "scheduling/bundle_ledger.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/string_util.h"
#include "scheduling/device_set_choice.h"
#include "scheduling/explanation.h"

namespace tessera {
namespace {

const Quantity kOne = Quantity::FromInt(1);

std::string BundleName(std::string_view group, int bundle) {
  return absl::StrCat("bundle ", bundle, " of ", ToAbsl(group));
}

}  // namespace

absl::Status BundleLedger::AddBundle(std::string_view group, int bundle,
                                     const Allocation& reservation) {
  if (group.empty()) return absl::InvalidArgumentError("bundle ledger: the group is empty");
  if (bundle < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("bundle ledger: bundle index ", bundle, " is negative"));
  }
  Key key(std::string(group), bundle);
  if (bundles_.contains(key)) {
    return absl::AlreadyExistsError(
        absl::StrCat(BundleName(group, bundle), " is registered already"));
  }
  Bundle b;
  b.reservation = reservation;
  b.left = reservation.resources;
  for (const DeviceGrant& g : reservation.devices) {
    b.devices.push_back(DevicesLeft{g.resource, g.instances, g.amounts, g.amounts});
  }
  std::sort(b.devices.begin(), b.devices.end(),
            [](const DevicesLeft& x, const DevicesLeft& y) { return x.resource < y.resource; });
  bundles_.emplace(std::move(key), std::move(b));
  return absl::OkStatus();
}

std::vector<Allocation> BundleLedger::RemoveBundles(std::string_view group,
                                                    std::optional<int> bundle) {
  std::vector<int64_t> lost;
  auto it = bundles_.lower_bound(Key(std::string(group), bundle.value_or(-1)));
  while (it != bundles_.end() && it->first.first == group &&
         (!bundle || it->first.second == *bundle)) {
    lost.insert(lost.end(), it->second.served.begin(), it->second.served.end());
    it = bundles_.erase(it);
  }
  std::sort(lost.begin(), lost.end());
  std::vector<Allocation> out;
  for (int64_t id : lost) {
    auto s = served_.find(id);
    out.push_back(std::move(s->second.allocation));
    served_.erase(s);
  }
  return out;
}

bool BundleLedger::Holds(const Bundle& b, const ResourceSet& demand, bool now) const {
  if (!(now ? b.left : b.reservation.resources).Contains(demand)) return false;
  for (const DevicesLeft& d : b.devices) {
    const Quantity q = demand.Get(d.resource);
    if (q.IsZero()) continue;
    const std::vector<Quantity>& pool = now ? d.left : d.granted;
    if (q.IsInteger()) {
      // Whole devices: only devices the bundle holds whole and has not lent out at all.
      int whole = 0;
      for (size_t i = 0; i < pool.size(); ++i) whole += (pool[i] == kOne && d.granted[i] == kOne);
      if (whole < q.WholePart()) return false;
    } else if (std::none_of(pool.begin(), pool.end(), [&](Quantity x) { return x >= q; })) {
      return false;
    }
  }
  return true;
}

std::optional<std::vector<DeviceGrant>> BundleLedger::ChooseDevices(
    const Bundle& b, const ResourceSet& demand) const {
  const std::optional<NodeIndex> node = cluster_->Find(b.reservation.node);
  std::vector<DeviceGrant> grants;
  for (const DevicesLeft& d : b.devices) {
    const Quantity q = demand.Get(d.resource);
    if (q.IsZero()) continue;
    const DeviceInstances* on_node = node ? cluster_->node(*node).FindDevices(d.resource) : nullptr;
    size_t size = on_node != nullptr ? on_node->available.size() : 0;
    for (int i : d.instances) size = std::max(size, static_cast<size_t>(i) + 1);
    DeviceGrant grant;
    grant.resource = d.resource;
    if (q.IsInteger()) {
      std::vector<bool> free(size, false);
      for (size_t i = 0; i < d.instances.size(); ++i) {
        free[d.instances[i]] = d.left[i] == kOne && d.granted[i] == kOne;
      }
      const int k = static_cast<int>(q.WholePart());
      if (on_node != nullptr && on_node->available.size() == size) {
        grant.instances = on_node->chooser->Choose(free, k);
      } else {
        for (size_t i = 0; i < size && static_cast<int>(grant.instances.size()) < k; ++i) {
          if (free[i]) grant.instances.push_back(static_cast<int>(i));
        }
      }
      if (static_cast<int>(grant.instances.size()) != k) return std::nullopt;
      grant.amounts.assign(k, kOne);
    } else {
      std::vector<Quantity> left(size, Quantity());
      for (size_t i = 0; i < d.instances.size(); ++i) left[d.instances[i]] = d.left[i];
      const int instance = BestFitFraction(left, q);
      if (instance < 0) return std::nullopt;
      grant.instances = {instance};
      grant.amounts = {q};
    }
    grants.push_back(std::move(grant));
  }
  return grants;
}

std::string BundleLedger::Shortfall(const Bundle& b, const ResourceSet& demand) const {
  std::vector<std::string> parts;
  for (const auto& [resource, q] : demand) {
    const Quantity left = b.left.Get(resource);
    if (left < q) {
      parts.push_back(absl::StrCat(resource, " ", left.ToString(), " of ",
                                   b.reservation.resources.Get(resource).ToString(), " left"));
    }
  }
  if (parts.empty()) {
    for (const DevicesLeft& d : b.devices) {
      const Quantity q = demand.Get(d.resource);
      if (q.IsZero()) continue;
      if (q.IsInteger()) {
        int whole = 0;
        for (size_t i = 0; i < d.left.size(); ++i) whole += d.left[i] == kOne;
        parts.push_back(absl::StrCat(whole, " whole ", d.resource, " left"));
      } else {
        parts.push_back(absl::StrCat("no ", d.resource, " with ", q.ToString(), " left"));
      }
    }
  }
  std::vector<Holder> holders;
  for (int64_t id : b.served) holders.push_back(served_.at(id).holder);
  return absl::StrCat(absl::StrJoin(parts, ", "), " (held by ", DescribeHolders(holders), ")");
}

absl::Status BundleLedger::SetHolder(AllocationId id, Holder holder) {
  auto s = served_.find(id.value());
  if (s == served_.end()) {
    return absl::NotFoundError(absl::StrCat("bundle allocation ", id.value(), " is not held"));
  }
  s->second.holder = std::move(holder);
  return absl::OkStatus();
}

ScheduleResult BundleLedger::Allocate(const BundleTarget& target, const ResourceSet& demand,
                                      Holder holder) {
  ScheduleResult result;
  std::vector<std::map<Key, Bundle, std::less<>>::iterator> candidates;
  if (target.bundle >= 0) {
    auto it = bundles_.find(Key(target.group, target.bundle));
    if (it != bundles_.end()) candidates.push_back(it);
  } else {
    for (auto it = bundles_.lower_bound(Key(target.group, -1));
         it != bundles_.end() && it->first.first == target.group; ++it) {
      candidates.push_back(it);
    }
  }
  if (candidates.empty()) {
    result.status = ScheduleStatus::kPending;
    result.explanation =
        target.bundle >= 0
            ? absl::StrCat(BundleName(target.group, target.bundle), " is not reserved now")
            : absl::StrCat("placement group ", target.group, " has no bundle reserved now");
    return result;
  }
  std::erase_if(candidates, [&](auto it) { return !Holds(it->second, demand, false); });
  if (candidates.empty()) {
    result.status = ScheduleStatus::kInfeasible;
    if (target.bundle >= 0) {
      const Bundle& b = bundles_.find(Key(target.group, target.bundle))->second;
      result.explanation = absl::StrCat(BundleName(target.group, target.bundle), " reserves ",
                                        b.reservation.resources.ToString(), "; it can never hold ",
                                        demand.ToString());
    } else {
      result.explanation = absl::StrCat("no bundle of ", target.group, " can ever hold ",
                                        demand.ToString(), " (a request never spans bundles)");
    }
    return result;
  }
  std::vector<std::string> busy;
  for (auto it : candidates) {
    Bundle& b = it->second;
    if (!Holds(b, demand, true)) {
      busy.push_back(
          absl::StrCat(BundleName(target.group, it->first.second), " has ", Shortfall(b, demand)));
      continue;
    }
    std::optional<std::vector<DeviceGrant>> devices = ChooseDevices(b, demand);
    if (!devices) continue;  // Holds() checked the counts; unreachable in practice
    b.left = *b.left.Minus(demand);
    AdjustDevicesLeft(b.devices, *devices, -1);
    Allocation a;
    a.id = AllocationId(next_id_++);
    a.node = b.reservation.node;
    a.resources = demand;
    a.devices = std::move(*devices);
    b.served.push_back(a.id.value());
    served_.emplace(a.id.value(), Served{it->first, a, std::move(holder)});
    result.status = ScheduleStatus::kPlaced;
    result.placement = Placement{a.node, std::move(a), 0, it->first.second};
    return result;
  }
  result.status = ScheduleStatus::kPending;
  constexpr size_t kShown = 3;
  if (busy.size() > kShown) {
    const size_t more = busy.size() - kShown;
    busy.resize(kShown);
    busy.push_back(absl::StrCat(more, " more"));
  }
  result.explanation =
      absl::StrCat("not enough left now for ", demand.ToString(), ": ", absl::StrJoin(busy, "; "));
  return result;
}

absl::StatusOr<Allocation> BundleLedger::Release(AllocationId id) {
  auto s = served_.find(id.value());
  if (s == served_.end()) {
    return absl::NotFoundError(absl::StrCat("bundle allocation ", id.value(),
                                            " is not held (released already, or its bundle is "
                                            "gone)"));
  }
  const Key key = s->second.bundle;
  Allocation allocation = std::move(s->second.allocation);
  served_.erase(s);
  Bundle& b = bundles_.at(key);
  std::erase(b.served, id.value());
  b.left = *b.left.Plus(allocation.resources);
  AdjustDevicesLeft(b.devices, allocation.devices, +1);
  return allocation;
}

void BundleLedger::AdjustDevicesLeft(std::vector<DevicesLeft>& devices,
                                     const std::vector<DeviceGrant>& grants, int64_t sign) {
  for (const DeviceGrant& g : grants) {
    for (DevicesLeft& d : devices) {
      if (d.resource != g.resource) continue;
      for (size_t i = 0; i < g.instances.size(); ++i) {
        const size_t pos =
            std::lower_bound(d.instances.begin(), d.instances.end(), g.instances[i]) -
            d.instances.begin();
        d.left[pos] = Quantity::FromRaw(d.left[pos].raw() + sign * g.amounts[i].raw());
      }
    }
  }
}

std::optional<AllocationId> BundleLedger::ReservationOf(std::string_view group, int bundle) const {
  auto it = bundles_.find(Key(std::string(group), bundle));
  if (it == bundles_.end()) return std::nullopt;
  return it->second.reservation.id;
}

std::vector<int> BundleLedger::BundlesOf(std::string_view group) const {
  std::vector<int> out;
  for (auto it = bundles_.lower_bound(Key(std::string(group), -1));
       it != bundles_.end() && it->first.first == group; ++it) {
    out.push_back(it->first.second);
  }
  return out;
}

const ResourceSet* BundleLedger::RemainingOf(std::string_view group, int bundle) const {
  auto it = bundles_.find(Key(std::string(group), bundle));
  return it == bundles_.end() ? nullptr : &it->second.left;
}

}  // namespace tessera
