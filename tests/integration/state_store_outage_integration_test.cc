// No write is acknowledged that is not durable (docs/cluster-runtime.md, "State store"): with its
// real redis-server killed under a workload, the head answers UNAVAILABLE to a placement group's
// creation and removal and to a job's submission, changing nothing, and says DEGRADED in
// `tessera status`; once Redis is back it takes writes again, and a head restarted after that
// finds every acknowledged write and nothing else.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "head/redis_test_server.h"
#include "integration/cluster_harness.h"

namespace tessera::testing {
namespace {

using ::testing::HasSubstr;

std::string Describe(const google::protobuf::Message& m) { return m.ShortDebugString(); }

v1::CreatePlacementGroupRequest Group(const std::string& name) {
  v1::CreatePlacementGroupRequest request;
  request.set_name(name);
  request.set_strategy(v1::PLACEMENT_STRATEGY_PACK);
  request.set_request_id(absl::StrCat("create-", name));
  (*request.mutable_primary()->add_bundles()->mutable_resources()->mutable_raw())["CPU"] = 10000;
  return request;
}

v1::SubmitJobRequest Job(const std::string& name) {
  v1::SubmitJobRequest request;
  request.set_request_id(absl::StrCat("submit-", name));
  request.mutable_spec()->set_name(name);
  for (const char* arg : {"sleep", "600"}) request.mutable_spec()->add_argv(arg);
  v1::GangPlacement* placement = request.mutable_spec()->mutable_placement();
  placement->set_min_workers(1);
  placement->set_max_workers(1);
  (*placement->mutable_resources_per_worker()->mutable_raw())["CPU"] = 10000;
  return request;
}

TEST(StateStoreOutageTest, NothingUnacknowledgedAndEveryAcknowledgedWriteSurvivesARestart) {
  if (auto found = FindRedisServer(); !found.ok()) {
    GTEST_SKIP() << "no redis-server to keep the head's state in: " << found.status();
  }
  auto redis = RedisTestServer::Create({.persistent = true});
  ASSERT_OK(redis.status());
  ClusterOptions options;
  options.head_extra_args = {"--redis-address", (*redis)->address()};
  options.nodes.push_back({.id = "n1", .hardware_yaml = CpuHost(8)});
  auto cluster = TestCluster::Start(options);
  ASSERT_OK(cluster.status());
  TestCluster& c = **cluster;
  client::ClusterClient& client = c.client();

  // One attempt each: what the head answers, not what a retry hides.
  auto create = [&](const std::string& name) {
    v1::PlacementGroupInfo info;
    const v1::CreatePlacementGroupRequest request = Group(name);
    return client.Call("head", client::Retry::kNever, [&](grpc::ClientContext* ctx) {
      return client.head_reservations().CreatePlacementGroup(ctx, request, &info);
    });
  };
  auto remove = [&](const std::string& name) {
    v1::RemovePlacementGroupRequest request;
    request.set_name(name);
    request.set_request_id(absl::StrCat("remove-", name));
    v1::RemovePlacementGroupResponse response;
    return client.Call("head", client::Retry::kNever, [&](grpc::ClientContext* ctx) {
      return client.head_reservations().RemovePlacementGroup(ctx, request, &response);
    });
  };
  auto submit = [&](const std::string& name) {
    v1::JobStatus status;
    const v1::SubmitJobRequest request = Job(name);
    return client.Call("head", client::Retry::kNever, [&](grpc::ClientContext* ctx) {
      return client.jobs().SubmitJob(ctx, request, &status);
    });
  };
  auto groups = [&]() -> absl::StatusOr<std::set<std::string>> {
    auto listed = client.ListPlacementGroups();
    if (!listed.ok()) return listed.status();
    std::set<std::string> names;
    for (const auto& g : listed->groups()) {
      if (g.name() == "kept" || g.name() == "doomed" || g.name() == "refused" ||
          g.name() == "after") {
        names.insert(g.name());
      }
    }
    return names;
  };
  auto jobs = [&]() -> absl::StatusOr<std::set<std::string>> {
    v1::ListRequest request;
    v1::JobList list;
    absl::Status listed = client.Call("head", client::Retry::kSafe, [&](grpc::ClientContext* ctx) {
      return client.jobs().ListGangJobs(ctx, request, &list);
    });
    if (!listed.ok()) return listed;
    std::set<std::string> names;
    for (const auto& j : list.jobs()) names.insert(j.name());
    return names;
  };
  auto degraded = [&](bool want) {
    return c.WaitUntil([&]() -> absl::Status {
      auto status = client.GetClusterStatus();
      if (!status.ok()) return status.status();
      if (status->state_store().degraded() == want) return absl::OkStatus();
      return absl::UnavailableError(Describe(status->state_store()));
    });
  };

  ASSERT_OK(create("kept"));
  ASSERT_OK(create("doomed"));
  ASSERT_OK(submit("before"));

  ASSERT_OK((*redis)->Stop());
  ASSERT_OK(degraded(true));
  const absl::Status refused_create = create("refused");
  EXPECT_EQ(refused_create.code(), absl::StatusCode::kUnavailable) << refused_create;
  EXPECT_THAT(refused_create.message(), HasSubstr("state store unavailable"));
  EXPECT_THAT(refused_create.message(), HasSubstr("nothing was changed"));
  EXPECT_EQ(remove("doomed").code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(submit("refused").code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(*groups(), (std::set<std::string>{"doomed", "kept"}));
  EXPECT_EQ(*jobs(), (std::set<std::string>{"before"}));
  const CliResult status = c.Cli({"status"});
  EXPECT_THAT(status.out, HasSubstr("State store: DEGRADED (")) << Describe(status);

  ASSERT_OK((*redis)->Start());
  ASSERT_OK(degraded(false));
  ASSERT_OK(create("after"));
  ASSERT_OK(remove("doomed"));
  ASSERT_OK(submit("after"));

  ASSERT_OK(c.KillHead());  // SIGKILL: nothing is closed or flushed
  ASSERT_OK(c.StartHead());
  ASSERT_OK(c.WaitNodes({"n1"}, v1::NODE_STATE_ALIVE));
  EXPECT_EQ(*groups(), (std::set<std::string>{"after", "kept"}));
  std::set<std::string> restored;
  ASSERT_OK(c.WaitUntil([&]() -> absl::Status {
    auto listed = jobs();  // UNAVAILABLE until the new head has adopted the stored jobs
    if (!listed.ok()) return listed.status();
    restored = *listed;
    return absl::OkStatus();
  }));
  EXPECT_EQ(restored, (std::set<std::string>{"after", "before"}));
}

}  // namespace
}  // namespace tessera::testing
