#include "wire/proto_convert.h"

#include <google/protobuf/unknown_field_set.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "base/string_util.h"
#include "labels/fallback.h"
#include "labels/label.h"

namespace tessera::wire {

namespace {

absl::Status Invalid(std::string_view field, std::string_view problem) {
  return absl::InvalidArgumentError(absl::StrCat(ToAbsl(field), ": ", ToAbsl(problem)));
}

absl::Status Prefixed(std::string_view field, const absl::Status& status) {
  return Invalid(field, ToStd(status.message()));
}

std::string Indexed(std::string_view field, size_t i) {
  return absl::StrCat(ToAbsl(field), "[", i, "]");
}

}  // namespace

// --- Resources ---

absl::StatusOr<ResourceSet> ResourcesFromProto(const v1::Resources& proto, std::string_view field) {
  ResourceSet set;
  // Sorted so the first bad entry reported is the same every time.
  std::map<std::string, int64_t> sorted(proto.raw().begin(), proto.raw().end());
  for (const auto& [name, raw] : sorted) {
    if (absl::Status status = ValidateResourceName(name); !status.ok()) {
      return Prefixed(field, status);
    }
    if (raw < 0) {
      return Invalid(field,
                     absl::StrCat("resource ", Quote(name), ": raw amount ", raw, " is negative"));
    }
    if (raw > 0) set.Set(name, Quantity::FromRaw(raw));
  }
  return set;
}

void ResourcesToProto(const ResourceSet& resources, v1::Resources* proto) {
  proto->Clear();
  for (const auto& [name, quantity] : resources) (*proto->mutable_raw())[name] = quantity.raw();
}

v1::Resources ResourcesToProto(const ResourceSet& resources) {
  v1::Resources proto;
  ResourcesToProto(resources, &proto);
  return proto;
}

// --- Device grants and allocations ---

absl::StatusOr<DeviceGrant> DeviceGrantFromProto(const v1::DeviceGrant& proto,
                                                 std::string_view field) {
  DeviceGrant grant;
  if (absl::Status status = ValidateResourceName(proto.resource()); !status.ok()) {
    return Prefixed(field, status);
  }
  grant.resource = proto.resource();
  if (proto.instances_size() != proto.amounts_raw_size()) {
    return Invalid(field, absl::StrCat(grant.resource, ": ", proto.instances_size(),
                                       " instances but ", proto.amounts_raw_size(), " amounts"));
  }
  if (proto.instances_size() == 0) return Invalid(field, grant.resource + ": no instances");
  if (proto.instances_size() > kMaxDevicesPerResource) {
    return Invalid(field, absl::StrCat(grant.resource, ": ", proto.instances_size(),
                                       " instances is too many"));
  }
  for (int i = 0; i < proto.instances_size(); ++i) {
    int instance = proto.instances(i);
    int64_t raw = proto.amounts_raw(i);
    if (instance < 0 || instance >= kMaxDevicesPerResource) {
      return Invalid(field,
                     absl::StrCat(grant.resource, ": instance ", instance, " is out of range"));
    }
    if (i > 0 && instance <= proto.instances(i - 1)) {
      return Invalid(field, absl::StrCat(grant.resource,
                                         ": instances must be ascending and "
                                         "distinct (",
                                         proto.instances(i - 1), " then ", instance, ")"));
    }
    if (raw <= 0 || raw > Quantity::kScale) {
      return Invalid(field, absl::StrCat(grant.resource, ": instance ", instance, " amount ", raw,
                                         " is outside (0, ", Quantity::kScale, "]"));
    }
    grant.instances.push_back(instance);
    grant.amounts.push_back(Quantity::FromRaw(raw));
  }
  return grant;
}

void DeviceGrantToProto(const DeviceGrant& grant, v1::DeviceGrant* proto) {
  proto->Clear();
  proto->set_resource(grant.resource);
  for (int instance : grant.instances) proto->add_instances(instance);
  for (Quantity amount : grant.amounts) proto->add_amounts_raw(amount.raw());
}

absl::StatusOr<ExactAllocation> AllocationFromProto(const v1::Allocation& proto,
                                                    std::string_view field) {
  ExactAllocation allocation;
  TESSERA_ASSIGN_OR_RETURN(
      allocation.resources,
      ResourcesFromProto(proto.resources(), absl::StrCat(ToAbsl(field), ".resources")));
  std::set<std::string> seen;
  for (int i = 0; i < proto.devices_size(); ++i) {
    std::string where = Indexed(absl::StrCat(ToAbsl(field), ".devices"), i);
    TESSERA_ASSIGN_OR_RETURN(DeviceGrant grant, DeviceGrantFromProto(proto.devices(i), where));
    if (!seen.insert(grant.resource).second) {
      return Invalid(where, absl::StrCat("resource ", Quote(grant.resource), " granted twice"));
    }
    allocation.devices.push_back(std::move(grant));
  }
  std::sort(allocation.devices.begin(), allocation.devices.end(),
            [](const DeviceGrant& a, const DeviceGrant& b) { return a.resource < b.resource; });
  return allocation;
}

void AllocationToProto(const ResourceSet& resources, const std::vector<DeviceGrant>& devices,
                       v1::Allocation* proto) {
  proto->Clear();
  ResourcesToProto(resources, proto->mutable_resources());
  for (const DeviceGrant& grant : devices) DeviceGrantToProto(grant, proto->add_devices());
}

void AllocationToProto(const Allocation& allocation, v1::Allocation* proto) {
  AllocationToProto(allocation.resources, allocation.devices, proto);
}

void AllocationToProto(const ExactAllocation& allocation, v1::Allocation* proto) {
  AllocationToProto(allocation.resources, allocation.devices, proto);
}

// --- Device topology ---

absl::StatusOr<LinkKind> ParseLinkKind(std::string_view name) {
  for (LinkKind kind : {LinkKind::kNvLink, LinkKind::kNvSwitch, LinkKind::kXgmi, LinkKind::kIci,
                        LinkKind::kNeuronLink, LinkKind::kGaudiRoce}) {
    if (LinkKindName(kind) == name) return kind;
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown link kind ", Quote(name)));
}

absl::StatusOr<DeviceTopology> DeviceTopologyFromProto(const v1::DeviceTopology& proto,
                                                       std::string_view field) {
  if (absl::Status status = ValidateResourceName(proto.resource()); !status.ok()) {
    return Prefixed(field, status);
  }
  std::string where = absl::StrCat(ToAbsl(field), " ", proto.resource());
  int count = proto.count();
  if (count < 0 || count > kMaxDevicesPerResource) {
    return Invalid(where, absl::StrCat("device count ", count, " is out of range"));
  }
  DeviceTopology topology;
  topology.count = count;
  if (proto.numa_node_size() != 0 && proto.numa_node_size() != count) {
    return Invalid(where,
                   absl::StrCat(proto.numa_node_size(), " NUMA nodes for ", count, " devices"));
  }
  if (proto.nearest_nic_size() != 0 && proto.nearest_nic_size() != count) {
    return Invalid(where,
                   absl::StrCat(proto.nearest_nic_size(), " nearest NICs for ", count, " devices"));
  }
  topology.numa_node.assign(count, -1);
  topology.nearest_nic.assign(count, "");
  for (int i = 0; i < proto.numa_node_size(); ++i) {
    if (proto.numa_node(i) < -1) {
      return Invalid(
          where, absl::StrCat("device ", i, ": NUMA node ", proto.numa_node(i), " is negative"));
    }
    topology.numa_node[i] = proto.numa_node(i);
  }
  for (int i = 0; i < proto.nearest_nic_size(); ++i) topology.nearest_nic[i] = proto.nearest_nic(i);
  for (int i = 0; i < proto.links_size(); ++i) {
    const v1::DeviceLink& link = proto.links(i);
    std::string link_where = Indexed(absl::StrCat(ToAbsl(where), ": links"), i);
    if (link.a() < 0 || link.a() >= count || link.b() < 0 || link.b() >= count) {
      return Invalid(link_where, absl::StrCat("device ", link.a(), " or ", link.b(),
                                              " is not one of the ", count, " devices"));
    }
    if (link.a() == link.b()) {
      return Invalid(link_where, absl::StrCat("links device ", link.a(), " to itself"));
    }
    auto kind = ParseLinkKind(link.kind());
    if (!kind.ok()) return Prefixed(link_where, kind.status());
    if (link.lanes() < 0) {
      return Invalid(link_where, absl::StrCat("lanes ", link.lanes(), " is negative"));
    }
    double speed = link.gigabytes_per_second();
    if (!std::isfinite(speed) || speed < 0) {
      return Invalid(link_where, "gigabytes_per_second must be a finite, non-negative number");
    }
    DeviceLink out;
    out.a = link.a();
    out.b = link.b();
    out.kind = *kind;
    out.lanes = link.lanes();
    out.gigabytes_per_second = speed;
    out.bandwidth_class = ClassifyBandwidth(speed);
    topology.links.push_back(out);
  }
  return topology;
}

void DeviceTopologyToProto(std::string_view resource, const DeviceTopology& topology,
                           v1::DeviceTopology* proto) {
  proto->Clear();
  proto->set_resource(std::string(resource));
  proto->set_count(topology.count);
  for (int numa : topology.numa_node) proto->add_numa_node(numa);
  for (const std::string& nic : topology.nearest_nic) proto->add_nearest_nic(nic);
  for (const DeviceLink& link : topology.links) {
    v1::DeviceLink* out = proto->add_links();
    out->set_a(link.a);
    out->set_b(link.b);
    out->set_kind(std::string(LinkKindName(link.kind)));
    out->set_lanes(link.lanes);
    out->set_gigabytes_per_second(link.gigabytes_per_second);
  }
}

// --- Nodes ---

absl::StatusOr<NodeRegistration> NodeFromProto(const v1::NodeDescription& proto) {
  NodeRegistration node;
  if (proto.node_id().empty()) return Invalid("node.node_id", "is empty");
  // The id is the value of the tessera.io/node-id label and a folder name under the state folder.
  if (absl::Status status = ValidateLabelValue(proto.node_id()); !status.ok()) {
    return Prefixed("node.node_id", status);
  }
  node.spec.id = NodeId(proto.node_id());
  TESSERA_ASSIGN_OR_RETURN(node.spec.resources,
                           ResourcesFromProto(proto.resources(), "node.resources"));
  for (const auto& [key, value] : proto.labels()) node.spec.labels.emplace(key, value);
  if (absl::Status status = ValidateLabels(node.spec.labels, LabelOrigin::kSystem); !status.ok()) {
    return Prefixed("node.labels", status);
  }
  for (int i = 0; i < proto.devices_size(); ++i) {
    std::string where = Indexed("node.devices", i);
    TESSERA_ASSIGN_OR_RETURN(DeviceTopology topology,
                             DeviceTopologyFromProto(proto.devices(i), where));
    const std::string& resource = proto.devices(i).resource();
    if (node.spec.devices.count(resource) != 0) {
      return Invalid(where, absl::StrCat("a second topology for ", resource));
    }
    node.spec.devices.emplace(resource,
                              std::make_shared<const DeviceTopology>(std::move(topology)));
  }
  node.address = proto.address();
  node.incarnation = proto.incarnation();
  return node;
}

void NodeToProto(const NodeSpec& spec, std::string_view address, std::string_view incarnation,
                 v1::NodeDescription* proto) {
  proto->Clear();
  proto->set_node_id(spec.id.value());
  proto->set_address(std::string(address));
  proto->set_incarnation(std::string(incarnation));
  ResourcesToProto(spec.resources, proto->mutable_resources());
  for (const auto& [key, value] : spec.labels) (*proto->mutable_labels())[key] = value;
  for (const auto& [resource, topology] : spec.devices) {
    if (topology != nullptr) DeviceTopologyToProto(resource, *topology, proto->add_devices());
  }
}

// --- Label selectors ---

namespace {

v1::LabelSelectorOperator SelectorOperatorToProto(SelectorOperator op) {
  switch (op) {
    case SelectorOperator::kIn: return v1::LABEL_OPERATOR_IN;
    case SelectorOperator::kNotIn: return v1::LABEL_OPERATOR_NOT_IN;
    case SelectorOperator::kExists: return v1::LABEL_OPERATOR_EXISTS;
    case SelectorOperator::kDoesNotExist: return v1::LABEL_OPERATOR_DOES_NOT_EXIST;
  }
  return v1::LABEL_OPERATOR_UNSPECIFIED;
}

absl::StatusOr<SelectorOperator> SelectorOperatorFromProto(v1::LabelSelectorOperator op,
                                                           std::string_view field) {
  constexpr std::string_view kExpected = "; expected IN, NOT_IN, EXISTS or DOES_NOT_EXIST";
  switch (op) {
    case v1::LABEL_OPERATOR_IN: return SelectorOperator::kIn;
    case v1::LABEL_OPERATOR_NOT_IN: return SelectorOperator::kNotIn;
    case v1::LABEL_OPERATOR_EXISTS: return SelectorOperator::kExists;
    case v1::LABEL_OPERATOR_DOES_NOT_EXIST: return SelectorOperator::kDoesNotExist;
    case v1::LABEL_OPERATOR_UNSPECIFIED:
      return Invalid(field, absl::StrCat("is unspecified", ToAbsl(kExpected)));
    default:
      return Invalid(field,
                     absl::StrCat("unknown operator ", static_cast<int>(op), ToAbsl(kExpected)));
  }
}

// The key and each value through the label rules, and the values the operator asks for, each
// error naming its own field; AddConstraint then has nothing left to refuse.
absl::StatusOr<LabelConstraint> LabelConstraintFromProto(const v1::LabelSelectorConstraint& proto,
                                                         const std::string& where) {
  LabelConstraint constraint;
  if (absl::Status status = ValidateLabelKey(proto.label_key()); !status.ok()) {
    return Prefixed(where + ".label_key", status);
  }
  constraint.key = proto.label_key();
  TESSERA_ASSIGN_OR_RETURN(constraint.op,
                           SelectorOperatorFromProto(proto.operator_(), where + ".operator"));
  const bool takes_values =
      constraint.op == SelectorOperator::kIn || constraint.op == SelectorOperator::kNotIn;
  const std::string& op_name = v1::LabelSelectorOperator_Name(proto.operator_());
  if (takes_values && proto.label_values().empty()) {
    return Invalid(where + ".label_values", op_name + " needs at least one value");
  }
  if (!takes_values && !proto.label_values().empty()) {
    return Invalid(where + ".label_values", op_name + " takes no values");
  }
  for (int i = 0; i < proto.label_values_size(); ++i) {
    const std::string& value = proto.label_values(i);
    // An empty label value is valid on a node, never in a selector: EXISTS says "any value".
    if (value.empty()) return Invalid(Indexed(where + ".label_values", i), "is empty");
    if (absl::Status status = ValidateLabelValue(value); !status.ok()) {
      return Prefixed(Indexed(where + ".label_values", i), status);
    }
    constraint.values.push_back(value);
  }
  return constraint;
}

// Field 1 was the map of selector expressions (key -> "in(a,b)"). A peer or a stored record from
// before the typed form still sends it; read as no constraints it would match any node, so it is
// refused instead.
absl::Status RefuseTheOldMapForm(const v1::LabelSelector& proto, std::string_view field) {
  const google::protobuf::UnknownFieldSet& unknown = proto.GetReflection()->GetUnknownFields(proto);
  for (int i = 0; i < unknown.field_count(); ++i) {
    if (unknown.field(i).number() == 1) {
      return Invalid(field,
                     "holds the old map of selector expressions (field 1), which this version no "
                     "longer reads; send label_constraints");
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<LabelSelector> LabelSelectorFromProto(const v1::LabelSelector& proto,
                                                     std::string_view field) {
  TESSERA_RETURN_IF_ERROR(RefuseTheOldMapForm(proto, field));
  LabelSelector selector;
  for (int i = 0; i < proto.label_constraints_size(); ++i) {
    const std::string where = Indexed(absl::StrCat(ToAbsl(field), ".label_constraints"), i);
    TESSERA_ASSIGN_OR_RETURN(LabelConstraint constraint,
                             LabelConstraintFromProto(proto.label_constraints(i), where));
    // Sorts, deduplicates and keeps the selector canonical; a rule the library adds later is
    // still reported against this constraint.
    if (absl::Status status = selector.AddConstraint(std::move(constraint)); !status.ok()) {
      return Prefixed(where, status);
    }
  }
  return selector;
}

void LabelSelectorToProto(const LabelSelector& selector, v1::LabelSelector* proto) {
  proto->Clear();
  for (const LabelConstraint& constraint : selector.constraints()) {
    v1::LabelSelectorConstraint* out = proto->add_label_constraints();
    out->set_label_key(constraint.key);
    out->set_operator_(SelectorOperatorToProto(constraint.op));
    for (const std::string& value : constraint.values) out->add_label_values(value);
  }
}

// --- Resource requests ---

absl::StatusOr<ResourceRequestValue> ResourceRequestFromProto(const v1::ResourceRequest& proto,
                                                              std::string_view field) {
  ResourceRequestValue value;
  SchedulingRequest& request = value.request;
  std::string prefix(field);
  TESSERA_ASSIGN_OR_RETURN(request.resources,
                           ResourcesFromProto(proto.resources(), prefix + ".resources"));
  std::vector<LabelSelector> options;
  TESSERA_ASSIGN_OR_RETURN(
      LabelSelector primary,
      LabelSelectorFromProto(proto.label_selector(), prefix + ".label_selector"));
  options.push_back(std::move(primary));
  for (int i = 0; i < proto.fallbacks_size(); ++i) {
    TESSERA_ASSIGN_OR_RETURN(
        LabelSelector fallback,
        LabelSelectorFromProto(proto.fallbacks(i), Indexed(prefix + ".fallbacks", i)));
    options.push_back(std::move(fallback));
  }
  // An empty primary with no fallbacks is "any node": the empty list.
  if (!(options.size() == 1 && options[0].empty())) {
    request.selectors = FallbackList::FromSelectors(std::move(options));
  }
  switch (proto.strategy()) {
    case v1::STRATEGY_DEFAULT: request.strategy = NodeRanking::kDefault; break;
    case v1::STRATEGY_SPREAD: request.strategy = NodeRanking::kSpread; break;
    default:
      return Invalid(prefix + ".strategy",
                     absl::StrCat("unknown strategy ", static_cast<int>(proto.strategy())));
  }
  if (!proto.affinity_node_id().empty()) {
    request.affinity =
        NodeAffinity{NodeId(proto.affinity_node_id()),
                     proto.affinity_soft() ? AffinityKind::kSoft : AffinityKind::kHard};
  } else if (proto.affinity_soft()) {
    return Invalid(prefix + ".affinity_soft", "set without affinity_node_id");
  }
  if (!proto.placement_group().empty()) {
    if (proto.bundle_index() < -1) {
      return Invalid(prefix + ".bundle_index",
                     absl::StrCat(proto.bundle_index(), " is below -1 (-1: any bundle)"));
    }
    value.target = BundleTarget{proto.placement_group(), proto.bundle_index()};
  } else if (proto.bundle_index() != 0) {
    return Invalid(prefix + ".bundle_index", "set without placement_group");
  }
  if (absl::Status status = ValidateSchedulingRequest(request); !status.ok()) {
    return Prefixed(prefix, status);
  }
  return value;
}

void ResourceRequestToProto(const SchedulingRequest& request,
                            const std::optional<BundleTarget>& target, v1::ResourceRequest* proto) {
  proto->Clear();
  ResourcesToProto(request.resources, proto->mutable_resources());
  const auto& options = request.selectors.options();
  for (size_t i = 0; i < options.size(); ++i) {
    LabelSelectorToProto(options[i],
                         i == 0 ? proto->mutable_label_selector() : proto->add_fallbacks());
  }
  proto->set_strategy(request.strategy == NodeRanking::kSpread ? v1::STRATEGY_SPREAD
                                                               : v1::STRATEGY_DEFAULT);
  if (request.affinity.has_value()) {
    proto->set_affinity_node_id(request.affinity->node.value());
    proto->set_affinity_soft(request.affinity->kind == AffinityKind::kSoft);
  }
  if (target.has_value()) {
    proto->set_placement_group(target->placement_group);
    proto->set_bundle_index(target->bundle_index);
  }
}

// --- Placement groups and slices ---

namespace {

absl::StatusOr<BundleOption> BundleOptionFromProto(const v1::BundleOptionSpec& proto,
                                                   std::string_view field) {
  BundleOption option;
  bool any_selector = false;
  for (int i = 0; i < proto.bundles_size(); ++i) {
    any_selector = any_selector || !proto.bundles(i).label_selector().label_constraints().empty();
  }
  for (int i = 0; i < proto.bundles_size(); ++i) {
    std::string where = Indexed(absl::StrCat(ToAbsl(field), ".bundles"), i);
    TESSERA_ASSIGN_OR_RETURN(
        ResourceSet bundle, ResourcesFromProto(proto.bundles(i).resources(), where + ".resources"));
    option.bundles.push_back(std::move(bundle));
    // Read even when no bundle has a constraint, so a selector in the old form is refused.
    TESSERA_ASSIGN_OR_RETURN(
        LabelSelector selector,
        LabelSelectorFromProto(proto.bundles(i).label_selector(), where + ".label_selector"));
    if (any_selector) option.selectors.push_back(std::move(selector));
  }
  return option;
}

void BundleOptionToProto(const BundleOption& option, v1::BundleOptionSpec* proto) {
  proto->Clear();
  for (size_t i = 0; i < option.bundles.size(); ++i) {
    v1::BundleSpec* bundle = proto->add_bundles();
    ResourcesToProto(option.bundles[i], bundle->mutable_resources());
    LabelSelectorToProto(BundleSelector(option, i), bundle->mutable_label_selector());
  }
}

}  // namespace

absl::Status DemandToProto(const ResourceSet& resources,
                           const std::vector<LabelSelector>& label_selectors,
                           const SchedulingStrategy& strategy, v1::ResourceRequest* proto) {
  TESSERA_RETURN_IF_ERROR(ValidateSchedulingStrategy(strategy));
  v1::ResourceRequest request;
  ResourcesToProto(resources, request.mutable_resources());
  for (size_t i = 0; i < label_selectors.size(); ++i) {
    LabelSelectorToProto(label_selectors[i],
                         i == 0 ? request.mutable_label_selector() : request.add_fallbacks());
  }
  if (std::holds_alternative<SpreadScheduling>(strategy)) {
    request.set_strategy(v1::STRATEGY_SPREAD);
  } else if (const auto* affinity = std::get_if<NodeAffinityScheduling>(&strategy)) {
    request.set_affinity_node_id(affinity->node.value());
    request.set_affinity_soft(affinity->soft);
  } else if (const auto* group = std::get_if<PlacementGroupScheduling>(&strategy)) {
    request.set_placement_group(group->placement_group.value());
    request.set_bundle_index(group->bundle_index);
  }
  *proto = std::move(request);
  return absl::OkStatus();
}

absl::StatusOr<PlacementStrategy> PlacementStrategyFromProto(v1::PlacementStrategy strategy,
                                                             std::string_view field) {
  switch (strategy) {
    case v1::PLACEMENT_STRATEGY_UNSPECIFIED:
    case v1::PLACEMENT_STRATEGY_PACK: return PlacementStrategy::kPack;
    case v1::PLACEMENT_STRATEGY_SPREAD: return PlacementStrategy::kSpread;
    case v1::PLACEMENT_STRATEGY_STRICT_PACK: return PlacementStrategy::kStrictPack;
    case v1::PLACEMENT_STRATEGY_STRICT_SPREAD: return PlacementStrategy::kStrictSpread;
    default:
      return Invalid(field, absl::StrCat("unknown placement strategy ", static_cast<int>(strategy),
                                         "; expected PACK, SPREAD, STRICT_PACK or STRICT_SPREAD"));
  }
}

v1::PlacementStrategy PlacementStrategyToProto(PlacementStrategy strategy) {
  switch (strategy) {
    case PlacementStrategy::kPack: return v1::PLACEMENT_STRATEGY_PACK;
    case PlacementStrategy::kSpread: return v1::PLACEMENT_STRATEGY_SPREAD;
    case PlacementStrategy::kStrictPack: return v1::PLACEMENT_STRATEGY_STRICT_PACK;
    case PlacementStrategy::kStrictSpread: return v1::PLACEMENT_STRATEGY_STRICT_SPREAD;
  }
  return v1::PLACEMENT_STRATEGY_UNSPECIFIED;
}

absl::StatusOr<GangState> GangStateFromProto(v1::GangJobState state, std::string_view field) {
  switch (state) {
    case v1::GANG_JOB_STATE_PENDING: return GangState::kPending;
    case v1::GANG_JOB_STATE_STARTING: return GangState::kStarting;
    case v1::GANG_JOB_STATE_RUNNING: return GangState::kRunning;
    case v1::GANG_JOB_STATE_RESTARTING: return GangState::kRestarting;
    case v1::GANG_JOB_STATE_SUCCEEDED: return GangState::kSucceeded;
    case v1::GANG_JOB_STATE_FAILED: return GangState::kFailed;
    case v1::GANG_JOB_STATE_STOPPED: return GangState::kStopped;
    default: return Invalid(field, absl::StrCat("unknown gang state ", static_cast<int>(state)));
  }
}

absl::StatusOr<GangRankState> GangRankStateFromProto(v1::RankState state, std::string_view field) {
  switch (state) {
    case v1::RANK_STATE_STARTING: return GangRankState::kStarting;
    case v1::RANK_STATE_RUNNING: return GangRankState::kRunning;
    case v1::RANK_STATE_SUCCEEDED: return GangRankState::kSucceeded;
    case v1::RANK_STATE_FAILED: return GangRankState::kFailed;
    case v1::RANK_STATE_STOPPED: return GangRankState::kStopped;
    default: return Invalid(field, absl::StrCat("unknown rank state ", static_cast<int>(state)));
  }
}

absl::StatusOr<PlacementGroupSpec> PlacementGroupSpecFromProto(
    const v1::CreatePlacementGroupRequest& proto) {
  PlacementGroupSpec spec;
  spec.name = proto.name();
  if (!proto.name().empty()) {
    // Names appear in messages, files and CLI output: keep them printable and short.
    if (proto.name().size() > 253) return Invalid("name", "longer than 253 characters");
    for (char c : proto.name()) {
      if (c <= ' ' || c > '~') {
        return Invalid("name", absl::StrCat(Quote(proto.name()),
                                            " holds a space or a non-printable character"));
      }
    }
  }
  TESSERA_ASSIGN_OR_RETURN(spec.strategy, PlacementStrategyFromProto(proto.strategy()));
  TESSERA_ASSIGN_OR_RETURN(spec.primary, BundleOptionFromProto(proto.primary(), "primary"));
  for (int i = 0; i < proto.fallbacks_size(); ++i) {
    TESSERA_ASSIGN_OR_RETURN(BundleOption option,
                             BundleOptionFromProto(proto.fallbacks(i), Indexed("fallbacks", i)));
    spec.fallbacks.push_back(std::move(option));
  }
  spec.same_label = proto.same_label();
  if (absl::Status status = ValidatePlacementGroupSpec(spec); !status.ok()) {
    return absl::InvalidArgumentError(status.message());
  }
  return spec;
}

void PlacementGroupSpecToProto(const PlacementGroupSpec& spec,
                               v1::CreatePlacementGroupRequest* proto) {
  proto->set_name(spec.name);
  proto->set_strategy(PlacementStrategyToProto(spec.strategy));
  BundleOptionToProto(spec.primary, proto->mutable_primary());
  proto->clear_fallbacks();
  for (const BundleOption& option : spec.fallbacks) {
    BundleOptionToProto(option, proto->add_fallbacks());
  }
  proto->set_same_label(spec.same_label);
}

// --- TPU slice shapes ---

v1::TpuGeneration TpuGenerationToProto(TpuGeneration generation) {
  switch (generation) {
    case TpuGeneration::kV2: return v1::TPU_GENERATION_V2;
    case TpuGeneration::kV3: return v1::TPU_GENERATION_V3;
    case TpuGeneration::kV4: return v1::TPU_GENERATION_V4;
    case TpuGeneration::kV5p: return v1::TPU_GENERATION_V5P;
    case TpuGeneration::kV5litepod: return v1::TPU_GENERATION_V5LITEPOD;
    case TpuGeneration::kV6e: return v1::TPU_GENERATION_V6E;
    case TpuGeneration::kV7x: return v1::TPU_GENERATION_V7X;
  }
  return v1::TPU_GENERATION_UNSPECIFIED;
}

absl::StatusOr<TpuGeneration> TpuGenerationFromProto(v1::TpuGeneration generation,
                                                     std::string_view field) {
  switch (generation) {
    case v1::TPU_GENERATION_V2: return TpuGeneration::kV2;
    case v1::TPU_GENERATION_V3: return TpuGeneration::kV3;
    case v1::TPU_GENERATION_V4: return TpuGeneration::kV4;
    case v1::TPU_GENERATION_V5P: return TpuGeneration::kV5p;
    case v1::TPU_GENERATION_V5LITEPOD: return TpuGeneration::kV5litepod;
    case v1::TPU_GENERATION_V6E: return TpuGeneration::kV6e;
    case v1::TPU_GENERATION_V7X: return TpuGeneration::kV7x;
    case v1::TPU_GENERATION_UNSPECIFIED:
      return Invalid(field, "unspecified (a TPU generation is needed, e.g. V6E)");
    default: break;
  }
  return Invalid(field, absl::StrCat("unknown TPU generation ", static_cast<int>(generation),
                                     "; expected V2, V3, V4, V5P, V5LITEPOD, V6E or V7X"));
}

void SliceShapeToProto(const SliceShape& shape, v1::TpuSliceShape* proto) {
  proto->set_generation(TpuGenerationToProto(shape.generation));
  proto->clear_dims();
  for (int d : shape.topology.dims) proto->add_dims(d);
}

absl::StatusOr<SliceShape> SliceShapeFromProto(const v1::TpuSliceShape& proto,
                                               std::string_view field) {
  TESSERA_ASSIGN_OR_RETURN(
      const TpuGeneration generation,
      TpuGenerationFromProto(proto.generation(), absl::StrCat(ToAbsl(field), ".generation")));
  const std::string dims_field = absl::StrCat(ToAbsl(field), ".dims");
  // Checked before the topology is printed in a message: a peer may send any number of values.
  if (proto.dims_size() < 2 || proto.dims_size() > 3) {
    return Invalid(dims_field, absl::StrCat("has ", proto.dims_size(),
                                            " values; a topology has 2 or 3 (e.g. [4, 4])"));
  }
  TpuTopology topology;
  for (int d : proto.dims()) {
    if (d < 1 || d > kMaxTopologyDim) {
      return Invalid(dims_field,
                     absl::StrCat("dimension ", d, " is not between 1 and ", kMaxTopologyDim));
    }
    topology.dims.push_back(d);
  }
  absl::StatusOr<SliceShape> shape = MakeSliceShape(generation, topology);
  if (!shape.ok()) return Prefixed(field, shape.status());
  return shape;
}

absl::StatusOr<DomainGroupRequest> DomainGroupRequestFromProto(
    const v1::ReserveSlicesRequest& proto) {
  DomainGroupRequest request;
  request.name = proto.name();
  if (proto.alternatives_size() == 0) return Invalid("alternatives", "none given");
  for (int i = 0; i < proto.alternatives_size(); ++i) {
    const v1::SliceAlternative& in = proto.alternatives(i);
    std::string where = Indexed("alternatives", i);
    DomainAlternative alt;
    if (in.nvlink_hosts() < 0) {
      return Invalid(where, absl::StrCat("nvlink_hosts ", in.nvlink_hosts(), " is negative"));
    }
    if (in.nvlink_hosts() > 0) {
      if (in.has_shape() || in.num_slices() != 0 || in.bundle_per_chip()) {
        return Invalid(where, "nvlink_hosts excludes shape, num_slices and bundle_per_chip");
      }
      alt.count = in.nvlink_hosts();
    } else {
      if (!in.has_shape()) {
        return Invalid(where, "a TPU slice shape is needed (or nvlink_hosts for NVLink hosts)");
      }
      if (in.num_slices() < 0) {
        return Invalid(where, absl::StrCat("num_slices ", in.num_slices(), " is negative"));
      }
      TESSERA_ASSIGN_OR_RETURN(alt.shape, SliceShapeFromProto(in.shape(), where + ".shape"));
      alt.count = in.num_slices() == 0 ? 1 : in.num_slices();
      alt.granularity =
          in.bundle_per_chip() ? BundleGranularity::kPerChip : BundleGranularity::kPerHost;
    }
    if (in.has_per_host()) {
      auto per_host = ResourcesFromProto(in.per_host(), absl::StrCat(where, ".per_host"));
      if (!per_host.ok()) return per_host.status();
      alt.per_host = *std::move(per_host);
    }
    if (!alt.shape.has_value() && alt.per_host.empty()) {
      return Invalid(where, "nvlink_hosts needs per_host resources (what each host must hold)");
    }
    alt.domain = in.domain();
    if (in.sub_slice() && !alt.shape.has_value()) {
      return Invalid(where, "sub_slice needs a TPU slice shape");
    }
    alt.sub_slice = in.sub_slice();
    if (in.has_label_selector()) {
      TESSERA_ASSIGN_OR_RETURN(
          alt.selector, LabelSelectorFromProto(in.label_selector(), where + ".label_selector"));
    }
    request.alternatives.push_back(std::move(alt));
  }
  return request;
}

void DomainGroupRequestToProto(const DomainGroupRequest& request, v1::ReserveSlicesRequest* proto) {
  proto->set_name(request.name);
  proto->clear_alternatives();
  for (const DomainAlternative& alt : request.alternatives) {
    v1::SliceAlternative* out = proto->add_alternatives();
    if (!alt.shape.has_value()) {
      out->set_nvlink_hosts(alt.count);
    } else {
      SliceShapeToProto(*alt.shape, out->mutable_shape());
      out->set_num_slices(alt.count);
      out->set_bundle_per_chip(alt.granularity == BundleGranularity::kPerChip);
    }
    if (!alt.per_host.empty()) ResourcesToProto(alt.per_host, out->mutable_per_host());
    out->set_domain(alt.domain);
    out->set_sub_slice(alt.sub_slice);
    if (!alt.selector.empty()) LabelSelectorToProto(alt.selector, out->mutable_label_selector());
  }
}

}  // namespace tessera::wire
