// Proto messages (tessera/v1) <-> the core types of resources, labels and scheduling, in both
// directions and exactly: amounts travel as Quantity::raw(), device grants as instance indices
// with per-instance raw amounts, so a reservation decided in one process is taken bit-for-bit in
// another.
//
// From-proto conversions take anything a peer can send: they return a value or a one-line
// InvalidArgument naming the field ("bundles[2].resources: resource \"GPU\": raw amount -3 is
// negative"), never abort. Thread-safe: pure functions.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "hardware/device.h"
#include "labels/label_selector.h"
#include "resources/resource_set.h"
#include "scheduling/cluster_view.h"
#include "scheduling/device_topology.h"
#include "scheduling/domain_group_scheduler.h"
#include "scheduling/placement_group_spec.h"
#include "scheduling/scheduling_request.h"
#include "tessera/v1/common.pb.h"
#include "tessera/v1/head.pb.h"
#include "tessera/v1/jobs.pb.h"
#include "vocabulary/gang_state.h"
#include "vocabulary/scheduling_strategy.h"
#include "vocabulary/slice_shape.h"
#include "vocabulary/tpu_generation.h"

namespace tessera::wire {

// --- Resources ---
absl::StatusOr<ResourceSet> ResourcesFromProto(const v1::Resources& proto,
                                               std::string_view field = "resources");
void ResourcesToProto(const ResourceSet& resources, v1::Resources* proto);
v1::Resources ResourcesToProto(const ResourceSet& resources);

// --- Device grants and allocations ---
absl::StatusOr<DeviceGrant> DeviceGrantFromProto(const v1::DeviceGrant& proto,
                                                 std::string_view field = "device grant");
void DeviceGrantToProto(const DeviceGrant& grant, v1::DeviceGrant* proto);

// An exact reservation without its identity: what ClusterView::AllocateExact takes.
struct ExactAllocation {
  ResourceSet resources;
  std::vector<DeviceGrant> devices;  // sorted by resource name
  friend bool operator==(const ExactAllocation&, const ExactAllocation&) = default;
};
// What the view holds as an allocation, as an agent is asked to hold it.
inline ExactAllocation ExactAllocationOf(const Allocation& allocation) {
  return ExactAllocation{allocation.resources, allocation.devices};
}
// Grants are sorted by resource name; a resource granted twice is refused.
absl::StatusOr<ExactAllocation> AllocationFromProto(const v1::Allocation& proto,
                                                    std::string_view field = "allocation");
void AllocationToProto(const ResourceSet& resources, const std::vector<DeviceGrant>& devices,
                       v1::Allocation* proto);
void AllocationToProto(const Allocation& allocation, v1::Allocation* proto);
void AllocationToProto(const ExactAllocation& allocation, v1::Allocation* proto);

// --- Device topology ---
// "nvlink", "nvswitch", "xgmi", "ici", "neuronlink", "gaudi-roce" (LinkKindName).
absl::StatusOr<LinkKind> ParseLinkKind(std::string_view name);
// The resource name is proto.resource(); links get their bandwidth class from their speed.
absl::StatusOr<DeviceTopology> DeviceTopologyFromProto(const v1::DeviceTopology& proto,
                                                       std::string_view field = "devices");
void DeviceTopologyToProto(std::string_view resource, const DeviceTopology& topology,
                           v1::DeviceTopology* proto);

// --- Nodes ---
struct NodeRegistration {
  NodeSpec spec;
  std::string address;      // host:port of its NodeAgent service
  std::string incarnation;  // changes with every agent start
};
// Labels are validated as system labels (tessera.io/ allowed); an empty node id, a topology
// given twice for one resource, and any bad resource or topology are refused.
absl::StatusOr<NodeRegistration> NodeFromProto(const v1::NodeDescription& proto);
void NodeToProto(const NodeSpec& spec, std::string_view address, std::string_view incarnation,
                 v1::NodeDescription* proto);

// --- Label selectors ---
// Constraint by constraint (key, operator, values), never as text: ToProto writes the
// selector's canonical order, so FromProto(ToProto(s)) == s for every selector. FromProto
// checks each key and value with the label rules and refuses an unspecified or unknown
// operator, IN or NOT_IN without values, EXISTS or DOES_NOT_EXIST with some, and a selector in
// the old map form (field 1), naming the field: "label_selector.label_constraints[1].operator:
// unknown operator 9; expected IN, NOT_IN, EXISTS or DOES_NOT_EXIST".
absl::StatusOr<LabelSelector> LabelSelectorFromProto(const v1::LabelSelector& proto,
                                                     std::string_view field = "label_selector");
void LabelSelectorToProto(const LabelSelector& selector, v1::LabelSelector* proto);

// --- Resource requests ---
// The placement-group target of a request (SchedulingRequest has no field for it yet).
struct BundleTarget {
  std::string placement_group;
  int bundle_index = -1;  // -1: any bundle of the group
  friend bool operator==(const BundleTarget&, const BundleTarget&) = default;
};
struct ResourceRequestValue {
  SchedulingRequest request;
  std::optional<BundleTarget> target;
};
// Validated with ValidateSchedulingRequest; bundle_index below -1 refused.
absl::StatusOr<ResourceRequestValue> ResourceRequestFromProto(const v1::ResourceRequest& proto,
                                                              std::string_view field = "request");
void ResourceRequestToProto(const SchedulingRequest& request,
                            const std::optional<BundleTarget>& target, v1::ResourceRequest* proto);

// --- What a task or an actor asks for ---
// Its lease request: `resources`, the first of `label_selectors` as the request's selector and
// the rest as fallbacks, and `strategy` (ValidateSchedulingStrategy first: an invalid one is its
// one-line error and `proto` is untouched).
absl::Status DemandToProto(const ResourceSet& resources,
                           const std::vector<LabelSelector>& label_selectors,
                           const SchedulingStrategy& strategy, v1::ResourceRequest* proto);

// --- Placement groups and slices ---
// UNSPECIFIED (a request that names none) is PACK; a number this build does not know is a
// one-line InvalidArgument naming `field`.
absl::StatusOr<PlacementStrategy> PlacementStrategyFromProto(v1::PlacementStrategy strategy,
                                                             std::string_view field = "strategy");
v1::PlacementStrategy PlacementStrategyToProto(PlacementStrategy strategy);
// Validated with ValidatePlacementGroupSpec.
absl::StatusOr<PlacementGroupSpec> PlacementGroupSpecFromProto(
    const v1::CreatePlacementGroupRequest& proto);
void PlacementGroupSpecToProto(const PlacementGroupSpec& spec,
                               v1::CreatePlacementGroupRequest* proto);

// --- Gangs ---
// A gang's state and one of its ranks', as the C++ API shows them (tessera/gang.h); UNSPECIFIED
// and numbers this build does not know are a one-line InvalidArgument naming `field`.
absl::StatusOr<GangState> GangStateFromProto(v1::GangJobState state,
                                             std::string_view field = "state");
absl::StatusOr<GangRankState> GangRankStateFromProto(v1::RankState state,
                                                     std::string_view field = "state");

// --- TPU slice shapes ---
// A slice's generation and topology travel as numbers (TpuSliceShape); the rest of a SliceShape
// (chips, hosts, the worker grid) is derived again where it is read.
v1::TpuGeneration TpuGenerationToProto(TpuGeneration generation);
// UNSPECIFIED and numbers this build does not know are a one-line InvalidArgument naming `field`.
absl::StatusOr<TpuGeneration> TpuGenerationFromProto(v1::TpuGeneration generation,
                                                     std::string_view field = "generation");
void SliceShapeToProto(const SliceShape& shape, v1::TpuSliceShape* proto);
// MakeSliceShape of the generation and dims (the default chips per host): a one-line
// InvalidArgument naming the field for a bad generation (`shape.generation: ...`), a count of
// dims other than 2 or 3 or one out of range (`shape.dims: ...`), or a topology that is not a
// slice of the generation (`shape: topology "3x3" is not a valid v6e slice; valid: ...`).
absl::StatusOr<SliceShape> SliceShapeFromProto(const v1::TpuSliceShape& proto,
                                               std::string_view field = "shape");

// Each alternative's shape through SliceShapeFromProto; an alternative with nvlink_hosts has none.
absl::StatusOr<DomainGroupRequest> DomainGroupRequestFromProto(
    const v1::ReserveSlicesRequest& proto);
void DomainGroupRequestToProto(const DomainGroupRequest& request, v1::ReserveSlicesRequest* proto);

}  // namespace tessera::wire
