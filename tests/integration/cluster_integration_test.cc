// The cluster runtime end to end: a real head and real node agents (separate `tessera`
// processes) on loopback, driven through the `tessera` command and direct gRPC calls.
// Timing: nodes heartbeat often and are declared dead after a short timeout; every wait polls
// for a state with a generous deadline and never sleeps a fixed time as a test of anything.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "integration/cluster_harness.h"
#include "integration/network_namespaces.h"
#include "rpc/state_names.h"

namespace tessera::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using Json = nlohmann::json;

// "CPU=1" -> raw map entry helpers.
int64_t Raw(const tessera::v1::Resources& r, const std::string& name) {
  const auto it = r.raw().find(name);
  return it == r.raw().end() ? 0 : it->second;
}

Json ParseJson(const CliResult& r) {
  return Json::parse(r.out, nullptr, /*allow_exceptions=*/false);
}

// The node each bundle of group `name` sits on ("" when unplaced).
std::vector<std::string> BundleNodes(const tessera::v1::PlacementGroupInfo& g) {
  std::vector<std::string> nodes;
  for (const auto& b : g.bundles()) nodes.push_back(b.node_id());
  return nodes;
}

absl::StatusOr<tessera::v1::PlacementGroupInfo> FindGroup(TestCluster& cluster,
                                                          const std::string& name) {
  auto groups = cluster.client().ListPlacementGroups();
  if (!groups.ok()) return groups.status();
  for (const auto& g : groups->groups()) {
    if (g.name() == name) return g;
  }
  return absl::NotFoundError(absl::StrCat("no group ", name));
}

absl::StatusOr<tessera::v1::NodeInfo> FindNode(TestCluster& cluster, const std::string& id) {
  auto nodes = cluster.client().ListNodes();
  if (!nodes.ok()) return nodes.status();
  for (const auto& n : nodes->nodes()) {
    if (n.node().node_id() == id) return n;
  }
  return absl::NotFoundError(absl::StrCat("no node ", id));
}

// Every resource of node `id` is free again (the head's view, mirrored from heartbeats).
absl::Status NodeIdle(TestCluster& cluster, const std::string& id) {
  auto node = FindNode(cluster, id);
  if (!node.ok()) return node.status();
  for (const auto& [name, total] : node->node().resources().raw()) {
    if (Raw(node->available(), name) != total) {
      return absl::UnavailableError(absl::StrCat(id, ": ", name, " not all free yet"));
    }
  }
  return absl::OkStatus();
}

ClusterOptions ThreeCpuNodes() {
  ClusterOptions options;
  for (const char* id : {"n1", "n2", "n3"})
    options.nodes.push_back({.id = id, .hardware_yaml = CpuHost(4)});
  return options;
}

// A file the test creates to let a waiting worker finish.
std::string ReleaseFile(const TestCluster& cluster, const std::string& name) {
  return absl::StrCat(cluster.state_dir(), "/test-logs/", name);
}

std::string WaitForFileCommand(const std::string& file) {
  return absl::StrCat("while [ ! -e ", file, " ]; do sleep 0.02; done");
}

void Touch(const std::string& path) { std::ofstream(path) << "go\n"; }

TEST(ClusterIntegrationTest, RunStreamsOutputAndReturnsTheExitCode) {
  auto cluster = TestCluster::Start(ThreeCpuNodes());
  ASSERT_OK(cluster.status());
  TestCluster& c = **cluster;

  const CliResult r = c.Cli({"run", "--", "sh", "-c", "echo out-line; echo err-line >&2; exit 3"});
  EXPECT_EQ(r.exit_code, 3) << Describe(r);
  EXPECT_EQ(r.out, "out-line\n") << Describe(r);
  EXPECT_THAT(r.err, HasSubstr("err-line")) << Describe(r);

  const CliResult ok = c.Cli({"run", "--", "true"});
  EXPECT_EQ(ok.exit_code, 0) << Describe(ok);

  // Both runs are jobs of the head, with how they ended.
  const CliResult jobs = c.Cli({"list", "jobs", "--json"});
  ASSERT_EQ(jobs.exit_code, 0) << Describe(jobs);
  const Json j = ParseJson(jobs);
  ASSERT_TRUE(j.contains("jobs")) << jobs.out;
  std::multiset<std::string> states;
  for (const Json& job : j["jobs"]) states.insert(job["state"].get<std::string>());
  EXPECT_EQ(states, (std::multiset<std::string>{"FAILED", "SUCCEEDED"})) << jobs.out;
}

TEST(ClusterIntegrationTest, LeaseSpillsBackToTheNodeThatFitsAndIsolatesDevices) {
  ClusterOptions options;
  // n1 sorts first, so it is the agent `tessera run` asks; only n2 has GPUs.
  options.nodes = {{.id = "n1", .hardware_yaml = CpuHost(4)},
                   {.id = "n2", .hardware_yaml = GpuHost(8, 4)},
                   {.id = "n3", .hardware_yaml = CpuHost(4)}};
  auto cluster = TestCluster::Start(options);
  ASSERT_OK(cluster.status());
  TestCluster& c = **cluster;

  // Two workers of 2 GPUs each run at the same time: each sees exactly its own two devices.
  const std::string release = ReleaseFile(c, "gpu-release");
  const std::string script = absl::StrCat("echo node=$TESSERA_NODE_ID gpus=$CUDA_VISIBLE_DEVICES; ",
                                          WaitForFileCommand(release));
  const int first = c.CliAsync({"run", "--resources", "CPU=1,GPU=2", "--", "sh", "-c", script});
  const int second = c.CliAsync({"run", "--resources", "CPU=1,GPU=2", "--", "sh", "-c", script});
  // Both are running once the head's view of n2 has no GPU left.
  ASSERT_OK(c.WaitUntil([&]() -> absl::Status {
    auto node = FindNode(c, "n2");
    if (!node.ok()) return node.status();
    if (Raw(node->available(), "GPU") != 0) return absl::UnavailableError("GPUs still free");
    return absl::OkStatus();
  }));
  Touch(release);
  const CliResult a = c.Wait(first);
  const CliResult b = c.Wait(second);
  ASSERT_EQ(a.exit_code, 0) << Describe(a);
  ASSERT_EQ(b.exit_code, 0) << Describe(b);
  EXPECT_THAT(a.out, HasSubstr("node=n2 ")) << Describe(a);
  EXPECT_THAT(b.out, HasSubstr("node=n2 ")) << Describe(b);
  auto gpus = [](const std::string& out) {
    const std::string ids = out.substr(out.find("gpus=") + 5);
    std::vector<std::string> list =
        absl::StrSplit(std::string(absl::StripTrailingAsciiWhitespace(ids)), ',');
    return std::set<std::string>(list.begin(), list.end());
  };
  const std::set<std::string> ga = gpus(a.out), gb = gpus(b.out);
  EXPECT_EQ(ga.size(), 2u) << a.out;
  EXPECT_EQ(gb.size(), 2u) << b.out;
  std::set<std::string> all = ga;
  all.insert(gb.begin(), gb.end());
  EXPECT_EQ(all, (std::set<std::string>{"0", "1", "2", "3"})) << a.out << b.out;

  // A request nothing can ever fit is refused with the head's explanation, not queued.
  const CliResult never = c.Cli({"run", "--resources", "GPU=8", "--", "true"});
  EXPECT_EQ(never.exit_code, 1) << Describe(never);
  EXPECT_THAT(never.err, HasSubstr("tessera: error: ")) << Describe(never);
  ASSERT_OK(c.WaitUntil([&] { return NodeIdle(c, "n2"); }));
}

TEST(ClusterIntegrationTest, PlacementGroupsOfEveryStrategy) {
  auto cluster = TestCluster::Start(ThreeCpuNodes());
  ASSERT_OK(cluster.status());
  TestCluster& c = **cluster;

  // Per-bundle selectors pin each bundle; an impossible primary shape falls back in order.
  const CliResult pinned = c.Cli(
      {"pg", "create", "pinned", "--strategy", "SPREAD", "--bundles", "CPU=100;CPU=100",
       "--fallback", "CPU=1;CPU=1|tessera.io/node-id=n3;tessera.io/node-id=n2", "--wait", "30s"});
  ASSERT_EQ(pinned.exit_code, 0) << Describe(pinned);
  EXPECT_THAT(pinned.out, HasSubstr("fallback option 1")) << pinned.out;
  auto pinned_group = FindGroup(c, "pinned");
  ASSERT_OK(pinned_group.status());
  EXPECT_THAT(BundleNodes(*pinned_group), ::testing::ElementsAre("n3", "n2"));
  const CliResult selected = c.Cli({"pg", "create", "selected", "--bundles", "CPU=1",
                                    "--bundle-selector", "tessera.io/node-id=n1", "--wait", "30s"});
  ASSERT_EQ(selected.exit_code, 0) << Describe(selected);
  auto selected_group = FindGroup(c, "selected");
  ASSERT_OK(selected_group.status());
  EXPECT_THAT(BundleNodes(*selected_group), ::testing::ElementsAre("n1"));
  for (const char* name : {"pinned", "selected"}) {
    const CliResult r = c.Cli({"pg", "remove", name});
    ASSERT_EQ(r.exit_code, 0) << Describe(r);
  }
  for (const char* id : {"n1", "n2", "n3"}) ASSERT_OK(c.WaitUntil([&] { return NodeIdle(c, id); }));

  struct Case {
    std::string name, strategy;
    int bundles;
  };
  for (const Case& k : std::vector<Case>{{"pack", "PACK", 2},
                                         {"spread", "SPREAD", 3},
                                         {"strict-pack", "STRICT_PACK", 2},
                                         {"strict-spread", "STRICT_SPREAD", 3}}) {
    std::vector<std::string> shapes(k.bundles, "CPU=1");
    const CliResult r = c.Cli({"pg", "create", k.name, "--strategy", k.strategy, "--bundles",
                               absl::StrJoin(shapes, ";"), "--wait", "30s", "--json"});
    ASSERT_EQ(r.exit_code, 0) << k.strategy << ": " << Describe(r);
    auto g = FindGroup(c, k.name);
    ASSERT_OK(g.status());
    EXPECT_EQ(g->state(), v1::PLACEMENT_GROUP_STATE_CREATED) << k.strategy;
    const std::vector<std::string> nodes = BundleNodes(*g);
    const std::set<std::string> distinct(nodes.begin(), nodes.end());
    if (k.strategy == "STRICT_PACK" || k.strategy == "PACK") {
      EXPECT_EQ(distinct.size(), 1u) << k.strategy;
    } else {
      EXPECT_EQ(distinct.size(), 3u) << k.strategy;
    }
  }
  // Four bundles on three distinct nodes can never fit: infeasible, with the reason, holding
  // nothing.
  const CliResult infeasible = c.Cli({"pg", "create", "too-wide", "--strategy", "STRICT_SPREAD",
                                      "--bundles", "CPU=1;CPU=1;CPU=1;CPU=1", "--json"});
  ASSERT_EQ(infeasible.exit_code, 0) << Describe(infeasible);
  auto wide = FindGroup(c, "too-wide");
  ASSERT_OK(wide.status());
  EXPECT_EQ(wide->state(), v1::PLACEMENT_GROUP_STATE_INFEASIBLE);
  EXPECT_FALSE(wide->explanation().empty());
  for (const std::string& n : BundleNodes(*wide)) EXPECT_EQ(n, "");
  // A group confined to one value of a label no node carries can never be placed.
  const CliResult confined =
      c.Cli({"pg", "create", "one-rack", "--bundles", "CPU=1", "--same-label", "rack", "--json"});
  ASSERT_EQ(confined.exit_code, 0) << Describe(confined);
  auto rack = FindGroup(c, "one-rack");
  ASSERT_OK(rack.status());
  EXPECT_EQ(rack->state(), v1::PLACEMENT_GROUP_STATE_INFEASIBLE);
  EXPECT_EQ(rack->explanation(), "no alive node has label rack");

  // A command placed in bundle 1 of the strict-spread group runs on that bundle's node.
  auto spread = FindGroup(c, "strict-spread");
  ASSERT_OK(spread.status());
  const CliResult in_bundle = c.Cli({"run", "--placement-group", "strict-spread", "--bundle", "1",
                                     "--", "sh", "-c", "echo $TESSERA_NODE_ID"});
  ASSERT_EQ(in_bundle.exit_code, 0) << Describe(in_bundle);
  EXPECT_EQ(in_bundle.out, spread->bundles(1).node_id() + "\n");

  // Removing every group returns every node to idle.
  for (const char* name :
       {"pack", "spread", "strict-pack", "strict-spread", "too-wide", "one-rack"}) {
    const CliResult r = c.Cli({"pg", "remove", name});
    EXPECT_EQ(r.exit_code, 0) << Describe(r);
  }
  const CliResult list = c.Cli({"pg", "list", "--json"});
  ASSERT_EQ(list.exit_code, 0) << Describe(list);
  const Json groups = ParseJson(list);
  for (const Json& g : groups["groups"]) {
    EXPECT_EQ(g["state"], "REMOVED") << list.out;
  }
  for (const char* id : {"n1", "n2", "n3"}) ASSERT_OK(c.WaitUntil([&] { return NodeIdle(c, id); }));
}

// Two v6e 2x4 slices of two hosts (4 chips) each.
std::string TwoSliceClusterFile() {
  return "node_groups:\n"
         "  - name: v6e\n"
         "    slices: {count: 2, accelerator: TPU-V6E, topology: 2x4, chips_per_host: 4}\n"
         "    hardware:\n"
         "      host: {sockets: 1, cores_per_socket: 8, memory: 64GiB}\n";
}

TEST(ClusterIntegrationTest, SlicesAreReservedWholeAndNeverShareAHost) {
  auto empty = TestCluster::Empty();
  ASSERT_OK(empty.status());
  const std::string file = absl::StrCat((*empty)->state_dir(), "/test-logs/slices.yaml");
  std::ofstream(file) << TwoSliceClusterFile();
  ClusterOptions options;
  for (const char* id : {"v6e-0-w0", "v6e-0-w1", "v6e-1-w0", "v6e-1-w1"}) {
    options.nodes.push_back({.id = id, .cluster_file = file});
  }
  auto cluster = TestCluster::Start(options);
  ASSERT_OK(cluster.status());
  TestCluster& c = **cluster;

  // No 4x4 slice exists: the fallback shape is taken.
  const CliResult first = c.Cli({"slice", "reserve", "a", "--accelerator", "TPU-V6E", "--topology",
                                 "4x4", "--fallback", "TPU-V6E:2x4", "--wait", "30s", "--json"});
  ASSERT_EQ(first.exit_code, 0) << Describe(first);
  const CliResult second = c.Cli({"slice", "reserve", "b", "--accelerator", "TPU-V6E", "--topology",
                                  "2x4", "--wait", "30s", "--json"});
  ASSERT_EQ(second.exit_code, 0) << Describe(second);
  const Json a = ParseJson(first), b = ParseJson(second);
  ASSERT_EQ(a["state"], "RESERVED") << first.out;
  EXPECT_EQ(a["alternative"], 1) << first.out;
  ASSERT_EQ(b["state"], "RESERVED") << second.out;
  std::set<std::string> hosts_a, hosts_b;
  for (const Json& h : a["hosts"]) hosts_a.insert(h["node_id"].get<std::string>());
  for (const Json& h : b["hosts"]) hosts_b.insert(h["node_id"].get<std::string>());
  // Whole slices: both hosts of one slice each, and no host in both.
  EXPECT_EQ(hosts_a.size(), 2u) << first.out;
  EXPECT_EQ(hosts_b.size(), 2u) << second.out;
  for (const std::string& h : hosts_a) EXPECT_FALSE(hosts_b.contains(h)) << h;
  EXPECT_EQ(a["domains"].size(), 1u);
  EXPECT_EQ(b["domains"].size(), 1u);
  EXPECT_NE(a["domains"][0], b["domains"][0]);

  // One command per host of reservation a, each in its host's bundle: it runs on that host with
  // the slice identity and the host's chips.
  for (const Json& h : a["hosts"]) {
    const int worker = h.value("worker", 0);
    const CliResult r =
        c.Cli({"run", "--placement-group", "a", "--bundle", absl::StrCat(worker), "--resources",
               "TPU=4", "--", "sh", "-c", "echo $TESSERA_NODE_ID $TPU_NAME $TPU_WORKER_ID"});
    ASSERT_EQ(r.exit_code, 0) << Describe(r);
    EXPECT_EQ(r.out, absl::StrCat(h["node_id"].get<std::string>(), " ",
                                  h["domain"].get<std::string>(), " ", worker, "\n"));
  }

  // With every chip reserved, a plain TPU request is pending (it fits once a slice is freed),
  // not infeasible; it gives up only because of --wait.
  const CliResult busy = c.Cli({"run", "--resources", "TPU=2", "--wait", "1s", "--", "true"});
  EXPECT_EQ(busy.exit_code, 1) << Describe(busy);
  EXPECT_THAT(busy.err, ::testing::HasSubstr("cannot run the command (pending)")) << Describe(busy);
  // A demand the targeted bundle can never hold is infeasible at once, even without --wait.
  const CliResult never = c.Cli(
      {"run", "--placement-group", "a", "--bundle", "0", "--resources", "CPU=1", "--", "true"});
  EXPECT_EQ(never.exit_code, 1) << Describe(never);
  EXPECT_THAT(never.err, ::testing::HasSubstr("(infeasible)")) << Describe(never);
  EXPECT_THAT(never.err, ::testing::HasSubstr("can never hold CPU=1")) << Describe(never);
  const CliResult any =
      c.Cli({"run", "--placement-group", "a", "--resources", "TPU=8", "--", "true"});
  EXPECT_EQ(any.exit_code, 1) << Describe(any);
  EXPECT_THAT(any.err, ::testing::HasSubstr("no bundle of a can ever hold TPU=8")) << Describe(any);

  // A third request waits, and says which reservations hold the slices.
  const CliResult third =
      c.Cli({"slice", "reserve", "c", "--accelerator", "TPU-V6E", "--topology", "2x4", "--json"});
  ASSERT_EQ(third.exit_code, 0) << Describe(third);
  EXPECT_EQ(ParseJson(third)["state"], "PENDING") << third.out;
  // Releasing one hands its slice to the waiting reservation.
  const CliResult release = c.Cli({"slice", "release", "a"});
  ASSERT_EQ(release.exit_code, 0) << Describe(release);
  ASSERT_OK(c.WaitUntil([&]() -> absl::Status {
    auto slices = c.client().ListSlices();
    if (!slices.ok()) return slices.status();
    for (const auto& g : slices->groups()) {
      if (g.name() == "c" && g.state() == v1::SLICE_GROUP_STATE_RESERVED) return absl::OkStatus();
    }
    return absl::UnavailableError("c not reserved yet");
  }));
  // Pinned to the slice b holds, a reservation waits and names its holder.
  const std::string held = b["domains"][0].get<std::string>();
  const CliResult pinned = c.Cli({"slice", "reserve", "d", "--accelerator", "TPU-V6E", "--topology",
                                  "2x4", "--domain", held, "--json"});
  ASSERT_EQ(pinned.exit_code, 0) << Describe(pinned);
  const Json d = ParseJson(pinned);
  EXPECT_EQ(d["state"], "PENDING") << pinned.out;
  EXPECT_THAT(d["explanation"].get<std::string>(),
              ::testing::HasSubstr(absl::StrCat("1 v6e 2x4 slice named ", held,
                                                " exists; all are busy (held by slice group b)")))
      << pinned.out;
}

TEST(ClusterIntegrationTest, HostsOfOneNvLinkDomainAreReservedTogether) {
  auto nvl_host = [](const std::string& domain) {
    return absl::StrCat(
        "host: {sockets: 1, cores_per_socket: 8, memory: 64GiB}\n"
        "accelerators:\n"
        "  - {family: nvidia, type: GB200, count: 4, memory: 186GiB, interconnect: "
        "nvswitch, fabric_domain: ",
        domain, "}\n");
  };
  ClusterOptions options;
  options.nodes = {{.id = "a1", .hardware_yaml = nvl_host("rack-a")},
                   {.id = "b1", .hardware_yaml = nvl_host("rack-b")},
                   {.id = "b2", .hardware_yaml = nvl_host("rack-b")}};
  auto cluster = TestCluster::Start(options);
  ASSERT_OK(cluster.status());
  TestCluster& c = **cluster;
  // Two hosts must share one domain: only rack-b has two.
  const CliResult r = c.Cli({"slice", "reserve", "nvl", "--nvlink-hosts", "2", "--per-host",
                             "GPU=4", "--wait", "30s", "--json"});
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  const Json group = ParseJson(r);
  ASSERT_EQ(group["state"], "RESERVED") << r.out;
  EXPECT_EQ(group["domains"], Json::array({"rack-b"})) << r.out;
  std::set<std::string> hosts;
  for (const Json& h : group["hosts"]) hosts.insert(h["node_id"].get<std::string>());
  EXPECT_EQ(hosts, (std::set<std::string>{"b1", "b2"})) << r.out;
  // One command per host inside the reservation sees that host's four GPUs.
  for (int bundle : {0, 1}) {
    const CliResult run =
        c.Cli({"run", "--placement-group", "nvl", "--bundle", absl::StrCat(bundle), "--resources",
               "GPU=4", "--", "sh", "-c", "echo $CUDA_VISIBLE_DEVICES"});
    ASSERT_EQ(run.exit_code, 0) << Describe(run);
    EXPECT_EQ(run.out, "0,1,2,3\n") << Describe(run);
  }
  // What each host must hold is required.
  const CliResult bare = c.Cli({"slice", "reserve", "x", "--nvlink-hosts", "2"});
  EXPECT_EQ(bare.exit_code, 1) << Describe(bare);
  EXPECT_THAT(bare.err, HasSubstr("--nvlink-hosts needs --per-host")) << Describe(bare);
}

TEST(ClusterIntegrationTest, KilledWorkerReleasesItsLeaseAndTheReasonIsReported) {
  ClusterOptions options;
  options.nodes = {{.id = "n1", .hardware_yaml = GpuHost(4, 2)}};
  auto cluster = TestCluster::Start(options);
  ASSERT_OK(cluster.status());
  TestCluster& c = **cluster;

  const std::string never = ReleaseFile(c, "never-created");
  const int run = c.CliAsync(
      {"run", "--resources", "CPU=1,GPU=1", "--", "sh", "-c", WaitForFileCommand(never)});
  int worker_pid = 0;
  ASSERT_OK(c.WaitUntil([&]() -> absl::Status {
    std::vector<std::string> unreachable;
    auto workers = c.client().ListWorkersEverywhere(unreachable);
    if (!workers.ok()) return workers.status();
    for (const auto& node : *workers) {
      for (const auto& w : node.workers()) {
        if (w.state() == tessera::v1::WORKER_STATE_RUNNING && w.pid() > 0) worker_pid = w.pid();
      }
    }
    return worker_pid > 0 ? absl::OkStatus() : absl::UnavailableError("no worker yet");
  }));
  ASSERT_EQ(kill(worker_pid, SIGKILL), 0);
  const CliResult r = c.Wait(run);
  EXPECT_EQ(r.exit_code, 128 + SIGKILL) << Describe(r);
  EXPECT_THAT(r.err, HasSubstr("signal 9")) << Describe(r);
  // The GPU and CPU are free again, in the agent and in the head's view.
  ASSERT_OK(c.WaitUntil([&] { return NodeIdle(c, "n1"); }));
  const CliResult jobs = c.Cli({"list", "jobs", "--json"});
  ASSERT_EQ(jobs.exit_code, 0) << Describe(jobs);
  const Json j = ParseJson(jobs);
  ASSERT_EQ(j["jobs"].size(), 1u) << jobs.out;
  EXPECT_EQ(j["jobs"][0]["state"], "FAILED");
  EXPECT_THAT(j["jobs"][0]["exit_reason"].get<std::string>(), HasSubstr("signal 9"));
}

// The id of the one running worker of the cluster, once there is one.
absl::StatusOr<tessera::v1::WorkerInfo> RunningWorker(TestCluster& c) {
  tessera::v1::WorkerInfo found;
  absl::Status s = c.WaitUntil([&]() -> absl::Status {
    std::vector<std::string> unreachable;
    auto workers = c.client().ListWorkersEverywhere(unreachable);
    if (!workers.ok()) return workers.status();
    for (const auto& node : *workers) {
      for (const auto& w : node.workers()) {
        if (w.state() == tessera::v1::WORKER_STATE_RUNNING && w.pid() > 0) {
          found = w;
          return absl::OkStatus();
        }
      }
    }
    return absl::UnavailableError("no running worker yet");
  });
  if (!s.ok()) return s;
  return found;
}

TEST(ClusterIntegrationTest, LogsReadAndFollowAWorkersOutput) {
  ClusterOptions options;
  options.nodes = {{.id = "n1", .hardware_yaml = CpuHost(2)}};
  auto cluster = TestCluster::Start(options);
  ASSERT_OK(cluster.status());
  TestCluster& c = **cluster;

  const std::string release = ReleaseFile(c, "logs-release");
  const int run = c.CliAsync(
      {"run", "--", "sh", "-c",
       absl::StrCat("echo first; echo oops >&2; ", WaitForFileCommand(release), "; echo last")});
  auto worker = RunningWorker(c);
  ASSERT_OK(worker.status());
  // The worker has written its first lines once its stderr log holds "oops".
  ASSERT_OK(c.WaitUntil([&]() -> absl::Status {
    const CliResult err = c.Cli({"logs", worker->worker_id(), "--stderr"});
    return err.out == "oops\n" ? absl::OkStatus() : absl::UnavailableError(err.out + err.err);
  }));
  const CliResult out = c.Cli({"logs", worker->worker_id()});
  EXPECT_EQ(out.exit_code, 0) << Describe(out);
  EXPECT_EQ(out.out, "first\n");
  // --follow prints what comes later and ends when the worker exits.
  const int follow = c.CliAsync({"logs", worker->worker_id(), "--follow"});
  Touch(release);
  const CliResult followed = c.Wait(follow);
  EXPECT_EQ(followed.exit_code, 0) << Describe(followed);
  EXPECT_EQ(followed.out, "first\nlast\n");
  EXPECT_EQ(c.Wait(run).exit_code, 0);

  const CliResult unknown = c.Cli({"logs", "w-nope"});
  EXPECT_EQ(unknown.exit_code, 1) << Describe(unknown);
  EXPECT_THAT(unknown.err, HasSubstr("no worker \"w-nope\""));
}

TEST(ClusterIntegrationTest, InterruptingRunStopsTheWorker) {
  ClusterOptions options;
  options.nodes = {{.id = "n1", .hardware_yaml = CpuHost(2)}};
  auto cluster = TestCluster::Start(options);
  ASSERT_OK(cluster.status());
  TestCluster& c = **cluster;

  const int run =
      c.CliAsync({"run", "--", "sh", "-c", WaitForFileCommand(ReleaseFile(c, "never"))});
  auto worker = RunningWorker(c);
  ASSERT_OK(worker.status());
  ASSERT_EQ(kill(run, SIGINT), 0);  // Ctrl-C in the terminal of `tessera run`
  const CliResult r = c.Wait(run);
  EXPECT_EQ(r.exit_code, 128 + SIGINT) << Describe(r);
  EXPECT_THAT(r.err, HasSubstr("SIGINT")) << Describe(r);
  ASSERT_OK(c.WaitUntil([&] { return NodeIdle(c, "n1"); }));
}

TEST(ClusterIntegrationTest, KilledNodeAgentIsDeclaredDeadAndOnlyItsBundlesMove) {
  auto cluster = TestCluster::Start(ThreeCpuNodes());
  ASSERT_OK(cluster.status());
  TestCluster& c = **cluster;

  // Two bundles on two distinct nodes; the third node is free to take the lost one.
  const CliResult created = c.Cli({"pg", "create", "g", "--strategy", "STRICT_SPREAD", "--bundles",
                                   "CPU=1;CPU=1", "--wait", "30s"});
  ASSERT_EQ(created.exit_code, 0) << Describe(created);
  auto before = FindGroup(c, "g");
  ASSERT_OK(before.status());
  const std::string victim = before->bundles(0).node_id();
  const std::string keeper = before->bundles(1).node_id();
  ASSERT_NE(victim, keeper);
  const std::string keeper_allocation = before->bundles(1).allocation().SerializeAsString();

  ASSERT_OK(c.KillNode(victim, SIGKILL));
  ASSERT_OK(c.WaitNodes({victim}, v1::NODE_STATE_DEAD));
  ASSERT_OK(c.WaitUntil([&]() -> absl::Status {
    auto g = FindGroup(c, "g");
    if (!g.ok()) return g.status();
    if (g->state() != v1::PLACEMENT_GROUP_STATE_CREATED || g->bundles(0).node_id().empty() ||
        g->bundles(0).node_id() == victim) {
      return absl::UnavailableError(absl::StrCat(
          "bundle 0 not re-placed yet: ", std::string(rpc::PlacementGroupStateName(g->state()))));
    }
    return absl::OkStatus();
  }));
  auto after = FindGroup(c, "g");
  ASSERT_OK(after.status());
  // The lost bundle moved to the third node; the other one did not move at all.
  EXPECT_NE(after->bundles(0).node_id(), keeper);
  EXPECT_EQ(after->bundles(1).node_id(), keeper);
  EXPECT_EQ(after->bundles(1).allocation().SerializeAsString(), keeper_allocation);
  // The other nodes stay alive.
  auto nodes = c.client().ListNodes();
  ASSERT_OK(nodes.status());
  for (const auto& n : nodes->nodes()) {
    if (n.node().node_id() != victim) {
      EXPECT_EQ(n.state(), v1::NODE_STATE_ALIVE) << n.node().node_id();
    }
  }
  const CliResult status = c.Cli({"status"});
  ASSERT_EQ(status.exit_code, 0) << Describe(status);
  EXPECT_THAT(status.out, HasSubstr(victim));
}

TEST(ClusterIntegrationTest, ASecondAgentWithALiveNodeIdIsRefusedAndExitsLeavingTheFirstAlone) {
  ClusterOptions options;
  options.nodes = {{.id = "n1", .hardware_yaml = CpuHost(4)}};
  auto cluster = TestCluster::Start(options);
  ASSERT_OK(cluster.status());
  TestCluster& c = **cluster;
  const std::string address = c.NodeAddress("n1");
  ASSERT_FALSE(address.empty());
  // A worker of the first agent, running until told to finish.
  const std::string release = ReleaseFile(c, "duplicate-release");
  const int run =
      c.CliAsync({"run", "--resources", "CPU=3", "--", "sh", "-c", WaitForFileCommand(release)});
  ASSERT_OK(c.WaitUntil([&]() -> absl::Status {
    auto node = FindNode(c, "n1");
    if (!node.ok()) return node.status();
    return node->workers() == 1 ? absl::OkStatus() : absl::UnavailableError("not running yet");
  }));

  // Another agent started with the same node id (no object store: the first one's socket is in
  // the same state folder) exits by itself with one line naming the node and the live agent.
  const CliResult second =
      c.Cli({"start", "--block", "--address", c.head_address(), "--node-id", "n1", "--hardware",
             absl::StrCat(c.state_dir(), "/test-logs/n1.yaml"), "--object-store-memory", "0B"});
  EXPECT_NE(second.exit_code, 0) << Describe(second);
  EXPECT_THAT(second.err,
              HasSubstr(absl::StrCat("node n1 is already held by a live agent at ", address)))
      << Describe(second);

  // The first agent keeps its node, its address file and its worker.
  auto node = FindNode(c, "n1");
  ASSERT_OK(node.status());
  EXPECT_EQ(node->state(), v1::NODE_STATE_ALIVE);
  EXPECT_EQ(node->node().address(), address);
  EXPECT_EQ(c.NodeAddress("n1"), address);
  Touch(release);
  const CliResult finished = c.Wait(run);
  EXPECT_EQ(finished.exit_code, 0) << Describe(finished);
  const CliResult status = c.Cli({"status"});
  ASSERT_EQ(status.exit_code, 0) << Describe(status);
  EXPECT_THAT(status.out, HasSubstr("a second agent for node n1")) << Describe(status);
}

TEST(ClusterIntegrationTest, HeadRestartWithMemoryStoreReportsWhatWasLost) {
  ClusterOptions options;
  options.nodes = {{.id = "n1", .hardware_yaml = CpuHost(4)},
                   {.id = "n2", .hardware_yaml = CpuHost(4)}};
  auto cluster = TestCluster::Start(options);
  ASSERT_OK(cluster.status());
  TestCluster& c = **cluster;

  const CliResult created = c.Cli({"pg", "create", "lost", "--strategy", "SPREAD", "--bundles",
                                   "CPU=1;CPU=1", "--wait", "30s"});
  ASSERT_EQ(created.exit_code, 0) << Describe(created);

  ASSERT_OK(c.KillHead());
  ASSERT_OK(c.StartHead());  // same port, same token, empty memory
  ASSERT_OK(c.WaitNodes({"n1", "n2"}, v1::NODE_STATE_ALIVE));
  // The agents released the bundles of the group the new head does not know, and the head says
  // so instead of forgetting silently.
  ASSERT_OK(c.WaitUntil([&]() -> absl::Status {
    auto status = c.client().GetClusterStatus();
    if (!status.ok()) return status.status();
    for (const std::string& e : status->events()) {
      if (e.find("lost") != std::string::npos) return absl::OkStatus();
    }
    return absl::UnavailableError("no event about the lost group yet");
  }));
  ASSERT_OK(c.WaitUntil([&] { return NodeIdle(c, "n1"); }));
  ASSERT_OK(c.WaitUntil([&] { return NodeIdle(c, "n2"); }));
  auto groups = c.client().ListPlacementGroups();
  ASSERT_OK(groups.status());
  EXPECT_EQ(groups->groups_size(), 0);
  const CliResult status = c.Cli({"status"});
  ASSERT_EQ(status.exit_code, 0) << Describe(status);
  EXPECT_THAT(status.out, HasSubstr("Events:"));
}

TEST(ClusterIntegrationTest, WrongTokenIsRejected) {
  ClusterOptions options;
  options.nodes = {{.id = "n1", .hardware_yaml = CpuHost(2)}};
  auto cluster = TestCluster::Start(options);
  ASSERT_OK(cluster.status());
  TestCluster& c = **cluster;

  const std::string wrong = absl::StrCat(c.state_dir(), "/test-logs/wrong-token");
  std::ofstream(wrong) << std::string(64, 'a') << "\n";
  std::filesystem::permissions(
      wrong, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  client::ClusterClientOptions client_options;
  client_options.state_dir = c.state_dir();
  client_options.token_file = wrong;
  auto client = client::ClusterClient::Connect(client_options);
  ASSERT_OK(client.status());
  auto nodes = (*client)->ListNodes();
  EXPECT_EQ(nodes.status().code(), absl::StatusCode::kUnauthenticated) << nodes.status();
  tessera::v1::ListWorkersResponse workers;
  const absl::Status agent_call =
      (*client)->Call("agent", client::Retry::kNever, [&](grpc::ClientContext* ctx) {
        return (*client)->agent(c.NodeAddress("n1")).ListWorkers(ctx, {}, &workers);
      });
  EXPECT_EQ(agent_call.code(), absl::StatusCode::kUnauthenticated) << agent_call;

  const CliResult r = c.Cli({"list", "nodes", "--token-file", wrong});
  EXPECT_EQ(r.exit_code, 1) << Describe(r);
  EXPECT_THAT(r.err, HasSubstr("tessera: error: ")) << Describe(r);
}

TEST(ClusterIntegrationTest, MalformedRequestsAreInvalidArgumentAndChangeNothing) {
  ClusterOptions options;
  options.nodes = {{.id = "n1", .hardware_yaml = CpuHost(2)}};
  auto cluster = TestCluster::Start(options);
  ASSERT_OK(cluster.status());
  TestCluster& c = **cluster;
  client::ClusterClient& client = c.client();

  auto expect_invalid = [&](const absl::Status& s, const std::string& what) {
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << what << ": " << s;
    EXPECT_EQ(std::string(s.message()).find('\n'), std::string::npos) << what;
  };
  {
    tessera::v1::CreatePlacementGroupRequest request;
    request.set_request_id("bad-1");
    request.set_name("bad");
    request.set_strategy(static_cast<tessera::v1::PlacementStrategy>(42));
    auto* bundle = request.mutable_primary()->add_bundles();
    (*bundle->mutable_resources()->mutable_raw())["CPU"] = 10000;
    tessera::v1::PlacementGroupInfo info;
    expect_invalid(client.Call("head", client::Retry::kNever,
                               [&](grpc::ClientContext* ctx) {
                                 return client.head_reservations().CreatePlacementGroup(
                                     ctx, request, &info);
                               }),
                   "unknown strategy");
    request.set_strategy(tessera::v1::PLACEMENT_STRATEGY_PACK);
    (*bundle->mutable_resources()->mutable_raw())["CPU"] = -10000;
    request.set_request_id("bad-2");
    expect_invalid(client.Call("head", client::Retry::kNever,
                               [&](grpc::ClientContext* ctx) {
                                 return client.head_reservations().CreatePlacementGroup(
                                     ctx, request, &info);
                               }),
                   "negative amount");
  }
  {
    tessera::v1::ReserveSlicesRequest request;
    request.set_request_id("bad-3");
    request.set_name("bad-slice");
    auto* alt = request.add_alternatives();
    alt->mutable_shape()->set_generation(tessera::v1::TPU_GENERATION_V6E);
    for (int i = 0; i < 4; ++i) alt->mutable_shape()->add_dims(3);  // 3x3x3x3
    alt->set_num_slices(1);
    tessera::v1::SliceGroupInfo info;
    expect_invalid(client.Call("head", client::Retry::kNever,
                               [&](grpc::ClientContext* ctx) {
                                 return client.head_reservations().ReserveSlices(ctx, request,
                                                                                 &info);
                               }),
                   "bad topology");
  }
  {
    tessera::v1::LeaseRequest request;
    request.set_request_id("bad-4");
    (*request.mutable_request()->mutable_resources()->mutable_raw())["CPU"] = 10000;
    tessera::v1::LeaseReply reply;  // no argv: nothing to run
    expect_invalid(
        client.Call("agent", client::Retry::kNever,
                    [&](grpc::ClientContext* ctx) {
                      return client.agent(c.NodeAddress("n1")).RequestLease(ctx, request, &reply);
                    }),
        "empty argv");
  }
  // Nothing was created or taken.
  auto groups = client.ListPlacementGroups();
  ASSERT_OK(groups.status());
  EXPECT_EQ(groups->groups_size(), 0);
  auto slices = client.ListSlices();
  ASSERT_OK(slices.status());
  EXPECT_EQ(slices->groups_size(), 0);
  ASSERT_OK(NodeIdle(c, "n1"));
  std::vector<std::string> unreachable;
  auto workers = client.ListWorkersEverywhere(unreachable);
  ASSERT_OK(workers.status());
  for (const auto& node : *workers) EXPECT_EQ(node.workers_size(), 0);

  // The command line checks its own input before any call, with one line.
  const CliResult bad_bundles =
      c.Cli({"pg", "create", "x", "--strategy", "PACK", "--bundles", "CPU=-1"});
  EXPECT_EQ(bad_bundles.exit_code, 1) << Describe(bad_bundles);
  EXPECT_THAT(bad_bundles.err, HasSubstr("tessera: error: --bundles: bundle 0"))
      << Describe(bad_bundles);
  const CliResult bad_topology =
      c.Cli({"slice", "reserve", "x", "--accelerator", "TPU-V6E", "--topology", "3x3"});
  EXPECT_EQ(bad_topology.exit_code, 1) << Describe(bad_topology);
}

TEST(ClusterIntegrationTest, StartAndStopDaemonsLeaveNothingRunning) {
  auto empty = TestCluster::Empty();
  ASSERT_OK(empty.status());
  TestCluster& c = **empty;
  const std::string state = absl::StrCat(c.state_dir(), "/daemons");
  const std::string hardware = absl::StrCat(c.state_dir(), "/test-logs/cpu.yaml");
  std::ofstream(hardware) << CpuHost(2);

  const std::string token_copy = absl::StrCat(c.state_dir(), "/test-logs/token-copy");
  const CliResult head = c.Cli({"start", "--head", "--port", "0", "--state-dir", state,
                                "--node-timeout", "2s", "--token-out", token_copy});
  ASSERT_EQ(head.exit_code, 0) << Describe(head);
  EXPECT_THAT(head.out, HasSubstr("Head started at 127.0.0.1:"));
  const std::string token = client::ReadFirstLine(state + "/token").value_or("");
  ASSERT_EQ(token.size(), 64u);
  // The token is never printed (terminals and CI logs keep it): it goes to a 0600 file.
  EXPECT_THAT(head.out + head.err, Not(HasSubstr(token)));
  EXPECT_THAT(head.out, HasSubstr("--token-file FILE"));
  EXPECT_THAT(head.out, HasSubstr(token_copy));
  EXPECT_EQ(client::ReadFirstLine(token_copy).value_or(""), token);
  EXPECT_EQ(std::filesystem::status(token_copy).permissions(),
            std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  const std::string address = client::ReadFirstLine(state + "/head.address").value_or("");

  const CliResult agent = c.Cli({"start", "--address", address, "--hardware", hardware, "--node-id",
                                 "d1", "--state-dir", state, "--object-store-memory", "16MiB"});
  ASSERT_EQ(agent.exit_code, 0) << Describe(agent);
  EXPECT_THAT(agent.out, HasSubstr("Node agent d1 started"));
  // A second head on the same state folder is refused.
  const CliResult again = c.Cli({"start", "--head", "--state-dir", state});
  EXPECT_EQ(again.exit_code, 1) << Describe(again);
  EXPECT_THAT(again.err, HasSubstr("already running"));

  // `--object-store-memory 0` (no unit needed) starts an agent without a store, and the node
  // listing says so.
  const CliResult storeless =
      c.Cli({"start", "--address", address, "--hardware", hardware, "--node-id", "d2",
             "--state-dir", state, "--object-store-memory", "0"});
  ASSERT_EQ(storeless.exit_code, 0) << Describe(storeless);
  EXPECT_FALSE(std::filesystem::exists(state + "/nodes/d2/objects.sock"));

  const CliResult nodes = c.Cli({"list", "nodes", "--state-dir", state});
  ASSERT_EQ(nodes.exit_code, 0) << Describe(nodes);
  EXPECT_THAT(nodes.out, HasSubstr("ALIVE"));
  EXPECT_THAT(nodes.out, HasSubstr("OBJECT STORE"));
  EXPECT_THAT(nodes.out, ::testing::ContainsRegex("d1 .* 16MiB ")) << nodes.out;
  EXPECT_THAT(nodes.out, ::testing::ContainsRegex("d2 .* none ")) << nodes.out;

  const CliResult stop = c.Cli({"stop", "--state-dir", state});
  ASSERT_EQ(stop.exit_code, 0) << Describe(stop);
  EXPECT_THAT(stop.out, HasSubstr("Stopped head"));
  EXPECT_THAT(stop.out, HasSubstr("Stopped node agent d1"));
  EXPECT_THAT(c.ProcessesOfThisCluster(), ::testing::IsEmpty());
  EXPECT_FALSE(std::filesystem::exists(state + "/head.pid"));
}

TEST(ClusterIntegrationTest, UpStartsEveryNodeOfTheFileAndDownLeavesOnlyItsLogs) {
  auto empty = TestCluster::Empty();
  ASSERT_OK(empty.status());
  TestCluster& c = **empty;
  const std::string state = absl::StrCat(c.state_dir(), "/up");
  const std::string file = absl::StrCat(c.state_dir(), "/test-logs/cluster.yaml");
  std::ofstream(file) << "node_groups:\n"
                         "  - name: cpu\n"
                         "    count: 2\n"
                         "    hardware:\n"
                         "      host: {sockets: 1, cores_per_socket: 2, memory: 8GiB}\n"
                         "  - name: gpu\n"
                         "    count: 1\n"
                         "    hardware:\n"
                         "      host: {sockets: 1, cores_per_socket: 4, memory: 32GiB}\n"
                         "      accelerators:\n"
                         "        - {family: nvidia, type: H100, count: 2, memory: 80GiB}\n";
  const CliResult up = c.Cli(
      {"up", file, "--state-dir", state, "--node-timeout", "2s", "--object-store-memory", "16MiB"});
  ASSERT_EQ(up.exit_code, 0) << Describe(up);
  EXPECT_THAT(up.out, HasSubstr("3 node agents"));

  const CliResult nodes = c.Cli({"list", "nodes", "--json", "--state-dir", state});
  ASSERT_EQ(nodes.exit_code, 0) << Describe(nodes);
  std::set<std::string> ids;
  const Json listed = ParseJson(nodes);
  for (const Json& n : listed["nodes"]) {
    ids.insert(n["node"]["node_id"].get<std::string>());
    EXPECT_EQ(n["state"], "ALIVE");
  }
  EXPECT_EQ(ids, (std::set<std::string>{"cpu-0", "cpu-1", "gpu-0"})) << nodes.out;
  // A worker the cluster runs is stopped by `down` too.
  const std::string never = ReleaseFile(c, "never");
  const int run = c.CliAsync({"run", "--state-dir", state, "--resources", "GPU=1", "--", "sh", "-c",
                              WaitForFileCommand(never)});
  ASSERT_OK(c.WaitUntil([&]() -> absl::Status {
    const CliResult w = c.Cli({"list", "workers", "--state-dir", state});
    return w.out.find("RUNNING") != std::string::npos ? absl::OkStatus()
                                                      : absl::UnavailableError(w.out);
  }));

  const CliResult down = c.Cli({"down", "--state-dir", state});
  ASSERT_EQ(down.exit_code, 0) << Describe(down);
  const CliResult ran = c.Wait(run);
  EXPECT_NE(ran.exit_code, 0) << Describe(ran);
  EXPECT_THAT(c.ProcessesOfThisCluster(), ::testing::IsEmpty());
  // Of the state folder only the logs are left: the head's, every agent's and the worker's,
  // under logs/<time>/, which logs/latest names.
  namespace fs = std::filesystem;
  std::vector<std::string> left;
  for (const auto& entry : fs::directory_iterator(state)) {
    left.push_back(entry.path().filename().string());
  }
  EXPECT_THAT(left, ::testing::ElementsAre("logs"));
  const std::string kept = state + "/logs/latest";
  EXPECT_TRUE(fs::is_symlink(kept));
  EXPECT_TRUE(fs::is_regular_file(kept + "/head.log"));
  for (const char* node : {"cpu-0", "cpu-1", "gpu-0"}) {
    EXPECT_TRUE(fs::is_regular_file(absl::StrCat(kept, "/nodes/", node, "/agent.log"))) << node;
  }
  bool worker_out = false;
  for (const auto& entry : fs::directory_iterator(kept + "/nodes/gpu-0/workers")) {
    worker_out |= entry.path().extension() == ".out";
  }
  EXPECT_TRUE(worker_out) << "no worker output kept for gpu-0";
}

// --- `tessera run` inside a bundle; a job across its node's pause ---

// Collects the `tessera` command started as `pid` when it ends within `timeout`; one still
// running then is killed, and its result says so (it would have hung).
CliResult WaitWithin(TestCluster& c, int pid, absl::Duration timeout) {
  const absl::Time until = absl::Now() + timeout;
  while (absl::Now() < until) {
    siginfo_t info{};
    // WNOWAIT: only looks, so Wait() still collects the exit.
    if (waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
        info.si_pid == pid) {
      return c.Wait(pid);
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  kill(pid, SIGKILL);
  CliResult r = c.Wait(pid);
  absl::StrAppend(&r.err, "[test: still running after ", absl::FormatDuration(timeout),
                  ", killed]\n");
  return r;
}

CliResult CliWithin(TestCluster& c, const std::vector<std::string>& args,
                    absl::Duration timeout = absl::Seconds(30)) {
  return WaitWithin(c, c.CliAsync(args), timeout);
}

absl::Status FileExists(const std::string& path) {
  return std::filesystem::exists(path) ? absl::OkStatus()
                                       : absl::UnavailableError(absl::StrCat(path, " not yet"));
}

TEST(ClusterIntegrationTest, RunInABundleThatCanNeverHoldTheRequestIsRefusedAtOnce) {
  ClusterOptions options;
  options.nodes = {{.id = "n1", .hardware_yaml = CpuHost(4)},
                   {.id = "n2", .hardware_yaml = CpuHost(4)}};
  auto cluster = TestCluster::Start(options);
  ASSERT_OK(cluster.status());
  TestCluster& c = **cluster;
  // Bundle 0 on n1 (the agent `tessera run` asks first, as this machine's), bundle 1 on n2.
  const CliResult created =
      c.Cli({"pg", "create", "held", "--strategy", "STRICT_SPREAD", "--bundles", "CPU=1;CPU=2",
             "--bundle-selector", "tessera.io/node-id=n1;tessera.io/node-id=n2", "--wait", "30s"});
  ASSERT_EQ(created.exit_code, 0) << Describe(created);
  auto group = FindGroup(c, "held");
  ASSERT_OK(group.status());
  ASSERT_THAT(BundleNodes(*group), ::testing::ElementsAre("n1", "n2"));

  struct Refusal {
    std::vector<std::string> flags;
    std::vector<std::string> says;
  };
  const std::vector<Refusal> refusals = {
      // More than the bundle holds in all, on the node this command asks first and elsewhere.
      {{"--placement-group", "held", "--bundle", "0", "--resources", "CPU=2"},
       {"bundle 0 of held reserves CPU=1", "it can never hold CPU=2"}},
      {{"--placement-group", "held", "--bundle", "1", "--resources", "CPU=3"},
       {"bundle 1 of held reserves CPU=2", "it can never hold CPU=3"}},
      // A resource the bundle lacks.
      {{"--placement-group", "held", "--bundle", "1", "--resources", "GPU=1"},
       {"bundle 1 of held reserves CPU=2", "it can never hold GPU=1"}},
      // Any bundle: none can.
      {{"--placement-group", "held", "--resources", "CPU=3"},
       {"no bundle of held can ever hold CPU=3"}},
      // A bundle index out of range; a group that does not exist.
      {{"--placement-group", "held", "--bundle", "5", "--resources", "CPU=1"},
       {"held has 2 bundles; there is no bundle 5"}},
      {{"--placement-group", "nope", "--bundle", "0"},
       {"no placement group or slice group named nope"}},
  };
  for (const Refusal& refusal : refusals) {
    std::vector<std::string> args = {"run"};
    args.insert(args.end(), refusal.flags.begin(), refusal.flags.end());
    args.insert(args.end(), {"--", "true"});
    const CliResult r = CliWithin(c, args);
    const std::string what = absl::StrJoin(refusal.flags, " ");
    EXPECT_EQ(r.exit_code, 1) << what << ": " << Describe(r);
    EXPECT_THAT(r.err, ::testing::StartsWith("tessera: error: cannot run the command (infeasible)"))
        << what << ": " << Describe(r);
    for (const std::string& part : refusal.says) {
      EXPECT_THAT(r.err, HasSubstr(part)) << what << ": " << Describe(r);
    }
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << what << ": " << Describe(r);
  }

  // A request that fits but must wait for the bundle's other work waits (here until --wait ends),
  // then runs once that work is done.
  const std::string started = ReleaseFile(c, "bundle-busy");
  const std::string release = ReleaseFile(c, "bundle-release");
  const int busy =
      c.CliAsync({"run", "--placement-group", "held", "--bundle", "1", "--resources", "CPU=2", "--",
                  "sh", "-c", absl::StrCat("touch ", started, "; ", WaitForFileCommand(release))});
  ASSERT_OK(c.WaitUntil([&] { return FileExists(started); }));
  const CliResult waited = CliWithin(c,
                                     {"run", "--placement-group", "held", "--bundle", "1",
                                      "--resources", "CPU=1", "--wait", "3s", "--", "true"},
                                     absl::Seconds(60));
  EXPECT_EQ(waited.exit_code, 1) << Describe(waited);
  EXPECT_THAT(waited.err, HasSubstr("tessera: waiting for resources")) << Describe(waited);
  EXPECT_THAT(waited.err, HasSubstr("cannot run the command (pending)")) << Describe(waited);
  const int after = c.CliAsync({"run", "--placement-group", "held", "--bundle", "1", "--resources",
                                "CPU=1", "--", "echo", "after"});
  Touch(release);
  const CliResult first = WaitWithin(c, busy, absl::Seconds(60));
  EXPECT_EQ(first.exit_code, 0) << Describe(first);
  const CliResult second = WaitWithin(c, after, absl::Seconds(60));
  EXPECT_EQ(second.exit_code, 0) << Describe(second);
  EXPECT_EQ(second.out, "after\n") << Describe(second);

  // A group that was removed.
  const CliResult removed = c.Cli({"pg", "remove", "held"});
  ASSERT_EQ(removed.exit_code, 0) << Describe(removed);
  const CliResult gone =
      CliWithin(c, {"run", "--placement-group", "held", "--bundle", "0", "--", "true"});
  EXPECT_EQ(gone.exit_code, 1) << Describe(gone);
  EXPECT_THAT(gone.err, HasSubstr("no placement group or slice group named held"))
      << Describe(gone);
}

absl::StatusOr<tessera::v1::JobInfo> OnlyJob(TestCluster& c) {
  auto jobs = c.client().ListJobs();
  if (!jobs.ok()) return jobs.status();
  if (jobs->jobs_size() != 1) {
    return absl::UnavailableError(absl::StrCat(jobs->jobs_size(), " jobs listed"));
  }
  return jobs->jobs(0);
}

TEST(ClusterIntegrationTest, AJobWhoseNodeWasPausedPastTheTimeoutIsRecordedAsItReallyEnded) {
  ClusterOptions options;
  options.nodes = {{.id = "n1", .hardware_yaml = CpuHost(2)},
                   {.id = "n2", .hardware_yaml = CpuHost(2)}};
  auto cluster = TestCluster::Start(options);
  ASSERT_OK(cluster.status());
  TestCluster& c = **cluster;
  const std::string started = ReleaseFile(c, "paused-started");
  const std::string release = ReleaseFile(c, "paused-release");
  const int run = c.CliAsync(
      {"run", "--label-selector", "tessera.io/node-id=n1", "--", "sh", "-c",
       absl::StrCat("touch ", started, "; ", WaitForFileCommand(release), "; echo finished")});
  ASSERT_OK(c.WaitUntil([&] { return FileExists(started); }));
  ASSERT_OK(c.WaitUntil([&]() -> absl::Status {
    auto job = OnlyJob(c);
    if (!job.ok()) return job.status();
    return job->state() == v1::JOB_STATE_RUNNING ? absl::OkStatus()
                                                 : absl::UnavailableError(job->DebugString());
  }));

  // The machine pauses past the node timeout: the head declares it dead and presumes the job
  // failed.
  ASSERT_OK(c.FreezeMachine("n1"));
  ASSERT_OK(c.WaitNodes({"n1"}, v1::NODE_STATE_DEAD));
  auto presumed = OnlyJob(c);
  ASSERT_OK(presumed.status());
  EXPECT_EQ(presumed->state(), v1::JOB_STATE_FAILED) << presumed->DebugString();
  EXPECT_TRUE(presumed->failure_presumed()) << presumed->DebugString();
  EXPECT_THAT(presumed->exit_reason(), HasSubstr("node n1 was declared dead"));

  // It resumes, the worker runs to its end, and `tessera run` reports that end, as does the head.
  Touch(release);
  ASSERT_OK(c.ThawMachine("n1"));
  const CliResult r = WaitWithin(c, run, absl::Seconds(60));
  EXPECT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_EQ(r.out, "finished\n") << Describe(r);
  EXPECT_THAT(r.err, Not(HasSubstr("warning"))) << Describe(r);
  auto ended = OnlyJob(c);
  ASSERT_OK(ended.status());
  EXPECT_EQ(ended->state(), v1::JOB_STATE_SUCCEEDED) << ended->DebugString();
  EXPECT_FALSE(ended->failure_presumed()) << ended->DebugString();
  ASSERT_OK(c.WaitNodes({"n1"}, v1::NODE_STATE_ALIVE));  // the same agent registered again
}

// Node agents in their own network namespaces, joined to the head's by veth pairs: the runtime
// works across real network interfaces, not just loopback.
TEST(NetnsTest, AgentsInSeparateNetworkNamespaces) {
  if (const std::string why = NetworkNamespaces::Why(); !why.empty()) GTEST_SKIP() << why;
  NetworkNamespaces namespaces;
  std::vector<NodeSpec> nodes;
  std::vector<VethNamespace> links;
  for (int i = 1; i <= 2; ++i) {
    auto link = namespaces.Add(i);
    ASSERT_OK(link.status());
    links.push_back(*link);
    nodes.push_back({.id = absl::StrCat("ns", i),
                     .hardware_yaml = CpuHost(2),
                     .extra_args = {"--bind", link->inside_ip},
                     .wrapper = {"ip", "netns", "exec", link->name}});
  }
  ClusterOptions options;
  options.head_extra_args = {"--bind", "0.0.0.0"};
  auto cluster = TestCluster::Start(options);
  ASSERT_OK(cluster.status());
  TestCluster& c = **cluster;
  // Each agent reaches the head through its veth pair: the head's address on that link.
  const std::string port = c.head_address().substr(c.head_address().rfind(':') + 1);
  for (int i = 0; i < 2; ++i) {
    NodeSpec node = nodes[i];
    node.head_address = absl::StrCat(links[i].host_ip, ":", port);
    ASSERT_OK(c.StartNode(node));
  }
  ASSERT_OK(c.WaitNodes({"ns1", "ns2"}, v1::NODE_STATE_ALIVE));
  auto n2 = FindNode(c, "ns2");
  ASSERT_OK(n2.status());
  EXPECT_THAT(n2->node().address(), HasSubstr(absl::StrCat("10.202.")));
  // A command that must run on ns2 gets there across the namespaces.
  const CliResult r = c.Cli({"run", "--label-selector", "tessera.io/node-id=ns2", "--", "sh", "-c",
                             "echo $TESSERA_NODE_ID"});
  EXPECT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_EQ(r.out, "ns2\n");
}

}  // namespace
}  // namespace tessera::testing
