// Named actors and the head's actor directory end to end (a head and two node agents as
// processes): the directory shows an actor alive where its process runs; a name is held by one
// live actor in the whole cluster (another driver cannot take it) and is free again once the
// actor is killed; a driver's named actors lose their names when it exits, unless detached;
// a fresh driver finds one actor from many threads at once.
// This binary is the driver, the workers and (run again, see main) the second driver.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "integration/api_test_cluster.h"
#include "integration/cluster_harness.h"
#include "tessera/tessera.h"

namespace tessera::testing {
namespace {

using ::testing::HasSubstr;

// How many threads of the second driver look the same actor up at once ("find-many").
constexpr int kGuestLookups = 8;

class Tally {
 public:
  explicit Tally(int start) : total_(start) {}
  int Add(int k) { return total_ += k; }

 private:
  int total_;
};

std::unique_ptr<Tally> MakeTally(int start) { return std::make_unique<Tally>(start); }
TESSERA_ACTOR(MakeTally);
TESSERA_ACTOR_METHOD(&Tally::Add);

class NamedActorIntegrationTest : public ApiClusterSuite<8> {
 protected:
  // The head's answer to GetActor(name) in the default namespace.
  static absl::StatusOr<v1::ActorInfo> Lookup(const std::string& name) {
    v1::GetActorRequest request;
    request.set_name(name);
    v1::ActorInfo info;
    absl::Status got =
        cluster_->client().Call("head", client::Retry::kSafe, [&](grpc::ClientContext* context) {
          return cluster_->client().head_actors().GetActor(context, request, &info);
        });
    if (!got.ok()) return got;
    return info;
  }
  // Every record ListActors pages through with `name` (live and dead).
  static std::vector<v1::ActorInfo> Listed(const std::string& name) {
    std::vector<v1::ActorInfo> found;
    v1::ListRequest request;
    request.set_page_size(2);  // several pages
    do {
      v1::ListActorsResponse page;
      absl::Status listed =
          cluster_->client().Call("head", client::Retry::kSafe, [&](grpc::ClientContext* context) {
            return cluster_->client().head_actors().ListActors(context, request, &page);
          });
      EXPECT_TRUE(listed.ok()) << listed;
      if (!listed.ok()) break;
      for (const v1::ActorInfo& actor : page.actors()) {
        if (actor.name() == name) found.push_back(actor);
      }
      request.set_page_token(page.next_page_token());
    } while (!request.page_token().empty());
    return found;
  }
  // Runs this binary as a second driver doing `mode` with `name`; its stdout, and its exit code.
  static std::pair<std::string, int> RunGuest(const std::string& mode, const std::string& name) {
    const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
    const std::string command =
        absl::StrCat("TESSERA_NAMED_ACTOR_GUEST=", mode, " TESSERA_NAMED_ACTOR_NAME=", name,
                     " TESSERA_NAMED_ACTOR_STATE='", cluster_->state_dir(), "' '", self, "'");
    FILE* guest = popen(command.c_str(), "r");
    if (guest == nullptr) return {"popen failed", -1};
    std::string out;
    char buffer[256];
    while (fgets(buffer, sizeof(buffer), guest) != nullptr) out += buffer;
    return {out, pclose(guest)};
  }
};

TEST_F(NamedActorIntegrationTest, TheDirectoryShowsTheActorAliveAndKillFreesItsName) {
  ActorHandle<Tally> tally = Actor(MakeTally).Name("dir-tally").Remote(1);
  ASSERT_OK(tally.status());
  EXPECT_EQ(*Get(tally.Task(&Tally::Add).Remote(1), kPatience), 2);
  // Alive is registered as the worker comes up, just before the first call can run.
  ASSERT_OK(cluster_->WaitUntil([&]() -> absl::Status {
    auto info = Lookup("dir-tally");
    if (!info.ok()) return info.status();
    return info->state() == v1::ACTOR_STATE_ALIVE ? absl::OkStatus()
                                                  : absl::UnavailableError(info->DebugString());
  }));
  auto info = Lookup("dir-tally");
  ASSERT_OK(info.status());
  EXPECT_EQ(info->actor_id(), tally.id().value());
  EXPECT_FALSE(info->address().empty());
  EXPECT_THAT(info->node_id(), ::testing::AnyOf("cpu1", "gpu1"));
  EXPECT_FALSE(info->owner().empty());  // this driver: not detached

  ActorHandle<Tally> twin = Actor(MakeTally).Name("dir-tally").Remote(0);
  EXPECT_EQ(twin.status().code(), absl::StatusCode::kAlreadyExists);

  ASSERT_OK(Kill(tally));
  // Kill returns once the head has heard: the name is free cluster-wide at once.
  EXPECT_EQ(Lookup("dir-tally").status().code(), absl::StatusCode::kNotFound);
  std::vector<v1::ActorInfo> records = Listed("dir-tally");
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].state(), v1::ACTOR_STATE_DEAD);
  EXPECT_EQ(records[0].death_cause(), "killed by tessera::Kill");

  ActorHandle<Tally> again = Actor(MakeTally).Name("dir-tally").Remote(10);
  ASSERT_OK(again.status());
  EXPECT_EQ(*Get(again.Task(&Tally::Add).Remote(1), kPatience), 11);
  ASSERT_OK(Kill(again));
}

TEST_F(NamedActorIntegrationTest, AnotherDriverFindsTheActorButCannotTakeItsName) {
  ActorHandle<Tally> tally = Actor(MakeTally).Name("cluster-wide").Remote(40);
  EXPECT_EQ(*Get(tally.Task(&Tally::Add).Remote(1), kPatience), 41);
  auto [found, found_code] = RunGuest("find", "cluster-wide");
  EXPECT_EQ(found_code, 0) << found;
  EXPECT_EQ(found, "value=42\n");
  auto [claimed, claimed_code] = RunGuest("claim", "cluster-wide");
  EXPECT_EQ(claimed_code, 0) << claimed;
  EXPECT_THAT(claimed, HasSubstr("ALREADY_EXISTS"));
  EXPECT_THAT(claimed, HasSubstr(absl::StrCat("held by live actor ", tally.id().value())));
  ASSERT_OK(Kill(tally));
  // Free again: the second driver takes it now (and its actor dies with it as it exits).
  auto [taken, taken_code] = RunGuest("claim", "cluster-wide");
  EXPECT_EQ(taken_code, 0) << taken;
  EXPECT_EQ(taken, "created\n");
}

TEST_F(NamedActorIntegrationTest, AFreshDriverFindsOneActorFromManyThreadsAtOnce) {
  // Each thread's lookup attaches the actor; those that come while another one sets up its
  // stream wait for it rather than submitting to an actor the driver does not know yet.
  ActorHandle<Tally> tally = Actor(MakeTally).Name("found-at-once").Remote(0);
  EXPECT_EQ(*Get(tally.Task(&Tally::Add).Remote(0), kPatience), 0);
  auto [found, found_code] = RunGuest("find-many", "found-at-once");
  EXPECT_EQ(found_code, 0) << found;
  EXPECT_EQ(found, absl::StrCat("total=", kGuestLookups, "\n"));
  EXPECT_EQ(*Get(tally.Task(&Tally::Add).Remote(0), kPatience), kGuestLookups);
  ASSERT_OK(Kill(tally));
}

TEST_F(NamedActorIntegrationTest, ADriversNamedActorsLoseTheirNamesWhenItExitsUnlessDetached) {
  auto [out, code] = RunGuest("own", "guest-owned");
  ASSERT_EQ(code, 0) << out;
  ASSERT_EQ(out, "ready\n");
  // The guest said it exited (DriverExited): its actor not detached is dead with it.
  EXPECT_EQ(Lookup("guest-owned").status().code(), absl::StatusCode::kNotFound);
  std::vector<v1::ActorInfo> owned = Listed("guest-owned");
  ASSERT_EQ(owned.size(), 1u);
  EXPECT_EQ(owned[0].state(), v1::ACTOR_STATE_DEAD);
  EXPECT_FALSE(owned[0].death_cause().empty());
  auto detached = Lookup("guest-owned-detached");
  ASSERT_OK(detached.status());
  EXPECT_EQ(detached->owner(), "");
  // Its name stays taken.
  ActorHandle<Tally> twin = Actor(MakeTally).Name("guest-owned-detached").Remote(0);
  EXPECT_EQ(twin.status().code(), absl::StatusCode::kAlreadyExists);
  // The name of the one that died with its owner is free.
  ActorHandle<Tally> successor = Actor(MakeTally).Name("guest-owned").Remote(0);
  ASSERT_OK(successor.status());
  ASSERT_OK(Kill(successor));
}

}  // namespace
}  // namespace tessera::testing

// The second driver of the tests above, by TESSERA_NAMED_ACTOR_GUEST:
//   find  — finds the named actor and adds 1 to it: prints "value=N";
//   find-many — kGuestLookups threads find it and add 1 at once: prints "total=N" (the last sum);
//   claim — creates an actor of that name: prints "created", or the error's code and message;
//   own   — creates the named actor and a detached one ("<name>-detached"), calls both, prints
//           "ready" and exits (Shutdown tells the head).
int RunGuest(const std::string& mode, const std::string& name, const char* state_dir) {
  using namespace tessera;  // NOLINT: a test's second main
  using tessera::testing::MakeTally;
  using tessera::testing::Tally;
  InitOptions init;
  init.state_dir = state_dir;
  if (absl::Status s = Init(init); !s.ok()) {
    std::fprintf(stderr, "guest: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  int code = 1;
  if (mode == "find") {
    absl::StatusOr<ActorHandle<Tally>> found = GetActor<Tally>(name);
    if (!found.ok()) {
      std::fprintf(stderr, "guest: %s\n", std::string(found.status().message()).c_str());
    } else if (auto value = Get(found->Task(&Tally::Add).Remote(1), absl::Seconds(60));
               value.ok()) {
      std::printf("value=%d\n", *value);
      code = 0;
    } else {
      std::fprintf(stderr, "guest: %s\n", std::string(value.status().message()).c_str());
    }
  } else if (mode == "find-many") {
    // Every thread looks the actor up and adds 1 at the same moment.
    std::vector<absl::StatusOr<int>> added(tessera::testing::kGuestLookups,
                                           absl::UnknownError("not run"));
    std::vector<std::thread> threads;
    for (absl::StatusOr<int>& result : added) {
      threads.emplace_back([&result, &name] {
        absl::StatusOr<ActorHandle<Tally>> found = GetActor<Tally>(name);
        result = found.ok() ? Get(found->Task(&Tally::Add).Remote(1), absl::Seconds(60))
                            : absl::StatusOr<int>(found.status());
      });
    }
    for (std::thread& thread : threads) thread.join();
    int largest = 0;
    code = 0;
    for (const absl::StatusOr<int>& result : added) {
      if (!result.ok()) {
        std::fprintf(stderr, "guest: %s\n", result.status().ToString().c_str());
        code = 1;
      } else {
        largest = std::max(largest, *result);
      }
    }
    if (code == 0) std::printf("total=%d\n", largest);
  } else if (mode == "claim") {
    ActorHandle<Tally> mine = Actor(MakeTally).Name(name).Remote(0);
    if (mine.status().ok()) {
      std::printf("created\n");
    } else {
      std::printf("%s: %s\n", absl::StatusCodeToString(mine.status().code()).c_str(),
                  std::string(mine.status().message()).c_str());
    }
    code = 0;
  } else if (mode == "own") {
    ActorHandle<Tally> owned = Actor(MakeTally).Name(name).Remote(0);
    ActorHandle<Tally> detached = Actor(MakeTally).Name(name + "-detached").Detached().Remote(0);
    auto a = Get(owned.Task(&Tally::Add).Remote(1), absl::Seconds(60));
    auto b = Get(detached.Task(&Tally::Add).Remote(1), absl::Seconds(60));
    if (a.ok() && b.ok()) {
      std::printf("ready\n");
      code = 0;
    } else {
      std::fprintf(stderr, "guest: %s / %s\n", a.status().ToString().c_str(),
                   b.status().ToString().c_str());
    }
  }
  std::fflush(stdout);
  Shutdown();
  return code;
}

int main(int argc, char** argv) {
  if (tessera::IsWorkerProcess()) (void)tessera::Init();
  if (const char* guest = std::getenv("TESSERA_NAMED_ACTOR_GUEST"); guest != nullptr) {
    return RunGuest(guest, std::getenv("TESSERA_NAMED_ACTOR_NAME"),
                    std::getenv("TESSERA_NAMED_ACTOR_STATE"));
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
