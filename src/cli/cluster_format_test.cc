#include "cli/cluster_format.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "cli/cluster_views.h"
#include "client/cluster_client.h"

namespace tessera::cli {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

tessera::v1::Resources Res(std::initializer_list<std::pair<const std::string, int64_t>> raw) {
  tessera::v1::Resources r;
  for (const auto& [name, value] : raw) (*r.mutable_raw())[name] = value;
  return r;
}

TEST(ClusterFormatTest, ResourcesTextIsExactAndSorted) {
  EXPECT_EQ(ResourcesText(Res({{"GPU", 20000}, {"CPU", 15000}})), "CPU=1.5,GPU=2");
  EXPECT_EQ(ResourcesText(Res({{"memory", (64LL << 30) * 10000}})), "memory=64GiB");
  EXPECT_EQ(ResourcesText(Res({{"CPU", 0}})), "");
  EXPECT_EQ(ResourcesText(Res({{"CPU", -3}})), "CPU=-3 (raw)");
}

TEST(ClusterFormatTest, UsageTextForPeopleRoundsBytes) {
  const auto total = Res({{"CPU", 80000}, {"memory", (64LL << 30) * 10000}});
  const auto available = Res({{"CPU", 60000}, {"memory", (48LL << 30) * 10000}});
  EXPECT_EQ(UsageText(available, total), "CPU 2/8, memory 16 GiB/64 GiB");
  // A resource missing from `available` is all used.
  EXPECT_EQ(UsageText(Res({}), Res({{"GPU", 40000}})), "GPU 4/4");
}

TEST(ClusterFormatTest, MeasuredUseIsInTheResourcesUnitOrABusyShareOfDevices) {
  tessera::v1::ResourceUsage usage;
  usage.set_resource("CPU");
  EXPECT_EQ(MeasuredUseText(usage), "");  // nobody measured it
  usage.set_measured(3.254);
  EXPECT_EQ(MeasuredUseText(usage), "  in use 3.25");
  usage.set_resource("memory");
  usage.set_measured(1.5 * 1024 * 1024 * 1024);
  EXPECT_EQ(MeasuredUseText(usage), "  in use 1.5 GiB");
  usage.set_resource("TPU");
  usage.set_measured(13.92);
  usage.set_measured_devices(16);
  EXPECT_EQ(MeasuredUseText(usage), "  busy 87% of 16 measured");
}

TEST(ClusterFormatTest, DevicesTextNamesInstancesAndFractions) {
  tessera::v1::Allocation a;
  auto* gpu = a.add_devices();
  gpu->set_resource("GPU");
  gpu->add_instances(0);
  gpu->add_amounts_raw(10000);
  gpu->add_instances(3);
  gpu->add_amounts_raw(5000);
  EXPECT_EQ(DevicesText(a), "GPU 0,3 (0.5)");
  EXPECT_EQ(DevicesText(tessera::v1::Allocation()), "");
}

TEST(ClusterFormatTest, SplitSemicolonsTrimsPieces) {
  EXPECT_THAT(SplitSemicolons(" CPU=1 ; GPU=2;"), ElementsAre("CPU=1", "GPU=2", ""));
  EXPECT_TRUE(SplitSemicolons("  ").empty());
}

TEST(ClusterViewsTest, JobsTableListsJobsByStartTimeWithTheirTimes) {
  tessera::v1::ListJobsResponse jobs;
  const absl::Time start = absl::FromUnixSeconds(1764633600);  // 2025-12-02 00:00:00 UTC
  auto add = [&](const std::string& id, absl::Duration after, absl::Duration ran, bool ended) {
    tessera::v1::JobInfo* job = jobs.add_jobs();
    job->set_job_id(id);
    job->set_state(ended ? tessera::v1::JOB_STATE_SUCCEEDED : tessera::v1::JOB_STATE_RUNNING);
    job->set_start_time_ms(absl::ToUnixMillis(start + after));
    if (ended) job->set_end_time_ms(absl::ToUnixMillis(start + after + ran));
  };
  add("zz-first", absl::ZeroDuration(), absl::Seconds(90), true);
  add("aa-last", absl::Minutes(10), absl::ZeroDuration(), false);
  add("mm-second", absl::Minutes(5), absl::Seconds(3), true);
  const std::string text = JobsTable(jobs, start + absl::Minutes(12), absl::UTCTimeZone());
  const size_t first = text.find("zz-first");
  const size_t second = text.find("mm-second");
  const size_t last = text.find("aa-last");
  ASSERT_NE(last, std::string::npos) << text;
  EXPECT_LT(first, second) << text;
  EXPECT_LT(second, last) << text;
  EXPECT_THAT(text, HasSubstr("2025-12-02 00:00:00  1m30s"));
  EXPECT_THAT(text, HasSubstr("2025-12-02 00:10:00  2m"));  // running: until now
  EXPECT_EQ(JobsByStartTime(jobs).jobs(0).job_id(), "zz-first");
}

TEST(ClusterViewsTest, StatusTextCountsNodesAndNamesDemandInWords) {
  tessera::v1::ClusterStatus status;
  status.add_nodes()->set_state(tessera::v1::NODE_STATE_ALIVE);
  status.add_nodes()->set_state(tessera::v1::NODE_STATE_ALIVE);
  status.add_nodes()->set_state(tessera::v1::NODE_STATE_DEAD);
  tessera::v1::Demand* demand = status.add_demand();
  demand->set_kind("placement group");
  demand->set_name("g");
  demand->set_status(tessera::v1::DEMAND_STATUS_PENDING);
  demand->set_explanation("no room");
  status.set_http_address("127.0.0.1:8265");
  const std::string text = StatusText(status, "head:1");
  EXPECT_THAT(text, HasSubstr("Dashboard: http://127.0.0.1:8265/  (metrics: "
                              "http://127.0.0.1:8265/metrics)\n"));
  EXPECT_THAT(text, HasSubstr("Nodes: 2 ALIVE, 1 DEAD\n"));
  EXPECT_THAT(text, HasSubstr("  placement group g: pending: no room\n"));
  EXPECT_THAT(text, ::testing::Not(HasSubstr("State store")));  // said only when degraded
}

TEST(ClusterViewsTest, StatusTextSaysTheStateStoreIsDegraded) {
  tessera::v1::ClusterStatus status;
  status.mutable_state_store()->set_degraded(true);
  status.mutable_state_store()->set_cause("could not write nodes/n1: connection refused");
  status.mutable_state_store()->set_pending_writes(2);
  EXPECT_THAT(StatusText(status, "head:1"),
              HasSubstr("State store: DEGRADED (could not write nodes/n1: connection refused; 2 "
                        "of the head's own writes pending)"));
}

TEST(ClusterViewsTest, NodesTableHidesMarkerResources) {
  tessera::v1::ListNodesResponse nodes;
  auto* n = nodes.add_nodes();
  n->set_state(tessera::v1::NODE_STATE_ALIVE);
  n->mutable_node()->set_node_id("v6e-0-w0");
  (*n->mutable_node()->mutable_labels())["tessera.io/tpu-slice-name"] = "v6e-0";
  *n->mutable_node()->mutable_resources() = Res({{"TPU", 40000},
                                                 {"v6e-0", 10000},
                                                 {"TPU-v6e-16-head", 10000},
                                                 {"accelerator_type:TPU-V6E", 10000}});
  *n->mutable_available() = Res({{"TPU", 0}});
  const std::string table = NodesTable(nodes);
  EXPECT_THAT(table, HasSubstr("ALIVE"));
  EXPECT_THAT(table, HasSubstr("TPU 4/4"));
  EXPECT_THAT(table, ::testing::Not(HasSubstr("head")));
  EXPECT_THAT(table, ::testing::Not(HasSubstr("accelerator_type")));
}

TEST(ClusterViewsTest, NodesTableShowsANodeWithoutAnObjectStore) {
  tessera::v1::ListNodesResponse nodes;
  auto* n = nodes.add_nodes();
  n->set_state(tessera::v1::NODE_STATE_ALIVE);
  n->mutable_node()->set_node_id("n1");
  (*n->mutable_node()->mutable_labels())["tessera.io/object-store"] = "none";
  auto* m = nodes.add_nodes();
  m->set_state(tessera::v1::NODE_STATE_ALIVE);
  m->mutable_node()->set_node_id("n2");
  (*m->mutable_node()->mutable_labels())["tessera.io/object-store"] = "682MiB";
  const std::string table = NodesTable(nodes);
  EXPECT_THAT(table, HasSubstr("OBJECT STORE"));
  EXPECT_THAT(table, ::testing::ContainsRegex("n1 .* none "));
  EXPECT_THAT(table, ::testing::ContainsRegex("n2 .* 682MiB "));
}

TEST(ClusterViewsTest, PlacementGroupTextShowsEveryBundle) {
  tessera::v1::PlacementGroupInfo g;
  g.set_name("g");
  g.set_id("pg-1");
  g.set_state(tessera::v1::PLACEMENT_GROUP_STATE_PENDING);
  g.set_strategy(tessera::v1::PLACEMENT_STRATEGY_STRICT_SPREAD);
  g.set_explanation("only 2 nodes have CPU=1 free");
  g.add_bundles()->set_index(0);
  EXPECT_EQ(PlacementGroupText(g),
            "Placement group g (pg-1): PENDING, STRICT_SPREAD\n"
            "  bundle 0: not placed\n"
            "  only 2 nodes have CPU=1 free\n");
}

TEST(ParseDurationFlagTest, TakesAbslDurationsAndSeconds) {
  EXPECT_EQ(*client::ParseDurationFlag("--wait", "500ms"), absl::Milliseconds(500));
  EXPECT_EQ(*client::ParseDurationFlag("--wait", "2"), absl::Seconds(2));
  EXPECT_EQ(*client::ParseDurationFlag("--wait", " 1m "), absl::Minutes(1));
  const auto bad = client::ParseDurationFlag("--wait", "soon");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("--wait: \"soon\""));
  EXPECT_FALSE(client::ParseDurationFlag("--wait", "-1s").ok());
  EXPECT_FALSE(client::ParseDurationFlag("--wait", "-3").ok());
}

TEST(NewRequestIdTest, IdsAreFreshAndPrefixed) {
  const std::string a = client::NewRequestId("pg");
  EXPECT_EQ(a.rfind("pg-", 0), 0u);
  EXPECT_EQ(a.size(), 3u + 16u);
  EXPECT_NE(a, client::NewRequestId("pg"));
}

}  // namespace
}  // namespace tessera::cli
