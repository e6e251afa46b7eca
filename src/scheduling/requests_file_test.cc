#include "scheduling/requests_file.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <vector>

namespace tessera {
namespace {

const std::set<std::string> kNodes = {"gpu-0", "gpu-1", "cpu-0"};

std::string ErrorOf(std::string_view yaml) {
  auto events = ParseRequestsFile(yaml, "requests.yaml", kNodes);
  if (events.ok()) return "parsed";
  return std::string(events.status().message());
}

std::string Read(const std::string& path) {
  std::ifstream in(std::string(TESSERA_SOURCE_DIR) + "/" + path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(RequestsFileTest, ParsesEveryEventKind) {
  auto events = ParseRequestsFile(R"yaml(events:
  - submit_task:
      name: t1
      resources: {CPU: 2, GPU: 0.5, memory: 4GiB}
      label_selector: "tessera.io/accelerator-type=in(H100,A100)"
      fallbacks: ["pool=cpu", {zone: "!b"}]
      strategy: SPREAD
      node_affinity: {node: gpu-1, soft: true}
      local_node: gpu-0
  - submit_actor: {name: a1, resources: "CPU=1"}
  - submit_task: {name: many, count: 2}
  - finish: t1
  - fail_node: gpu-0
  - drain_node: gpu-1
  - add_nodes:
      {name: late, count: 2, hardware: {host: {sockets: 1, cores_per_socket: 2, memory: 1GiB}}}
  - drain_node: late-1
)yaml",
                                  "requests.yaml", kNodes);
  ASSERT_TRUE(events.ok()) << events.status();
  ASSERT_EQ(events->size(), 9u);
  const SimulatedRequest& t1 = (*events)[0].request;
  EXPECT_EQ((*events)[0].kind, SimulatedEventKind::kSubmit);
  EXPECT_EQ((*events)[0].line, 2);
  EXPECT_EQ(t1.name, "t1");
  EXPECT_FALSE(t1.actor);
  EXPECT_EQ(t1.resources.ToString(), "CPU=2,GPU=0.5,memory=4GiB");
  EXPECT_EQ(t1.label_selector.ToString(), "tessera.io/accelerator-type=in(A100,H100)");
  ASSERT_EQ(t1.fallbacks.size(), 2u);
  EXPECT_EQ(t1.fallbacks[0].ToString(), "pool=cpu");
  EXPECT_EQ(t1.fallbacks[1].ToString(), "zone=!b");
  EXPECT_EQ(t1.strategy, SimulatedStrategy::kSpread);
  ASSERT_TRUE(t1.node_affinity.has_value());
  EXPECT_EQ(t1.node_affinity->node, "gpu-1");
  EXPECT_TRUE(t1.node_affinity->soft);
  EXPECT_EQ(t1.local_node, "gpu-0");
  EXPECT_TRUE((*events)[1].request.actor);
  EXPECT_EQ((*events)[1].request.resources.ToString(), "CPU=1");
  EXPECT_EQ((*events)[2].request.name, "many-0");
  EXPECT_EQ((*events)[3].request.name, "many-1");
  EXPECT_EQ((*events)[4].kind, SimulatedEventKind::kFinish);
  EXPECT_EQ((*events)[4].target, "t1");
  EXPECT_EQ((*events)[5].kind, SimulatedEventKind::kFailNode);
  EXPECT_EQ((*events)[5].target, "gpu-0");
  EXPECT_EQ((*events)[6].kind, SimulatedEventKind::kDrainNode);
  EXPECT_EQ((*events)[7].kind, SimulatedEventKind::kAddNodes);
  ASSERT_EQ((*events)[7].nodes.size(), 2u);
  EXPECT_EQ((*events)[7].nodes[1].id, "late-1");
  EXPECT_EQ((*events)[8].target, "late-1");
}

TEST(RequestsFileTest, ExamplesParse) {
  for (const std::string name : {"mixed", "small"}) {
    SCOPED_TRACE(name);
    std::set<std::string> ids;
    // The examples name nodes of their cluster: give the ids the cluster file would.
    for (const char* id : {"cpu-0", "cpu-1", "cpu-2", "gpu-0", "gpu-1"}) ids.insert(id);
    auto events = ParseRequestsFile(Read("examples/requests/" + name + ".yaml"), name, ids);
    EXPECT_TRUE(events.ok()) << events.status();
  }
}

TEST(RequestsFileTest, EmptyEventList) {
  auto events = ParseRequestsFile("events:", "requests.yaml", kNodes);
  ASSERT_TRUE(events.ok()) << events.status();
  EXPECT_TRUE(events->empty());
}

TEST(RequestsFileTest, Errors) {
  EXPECT_EQ(ErrorOf(""), "requests.yaml: empty requests file: expected a map with key events");
  EXPECT_EQ(ErrorOf("events: [\n  {a: b"),
            "requests.yaml:2:1: invalid YAML: end of map flow not found");
  EXPECT_EQ(
      ErrorOf("event: []"),
      "requests.yaml:1:1: unknown key \"event\" (did you mean events?); expected one of: events");
  EXPECT_EQ(
      ErrorOf("events:\n  - submit_tsk: {name: a}"),
      "requests.yaml:2:5: events[0]: unknown event \"submit_tsk\" (did you mean submit_task?); "
      "expected one of: submit_task, submit_actor, finish, add_nodes, fail_node, drain_node, "
      "create_placement_group, remove_placement_group, reserve_slices, release_slices");
  EXPECT_EQ(ErrorOf("events:\n  - {submit_task: {name: a}, finish: a}"),
            "requests.yaml:2:5: events[0]: an event is a map with one key (submit_task, "
            "submit_actor, finish, add_nodes, fail_node, drain_node, create_placement_group, "
            "remove_placement_group, reserve_slices, release_slices), got a map with 2 keys");
  EXPECT_EQ(ErrorOf("events:\n  - submit_task: {name: a, resorces: {CPU: 1}}"),
            "requests.yaml:2:28: events[0].submit_task: unknown key \"resorces\" (did you mean "
            "resources?); expected one of: name, count, resources, label_selector, fallbacks, "
            "strategy, node_affinity, local_node, placement_group, bundle_index, max_retries");
  EXPECT_EQ(ErrorOf("events:\n  - submit_task: {resources: {CPU: 1}}"),
            "requests.yaml:2:18: events[0].submit_task: missing required key \"name\"");
  EXPECT_EQ(
      ErrorOf("events:\n  - submit_task: {name: a}\n  - submit_task: {name: b}\n"
              "  - submit_task: {name: c}\n  - submit_task:\n      name: d\n"
              "      resources: {CPU: 1, GPU: -1}"),

      "requests.yaml:7:32: events[3].submit_task.resources: resource \"GPU\": \"-1\" is negative");
  EXPECT_EQ(
      ErrorOf("events:\n  - submit_task: {name: a, resources: \"GPU=-1\"}"),
      "requests.yaml:2:39: events[0].submit_task.resources: resource \"GPU\": \"-1\" is negative");
  EXPECT_EQ(ErrorOf("events:\n  - submit_task: {name: a, resources: {GPU: 1.5}}"),
            "requests.yaml:2:39: events[0].submit_task.resources: GPU: 1.5 must be a whole number "
            "of devices or a fraction below 1 (one shared device)");
  EXPECT_EQ(ErrorOf("events:\n  - submit_task: {name: a, resources: {TPU: 3}}"),
            "requests.yaml:2:39: events[0].submit_task.resources: TPU requests must be 1, 2, 4 or "
            "8 chips, got 3");
  EXPECT_EQ(ErrorOf("events:\n  - submit_task: {name: a, resources: [CPU]}"),
            "requests.yaml:2:39: events[0].submit_task.resources: expected a map of resources or a "
            "string such as \"CPU=1,GPU=2\", got a list");
  EXPECT_EQ(ErrorOf("events:\n  - submit_task: {name: a, label_selector: \"gpu=in(a\"}"),
            "requests.yaml:2:44: events[0].submit_task.label_selector: label selector "
            "\"gpu=in(a\": column 7: '(' is never closed");
  EXPECT_EQ(ErrorOf("events:\n  - submit_task: {name: a, fallbacks: [{gpu: \"in(a\"}]}"),
            "requests.yaml:2:40: events[0].submit_task.fallbacks[0]: label selector: key \"gpu\": "
            "\"in(a\": column 3: '(' is never closed");
  EXPECT_EQ(ErrorOf("events:\n  - submit_task: {name: a, strategy: SPRED}"),
            "requests.yaml:2:38: events[0].submit_task.strategy: unknown strategy \"SPRED\" (did "
            "you mean SPREAD?); expected DEFAULT or SPREAD");
  EXPECT_EQ(ErrorOf("events:\n  - submit_task: {name: a, strategy: STRICT_PACK}"),
            "requests.yaml:2:38: events[0].submit_task.strategy: STRICT_PACK is a placement group "
            "strategy; tasks and actors take DEFAULT or SPREAD");
  EXPECT_EQ(ErrorOf("events:\n  - submit_task: {name: a, node_affinity: {node: gpu-9}}"),
            "requests.yaml:2:50: events[0].submit_task.node_affinity.node: no node \"gpu-9\" in "
            "the cluster (node ids are <group>-<k>, or <group>-<slice>-w<worker> for slice hosts)");
  EXPECT_EQ(ErrorOf("events:\n  - submit_task: {name: a, node_affinity: {node: gpu-0, soft: "
                    "maybe}}"),

            "requests.yaml:2:63: events[0].submit_task.node_affinity.soft: expected a boolean "
            "(1/true/yes/on or 0/false/no/off), got \"maybe\"");
  EXPECT_EQ(ErrorOf("events:\n  - submit_task: {name: a, local_node: nope}"),
            "requests.yaml:2:40: events[0].submit_task.local_node: no node \"nope\" in the cluster "
            "(node ids are <group>-<k>, or <group>-<slice>-w<worker> for slice hosts)");
  EXPECT_EQ(ErrorOf("events:\n  - submit_task: {name: a}\n  - submit_actor: {name: a}"),
            "requests.yaml:3:26: events[1].submit_actor.name: a task or actor named \"a\" is "
            "already submitted");
  EXPECT_EQ(ErrorOf("events:\n  - finish: a"),
            "requests.yaml:2:13: events[0].finish: no task or actor named \"a\" is submitted "
            "before this event");
  EXPECT_EQ(ErrorOf("events:\n  - fail_node: gpu-7"),
            "requests.yaml:2:16: events[0].fail_node: no node \"gpu-7\" in the cluster (node ids "
            "are <group>-<k>, or <group>-<slice>-w<worker> for slice hosts)");
  EXPECT_EQ(ErrorOf("events:\n  - add_nodes: {name: gpu, count: 1, hardware: {host: {sockets: 1, "
                    "cores_per_socket: 2, memory: 1GiB}}}"),

            "requests.yaml:2:16: events[0].add_nodes: node id \"gpu-0\" is already in the cluster");
}

TEST(RequestsFileTest, TasksInPlacementGroupBundles) {
  const std::string group =
      "events:\n"
      "  - create_placement_group: {name: pg, bundles: [{resources: {GPU: 1}}], fallbacks: "
      "[{bundles: [{resources: {CPU: 1}}, {resources: {CPU: 1}}]}]}\n";
  auto events = ParseRequestsFile(group +
                                      "  - submit_task: {name: a, placement_group: pg, "
                                      "bundle_index: 1, resources: {CPU: 1}}\n"
                                      "  - submit_actor: {name: b, placement_group: pg}\n",
                                  "requests.yaml", kNodes);
  ASSERT_TRUE(events.ok()) << events.status();
  ASSERT_EQ(events->size(), 3u);
  EXPECT_EQ((*events)[1].request.bundle_target, (BundleTarget{"pg", 1}));
  EXPECT_EQ((*events)[2].request.bundle_target, (BundleTarget{"pg", -1}));
  // The index is checked against the largest option (2 bundles here).
  EXPECT_EQ(ErrorOf(group + "  - submit_task: {name: a, placement_group: pg, bundle_index: 2}"),
            "requests.yaml:3:63: events[1].submit_task.bundle_index: placement group \"pg\" has 2 "
            "bundles at most; bundle_index is -1 (any) or 0..1");
  EXPECT_EQ(ErrorOf(group + "  - submit_task: {name: a, placement_group: pg, bundle_index: -2}"),
            "requests.yaml:3:63: events[1].submit_task.bundle_index: placement group \"pg\" has 2 "
            "bundles at most; bundle_index is -1 (any) or 0..1");
  EXPECT_EQ(ErrorOf("events:\n  - submit_task: {name: a, placement_group: pg}"),
            "requests.yaml:2:45: events[0].submit_task.placement_group: no placement group named "
            "\"pg\" is created before this event");
  EXPECT_EQ(ErrorOf("events:\n  - submit_task: {name: a, bundle_index: 0}"),
            "requests.yaml:2:42: events[0].submit_task.bundle_index: bundle_index needs "
            "placement_group");
  EXPECT_EQ(
      ErrorOf(group + "  - submit_task: {name: a, placement_group: pg, label_selector: \"a=b\"}"),
      "requests.yaml:3:65: events[1].submit_task.label_selector: label_selector does not "
      "apply to a request in a placement group: its bundle's node is fixed");
  EXPECT_EQ(ErrorOf(group + "  - remove_placement_group: pg\n"
                            "  - submit_task: {name: a, placement_group: pg}"),
            "requests.yaml:4:45: events[2].submit_task.placement_group: no placement group named "
            "\"pg\" is created before this event");
}

TEST(RequestsFileTest, SliceEvents) {
  auto events = ParseRequestsFile(
      "events:\n"
      "  - reserve_slices:\n"
      "      name: s\n"
      "      alternatives:\n"
      "        - {accelerator: v6e, topology: 8x8}\n"
      "        - {accelerator: TPU-V6E, topology: 4x4, count: 2, bundle: chip, per_host: {CPU: "
      "2}}\n"
      "        - {count: 2, per_host: {GPU: 8}}\n"
      "  - release_slices: s\n",
      "requests.yaml", {});
  ASSERT_TRUE(events.ok()) << events.status();
  ASSERT_EQ(events->size(), 2u);
  const DomainGroupRequest& r = (*events)[0].slices;
  EXPECT_EQ((*events)[0].kind, SimulatedEventKind::kReserveSlices);
  EXPECT_EQ(r.name, "s");
  ASSERT_EQ(r.alternatives.size(), 3u);
  // The shape is parsed here, once: the scheduler takes it as a type.
  ASSERT_TRUE(r.alternatives[0].shape.has_value());
  EXPECT_EQ(r.alternatives[0].shape->generation, TpuGeneration::kV6e);
  EXPECT_EQ(r.alternatives[0].shape->topology.dims, (std::vector<int>{8, 8}));
  EXPECT_EQ(r.alternatives[0].count, 1);
  ASSERT_TRUE(r.alternatives[1].shape.has_value());
  EXPECT_EQ(r.alternatives[1].shape->pod_type, "v6e-16");
  EXPECT_EQ(r.alternatives[1].count, 2);
  EXPECT_EQ(r.alternatives[1].granularity, BundleGranularity::kPerChip);
  EXPECT_EQ(r.alternatives[1].per_host, *ParseResourceSet("CPU=2"));
  EXPECT_FALSE(r.alternatives[2].shape.has_value());
  EXPECT_EQ((*events)[1].kind, SimulatedEventKind::kReleaseSlices);
  EXPECT_EQ((*events)[1].target, "s");
}

TEST(RequestsFileTest, SliceEventErrorsNameTheProblem) {
  EXPECT_EQ(ErrorOf("events:\n  - release_slices: s"),
            "requests.yaml:2:21: events[0].release_slices: no slice reservation named \"s\" is "
            "made before this event");
  EXPECT_NE(ErrorOf("events:\n  - reserve_slices: {name: s, alternatives: [{accelerator: v6e, "
                    "topology: 3x5}]}")
                .find("requests.yaml:2:"),
            std::string::npos);
  EXPECT_NE(ErrorOf("events:\n  - reserve_slices: {name: s, alternatives: [{accelerator: v6e}]}")
                .find("needs both accelerator and topology"),
            std::string::npos);
  EXPECT_NE(ErrorOf("events:\n  - reserve_slices: {name: s, alternatives: [{count: 2}]}")
                .find("needs per_host resources"),
            std::string::npos);
  EXPECT_NE(ErrorOf("events:\n  - reserve_slices: {name: s, alternatives: [{accelerator: v6e, "
                    "topology: 4x4, bundle: rack}]}")
                .find("bundle is host or chip, got \"rack\""),
            std::string::npos);
  EXPECT_NE(ErrorOf("events:\n  - reserve_slice: {name: s}").find("did you mean"),
            std::string::npos);
}

TEST(RequestsFileTest, PlacementGroupsAndSliceReservationsShareOneNameSpace) {
  // A cluster refuses the second of a placement group and a slice group with one name, so a
  // requests file does too, before anything runs.
  EXPECT_EQ(ErrorOf("events:\n  - reserve_slices: {name: s, alternatives: [{accelerator: v6e, "
                    "topology: 4x4}]}\n  - create_placement_group: {name: s, bundles: "
                    "[{resources: {CPU: 1}}]}"),
            "requests.yaml:3:36: events[1].create_placement_group.name: a slice reservation "
            "named \"s\" exists; a placement group needs another name");
  EXPECT_NE(ErrorOf("events:\n  - create_placement_group: {name: g, bundles: [{resources: {CPU: "
                    "1}}]}\n  - reserve_slices: {name: g, alternatives: [{accelerator: v6e, "
                    "topology: 4x4}]}")
                .find("a placement group named \"g\" exists"),
            std::string::npos);
}

TEST(RequestsFileTest, PlacementGroupEvents) {
  auto events = ParseRequestsFile(
      "events:\n"
      "  - create_placement_group:\n"
      "      name: pg\n"
      "      strategy: STRICT_SPREAD\n"
      "      bundles:\n"
      "        - {resources: {GPU: 2}, label_selector: zone=a}\n"
      "        - {resources: \"CPU=1,GPU=2\"}\n"
      "      fallbacks:\n"
      "        - bundles: [{resources: {GPU: 1}}]\n"
      "  - remove_placement_group: pg\n",
      "requests.yaml", {});
  ASSERT_TRUE(events.ok()) << events.status();
  ASSERT_EQ(events->size(), 2u);
  const PlacementGroupSpec& g = (*events)[0].group;
  EXPECT_EQ((*events)[0].kind, SimulatedEventKind::kCreatePlacementGroup);
  EXPECT_EQ(g.name, "pg");
  EXPECT_EQ(g.strategy, PlacementStrategy::kStrictSpread);
  ASSERT_EQ(g.primary.bundles.size(), 2u);
  EXPECT_EQ(g.primary.bundles[1].ToString(), "CPU=1,GPU=2");
  ASSERT_EQ(g.primary.selectors.size(), 2u);
  EXPECT_EQ(g.primary.selectors[0].ToString(), "zone=a");
  EXPECT_TRUE(g.primary.selectors[1].empty());
  ASSERT_EQ(g.fallbacks.size(), 1u);
  EXPECT_TRUE(g.fallbacks[0].selectors.empty());
  EXPECT_EQ((*events)[1].kind, SimulatedEventKind::kRemovePlacementGroup);
  EXPECT_EQ((*events)[1].target, "pg");

  EXPECT_EQ(
      ErrorOf("events:\n  - create_placement_group: {name: pg, bundles: [{resources: {CPU: 0}}]}"),
      "requests.yaml:2:29: events[0].create_placement_group: bundle 0: empty or all-zero "
      "bundle (a bundle reserves at least one resource)");
  EXPECT_EQ(
      ErrorOf("events:\n  - create_placement_group: {name: pg, strategy: TIGHT, bundles: []}"),
      "requests.yaml:2:50: events[0].create_placement_group.strategy: unknown placement "
      "strategy \"TIGHT\"; expected PACK, SPREAD, STRICT_PACK or STRICT_SPREAD");
  EXPECT_EQ(ErrorOf("events:\n  - remove_placement_group: pg"),
            "requests.yaml:2:29: events[0].remove_placement_group: no placement group named \"pg\" "
            "is created before this event");
}

TEST(RequestsFileTest, ConfinedGroupsPinnedSlicesAndRetryBudgets) {
  auto events = ParseRequestsFile(
      "events:\n"
      "  - create_placement_group: {name: pg, same_label: rack, bundles: [{resources: {CPU: 1}}]}\n"
      "  - reserve_slices:\n"
      "      name: s\n"
      "      alternatives:\n"
      "        - {accelerator: v6e, topology: 4x4, slice: v6e-1, label_selector: zone=b}\n"
      "        - {count: 2, per_host: {GPU: 8}, domain: nvl-a}\n"
      "  - submit_task: {name: t}\n"
      "  - submit_task: {name: t3, max_retries: -1}\n"
      "  - submit_actor: {name: a}\n"
      "  - submit_actor: {name: a2, max_restarts: 5}\n",
      "requests.yaml", {});
  ASSERT_TRUE(events.ok()) << events.status();
  ASSERT_EQ(events->size(), 6u);
  EXPECT_EQ((*events)[0].group.same_label, "rack");
  const DomainGroupRequest& slices = (*events)[1].slices;
  EXPECT_EQ(slices.alternatives[0].domain, "v6e-1");
  EXPECT_EQ(slices.alternatives[0].selector.ToString(), "zone=b");
  EXPECT_EQ(slices.alternatives[1].domain, "nvl-a");
  EXPECT_EQ((*events)[2].request.max_retries, 3);
  EXPECT_EQ((*events)[3].request.max_retries, -1);
  EXPECT_EQ((*events)[4].request.max_retries, 0);
  EXPECT_EQ((*events)[5].request.max_retries, 5);

  EXPECT_THAT(ErrorOf("events:\n  - create_placement_group: {name: pg, same_label: \"a b\", "
                      "bundles: [{resources: {CPU: 1}}]}"),
              ::testing::HasSubstr("requests.yaml:2:52: events[0].create_placement_group."
                                   "same_label: "));
  EXPECT_THAT(ErrorOf("events:\n  - reserve_slices: {name: s, alternatives: [{count: 2, "
                      "per_host: {GPU: 1}, slice: x}]}"),
              ::testing::HasSubstr("slice pins a TPU alternative; use domain for NVLink"));
  EXPECT_THAT(ErrorOf("events:\n  - reserve_slices: {name: s, alternatives: [{accelerator: v6e, "
                      "topology: 4x4, domain: x}]}"),
              ::testing::HasSubstr("domain pins an NVLink alternative; use slice for TPU"));
  EXPECT_THAT(ErrorOf("events:\n  - submit_task: {name: t, max_retries: 1001}"),
              ::testing::HasSubstr("max_retries"));
  EXPECT_THAT(ErrorOf("events:\n  - submit_task: {name: t, max_restarts: 1}"),
              ::testing::HasSubstr("unknown key \"max_restarts\""));
}

}  // namespace
}  // namespace tessera
