// `tessera schedule` as users run it: the examples' placements, explanations and utilization,
// byte-identical output run to run, and one-line errors for malformed files.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "run_command.h"

namespace tessera::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

const std::string kExamples = std::string(TESSERA_SOURCE_DIR) + "/examples/";

CommandResult Schedule(const std::string& cluster, const std::string& requests, bool json = false,
                       std::vector<std::string> flags = {}) {
  std::vector<std::string> argv = {TesseraBinary(), "schedule",   "--cluster",
                                   cluster,         "--requests", requests};
  if (json) argv.push_back("--json");
  argv.insert(argv.end(), flags.begin(), flags.end());
  return RunCommand(argv);
}

std::string WriteTemp(const std::string& name, const std::string& text) {
  const std::string path = std::filesystem::temp_directory_path() / name;
  std::ofstream(path) << text;
  return path;
}

void ExpectOneLineError(const CommandResult& r, const std::string& needle) {
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_THAT(r.err, StartsWith("tessera: error: "));
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr(needle));
  EXPECT_EQ(r.out, "");
}

TEST(ScheduleCliTest, MixedExampleText) {
  auto r = Schedule(kExamples + "clusters/mixed.yaml", kExamples + "requests/mixed.yaml");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_THAT(r.out, HasSubstr("[1] submit_task train-a: placed on h100-"));
  EXPECT_THAT(r.out, HasSubstr("GPU 0,1,2,3\n"));
  EXPECT_THAT(r.out, HasSubstr("[2] submit_task infer-a: placed on h100-"));
  EXPECT_THAT(r.out, HasSubstr(" (0.5)\n"));
  EXPECT_THAT(r.out, HasSubstr("[4] submit_task tpu-job: placed on v6e-"));
  EXPECT_THAT(r.out, HasSubstr("[5] submit_task b200-job: INFEASIBLE: no node has "
                               "tessera.io/accelerator-type in (B200)\n"));
  EXPECT_THAT(r.out, HasSubstr("[9] submit_task wait-8: PENDING: "));
  // Lost with cpu-1, the soft-affinity task is resubmitted within its retry budget.
  EXPECT_THAT(r.out, HasSubstr("[13] fail_node cpu-1: dead; released (work lost) pinned; "
                               "resubmitted pinned (retry 1 of 3)\n"
                               "    resubmitted pinned: placed on cpu-2\n"));
  EXPECT_THAT(r.out, HasSubstr("[14] drain_node cpu-2: draining; takes no new work; still "
                               "running near, pinned, ps\n"));
  EXPECT_THAT(r.out, HasSubstr("[9] submit_task wait-8: PENDING: 4 nodes could fit GPU=8; all "
                               "are busy (available GPU: 7, 4, 0, 0; held by task big-0, task "
                               "big-1, task infer-a, task train-a)\n"));
  EXPECT_THAT(r.out, HasSubstr("[15] add_nodes 1 node: b200-0\n    waiting b200-job: placed on "
                               "b200-0, GPU 0,1,2,3,4,5,6,7\n"));
  EXPECT_THAT(r.out, HasSubstr("utilization:\n  CPU "));
  EXPECT_THAT(r.out, HasSubstr("  GPU 32.5/40 (81.2%)\n"));
  EXPECT_THAT(r.out, HasSubstr("  TPU 4/48 (8.3%)\n"));
}

TEST(ScheduleCliTest, SmallExampleJson) {
  auto r = Schedule(kExamples + "clusters/small.yaml", kExamples + "requests/small.yaml", true);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  const auto& events = j["events"];
  ASSERT_EQ(events.size(), 9u);
  EXPECT_EQ(events[0]["status"], "PLACED");
  EXPECT_EQ(events[0]["placement"]["devices"]["GPU"].size(), 2u);
  // Fractions best-fit onto one device before opening another.
  for (int i = 1; i <= 3; ++i) {
    EXPECT_EQ(events[i]["placement"]["devices"]["GPU"][0]["amount"], "0.25");
    EXPECT_EQ(events[i]["placement"]["node"], events[1]["placement"]["node"]);
    EXPECT_EQ(events[i]["placement"]["devices"]["GPU"][0]["instance"],
              events[1]["placement"]["devices"]["GPU"][0]["instance"]);
  }
  EXPECT_EQ(events[4]["status"], "PENDING");
  EXPECT_EQ(events[8]["status"], "INFEASIBLE");
  EXPECT_EQ(events[8]["explanation"], "no node has 64 CPU (largest: 16)");
  EXPECT_EQ(j["utilization"]["GPU"]["used"], "2.75");
  EXPECT_EQ(j["utilization"]["GPU"]["total"], "8");
  EXPECT_EQ(j["utilization"]["CPU"]["percent"], "20.0");
}

TEST(ScheduleCliTest, OutputIsIdenticalRunToRun) {
  for (bool json : {false, true}) {
    auto a = Schedule(kExamples + "clusters/mixed.yaml", kExamples + "requests/mixed.yaml", json);
    auto b = Schedule(kExamples + "clusters/mixed.yaml", kExamples + "requests/mixed.yaml", json);
    ASSERT_EQ(a.exit_code, 0) << a.err;
    EXPECT_EQ(a.out, b.out);
  }
}

TEST(ScheduleCliTest, PlacementGroupExample) {
  const std::string cluster = kExamples + "clusters/small.yaml";
  const std::string requests = kExamples + "requests/placement_groups.yaml";
  auto r = Schedule(cluster, requests);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("[1] create_placement_group train: placed bundle 0 on gpu-0 "
                               "(GPU 0,1); bundle 1 on gpu-0 (GPU 2,3)\n"));
  EXPECT_THAT(r.out,
              HasSubstr("[3] create_placement_group wide: INFEASIBLE: STRICT_SPREAD: bundles "
                        "0, 1, 2 (GPU=1) need 3 nodes; only 2 can hold any of them (gpu-0, "
                        "gpu-1)\n"));
  EXPECT_THAT(r.out, HasSubstr("[4] create_placement_group flexible: placed bundle 0 on gpu-1 "
                               "(GPU 0,1) (fallback option 1)\n"));
  EXPECT_THAT(r.out, HasSubstr("    placement group train: RESCHEDULING bundles 0,1: 1 node could "
                               "hold the 2 bundles together (STRICT_PACK needs GPU=4); none has "
                               "room now\n"));
  EXPECT_THAT(r.out, HasSubstr("    placement group ps: RESCHEDULING bundles 2: STRICT_SPREAD: "
                               "bundle 2 (CPU=1) needs 1 node; only 0 can hold it besides the 2 "
                               "nodes holding the group's other bundles\n"));
  EXPECT_THAT(r.out, HasSubstr("[6] remove_placement_group flexible: removed; released GPU=2 on "
                               "gpu-1\n    placement group train: re-placed bundle 0 on gpu-1 "
                               "(GPU 0,1); bundle 1 on gpu-1 (GPU 2,3)\n"));
  EXPECT_THAT(r.out,
              HasSubstr("[7] remove_placement_group wide: withdrawn before it was placed\n"));
  EXPECT_EQ(Schedule(cluster, requests).out, r.out);  // identical run to run
  auto j = Schedule(cluster, requests, /*json=*/true);
  ASSERT_EQ(j.exit_code, 0) << j.err;
  const nlohmann::json doc = nlohmann::json::parse(j.out);
  EXPECT_EQ(doc["events"][0]["bundles"][1]["node"], "gpu-0");
  EXPECT_EQ(doc["events"][3]["option"], 1);
  EXPECT_EQ(doc["events"][4]["placement_groups"][0]["state"], "RESCHEDULING");
}

TEST(ScheduleCliTest, RequestsInPlacementGroupBundles) {
  const std::string cluster = kExamples + "clusters/small.yaml";
  const std::string requests = kExamples + "requests/bundle_tasks.yaml";
  auto r = Schedule(cluster, requests);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("[2] submit_actor rank0: placed in bundle 0 on gpu-0, GPU 0,1\n"));
  EXPECT_THAT(r.out, HasSubstr("[3] submit_task loader: placed in bundle 1 on gpu-1, GPU 0\n"));
  // Two devices are left in the group, one per bundle: a request never spans bundles.
  EXPECT_THAT(r.out, HasSubstr("[4] submit_task pair: PENDING: not enough left now for GPU=2: "
                               "bundle 0 of train has GPU 0 of 2 left (held by actor rank0); "
                               "bundle 1 of train has GPU 1 of 2 left (held by task loader)\n"));
  EXPECT_THAT(r.out,
              HasSubstr("[5] submit_task shard: placed in bundle 1 on gpu-1, GPU 1 (0.5)\n"));
  EXPECT_THAT(r.out, HasSubstr("[6] submit_task too-big: INFEASIBLE: no bundle of train can ever "
                               "hold GPU=4 (a request never spans bundles)\n"));
  EXPECT_THAT(r.out, HasSubstr("[7] finish loader: finished; released CPU=1,GPU=1 to bundle 1 of "
                               "train on gpu-1\n"));
  // The bundle on the failed node is re-placed empty; its work is lost, the other bundle's is not.
  EXPECT_THAT(r.out, HasSubstr("[8] fail_node gpu-0: dead; released (work lost) rank0; touched "
                               "placement group train\n"
                               "    placement group train: re-placed bundle 0 on gpu-1 (GPU 2,3)\n"
                               "    waiting pair: placed in bundle 0 on gpu-1, GPU 2,3\n"));
  EXPECT_THAT(r.out, HasSubstr("; stopped pair, shard\n"));
  auto j = Schedule(cluster, requests, /*json=*/true);
  ASSERT_EQ(j.exit_code, 0) << j.err;
  const nlohmann::json doc = nlohmann::json::parse(j.out);
  EXPECT_EQ(doc["events"][1]["placement"]["bundle"], 0);
  EXPECT_EQ(doc["events"][7]["placed_in_bundles"][0]["name"], "pair");
  EXPECT_EQ(doc["events"][8]["stopped"], nlohmann::json::array({"pair", "shard"}));
  EXPECT_EQ(Schedule(cluster, requests).out, r.out);  // identical run to run
}

TEST(ScheduleCliTest, CpuWorkAvoidsAcceleratorNodesUnlessTurnedOff) {
  const std::string requests = WriteTemp("tessera_cpu_work.yaml", R"(events:
  - submit_task: {name: prep, count: 4, resources: {CPU: 2}}
  - submit_task: {name: more, resources: {CPU: 2}}
  - submit_task: {name: fan, count: 2, resources: {CPU: 1}, strategy: SPREAD}
)");
  const std::string cluster = kExamples + "clusters/small.yaml";  // gpu-0, gpu-1, cpu-0 (8 CPUs)
  auto r = Schedule(cluster, requests);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (int i = 0; i < 4; ++i) {
    EXPECT_THAT(r.out,
                HasSubstr("] submit_task prep-" + std::to_string(i) + ": placed on cpu-0\n"));
  }
  // cpu-0 is full: only now does CPU work go to the GPU nodes, SPREAD taking them in turn.
  EXPECT_THAT(r.out, HasSubstr("[5] submit_task more: placed on gpu-"));
  EXPECT_THAT(r.out, HasSubstr("[6] submit_task fan-0: placed on gpu-0\n"
                               "[7] submit_task fan-1: placed on gpu-1\n"));
  auto off = Schedule(cluster, requests, false, {"--cpu-work-on-accelerator-nodes"});
  ASSERT_EQ(off.exit_code, 0) << off.err;
  EXPECT_THAT(off.out, HasSubstr("[3] submit_task prep-2: placed on gpu-"));
  std::filesystem::remove(requests);
}

TEST(ScheduleCliTest, NodeFailureListsTheWorkLostAndEveryReservationItTouched) {
  const std::string requests = WriteTemp("tessera_fail_touched.yaml", R"(events:
  - reserve_slices: {name: train, alternatives: [{accelerator: v6e, topology: 4x4}]}
  - create_placement_group:
      name: side
      strategy: PACK
      bundles: [{resources: {CPU: 2}, label_selector: "tessera.io/tpu-slice-name=v6e-0"}]
  - submit_task: {name: probe, resources: {CPU: 1}, node_affinity: {node: v6e-0-w0}}
  - fail_node: v6e-0-w0
  - fail_node: v6e-1-w0
)");
  const std::string cluster = kExamples + "clusters/mixed.yaml";
  const CommandResult r = Schedule(cluster, requests);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("[4] fail_node v6e-0-w0: dead; released (work lost) probe; "
                               "touched placement group side, slice group train; resubmitted "
                               "probe (retry 1 of 3)\n"
                               "    placement group side: re-placed bundle 0 on v6e-0-w1\n"
                               "    slice group train: BROKEN: host v6e-0-w0 died (fail_node)\n"
                               "    resubmitted probe: INFEASIBLE: affinity node v6e-0-w0 is "
                               "dead\n"));
  EXPECT_THAT(r.out, HasSubstr("[5] fail_node v6e-1-w0: dead; nothing was running\n"));
  const CommandResult j = Schedule(cluster, requests, /*json=*/true);
  ASSERT_EQ(j.exit_code, 0) << j.err;
  const nlohmann::json doc = nlohmann::json::parse(j.out);
  EXPECT_EQ(doc["events"][3]["lost"], nlohmann::json({"probe"}));
  EXPECT_EQ(doc["events"][3]["touched"],
            nlohmann::json({"placement group side", "slice group train"}));
  EXPECT_EQ(doc["events"][4]["touched"], nlohmann::json::array());
  // As on a cluster, the slice group that lost a host is broken (its other hosts stay held).
  EXPECT_EQ(doc["events"][3]["broken"],
            nlohmann::json::array(
                {{{"name", "train"}, {"explanation", "host v6e-0-w0 died (fail_node)"}}}));
  EXPECT_EQ(doc["utilization"]["TPU"]["used"], "12");
  std::filesystem::remove(requests);
}

TEST(ScheduleCliTest, LostWorkIsResubmittedWithinItsRetryBudget) {
  const std::string requests = WriteTemp("tessera_retries.yaml", R"(events:
  - submit_task: {name: default, resources: {CPU: 8}, node_affinity: {node: cpu-0, soft: true}}
  - submit_task: {name: once, resources: {CPU: 8}, max_retries: 1,
                  node_affinity: {node: cpu-0, soft: true}}
  - submit_task: {name: never, resources: {CPU: 8}, max_retries: 0,
                  node_affinity: {node: cpu-0, soft: true}}
  - submit_actor: {name: actor, resources: {CPU: 8}, node_affinity: {node: cpu-0, soft: true}}
  - submit_actor: {name: restarts, resources: {CPU: 8}, max_restarts: -1,
                   node_affinity: {node: cpu-0, soft: true}}
  - fail_node: cpu-0
)");
  const std::string cluster = WriteTemp("tessera_retries_cluster.yaml", R"(node_groups:
  - name: cpu
    count: 3
    hardware: {host: {sockets: 1, cores_per_socket: 20, threads_per_core: 2, memory: 64GiB}}
)");
  const CommandResult r = Schedule(cluster, requests);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("[6] fail_node cpu-0: dead; released (work lost) actor, default, "
                               "never, once, restarts; resubmitted default (retry 1 of 3), once "
                               "(retry 1 of 1), restarts (retry 1)\n"));
  EXPECT_THAT(r.out, HasSubstr("    resubmitted default: placed on cpu-"));
  const CommandResult j = Schedule(cluster, requests, /*json=*/true);
  ASSERT_EQ(j.exit_code, 0) << j.err;
  const nlohmann::json doc = nlohmann::json::parse(j.out);
  const nlohmann::json& failure = doc["events"][5];
  ASSERT_EQ(failure["resubmitted"].size(), 3u);
  EXPECT_EQ(failure["resubmitted"][1],
            nlohmann::json({{"name", "once"}, {"retry", 1}, {"max_retries", 1}}));
  EXPECT_EQ(failure["resubmitted"][2]["max_retries"], -1);
  // Actors name their budget max_restarts, tasks max_retries; anything else is refused.
  ExpectOneLineError(Schedule(cluster, WriteTemp("tessera_retries_bad.yaml",
                                                 "events:\n  - submit_actor: {name: a, "
                                                 "max_retries: 2}\n")),
                     "max_retries");
  ExpectOneLineError(Schedule(cluster, WriteTemp("tessera_retries_range.yaml",
                                                 "events:\n  - submit_task: {name: a, "
                                                 "max_retries: -2}\n")),
                     "max_retries");
  std::filesystem::remove(requests);
  std::filesystem::remove(cluster);
}

TEST(ScheduleCliTest, GroupsConfinedToOneLabelValueAndPinnedSlices) {
  const std::string requests = WriteTemp("tessera_confined.yaml", R"(events:
  - create_placement_group:
      name: one-zone
      strategy: SPREAD
      same_label: tessera.io/availability-zone
      bundles: [{resources: {GPU: 8}}, {resources: {TPU: 4}}]
  - create_placement_group:
      name: nowhere
      same_label: rack
      bundles: [{resources: {CPU: 1}}]
  - reserve_slices:
      name: second
      alternatives: [{accelerator: v6e, topology: 4x4, slice: v6e-1}]
  - reserve_slices:
      name: half
      alternatives: [{accelerator: v6e, topology: 2x4, sub_slice: true}]
  - reserve_slices:
      name: zoned
      alternatives:
        - accelerator: v6e
          topology: 4x4
          label_selector: "tessera.io/availability-zone=us-east5-a"
)");
  const std::string cluster = kExamples + "clusters/mixed.yaml";
  const CommandResult r = Schedule(cluster, requests);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // H100 boxes are in us-east5-a, the v6e hosts in us-east5-b: no zone has both.
  EXPECT_THAT(r.out, HasSubstr("[1] create_placement_group one-zone: INFEASIBLE: no value of "
                               "tessera.io/availability-zone has nodes that could ever hold "
                               "GPU=8,TPU=4 together"));
  EXPECT_THAT(r.out, HasSubstr("[2] create_placement_group nowhere: INFEASIBLE: no alive node "
                               "has label rack\n"));
  EXPECT_THAT(r.out, HasSubstr("[3] reserve_slices second: placed v6e-1: v6e-1-w0"));
  // v6e-1 is held whole: the 2x4 block comes out of v6e-0, its workers 0 and 2.
  EXPECT_THAT(r.out, HasSubstr("[4] reserve_slices half: placed v6e-0/0: v6e-0-w0 (TPU 0,1,2,3), "
                               "v6e-0-w2 (TPU 0,1,2,3)\n"));
  EXPECT_THAT(r.out, HasSubstr("[5] reserve_slices zoned: INFEASIBLE: no v6e 4x4 slice with "
                               "every host matching tessera.io/availability-zone=us-east5-a "
                               "exists"));
  std::filesystem::remove(requests);
}

TEST(ScheduleCliTest, SliceExample) {
  const std::string cluster = kExamples + "clusters/mixed.yaml";
  const std::string requests = kExamples + "requests/slices.yaml";
  const CommandResult r = Schedule(cluster, requests);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("[1] reserve_slices train: placed v6e-0: v6e-0-w0 (TPU 0,1,2,3), "
                               "v6e-0-w1 (TPU 0,1,2,3)"));
  EXPECT_THAT(r.out, HasSubstr("v6e-1-w3 (TPU 0,1,2,3) (alternative 2)\n"));
  EXPECT_THAT(r.out, HasSubstr("[2] reserve_slices infer: PENDING: 2 v6e 4x4 slices exist; all "
                               "are busy (held by slice group train)\n"));
  EXPECT_THAT(r.out, HasSubstr("[4] reserve_slices huge: INFEASIBLE: no v6e 8x16 slice exists "
                               "(slices: 2 v5e 2x4, 2 v6e 4x4)\n"));
  EXPECT_THAT(r.out, HasSubstr("    waiting slice reservation infer: placed v6e-0: v6e-0-w0"));
  EXPECT_THAT(r.out, HasSubstr("[7] reserve_slices multi: INFEASIBLE: 2 v6e 4x4 slices exist; 1 is "
                               "busy (held by slice group infer); 1 is not intact (v6e-1: "
                               "worker 2 is dead)"));
  EXPECT_THAT(r.out, HasSubstr("[9] release_slices huge: withdrawn before it was placed\n"));
  EXPECT_THAT(r.out, HasSubstr("  TPU 16/44 (36.4%)\n"));
  EXPECT_THAT(r.out, HasSubstr("[11] reserve_slices nvl: placed nvl-a: gb-0 (GPU 0,1,2,3), gb-1 "
                               "(GPU 0,1,2,3)\n"));
  EXPECT_THAT(r.out, HasSubstr("[12] reserve_slices nvl-more: PENDING: 1 NVLink domain could "
                               "hold 2 hosts of GPU=4; none has 2 free now (held by slice group "
                               "nvl)\n"));
  const CommandResult j = Schedule(cluster, requests, /*json=*/true);
  ASSERT_EQ(j.exit_code, 0) << j.err;
  const nlohmann::json doc = nlohmann::json::parse(j.out);
  EXPECT_EQ(doc["events"][0]["alternative"], 1);
  EXPECT_EQ(doc["events"][0]["bundles"].size(), 8u);
  EXPECT_EQ(doc["events"][0]["bundles"][5]["worker"], 1);
  EXPECT_EQ(doc["events"][0]["bundles"][5]["domain"], "v6e-1");
  EXPECT_EQ(doc["events"][2]["bundles"].size(), 8u);  // one per chip
  EXPECT_EQ(Schedule(cluster, requests).out, r.out);  // identical run to run
}

TEST(ScheduleCliTest, MalformedFilesAreOneLineErrors) {
  const std::string cluster = kExamples + "clusters/small.yaml";
  ExpectOneLineError(Schedule(cluster, WriteTemp("sched_bad.yaml",
                                                 "events:\n  - submit_task: {name: a, "
                                                 "resources: {GPU: -1}}\n")),
                     "sched_bad.yaml:2:45: events[0].submit_task.resources: resource \"GPU\": "
                     "\"-1\" is negative");
  ExpectOneLineError(
      Schedule(cluster, WriteTemp("sched_pg.yaml", "events:\n  - release_slices: x\n")),
      "sched_pg.yaml:2:21: events[0].release_slices: no slice reservation named "
      "\"x\" is made before this event");
  ExpectOneLineError(Schedule(WriteTemp("sched_cluster.yaml", "node_groups: [{name: a}]\n"),
                              kExamples + "requests/small.yaml"),
                     "sched_cluster.yaml:1:15: node_groups[0]: missing required key \"count\"");
  ExpectOneLineError(Schedule(cluster, "/nonexistent/requests.yaml"), "cannot read");
  // A reference to a node the cluster lacks is caught before anything runs.
  ExpectOneLineError(
      Schedule(cluster, WriteTemp("sched_node.yaml", "events:\n  - fail_node: gpu-9\n")),
      "no node \"gpu-9\"");
}

}  // namespace
}  // namespace tessera::testing
