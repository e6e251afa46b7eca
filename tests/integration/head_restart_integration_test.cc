// A head SIGKILLed and restarted on Redis (a real redis-server) loses nothing: a placement group,
// a slice reservation, a running job and the actor directory's records all come back, and the
// agents keep every bundle and worker they held (docs/cluster-runtime.md, "State store").
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

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

  // A placement group, a slice reservation, a running job and named actors.
  const CliResult group =
      c.Cli({"pg", "create", "keep", "--bundles", "CPU=1;CPU=1", "--wait", "30s"});
  ASSERT_EQ(group.exit_code, 0) << Describe(group);
  const CliResult slice = c.Cli({"slice", "reserve", "train", "--accelerator", "TPU-V6E",
                                 "--topology", "2x4", "--wait", "30s"});
  ASSERT_EQ(slice.exit_code, 0) << Describe(slice);
  const std::string release = absl::StrCat(c.state_dir(), "/test-logs/release");
  const int job = c.CliAsync(
      {"run", "--", "sh", "-c", absl::StrCat("while [ ! -e ", release, " ]; do sleep 0.05; done")});
  std::string job_id;
  ASSERT_OK(c.WaitUntil([&]() -> absl::Status {
    auto jobs = c.client().ListJobs();
    if (!jobs.ok()) return jobs.status();
    for (const auto& j : jobs->jobs()) {
      if (j.state() == v1::JOB_STATE_RUNNING) job_id = j.job_id();
    }
    return job_id.empty() ? absl::UnavailableError("the job is not running yet") : absl::OkStatus();
  }));
  // A named actor in the directory, as a driver registers it once its worker is up, and a dead
  // one (kept for listing, its name free).
  v1::ActorInfo counter;
  counter.set_actor_id("actor-7");
  counter.set_name("counter");
  counter.set_class_name("Counter");
  counter.set_owner("driver-7");
  counter.set_state(v1::ACTOR_STATE_ALIVE);
  counter.set_address("127.0.0.1:4567");
  counter.set_node_id("n1");
  for (const char* id : {"actor-7", "actor-8"}) {
    v1::RegisterActorRequest request;
    *request.mutable_actor() = counter;
    request.mutable_actor()->set_actor_id(id);
    if (std::string_view(id) == "actor-8") request.mutable_actor()->set_name("gone");
    v1::ActorInfo response;
    ASSERT_OK(c.client().Call("head", client::Retry::kSafe, [&](grpc::ClientContext* ctx) {
      return c.client().head_actors().RegisterActor(ctx, request, &response);
    }));
  }
  {
    v1::ActorDiedRequest died;
    died.set_actor_id("actor-8");
    died.set_death_cause("killed by tessera::Kill");
    v1::ActorInfo response;
    ASSERT_OK(c.client().Call("head", client::Retry::kSafe, [&](grpc::ClientContext* ctx) {
      return c.client().head_actors().ActorDied(ctx, died, &response);
    }));
  }
  // The driver keeps itself alive meanwhile, so its actor is not taken for orphaned.
  auto keep_driver_alive = [&] {
    v1::KeepDriverAliveRequest request;
    request.set_driver_id("driver-7");
    v1::KeepDriverAliveResponse response;
    return c.client().Call("head", client::Retry::kSafe, [&](grpc::ClientContext* ctx) {
      return c.client().head_reservations().KeepDriverAlive(ctx, request, &response);
    });
  };
  ASSERT_OK(keep_driver_alive());
  auto groups_before = c.client().ListPlacementGroups();
  auto slices_before = c.client().ListSlices();
  ASSERT_OK(groups_before.status());
  ASSERT_OK(slices_before.status());

  ASSERT_OK(c.KillHead());  // SIGKILL: nothing is closed or flushed
  ASSERT_OK(c.StartHead());
  ASSERT_OK(c.WaitNodes({"n1", "v6e-0-w0", "v6e-0-w1"}, v1::NODE_STATE_ALIVE));

  auto groups_after = c.client().ListPlacementGroups();
  auto slices_after = c.client().ListSlices();
  ASSERT_OK(groups_after.status());
  ASSERT_OK(slices_after.status());
  // Exactly as before: the same nodes and device instances, so nothing running moved.
  EXPECT_EQ(Describe(*groups_after), Describe(*groups_before));
  ASSERT_EQ(slices_after->groups_size(), 1);
  EXPECT_EQ(Describe(slices_after->groups(0)), Describe(slices_before->groups(0)));
  ASSERT_OK(keep_driver_alive());
  {
    // The live actor holds its name again, exactly as registered; the dead one is listed.
    v1::GetActorRequest get;
    get.set_name("counter");
    v1::ActorInfo found;
    ASSERT_OK(c.client().Call("head", client::Retry::kSafe, [&](grpc::ClientContext* ctx) {
      return c.client().head_actors().GetActor(ctx, get, &found);
    }));
    EXPECT_EQ(Describe(found), Describe(counter));
    v1::ListRequest list;
    v1::ListActorsResponse listed;
    ASSERT_OK(c.client().Call("head", client::Retry::kSafe, [&](grpc::ClientContext* ctx) {
      return c.client().head_actors().ListActors(ctx, list, &listed);
    }));
    ASSERT_EQ(listed.actors_size(), 2) << Describe(listed);
    EXPECT_EQ(listed.actors(0).actor_id(), "actor-7");
    EXPECT_EQ(listed.actors(1).actor_id(), "actor-8");
    EXPECT_EQ(listed.actors(1).state(), v1::ACTOR_STATE_DEAD);
    EXPECT_EQ(listed.actors(1).death_cause(), "killed by tessera::Kill");
    // A second actor cannot take the restored name.
    v1::RegisterActorRequest twin;
    *twin.mutable_actor() = counter;
    twin.mutable_actor()->set_actor_id("actor-9");
    twin.mutable_actor()->set_state(v1::ACTOR_STATE_PENDING);
    v1::ActorInfo response;
    EXPECT_EQ(c.client()
                  .Call("head", client::Retry::kSafe,
                        [&](grpc::ClientContext* ctx) {
                          return c.client().head_actors().RegisterActor(ctx, twin, &response);
                        })
                  .code(),
              absl::StatusCode::kAlreadyExists);
  }
  auto jobs = c.client().ListJobs();
  ASSERT_OK(jobs.status());
  bool running = false;
  for (const auto& j : jobs->jobs()) {
    running = running || (j.job_id() == job_id && j.state() == v1::JOB_STATE_RUNNING);
  }
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
      if (j.job_id() == job_id && j.state() == v1::JOB_STATE_SUCCEEDED) return absl::OkStatus();
    }
    return absl::UnavailableError("the job's end is not recorded yet");
  }));
}

}  // namespace
}  // namespace tessera::testing
