// A head SIGKILLed and restarted on Redis (a real redis-server) loses nothing: a placement group,
// a slice reservation, a running job and a named actor's record all come back, and the agents
// keep every bundle and worker they held (docs/cluster-runtime.md, "State store").
#include <filesystem>
#include <fstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "head/redis_test_server.h"
#include "integration/cluster_harness.h"

namespace tessera::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using Json = nlohmann::json;

std::string TwoBySlice() {
  return "node_groups:\n"
         "  - name: v6e\n"
         "    slices: {count: 1, accelerator: TPU-V6E, topology: 2x4, chips_per_host: 4}\n"
         "    hardware:\n"
         "      host: {sockets: 1, cores_per_socket: 8, memory: 64GiB}\n";
}

std::string Describe(const google::protobuf::Message& m) { return m.ShortDebugString(); }

TEST(HeadRestartTest, AHeadKilledAndRestartedOnRedisLosesNothing) {
  if (auto found = FindRedisServer(); !found.ok()) {
    GTEST_SKIP() << "no redis-server to keep the head's state in: " << found.status();
  }
  auto redis = RedisTestServer::Create();
  ASSERT_OK(redis.status());
  auto empty = TestCluster::Empty();
  ASSERT_OK(empty.status());
  const std::string file = absl::StrCat((*empty)->state_dir(), "/test-logs/slice.yaml");
  std::ofstream(file) << TwoBySlice();
  ClusterOptions options;
  options.head_extra_args = {"--redis-address", (*redis)->address()};
  options.nodes.push_back({.id = "n1", .hardware_yaml = CpuHost(4)});
  for (const char* id : {"v6e-0-w0", "v6e-0-w1"}) {
    options.nodes.push_back({.id = id, .cluster_file = file});
  }
  auto cluster = TestCluster::Start(options);
  ASSERT_OK(cluster.status());
  TestCluster& c = **cluster;

  // A placement group, a slice reservation, a running job and a named actor's record.
  const CliResult group = c.Cli({"pg", "create", "keep", "--bundles", "CPU=1;CPU=1", "--wait",
                                 "30s"});
  ASSERT_EQ(group.exit_code, 0) << Describe(group);
  const CliResult slice = c.Cli({"slice", "reserve", "train", "--accelerator", "TPU-V6E",
                                 "--topology", "2x4", "--wait", "30s"});
  ASSERT_EQ(slice.exit_code, 0) << Describe(slice);
  const std::string release = absl::StrCat(c.state_dir(), "/test-logs/release");
  const int job = c.CliAsync({"run", "--", "sh", "-c",
                              absl::StrCat("while [ ! -e ", release, " ]; do sleep 0.05; done")});
  std::string job_id;
  ASSERT_OK(c.WaitUntil([&]() -> absl::Status {
    auto jobs = c.client().ListJobs();
    if (!jobs.ok()) return jobs.status();
    for (const auto& j : jobs->jobs()) {
      if (j.state() == "RUNNING") job_id = j.job_id();
    }
    return job_id.empty() ? absl::UnavailableError("the job is not running yet") : absl::OkStatus();
  }));
  {
    tessera::v1::KvPutRequest put;
    put.set_key("actor:counter");
    put.set_value("worker-7@127.0.0.1:4567");
    tessera::v1::KvPutResponse response;
    ASSERT_OK(c.client().Call("head", cli::Retry::kSafe, [&](grpc::ClientContext* ctx) {
      return c.client().head().KvPut(ctx, put, &response);
    }));
  }
  auto groups_before = c.client().ListPlacementGroups();
  auto slices_before = c.client().ListSlices();
  ASSERT_OK(groups_before.status());
  ASSERT_OK(slices_before.status());

  ASSERT_OK(c.KillHead());  // SIGKILL: nothing is closed or flushed
  ASSERT_OK(c.StartHead());
  ASSERT_OK(c.WaitNodes({"n1", "v6e-0-w0", "v6e-0-w1"}, "ALIVE"));

  auto groups_after = c.client().ListPlacementGroups();
  auto slices_after = c.client().ListSlices();
  ASSERT_OK(groups_after.status());
  ASSERT_OK(slices_after.status());
  // Exactly as before: the same nodes and device instances, so nothing running moved.
  EXPECT_EQ(Describe(*groups_after), Describe(*groups_before));
  ASSERT_EQ(slices_after->groups_size(), 1);
  EXPECT_EQ(Describe(slices_after->groups(0)), Describe(slices_before->groups(0)));
  {
    tessera::v1::KvGetRequest get;
    get.set_key("actor:counter");
    tessera::v1::KvGetResponse response;
    ASSERT_OK(c.client().Call("head", cli::Retry::kSafe, [&](grpc::ClientContext* ctx) {
      return c.client().head().KvGet(ctx, get, &response);
    }));
    EXPECT_TRUE(response.found());
    EXPECT_EQ(response.value(), "worker-7@127.0.0.1:4567");
  }
  auto jobs = c.client().ListJobs();
  ASSERT_OK(jobs.status());
  bool running = false;
  for (const auto& j : jobs->jobs()) running = running || (j.job_id() == job_id && j.state() == "RUNNING");
  EXPECT_TRUE(running) << Describe(*jobs);
  // The agents kept their bundles: nothing was released as unknown, over several heartbeats.
  absl::SleepFor(absl::Seconds(2));
  auto status = c.client().GetClusterStatus();
  ASSERT_OK(status.status());
  for (const std::string& event : status->events()) {
    EXPECT_THAT(event, Not(HasSubstr("released"))) << event;
    EXPECT_THAT(event, Not(HasSubstr("lost with the head restart"))) << event;
  }
  EXPECT_EQ(Describe(*c.client().ListPlacementGroups()), Describe(*groups_before));

  // The job runs to its end and is recorded with the new head.
  std::ofstream(release) << "go\n";
  const CliResult ended = c.Wait(job);
  EXPECT_EQ(ended.exit_code, 0) << Describe(ended);
  ASSERT_OK(c.WaitUntil([&]() -> absl::Status {
    auto listed = c.client().ListJobs();
    if (!listed.ok()) return listed.status();
    for (const auto& j : listed->jobs()) {
      if (j.job_id() == job_id && j.state() == "SUCCEEDED") return absl::OkStatus();
    }
    return absl::UnavailableError("the job's end is not recorded yet");
  }));
}

}  // namespace
}  // namespace tessera::testing
