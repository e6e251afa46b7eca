#include "scheduling/cluster_view.h"

#include <algorithm>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "base/string_util.h"
#include "hardware/node_label_keys.h"
#include "scheduling/device_set_choice.h"
#include "scheduling/resource_families.h"
#include "vocabulary/tpu_accelerator_type.h"

namespace tessera {
namespace {

constexpr int64_t kPartsPerMillion = 1'000'000;
const Quantity kOne = Quantity::FromInt(1);

std::string LabelOr(const LabelSet& labels, std::string_view key) {
  auto it = labels.find(key);
  return it == labels.end() ? std::string() : it->second;
}

std::optional<int> WorkerIdOf(const std::string& label) {
  int worker = 0;
  if (label.empty() || !absl::SimpleAtoi(ToAbsl(label), &worker) || worker < 0) return std::nullopt;
  return worker;
}

// The slice type of a pod type ("v6e-16") and a topology ("4x4") that agree: the topology is a
// slice of the pod type's generation with its chips.
std::optional<TpuSliceType> SliceTypeOf(const std::string& pod_type, const std::string& topology) {
  if (pod_type.empty() || topology.empty()) return std::nullopt;
  absl::StatusOr<TpuAcceleratorType> type = ParseTpuAcceleratorType(pod_type);
  if (!type.ok()) return std::nullopt;
  absl::StatusOr<TpuTopology> shape = ParseTpuTopologyFor(type->generation, topology);
  if (!shape.ok() || shape->chips() != type->chips()) return std::nullopt;
  return TpuSliceType{type->generation, *std::move(shape)};
}

// A topology of `count` devices with nothing known about them: for unit-instance resources that
// were declared without hardware (tests, operator overrides).
DeviceTopologyPtr PlainTopology(int count) {
  auto topology = std::make_shared<DeviceTopology>();
  topology->count = count;
  topology->numa_node.assign(count, -1);
  topology->nearest_nic.assign(count, "");
  return topology;
}

}  // namespace

std::string_view NodeStateName(NodeState state) {
  switch (state) {
    case NodeState::kAlive: return "alive";
    case NodeState::kDraining: return "draining";
    case NodeState::kDead: return "dead";
  }
  return "unknown";
}

NodeSpec NodeSpecFromHardware(NodeId id, const NodeHardware& hardware) {
  NodeSpec spec;
  spec.id = std::move(id);
  spec.resources = hardware.resources;
  spec.labels = hardware.labels;
  for (const FamilyReport& family : hardware.families) {
    if (!family.advertised || family.plugin == nullptr) continue;
    const std::string resource(family.plugin->resource_name());
    // Claim priority: the first advertised family owns a shared resource name.
    if (spec.devices.contains(resource)) continue;
    const int64_t advertised = spec.resources.Get(resource).WholePart();
    if (advertised <= 0) continue;
    // An operator override may advertise fewer than are visible: the first N, as discovery does.
    std::vector<Device> visible = family.visible;
    if (static_cast<int64_t>(visible.size()) > advertised) visible.resize(advertised);
    spec.devices.emplace(resource,
                         std::make_shared<DeviceTopology>(
                             DeviceTopology::FromVisibleDevices(visible, family.detection.links)));
  }
  return spec;
}

FabricMembership FabricMembershipFromLabels(const LabelSet& labels) {
  FabricMembership fabric;
  fabric.tpu_slice_name = LabelOr(labels, labels::kTpuSliceName);
  fabric.tpu_worker_id = WorkerIdOf(LabelOr(labels, labels::kTpuWorkerId));
  fabric.tpu_slice =
      SliceTypeOf(LabelOr(labels, labels::kTpuPodType), LabelOr(labels, labels::kTpuTopology));
  fabric.fabric_domain = LabelOr(labels, labels::kFabricDomain);
  return fabric;
}

int DeviceInstances::FullyFree() const {
  return static_cast<int>(std::count(available.begin(), available.end(), kOne));
}

Quantity DeviceInstances::LargestFree() const {
  Quantity largest;
  for (Quantity q : available) largest = std::max(largest, q);
  return largest;
}

const DeviceInstances* NodeRecord::FindDevices(std::string_view resource) const {
  for (const DeviceInstances& d : devices) {
    if (d.resource == resource) return &d;
  }
  return nullptr;
}

absl::StatusOr<NodeIndex> ClusterView::AddNode(NodeSpec spec) {
  const std::string id = spec.id.value();  // a copy: spec.id moves into the record
  if (id.empty()) return absl::InvalidArgumentError("node id is empty");
  if (by_id_.contains(id)) {
    return absl::AlreadyExistsError(absl::StrCat("node ", id, " is already registered"));
  }
  if (absl::Status s = ValidateLabels(spec.labels, LabelOrigin::kSystem); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("node ", id, ": ", s.message()));
  }
  NodeRecord record;
  for (const auto& [resource, topology] : spec.devices) {
    const Quantity total = spec.resources.Get(resource);
    if (topology == nullptr || topology->count <= 0 || !total.IsInteger() ||
        total.WholePart() != topology->count) {
      return absl::InvalidArgumentError(absl::StrCat(
          "node ", id, ": ", resource, " total ", total.ToString(), " does not match its ",
          topology == nullptr ? 0 : topology->count, " devices"));
    }
  }
  for (const auto& [resource, total] : spec.resources) {
    if (!IsUnitInstanceResource(resource) || spec.devices.contains(resource)) continue;
    if (!total.IsInteger()) {
      return absl::InvalidArgumentError(absl::StrCat("node ", id, ": ", resource, " total ",
                                                     total.ToString(),
                                                     " is not a whole number of devices"));
    }
    if (total.WholePart() < 0 || total.WholePart() > kMaxDevicesPerResource) {
      return absl::InvalidArgumentError(
          absl::StrCat("node ", id, ": ", resource, " total ", total.ToString(),
                       " is more than the ", kMaxDevicesPerResource, " devices a node may have"));
    }
    spec.devices.emplace(resource, PlainTopology(static_cast<int>(total.WholePart())));
  }
  for (auto& [resource, topology] : spec.devices) {
    std::shared_ptr<const DeviceSetChooser>& chooser = choosers_[topology];
    if (chooser == nullptr) chooser = std::make_shared<const DeviceSetChooser>(*topology);
    record.devices.push_back(
        DeviceInstances{resource, topology, chooser, std::vector<Quantity>(topology->count, kOne)});
  }
  record.id = std::move(spec.id);
  record.total = spec.resources;
  for (const auto& [resource, q] : record.total) {
    record.carries_accelerators = record.carries_accelerators || IsAcceleratorResource(resource);
  }
  record.available = std::move(spec.resources);
  record.fabric =
      spec.fabric.has_value() ? *std::move(spec.fabric) : FabricMembershipFromLabels(spec.labels);
  record.labels = std::move(spec.labels);

  const NodeIndex index = static_cast<NodeIndex>(nodes_.size());
  by_id_.emplace(id, index);
  nodes_.push_back(std::move(record));
  ++alive_count_;
  IndexLabels(index);
  Join(index);
  feasibility_log_.push_back(index);
  return index;
}

absl::StatusOr<NodeIndex> ClusterView::Lookup(const NodeId& id) const {
  auto it = by_id_.find(id.value());
  if (it == by_id_.end())
    return absl::NotFoundError(absl::StrCat("node ", id.value(), " is not in the cluster"));
  return it->second;
}

std::optional<NodeIndex> ClusterView::Find(const NodeId& id) const {
  auto it = by_id_.find(id.value());
  if (it == by_id_.end()) return std::nullopt;
  return it->second;
}

absl::StatusOr<std::vector<Allocation>> ClusterView::TakeAllocations(NodeRecord& record) {
  std::vector<Allocation> taken;
  taken.reserve(record.allocations.size());
  for (int64_t id : record.allocations) {
    auto it = allocations_.find(id);
    taken.push_back(std::move(it->second.allocation));
    allocations_.erase(it);
  }
  record.allocations.clear();
  record.available = record.total;
  for (DeviceInstances& d : record.devices) std::fill(d.available.begin(), d.available.end(), kOne);
  return taken;
}

absl::StatusOr<std::vector<Allocation>> ClusterView::FailNode(const NodeId& id) {
  TESSERA_ASSIGN_OR_RETURN(NodeIndex index, Lookup(id));
  NodeRecord& record = nodes_[index];
  if (record.state == NodeState::kDead) return std::vector<Allocation>();
  if (record.state == NodeState::kAlive) {
    Leave(index);
    --alive_count_;
  }
  record.state = NodeState::kDead;
  return TakeAllocations(record);
}

absl::StatusOr<std::vector<Allocation>> ClusterView::RemoveNode(const NodeId& id) {
  TESSERA_ASSIGN_OR_RETURN(std::vector<Allocation> taken, FailNode(id));
  const NodeIndex index = by_id_.at(id.value());
  UnindexLabels(index);
  by_id_.erase(id.value());
  NodeRecord& record = nodes_[index];
  record.removed = true;
  record.labels.clear();
  record.devices.clear();
  return taken;
}

absl::Status ClusterView::SetDraining(const NodeId& id, bool draining) {
  TESSERA_ASSIGN_OR_RETURN(NodeIndex index, Lookup(id));
  NodeRecord& record = nodes_[index];
  if (record.state == NodeState::kDead) {
    return absl::FailedPreconditionError(absl::StrCat("node ", id.value(), " is dead"));
  }
  const NodeState wanted = draining ? NodeState::kDraining : NodeState::kAlive;
  if (record.state == wanted) return absl::OkStatus();
  if (draining) {
    Leave(index);
    --alive_count_;
    record.state = NodeState::kDraining;
  } else {
    record.state = NodeState::kAlive;
    ++alive_count_;
    Join(index);
    feasibility_log_.push_back(index);
  }
  return absl::OkStatus();
}

absl::Status ClusterView::SetTotals(const NodeId& id, const ResourceSet& totals) {
  TESSERA_ASSIGN_OR_RETURN(NodeIndex index, Lookup(id));
  NodeRecord& record = nodes_[index];
  if (record.state == NodeState::kDead) {
    return absl::FailedPreconditionError(absl::StrCat("node ", id.value(), " is dead"));
  }
  auto unit_changed = [&](std::string_view resource) {
    return (record.FindDevices(resource) != nullptr || IsUnitInstanceResource(resource)) &&
           record.total.Get(resource) != totals.Get(resource);
  };
  for (const auto& [resource, q] : totals) {
    if (unit_changed(resource)) {
      return absl::InvalidArgumentError(
          absl::StrCat("node ", id.value(), ": ", resource,
                       " is counted per device; re-register the node to change it"));
    }
  }
  for (const auto& [resource, q] : record.total) {
    if (unit_changed(resource)) {
      return absl::InvalidArgumentError(
          absl::StrCat("node ", id.value(), ": ", resource,
                       " is counted per device; re-register the node to change it"));
    }
  }
  TESSERA_ASSIGN_OR_RETURN(ResourceSet used, record.total.Minus(record.available));
  absl::StatusOr<ResourceSet> available = totals.Minus(used);
  if (!available.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("node ", id.value(), ": new totals ", totals.ToString(),
                     " are below what is allocated (", used.ToString(), ")"));
  }
  bool grew = false;
  for (const auto& [resource, q] : totals) grew = grew || q > record.total.Get(resource);
  const bool indexed = record.state == NodeState::kAlive;
  if (indexed) Leave(index);
  record.total = totals;
  record.available = *std::move(available);
  record.carries_accelerators = false;
  for (const auto& [resource, q] : record.total) {
    record.carries_accelerators = record.carries_accelerators || IsAcceleratorResource(resource);
  }
  if (indexed) Join(index);
  if (grew) feasibility_log_.push_back(index);
  return absl::OkStatus();
}

bool ClusterView::DevicesFit(const NodeRecord& record, const ResourceSet& demand, bool now) {
  for (const DeviceInstances& d : record.devices) {
    const Quantity q = demand.Get(d.resource);
    if (q.IsZero()) continue;
    if (q.IsInteger()) {
      const int64_t k = q.WholePart();
      if ((now ? d.FullyFree() : static_cast<int>(d.available.size())) < k) return false;
    } else if (q > kOne) {
      return false;  // refused by request validation; never fits a device
    } else if (now && d.LargestFree() < q) {
      return false;
    }
  }
  return true;
}

bool ClusterView::FeasibleOn(NodeIndex node, const ResourceSet& demand) const {
  const NodeRecord& record = nodes_[node];
  return record.total.Contains(demand) && DevicesFit(record, demand, /*now=*/false);
}

bool ClusterView::FitsNow(NodeIndex node, const ResourceSet& demand) const {
  const NodeRecord& record = nodes_[node];
  return record.available.Contains(demand) && DevicesFit(record, demand, /*now=*/true);
}

absl::Status ClusterView::CheckAllocatable(NodeIndex node, const ResourceSet& demand,
                                           bool allow_draining) const {
  if (node < 0 || node >= slot_count() || nodes_[node].removed) {
    return absl::NotFoundError(absl::StrCat("node index ", node, " is not in the cluster"));
  }
  const NodeRecord& record = nodes_[node];
  const bool usable =
      record.state == NodeState::kAlive || (allow_draining && record.state == NodeState::kDraining);
  if (!usable) {
    return absl::FailedPreconditionError(
        absl::StrCat("node ", record.id.value(), " is ", ToAbsl(NodeStateName(record.state))));
  }
  if (!record.available.Contains(demand)) {
    return absl::ResourceExhaustedError(absl::StrCat("node ", record.id.value(), " has ",
                                                     record.available.ToString(), " free, not ",
                                                     demand.ToString()));
  }
  return absl::OkStatus();
}

absl::StatusOr<Allocation> ClusterView::Allocate(NodeIndex node, const ResourceSet& demand,
                                                 Holder holder) {
  TESSERA_RETURN_IF_ERROR(CheckAllocatable(node, demand));
  const NodeRecord& record = nodes_[node];
  Allocation allocation;
  for (const DeviceInstances& d : record.devices) {
    const Quantity q = demand.Get(d.resource);
    if (q.IsZero()) continue;
    DeviceGrant grant;
    grant.resource = d.resource;
    if (q.IsInteger()) {
      std::vector<bool> free(d.available.size());
      for (size_t i = 0; i < free.size(); ++i) free[i] = d.available[i] == kOne;
      const int k = static_cast<int>(q.WholePart());
      grant.instances = d.chooser->Choose(free, k);
      if (static_cast<int>(grant.instances.size()) != k) {
        return absl::ResourceExhaustedError(absl::StrCat("node ", record.id.value(), " has ",
                                                         d.FullyFree(), " whole ", d.resource,
                                                         " free, not ", k));
      }
      grant.amounts.assign(k, kOne);
    } else {
      if (q > kOne) {
        return absl::InvalidArgumentError(absl::StrCat(
            d.resource, ": ", q.ToString(), " is neither a whole number nor a fraction below 1"));
      }
      const int instance = BestFitFraction(d.available, q);
      if (instance < 0) {
        return absl::ResourceExhaustedError(absl::StrCat(
            "node ", record.id.value(), ": no ", d.resource, " has ", q.ToString(), " free"));
      }
      grant.instances = {instance};
      grant.amounts = {q};
    }
    allocation.devices.push_back(std::move(grant));
  }
  return Apply(node, demand, std::move(allocation.devices), std::move(holder));
}

absl::StatusOr<Allocation> ClusterView::AllocateExact(NodeIndex node, const ResourceSet& demand,
                                                      std::vector<DeviceGrant> devices) {
  return TakeExact(node, demand, std::move(devices), /*allow_draining=*/false);
}

absl::StatusOr<Allocation> ClusterView::RestoreExact(NodeIndex node, const ResourceSet& demand,
                                                     std::vector<DeviceGrant> devices) {
  return TakeExact(node, demand, std::move(devices), /*allow_draining=*/true);
}

absl::StatusOr<Allocation> ClusterView::TakeExact(NodeIndex node, const ResourceSet& demand,
                                                  std::vector<DeviceGrant> devices,
                                                  bool allow_draining) {
  TESSERA_RETURN_IF_ERROR(CheckAllocatable(node, demand, allow_draining));
  const NodeRecord& record = nodes_[node];
  std::sort(devices.begin(), devices.end(),
            [](const DeviceGrant& a, const DeviceGrant& b) { return a.resource < b.resource; });
  for (size_t g = 0; g < devices.size(); ++g) {
    const DeviceGrant& grant = devices[g];
    if (g > 0 && devices[g - 1].resource == grant.resource) {
      return absl::InvalidArgumentError(absl::StrCat(grant.resource, " is granted twice"));
    }
    const DeviceInstances* d = record.FindDevices(grant.resource);
    if (d == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("node ", record.id.value(), " has no ", grant.resource, " devices"));
    }
    if (grant.instances.size() != grant.amounts.size() || grant.instances.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(grant.resource, ": instances and amounts do not pair up"));
    }
    const Quantity q = demand.Get(grant.resource);
    int64_t sum = 0;
    for (size_t i = 0; i < grant.instances.size(); ++i) {
      const int instance = grant.instances[i];
      if (instance < 0 || instance >= static_cast<int>(d->available.size()) ||
          (i > 0 && grant.instances[i - 1] >= instance)) {
        return absl::InvalidArgumentError(
            absl::StrCat(grant.resource, ": instances must be ascending, distinct and below ",
                         d->available.size()));
      }
      const Quantity amount = grant.amounts[i];
      const bool whole = q.IsInteger();
      if (amount.raw() <= 0 || (whole && amount != kOne) || (!whole && amount != q)) {
        return absl::InvalidArgumentError(absl::StrCat(grant.resource, ": instance ", instance,
                                                       " is granted ", amount.ToString(), " of a ",
                                                       q.ToString(), " demand"));
      }
      if (d->available[instance] < amount) {
        return absl::ResourceExhaustedError(
            absl::StrCat("node ", record.id.value(), ": ", grant.resource, " ", instance, " has ",
                         d->available[instance].ToString(), " free, not ", amount.ToString()));
      }
      sum += amount.raw();
    }
    if (sum != q.raw()) {
      return absl::InvalidArgumentError(absl::StrCat(grant.resource, ": the grant adds up to ",
                                                     Quantity::FromRaw(sum).ToString(),
                                                     ", the demand is ", q.ToString()));
    }
  }
  for (const DeviceInstances& d : record.devices) {
    if (!demand.Get(d.resource).IsZero() &&
        std::none_of(devices.begin(), devices.end(),
                     [&](const DeviceGrant& g) { return g.resource == d.resource; })) {
      return absl::InvalidArgumentError(
          absl::StrCat(d.resource, " is demanded but no instances are granted"));
    }
  }
  return Apply(node, demand, std::move(devices), Holder{});
}

absl::StatusOr<Allocation> ClusterView::Apply(NodeIndex node, const ResourceSet& demand,
                                              std::vector<DeviceGrant> devices, Holder holder) {
  NodeRecord& record = nodes_[node];
  Allocation allocation;
  allocation.devices = std::move(devices);
  // Only alive nodes are in the utilization indexes (a draining one takes a restored allocation).
  const bool indexed = record.state == NodeState::kAlive;
  if (indexed) Unindex(node);
  record.available = *record.available.Minus(demand);
  for (const DeviceGrant& grant : allocation.devices) {
    for (DeviceInstances& d : record.devices) {
      if (d.resource != grant.resource) continue;
      for (size_t i = 0; i < grant.instances.size(); ++i) {
        Quantity& slot = d.available[grant.instances[i]];
        slot = Quantity::FromRaw(slot.raw() - grant.amounts[i].raw());
      }
    }
  }
  if (indexed) {
    Reindex(node);
  } else {
    UpdateUtilization(node);
  }
  allocation.id = AllocationId(next_allocation_++);
  allocation.node = record.id;
  allocation.resources = demand;
  record.allocations.insert(allocation.id.value());
  allocations_.emplace(allocation.id.value(), Held{allocation, std::move(holder)});
  return allocation;
}

absl::StatusOr<Allocation> ClusterView::Release(AllocationId id) {
  auto it = allocations_.find(id.value());
  if (it == allocations_.end()) {
    return absl::NotFoundError(absl::StrCat("allocation ", id.value(),
                                            " is not held (released already, or its node failed)"));
  }
  Allocation allocation = std::move(it->second.allocation);
  allocations_.erase(it);
  const NodeIndex node = by_id_.at(allocation.node.value());
  NodeRecord& record = nodes_[node];
  const bool indexed = record.state == NodeState::kAlive;
  if (indexed) Unindex(node);
  record.allocations.erase(id.value());
  record.available = *record.available.Plus(allocation.resources);
  for (const DeviceGrant& grant : allocation.devices) {
    for (DeviceInstances& d : record.devices) {
      if (d.resource != grant.resource) continue;
      for (size_t i = 0; i < grant.instances.size(); ++i) {
        Quantity& slot = d.available[grant.instances[i]];
        slot = Quantity::FromRaw(slot.raw() + grant.amounts[i].raw());
      }
    }
  }
  if (indexed) Reindex(node);
  return allocation;
}

const Allocation* ClusterView::FindAllocation(AllocationId id) const {
  auto it = allocations_.find(id.value());
  return it == allocations_.end() ? nullptr : &it->second.allocation;
}

absl::Status ClusterView::SetHolder(AllocationId id, Holder holder) {
  auto it = allocations_.find(id.value());
  if (it == allocations_.end()) {
    return absl::NotFoundError(absl::StrCat("allocation ", id.value(), " is not held"));
  }
  it->second.holder = std::move(holder);
  return absl::OkStatus();
}

const Holder& ClusterView::HolderOf(AllocationId id) const {
  static const Holder kNobody;
  auto it = allocations_.find(id.value());
  return it == allocations_.end() ? kNobody : it->second.holder;
}

void ClusterView::UpdateUtilization(NodeIndex index) {
  NodeRecord& record = nodes_[index];
  int64_t worst = 0;
  for (const auto& [resource, total] : record.total) {
    const __int128 used = total.raw() - record.available.Get(resource).raw();
    const int64_t ppm = static_cast<int64_t>(used * kPartsPerMillion / total.raw());
    worst = std::max(worst, ppm);
  }
  record.utilization_ppm = worst;
}

void ClusterView::Unindex(NodeIndex index) {
  const NodeRecord& record = nodes_[index];
  const std::pair<int64_t, NodeIndex> key(record.utilization_ppm, index);
  by_resource_[""].erase(key);
  if (!record.carries_accelerators) without_accelerators_.erase(key);
  for (const auto& [resource, total] : record.total) {
    auto it = by_resource_.find(resource);
    if (it != by_resource_.end()) it->second.erase(key);
  }
}

void ClusterView::Reindex(NodeIndex index) {
  UpdateUtilization(index);
  const NodeRecord& record = nodes_[index];
  const std::pair<int64_t, NodeIndex> key(record.utilization_ppm, index);
  by_resource_[""].insert(key);
  if (!record.carries_accelerators) without_accelerators_.insert(key);
  for (const auto& [resource, total] : record.total) {
    auto it = by_resource_.find(resource);
    if (it == by_resource_.end()) it = by_resource_.emplace(resource, UtilizationIndex()).first;
    it->second.insert(key);
  }
}

void ClusterView::Leave(NodeIndex index) {
  Unindex(index);
  const NodeRecord& record = nodes_[index];
  by_resource_in_order_[""].erase(index);
  if (!record.carries_accelerators) without_accelerators_by_index_.erase(index);
  for (const auto& [resource, total] : record.total) {
    auto it = by_resource_in_order_.find(resource);
    if (it != by_resource_in_order_.end()) it->second.erase(index);
  }
}

void ClusterView::Join(NodeIndex index) {
  Reindex(index);
  const NodeRecord& record = nodes_[index];
  by_resource_in_order_[""].insert(index);
  if (!record.carries_accelerators) without_accelerators_by_index_.insert(index);
  for (const auto& [resource, total] : record.total) {
    by_resource_in_order_[resource].insert(index);
  }
}

void ClusterView::IndexLabels(NodeIndex index) {
  for (const auto& [key, value] : nodes_[index].labels) {
    auto by_key = label_index_.find(key);
    if (by_key == label_index_.end())
      by_key = label_index_.emplace(key, LabelIndex::mapped_type()).first;
    auto by_value = by_key->second.find(value);
    if (by_value == by_key->second.end()) {
      by_value = by_key->second.emplace(value, absl::btree_set<NodeIndex>()).first;
    }
    by_value->second.insert(index);
  }
}

void ClusterView::UnindexLabels(NodeIndex index) {
  for (const auto& [key, value] : nodes_[index].labels) {
    auto by_key = label_index_.find(key);
    auto by_value = by_key->second.find(value);
    by_value->second.erase(index);
    if (by_value->second.empty()) by_key->second.erase(by_value);
    if (by_key->second.empty()) label_index_.erase(by_key);
  }
}

const UtilizationIndex* ClusterView::UtilizationOrder(std::string_view resource) const {
  auto it = by_resource_.find(resource);
  return it == by_resource_.end() ? nullptr : &it->second;
}

const NodeOrder* ClusterView::IndexOrder(std::string_view resource) const {
  auto it = by_resource_in_order_.find(resource);
  return it == by_resource_in_order_.end() ? nullptr : &it->second;
}

const absl::btree_set<NodeIndex>* ClusterView::NodesWithLabel(std::string_view key,
                                                              std::string_view value) const {
  auto by_key = label_index_.find(key);
  if (by_key == label_index_.end()) return nullptr;
  auto by_value = by_key->second.find(value);
  return by_value == by_key->second.end() ? nullptr : &by_value->second;
}

std::vector<std::pair<std::string, std::vector<NodeIndex>>> ClusterView::NodesByLabelValue(
    std::string_view key) const {
  std::vector<std::pair<std::string, std::vector<NodeIndex>>> out;
  auto by_key = label_index_.find(key);
  if (by_key == label_index_.end()) return out;
  for (const auto& [value, nodes] : by_key->second) {
    std::vector<NodeIndex> alive;
    for (NodeIndex n : nodes) {
      if (nodes_[n].state == NodeState::kAlive) alive.push_back(n);
    }
    if (!alive.empty()) out.emplace_back(value, std::move(alive));
  }
  return out;
}

std::optional<std::pair<const LabelConstraint*, size_t>> ClusterView::MostSelective(
    const LabelSelector& selector) const {
  std::optional<std::pair<const LabelConstraint*, size_t>> best;
  for (const LabelConstraint& c : selector.constraints()) {
    if (c.op != SelectorOperator::kIn && c.op != SelectorOperator::kExists) continue;
    size_t count = 0;
    auto by_key = label_index_.find(c.key);
    if (by_key != label_index_.end()) {
      if (c.op == SelectorOperator::kExists) {
        for (const auto& [value, nodes] : by_key->second) count += nodes.size();
      } else {
        for (const std::string& value : c.values) {
          auto by_value = by_key->second.find(value);
          if (by_value != by_key->second.end()) count += by_value->second.size();
        }
      }
    }
    if (!best || count < best->second) best.emplace(&c, count);
  }
  return best;
}

std::optional<size_t> ClusterView::SelectorCandidateCount(const LabelSelector& selector) const {
  auto best = MostSelective(selector);
  if (!best) return std::nullopt;
  return best->second;
}

std::optional<std::vector<NodeIndex>> ClusterView::SelectorCandidates(
    const LabelSelector& selector) const {
  auto best = MostSelective(selector);
  if (!best) return std::nullopt;
  std::vector<NodeIndex> candidates;
  candidates.reserve(best->second);
  const LabelConstraint& c = *best->first;
  auto by_key = label_index_.find(c.key);
  if (by_key != label_index_.end()) {
    for (const auto& [value, nodes] : by_key->second) {
      if (c.op == SelectorOperator::kIn &&
          !std::binary_search(c.values.begin(), c.values.end(), value)) {
        continue;
      }
      candidates.insert(candidates.end(), nodes.begin(), nodes.end());
    }
  }
  std::sort(candidates.begin(), candidates.end());
  return candidates;
}

}  // namespace tessera
