#include "wire/proto_convert.h"

#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "scheduling/scheduling_test_util.h"

namespace tessera::wire {
namespace {

using testing_util::Res;

v1::LabelSelectorConstraint Constraint(const std::string& key, v1::LabelSelectorOperator op,
                                       const std::vector<std::string>& values) {
  v1::LabelSelectorConstraint constraint;
  constraint.set_label_key(key);
  constraint.set_operator_(op);
  for (const std::string& value : values) constraint.add_label_values(value);
  return constraint;
}

v1::LabelSelector SelectorOf(const std::vector<v1::LabelSelectorConstraint>& constraints) {
  v1::LabelSelector proto;
  for (const v1::LabelSelectorConstraint& constraint : constraints) {
    *proto.add_label_constraints() = constraint;
  }
  return proto;
}

TEST(ResourcesConvertTest, RoundTripIsExact) {
  ResourceSet set = Res("CPU=8.5,GPU=4,memory=64GiB,my_res=0.0001");
  v1::Resources proto = ResourcesToProto(set);
  EXPECT_EQ(proto.raw().at("CPU"), 85000);
  EXPECT_EQ(proto.raw().at("my_res"), 1);
  auto back = ResourcesFromProto(proto);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, set);
}

TEST(ResourcesConvertTest, ZeroDroppedNegativeAndBadNamesRefusedNamingTheField) {
  v1::Resources proto;
  (*proto.mutable_raw())["CPU"] = 0;
  EXPECT_TRUE(ResourcesFromProto(proto)->empty());
  (*proto.mutable_raw())["GPU"] = -3;
  auto negative = ResourcesFromProto(proto, "bundles[2].resources");
  ASSERT_FALSE(negative.ok());
  EXPECT_EQ(negative.status().message(),
            "bundles[2].resources: resource \"GPU\": raw amount -3 is negative");
  v1::Resources bad_name;
  (*bad_name.mutable_raw())["9lives"] = 1;
  auto named = ResourcesFromProto(bad_name);
  ASSERT_FALSE(named.ok());
  EXPECT_EQ(named.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StartsWith(named.status().message(), "resources: "));
}

TEST(AllocationConvertTest, RoundTripKeepsInstancesAndFractions) {
  Allocation allocation;
  allocation.resources = Res("CPU=2,GPU=2.5");
  allocation.devices = {DeviceGrant{
      "GPU", {1, 3, 6}, {Quantity::FromInt(1), Quantity::FromInt(1), Quantity::FromRaw(5000)}}};
  v1::Allocation proto;
  AllocationToProto(allocation, &proto);
  auto back = AllocationFromProto(proto);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->resources, allocation.resources);
  EXPECT_EQ(back->devices, allocation.devices);
}

TEST(AllocationConvertTest, MalformedGrantsAreRefused) {
  auto check = [](const v1::Allocation& proto, const char* expected) {
    auto result = AllocationFromProto(proto);
    ASSERT_FALSE(result.ok());
    EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(result.status().message().find(expected), absl::string_view::npos) << result.status();
  };
  v1::Allocation mismatched;
  auto* grant = mismatched.add_devices();
  grant->set_resource("GPU");
  grant->add_instances(0);
  check(mismatched, "1 instances but 0 amounts");

  v1::Allocation descending;
  grant = descending.add_devices();
  grant->set_resource("GPU");
  grant->add_instances(2);
  grant->add_instances(1);
  grant->add_amounts_raw(10000);
  grant->add_amounts_raw(10000);
  check(descending, "ascending");

  v1::Allocation too_much;
  grant = too_much.add_devices();
  grant->set_resource("GPU");
  grant->add_instances(0);
  grant->add_amounts_raw(10001);
  check(too_much, "outside (0, 10000]");

  v1::Allocation twice;
  for (int i = 0; i < 2; ++i) {
    grant = twice.add_devices();
    grant->set_resource("GPU");
    grant->add_instances(i);
    grant->add_amounts_raw(10000);
  }
  check(twice, "granted twice");
  check(twice, "allocation.devices[1]");
}

TEST(TopologyConvertTest, RoundTripWithLinksByName) {
  DeviceTopologyPtr topology = testing_util::TwoIslands();
  v1::DeviceTopology proto;
  DeviceTopologyToProto("GPU", *topology, &proto);
  EXPECT_EQ(proto.links(0).kind(), "nvlink");
  auto back = DeviceTopologyFromProto(proto);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->count, topology->count);
  EXPECT_EQ(back->numa_node, topology->numa_node);
  EXPECT_EQ(back->nearest_nic, topology->nearest_nic);
  ASSERT_EQ(back->links.size(), topology->links.size());
  for (size_t i = 0; i < back->links.size(); ++i) {
    EXPECT_EQ(back->links[i].a, topology->links[i].a);
    EXPECT_EQ(back->links[i].b, topology->links[i].b);
    EXPECT_EQ(back->links[i].kind, topology->links[i].kind);
    EXPECT_EQ(back->links[i].lanes, topology->links[i].lanes);
    EXPECT_EQ(back->links[i].bandwidth_class, topology->links[i].bandwidth_class);
  }
}

TEST(TopologyConvertTest, BadLinksAreRefused) {
  v1::DeviceTopology proto;
  proto.set_resource("GPU");
  proto.set_count(2);
  auto* link = proto.add_links();
  link->set_a(0);
  link->set_b(5);
  link->set_kind("nvlink");
  EXPECT_FALSE(DeviceTopologyFromProto(proto).ok());
  link->set_b(1);
  link->set_kind("warp-drive");
  auto unknown = DeviceTopologyFromProto(proto);
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("unknown link kind \"warp-drive\""),
            absl::string_view::npos);
  EXPECT_EQ(*ParseLinkKind("gaudi-roce"), LinkKind::kGaudiRoce);
  proto.set_count(-1);
  EXPECT_FALSE(DeviceTopologyFromProto(proto).ok());
  proto.set_count(100000000);
  EXPECT_FALSE(DeviceTopologyFromProto(proto).ok());
}

TEST(NodeConvertTest, RoundTripIncludingAddressAndIncarnation) {
  NodeSpec spec = testing_util::Spec("n1", "CPU=16,GPU=8,memory=64GiB",
                                     {{"tessera.io/accelerator-type", "H100"}, {"zone", "a"}},
                                     testing_util::FullyLinked(8));
  v1::NodeDescription proto;
  NodeToProto(spec, "127.0.0.1:4000", "inc-7", &proto);
  auto back = NodeFromProto(proto);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->spec.id, spec.id);
  EXPECT_EQ(back->spec.resources, spec.resources);
  EXPECT_EQ(back->spec.labels, spec.labels);
  ASSERT_EQ(back->spec.devices.count("GPU"), 1u);
  EXPECT_EQ(back->spec.devices.at("GPU")->count, 8);
  EXPECT_EQ(back->spec.devices.at("GPU")->links.size(), 28u);
  EXPECT_EQ(back->address, "127.0.0.1:4000");
  EXPECT_EQ(back->incarnation, "inc-7");
  // The converted spec is one a ClusterView accepts.
  ClusterView cluster;
  EXPECT_TRUE(cluster.AddNode(back->spec).ok());
}

TEST(NodeConvertTest, BadNodesAreRefused) {
  v1::NodeDescription proto;
  EXPECT_EQ(NodeFromProto(proto).status().message(), "node.node_id: is empty");
  proto.set_node_id("n1");
  (*proto.mutable_labels())["Bad Key"] = "x";
  auto labels = NodeFromProto(proto);
  ASSERT_FALSE(labels.ok());
  EXPECT_TRUE(absl::StartsWith(labels.status().message(), "node.labels: "));
  proto.clear_labels();
  for (int i = 0; i < 2; ++i) {
    auto* devices = proto.add_devices();
    devices->set_resource("GPU");
    devices->set_count(1);
  }
  auto twice = NodeFromProto(proto);
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.status().message().find("a second topology for GPU"), absl::string_view::npos);
}

TEST(SelectorConvertTest, EveryOperatorRoundTripsExactlyAsTypedConstraints) {
  const LabelSelector selector =
      LabelSelector::Of({{"gpu", SelectorOperator::kIn, {"h100", "a100"}},
                         {"gpu", SelectorOperator::kNotIn, {"b200"}},
                         {"gpu", SelectorOperator::kExists, {}},
                         {"spot", SelectorOperator::kDoesNotExist, {}},
                         {"tessera.io/accelerator-type", SelectorOperator::kIn, {"H100"}}})
          .value();
  v1::LabelSelector proto;
  LabelSelectorToProto(selector, &proto);
  // The selector's canonical order (key, operator, values), values sorted; no expression text.
  ASSERT_EQ(proto.label_constraints_size(), 5);
  const v1::LabelSelectorConstraint& in = proto.label_constraints(0);
  EXPECT_EQ(in.label_key(), "gpu");
  EXPECT_EQ(in.operator_(), v1::LABEL_OPERATOR_IN);
  EXPECT_EQ(std::vector<std::string>(in.label_values().begin(), in.label_values().end()),
            (std::vector<std::string>{"a100", "h100"}));
  EXPECT_EQ(proto.label_constraints(1).operator_(), v1::LABEL_OPERATOR_NOT_IN);
  EXPECT_EQ(proto.label_constraints(2).operator_(), v1::LABEL_OPERATOR_EXISTS);
  EXPECT_EQ(proto.label_constraints(2).label_values_size(), 0);
  EXPECT_EQ(proto.label_constraints(3).label_key(), "spot");
  EXPECT_EQ(proto.label_constraints(3).operator_(), v1::LABEL_OPERATOR_DOES_NOT_EXIST);
  EXPECT_EQ(proto.label_constraints(4).label_key(), "tessera.io/accelerator-type");

  v1::LabelSelector sent;
  ASSERT_TRUE(sent.ParseFromString(proto.SerializeAsString()));
  auto back = LabelSelectorFromProto(sent);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, selector);

  // Each operator on its own, and the empty selector (no constraints: any node).
  for (const LabelConstraint& constraint : selector.constraints()) {
    const LabelSelector one = LabelSelector::Of({constraint}).value();
    LabelSelectorToProto(one, &proto);
    EXPECT_EQ(LabelSelectorFromProto(proto).value(), one) << SelectorOperatorName(constraint.op);
  }
  LabelSelectorToProto(LabelSelector(), &proto);
  EXPECT_EQ(proto.label_constraints_size(), 0);
  EXPECT_TRUE(LabelSelectorFromProto(proto).value().empty());
}

TEST(SelectorConvertTest, ReadInAnyOrderWithRepeatsKeptOnce) {
  const v1::LabelSelector proto =
      SelectorOf({Constraint("zone", v1::LABEL_OPERATOR_NOT_IN, {"c", "b", "c"}),
                  Constraint("gpu", v1::LABEL_OPERATOR_EXISTS, {}),
                  Constraint("zone", v1::LABEL_OPERATOR_NOT_IN, {"b", "c"})});
  auto read = LabelSelectorFromProto(proto);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(*read, LabelSelector::Of({{"gpu", SelectorOperator::kExists, {}},
                                      {"zone", SelectorOperator::kNotIn, {"b", "c"}}})
                       .value());
}

TEST(SelectorConvertTest, EachBadConstraintIsOneLineNamingItsField) {
  const std::string at = "request.label_selector.label_constraints";
  const std::string expected = "; expected IN, NOT_IN, EXISTS or DOES_NOT_EXIST";
  const v1::LabelSelectorConstraint good = Constraint("zone", v1::LABEL_OPERATOR_IN, {"a"});
  struct Case {
    std::vector<v1::LabelSelectorConstraint> constraints;
    std::string message;  // the whole message, or its start where the label rules word the rest
  };
  const std::vector<Case> cases = {
      {{Constraint("zone", v1::LABEL_OPERATOR_UNSPECIFIED, {"a"})},
       at + "[0].operator: is unspecified" + expected},
      {{good, Constraint("zone", static_cast<v1::LabelSelectorOperator>(9), {"a"})},
       at + "[1].operator: unknown operator 9" + expected},
      {{Constraint("", v1::LABEL_OPERATOR_EXISTS, {})},
       at + "[0].label_key: label key \"\" is empty"},
      {{Constraint("Bad Key", v1::LABEL_OPERATOR_IN, {"a"})},
       at + "[0].label_key: label key \"Bad Key\": name \"Bad Key\" has an invalid character"},
      {{Constraint("zone", v1::LABEL_OPERATOR_IN, {})},
       at + "[0].label_values: LABEL_OPERATOR_IN needs at least one value"},
      {{Constraint("zone", v1::LABEL_OPERATOR_NOT_IN, {})},
       at + "[0].label_values: LABEL_OPERATOR_NOT_IN needs at least one value"},
      {{Constraint("zone", v1::LABEL_OPERATOR_EXISTS, {"a"})},
       at + "[0].label_values: LABEL_OPERATOR_EXISTS takes no values"},
      {{Constraint("zone", v1::LABEL_OPERATOR_DOES_NOT_EXIST, {"a"})},
       at + "[0].label_values: LABEL_OPERATOR_DOES_NOT_EXIST takes no values"},
      {{Constraint("zone", v1::LABEL_OPERATOR_IN, {"a", ""})},
       at + "[0].label_values[1]: is empty"},
      {{Constraint("zone", v1::LABEL_OPERATOR_NOT_IN, {"a\nb"})},
       at + "[0].label_values[0]: label value \"a\\nb\" has an invalid character"},
  };
  for (const Case& c : cases) {
    auto read = LabelSelectorFromProto(SelectorOf(c.constraints), "request.label_selector");
    ASSERT_FALSE(read.ok()) << c.message;
    EXPECT_EQ(read.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_TRUE(absl::StartsWith(read.status().message(), c.message)) << read.status();
    EXPECT_EQ(read.status().message().find('\n'), absl::string_view::npos) << read.status();
  }

  // Inside a request, the path runs through it.
  v1::ResourceRequest request;
  *request.add_fallbacks() = SelectorOf({Constraint("zone", v1::LABEL_OPERATOR_IN, {})});
  EXPECT_EQ(ResourceRequestFromProto(request).status().message(),
            "request.fallbacks[0].label_constraints[0].label_values: LABEL_OPERATOR_IN needs at "
            "least one value");
}

TEST(SelectorConvertTest, TheOldMapOfExpressionsIsRefusedNotReadAsAnyNode) {
  // Field 1 as the map form wrote it: one entry {key: "zone", value: "a"}.
  v1::LabelSelector old;
  ASSERT_TRUE(
      old.ParseFromString(std::string("\x0a\x09\x0a\x04zone\x12\x01"
                                      "a",
                                      11)));
  EXPECT_EQ(old.label_constraints_size(), 0);
  EXPECT_EQ(LabelSelectorFromProto(old, "request.label_selector").status().message(),
            "request.label_selector: holds the old map of selector expressions (field 1), which "
            "this version no longer reads; send label_constraints");
  // Also where it is a group's only selector, so no bundle has a constraint of the new form.
  v1::CreatePlacementGroupRequest group;
  group.set_name("g");
  v1::BundleSpec* bundle = group.mutable_primary()->add_bundles();
  (*bundle->mutable_resources()->mutable_raw())["CPU"] = 10000;
  *bundle->mutable_label_selector() = old;
  EXPECT_TRUE(absl::StartsWith(PlacementGroupSpecFromProto(group).status().message(),
                               "primary.bundles[0].label_selector: holds the old map"))
      << PlacementGroupSpecFromProto(group).status();
}

TEST(RequestConvertTest, RoundTripWithFallbacksAffinityAndTarget) {
  SchedulingRequest request;
  request.resources = Res("CPU=1,GPU=2");
  request.selectors = FallbackList::FromSelectors(
      {*ParseLabelSelector("gpu=h100"), *ParseLabelSelector("gpu=a100")});
  request.strategy = NodeRanking::kSpread;
  request.affinity = NodeAffinity{NodeId("n3"), AffinityKind::kSoft};
  v1::ResourceRequest proto;
  ResourceRequestToProto(request, BundleTarget{"pg-1", 2}, &proto);
  auto back = ResourceRequestFromProto(proto);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->request.resources, request.resources);
  EXPECT_EQ(back->request.selectors, request.selectors);
  EXPECT_EQ(back->request.strategy, NodeRanking::kSpread);
  ASSERT_TRUE(back->request.affinity.has_value());
  EXPECT_EQ(back->request.affinity->node, NodeId("n3"));
  EXPECT_EQ(back->request.affinity->kind, AffinityKind::kSoft);
  ASSERT_TRUE(back->target.has_value());
  EXPECT_EQ(*back->target, (BundleTarget{"pg-1", 2}));
}

TEST(RequestConvertTest, PlainRequestHasNoSelectorsNoTarget) {
  v1::ResourceRequest proto;
  (*proto.mutable_resources()->mutable_raw())["CPU"] = 10000;
  auto value = ResourceRequestFromProto(proto);
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_TRUE(value->request.selectors.empty());
  EXPECT_FALSE(value->target.has_value());
  EXPECT_FALSE(value->request.affinity.has_value());
}

TEST(RequestConvertTest, MalformedRequestsAreRefused) {
  v1::ResourceRequest proto;
  (*proto.mutable_resources()->mutable_raw())["GPU"] = 15000;  // 1.5 GPUs
  auto fractional = ResourceRequestFromProto(proto);
  ASSERT_FALSE(fractional.ok());
  EXPECT_EQ(fractional.status().code(), absl::StatusCode::kInvalidArgument);
  proto.clear_resources();
  proto.set_strategy(static_cast<v1::Strategy>(42));
  EXPECT_NE(ResourceRequestFromProto(proto).status().message().find("unknown strategy 42"),
            absl::string_view::npos);
  proto.set_strategy(v1::STRATEGY_DEFAULT);
  proto.set_bundle_index(3);
  EXPECT_NE(ResourceRequestFromProto(proto).status().message().find("without placement_group"),
            absl::string_view::npos);
  proto.set_placement_group("pg");
  proto.set_bundle_index(-2);
  EXPECT_FALSE(ResourceRequestFromProto(proto).ok());
}

TEST(PlacementGroupConvertTest, RoundTripAndValidation) {
  PlacementGroupSpec spec;
  spec.name = "pg-a";
  spec.strategy = PlacementStrategy::kStrictSpread;
  spec.primary.bundles = {Res("GPU=1"), Res("GPU=1")};
  spec.primary.selectors = {*ParseLabelSelector("zone=a"), LabelSelector()};
  BundleOption fallback;
  fallback.bundles = {Res("CPU=2")};
  spec.fallbacks = {fallback};
  v1::CreatePlacementGroupRequest proto;
  PlacementGroupSpecToProto(spec, &proto);
  auto back = PlacementGroupSpecFromProto(proto);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->name, spec.name);
  EXPECT_EQ(back->strategy, spec.strategy);
  EXPECT_EQ(back->primary, spec.primary);
  EXPECT_EQ(back->fallbacks, spec.fallbacks);

  EXPECT_EQ(proto.strategy(), v1::PLACEMENT_STRATEGY_STRICT_SPREAD);
  proto.set_strategy(static_cast<v1::PlacementStrategy>(42));
  EXPECT_EQ(PlacementGroupSpecFromProto(proto).status().message(),
            "strategy: unknown placement strategy 42; expected PACK, SPREAD, STRICT_PACK or "
            "STRICT_SPREAD");
  proto.clear_strategy();  // none named: PACK
  ASSERT_TRUE(PlacementGroupSpecFromProto(proto).ok());
  EXPECT_EQ(PlacementGroupSpecFromProto(proto)->strategy, PlacementStrategy::kPack);
  proto.set_strategy(v1::PLACEMENT_STRATEGY_PACK);
  proto.mutable_primary()->clear_bundles();
  EXPECT_EQ(PlacementGroupSpecFromProto(proto).status().code(), absl::StatusCode::kInvalidArgument);
  proto.mutable_primary()->add_bundles();
  proto.set_name("has space");
  EXPECT_EQ(PlacementGroupSpecFromProto(proto).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(SliceConvertTest, RoundTripSlicesAndNvLink) {
  DomainGroupRequest request;
  request.name = "train";
  request.alternatives.push_back(
      DomainAlternative{testing_util::Shape("TPU-V6E", "4x4"), 2, BundleGranularity::kPerChip, {}});
  request.alternatives.push_back(DomainAlternative{std::nullopt, 4, BundleGranularity::kPerHost,
                                                   *ParseResourceSet("GPU=4,CPU=8")});
  v1::ReserveSlicesRequest proto;
  DomainGroupRequestToProto(request, &proto);
  EXPECT_EQ(proto.alternatives(0).shape().generation(), v1::TPU_GENERATION_V6E);
  EXPECT_FALSE(proto.alternatives(1).has_shape());
  auto back = DomainGroupRequestFromProto(proto);
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->alternatives.size(), 2u);
  ASSERT_TRUE(back->alternatives[0].shape.has_value());
  EXPECT_EQ(back->alternatives[0].shape->accelerator_type, "TPU-V6E");
  EXPECT_EQ(back->alternatives[0].shape->topology.dims, (std::vector<int>{4, 4}));
  EXPECT_EQ(back->alternatives[0].shape->hosts, 4);
  EXPECT_EQ(back->alternatives[0].count, 2);
  EXPECT_EQ(back->alternatives[0].granularity, BundleGranularity::kPerChip);
  EXPECT_FALSE(back->alternatives[1].shape.has_value());
  EXPECT_EQ(back->alternatives[1].count, 4);
  EXPECT_EQ(back->alternatives[1].per_host, *ParseResourceSet("GPU=4,CPU=8"));
  EXPECT_TRUE(back->alternatives[0].per_host.empty());
  // NVLink hosts need a per-host demand; a bad one names its field.
  proto.mutable_alternatives(1)->clear_per_host();
  EXPECT_EQ(DomainGroupRequestFromProto(proto).status().message(),
            "alternatives[1]: nvlink_hosts needs per_host resources (what each host must hold)");
  (*proto.mutable_alternatives(1)->mutable_per_host()->mutable_raw())["GPU"] = -1;
  EXPECT_EQ(DomainGroupRequestFromProto(proto).status().message(),
            "alternatives[1].per_host: resource \"GPU\": raw amount -1 is negative");
  proto.clear_alternatives();
  EXPECT_FALSE(DomainGroupRequestFromProto(proto).ok());
}

TEST(GangConvertTest, EveryStateOfTheProtocolIsOneOfTheApisAndNoOtherNumberIs) {
  for (int n = 1; n < v1::GangJobState_descriptor()->value_count(); ++n) {
    absl::StatusOr<GangState> state = GangStateFromProto(static_cast<v1::GangJobState>(n));
    ASSERT_TRUE(state.ok()) << state.status();
    EXPECT_EQ(static_cast<int>(*state), n);
  }
  for (int n = 1; n < v1::RankState_descriptor()->value_count(); ++n) {
    absl::StatusOr<GangRankState> state = GangRankStateFromProto(static_cast<v1::RankState>(n));
    ASSERT_TRUE(state.ok()) << state.status();
    EXPECT_EQ(static_cast<int>(*state), n);
  }
  EXPECT_EQ(GangStateFromProto(v1::GANG_JOB_STATE_UNSPECIFIED).status().message(),
            "state: unknown gang state 0");
  EXPECT_EQ(
      GangStateFromProto(static_cast<v1::GangJobState>(42), "jobs[3].state").status().message(),
      "jobs[3].state: unknown gang state 42");
  EXPECT_EQ(
      GangRankStateFromProto(static_cast<v1::RankState>(9), "ranks[0].state").status().message(),
      "ranks[0].state: unknown rank state 9");
}

TEST(SliceConvertTest, ASliceShapeTravelsAsItsGenerationAndDims) {
  for (const auto& [accelerator, topology] :
       std::vector<std::pair<std::string, std::string>>{{"v2", "2x2"},
                                                        {"v3", "4x8"},
                                                        {"v4", "2x2x2"},
                                                        {"v5p", "4x4x8"},
                                                        {"v5e", "2x4"},
                                                        {"TPU-V6E", "16x16"},
                                                        {"v7x", "2x2x1"}}) {
    const SliceShape shape = testing_util::Shape(accelerator, topology);
    v1::TpuSliceShape proto;
    SliceShapeToProto(shape, &proto);
    EXPECT_NE(proto.generation(), v1::TPU_GENERATION_UNSPECIFIED);
    EXPECT_EQ(std::vector<int>(proto.dims().begin(), proto.dims().end()), shape.topology.dims);
    absl::StatusOr<SliceShape> back = SliceShapeFromProto(proto);
    ASSERT_TRUE(back.ok()) << accelerator << " " << topology << ": " << back.status();
    EXPECT_EQ(back->generation, shape.generation);
    EXPECT_EQ(back->topology, shape.topology);
    EXPECT_EQ(back->pod_type, shape.pod_type);
    EXPECT_EQ(back->hosts, shape.hosts);
  }
}

TEST(SliceConvertTest, ABadShapeIsOneLineNamingItsField) {
  v1::TpuSliceShape proto;
  proto.add_dims(4);
  proto.add_dims(4);
  EXPECT_EQ(SliceShapeFromProto(proto, "alternatives[0].shape").status().message(),
            "alternatives[0].shape.generation: unspecified (a TPU generation is needed, e.g. V6E)");
  proto.set_generation(static_cast<v1::TpuGeneration>(42));
  EXPECT_EQ(SliceShapeFromProto(proto).status().message(),
            "shape.generation: unknown TPU generation 42; expected V2, V3, V4, V5P, V5LITEPOD, "
            "V6E or V7X");
  proto.set_generation(v1::TPU_GENERATION_V6E);
  proto.set_dims(1, 3);
  EXPECT_TRUE(absl::StartsWith(SliceShapeFromProto(proto).status().message(),
                               "shape: topology \"4x3\" is not a valid v6e slice; valid: "));
  proto.add_dims(2);  // 4x3x2: a v6e slice is 2D
  EXPECT_TRUE(absl::StartsWith(SliceShapeFromProto(proto).status().message(),
                               "shape: topology \"4x3x2\" is 3D, but v6e slices are 2D"));
  proto.add_dims(2);
  EXPECT_EQ(SliceShapeFromProto(proto).status().message(),
            "shape.dims: has 4 values; a topology has 2 or 3 (e.g. [4, 4])");
  proto.clear_dims();
  proto.add_dims(4);
  proto.add_dims(-4);
  EXPECT_EQ(SliceShapeFromProto(proto).status().message(),
            "shape.dims: dimension -4 is not between 1 and 1024");
  // In a request: an alternative without a shape or NVLink hosts, and a bad shape, name it.
  v1::ReserveSlicesRequest request;
  request.set_name("s");
  v1::SliceAlternative* alt = request.add_alternatives();
  EXPECT_EQ(DomainGroupRequestFromProto(request).status().message(),
            "alternatives[0]: a TPU slice shape is needed (or nvlink_hosts for NVLink hosts)");
  *alt->mutable_shape() = proto;
  EXPECT_EQ(DomainGroupRequestFromProto(request).status().message(),
            "alternatives[0].shape.dims: dimension -4 is not between 1 and 1024");
  alt->set_nvlink_hosts(2);
  EXPECT_EQ(DomainGroupRequestFromProto(request).status().message(),
            "alternatives[0]: nvlink_hosts excludes shape, num_slices and bundle_per_chip");
}

// Fuzz-style: random field contents never abort, and every error is one line.
TEST(ProtoConvertRobustnessTest, RandomContentGivesValueOrOneLineError) {
  std::mt19937 rng(12345);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  const std::vector<std::string> words = {
      "",          "GPU",    "CPU",          "memory",
      "x\ny",      "9",      "in(a",         "tessera.io/node-id",
      "!exists()", "nvlink", "a b",          "\xff\xfe",
      "in(a,b)",   "PACK",   "STRICT_SPREAD"};
  const std::vector<int64_t> numbers = {0, 1, -1, 10000, 10001, INT64_MAX, INT64_MIN, 5000, 3};
  auto word = [&] { return words[pick(static_cast<int>(words.size()))]; };
  auto number = [&] { return numbers[pick(static_cast<int>(numbers.size()))]; };
  // A constraint of random words, any operator number (known or not) and 0-2 values.
  auto random_constraint = [&](v1::LabelSelector* selector) {
    v1::LabelSelectorConstraint* constraint = selector->add_label_constraints();
    constraint->set_label_key(word());
    constraint->set_operator_(static_cast<v1::LabelSelectorOperator>(pick(6)));
    for (int i = 0; i < pick(3); ++i) constraint->add_label_values(word());
  };
  auto one_line = [](const absl::Status& status) {
    return status.ok() || status.message().find('\n') == absl::string_view::npos;
  };
  for (int round = 0; round < 3000; ++round) {
    v1::NodeDescription node;
    node.set_node_id(word());
    (*node.mutable_resources()->mutable_raw())[word()] = number();
    (*node.mutable_labels())[word()] = word();
    auto* devices = node.add_devices();
    devices->set_resource(word());
    devices->set_count(static_cast<int>(number() % 20));
    for (int i = 0; i < pick(4); ++i) devices->add_numa_node(static_cast<int>(number() % 4));
    auto* link = devices->add_links();
    link->set_a(static_cast<int>(number() % 5));
    link->set_b(static_cast<int>(number() % 5));
    link->set_kind(word());
    link->set_gigabytes_per_second(static_cast<double>(number()));
    auto n = NodeFromProto(node);
    EXPECT_TRUE(one_line(n.status())) << n.status();
    if (n.ok()) {
      ClusterView cluster;
      (void)cluster.AddNode(n->spec);
    }

    v1::ResourceRequest request;
    (*request.mutable_resources()->mutable_raw())[word()] = number();
    random_constraint(request.mutable_label_selector());
    request.set_strategy(static_cast<v1::Strategy>(pick(3)));
    request.set_affinity_node_id(word());
    request.set_placement_group(word());
    request.set_bundle_index(static_cast<int>(number() % 4));
    auto r = ResourceRequestFromProto(request);
    EXPECT_TRUE(one_line(r.status())) << r.status();

    v1::Allocation allocation;
    auto* grant = allocation.add_devices();
    grant->set_resource(word());
    for (int i = 0; i < pick(3); ++i) grant->add_instances(static_cast<int>(number()));
    for (int i = 0; i < pick(3); ++i) grant->add_amounts_raw(number());
    auto a = AllocationFromProto(allocation);
    EXPECT_TRUE(one_line(a.status())) << a.status();

    v1::CreatePlacementGroupRequest pg;
    pg.set_strategy(static_cast<v1::PlacementStrategy>(pick(7)));
    pg.set_name(word());
    auto* bundle = pg.mutable_primary()->add_bundles();
    (*bundle->mutable_resources()->mutable_raw())[word()] = number();
    random_constraint(bundle->mutable_label_selector());
    auto p = PlacementGroupSpecFromProto(pg);
    EXPECT_TRUE(one_line(p.status())) << p.status();

    v1::TpuSliceShape shape;
    shape.set_generation(static_cast<v1::TpuGeneration>(pick(10) - 1));
    for (int i = 0; i < pick(5); ++i) shape.add_dims(static_cast<int>(number() % 20));
    auto sliced = SliceShapeFromProto(shape);
    EXPECT_TRUE(one_line(sliced.status())) << sliced.status();
  }
}

TEST(DemandToProtoTest, EachStrategyFillsItsOwnFieldsOfTheLeaseRequest) {
  const ResourceSet demand = Res("CPU=1,GPU=1");
  const LabelSelector zone_a = LabelSelector::Of({{"zone", SelectorOperator::kIn, {"a"}}}).value();
  const LabelSelector zone_b = LabelSelector::Of({{"zone", SelectorOperator::kIn, {"b"}}}).value();

  v1::ResourceRequest plain;
  ASSERT_TRUE(DemandToProto(demand, {zone_a, zone_b}, DefaultScheduling{}, &plain).ok());
  EXPECT_EQ(ResourcesFromProto(plain.resources()).value(), demand);
  EXPECT_EQ(LabelSelectorFromProto(plain.label_selector()).value(), zone_a);
  ASSERT_EQ(plain.fallbacks_size(), 1);
  EXPECT_EQ(LabelSelectorFromProto(plain.fallbacks(0)).value(), zone_b);
  EXPECT_EQ(plain.strategy(), v1::STRATEGY_DEFAULT);
  EXPECT_EQ(plain.affinity_node_id(), "");
  EXPECT_EQ(plain.placement_group(), "");

  v1::ResourceRequest spread;
  ASSERT_TRUE(DemandToProto(demand, {}, SpreadScheduling{}, &spread).ok());
  EXPECT_EQ(spread.strategy(), v1::STRATEGY_SPREAD);

  v1::ResourceRequest soft;
  ASSERT_TRUE(DemandToProto(demand, {}, NodeAffinityScheduling{NodeId("cpu2"), true}, &soft).ok());
  EXPECT_EQ(soft.affinity_node_id(), "cpu2");
  EXPECT_TRUE(soft.affinity_soft());

  v1::ResourceRequest bundle;
  ASSERT_TRUE(
      DemandToProto(demand, {}, PlacementGroupScheduling{PlacementGroupName("g"), 2}, &bundle)
          .ok());
  EXPECT_EQ(bundle.placement_group(), "g");
  EXPECT_EQ(bundle.bundle_index(), 2);
}

TEST(DemandToProtoTest, AnInvalidStrategyIsItsErrorAndTouchesNothing) {
  v1::ResourceRequest request;
  request.set_placement_group("kept");
  const absl::Status bad =
      DemandToProto(Res("CPU=1"), {}, NodeAffinityScheduling{NodeId("not a node")}, &request);
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(std::string(bad.message()).rfind("node affinity \"not a node\": not a node id", 0), 0u);
  EXPECT_EQ(request.placement_group(), "kept");
  EXPECT_FALSE(request.has_resources());
}

}  // namespace
}  // namespace tessera::wire
