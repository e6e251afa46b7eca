// ActorDirectory: names held by one live actor per namespace and freed at death, updates, the
// owner's and the node's deaths, retention of the dead, persistence across a restart (Restore
// from a store another directory wrote), paging, and failed writes reported.
#include "head/actor_directory.h"

#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "head/actor_info_proto.h"
#include "head/state_store.h"

namespace tessera {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAre;

ActorRecord Actor(std::string id, std::string name, std::string owner = "driver-1",
                  std::string name_space = "") {
  ActorRecord actor;
  actor.actor_id = std::move(id);
  actor.name = std::move(name);
  actor.name_space = std::move(name_space);
  actor.class_name = "Counter";
  actor.owner = std::move(owner);
  return actor;
}

ActorRecord Alive(ActorRecord actor, std::string address, std::string node, int restarts = 0) {
  actor.state = ActorState::kAlive;
  actor.address = std::move(address);
  actor.node_id = std::move(node);
  actor.restarts = restarts;
  return actor;
}

// A store whose writes fail while `failing` is set.
class FlakyStore : public InMemoryStateStore {
 public:
  bool failing = false;
  absl::Status Put(std::string_view table, std::string_view key, std::string_view value) override {
    if (failing) return absl::UnavailableError("redis is down");
    return InMemoryStateStore::Put(table, key, value);
  }
};

class ActorDirectoryTest : public ::testing::Test {
 protected:
  std::unique_ptr<ActorDirectory> MakeDirectory(size_t max_dead = 1000) {
    return std::make_unique<ActorDirectory>(ActorDirectoryOptions{&store_, &clock_, max_dead});
  }
  std::vector<std::string> ListedIds(const ActorDirectory& directory) {
    bool more = false;
    std::vector<std::string> ids;
    for (const ActorRecord& actor : directory.List("", 1000, &more)) ids.push_back(actor.actor_id);
    EXPECT_FALSE(more);
    return ids;
  }

  FakeClock clock_;
  FlakyStore store_;
};

TEST_F(ActorDirectoryTest, ANameIsHeldByOneLiveActorAndFreedWhenItDies) {
  auto directory = MakeDirectory();
  ASSERT_TRUE(directory->Register(Actor("a1", "counter")).ok());
  auto found = directory->Get("counter", "");
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(found->actor_id, "a1");
  EXPECT_EQ(found->state, ActorState::kPending);

  auto second = directory->Register(Actor("a2", "counter", "driver-2"));
  ASSERT_EQ(second.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(second.status().message(), HasSubstr("held by live actor a1"));
  EXPECT_THAT(second.status().message(), HasSubstr("owner driver-1"));

  auto dead = directory->Died("a1", "killed by tessera::Kill");
  ASSERT_TRUE(dead.ok()) << dead.status();
  EXPECT_EQ(dead->state, ActorState::kDead);
  EXPECT_EQ(directory->Get("counter", "").status().code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(directory->Register(Actor("a2", "counter", "driver-2")).ok());
  EXPECT_EQ(directory->Get("counter", "")->actor_id, "a2");
}

TEST_F(ActorDirectoryTest, NamesAreUniquePerNamespace) {
  auto directory = MakeDirectory();
  ASSERT_TRUE(directory->Register(Actor("a1", "counter", "d", "team-a")).ok());
  ASSERT_TRUE(directory->Register(Actor("a2", "counter", "d", "team-b")).ok());
  EXPECT_EQ(directory->Get("counter", "team-a")->actor_id, "a1");
  EXPECT_EQ(directory->Get("counter", "team-b")->actor_id, "a2");
  EXPECT_EQ(directory->Get("counter", "").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(directory->Register(Actor("a3", "counter", "d", "team-a")).status().code(),
            absl::StatusCode::kAlreadyExists);
}

TEST_F(ActorDirectoryTest, UpdatesMoveTheActorButNeverItsNameOwnerOrClass) {
  auto directory = MakeDirectory();
  ASSERT_TRUE(directory->Register(Actor("a1", "counter")).ok());
  ASSERT_TRUE(directory->Register(Alive(Actor("a1", "counter"), "10.0.0.1:5000", "node-1")).ok());
  EXPECT_EQ(directory->Get("counter", "")->address, "10.0.0.1:5000");

  ActorRecord restarting = Actor("a1", "counter", "someone-else");
  restarting.class_name = "Other";
  restarting.state = ActorState::kRestarting;
  restarting.address = "stale";
  restarting.restarts = 1;
  auto updated = directory->Register(restarting);
  ASSERT_TRUE(updated.ok()) << updated.status();
  EXPECT_EQ(updated->state, ActorState::kRestarting);
  EXPECT_EQ(updated->address, "");  // an address only while alive
  EXPECT_EQ(updated->owner, "driver-1");
  EXPECT_EQ(updated->class_name, "Counter");

  ASSERT_TRUE(
      directory->Register(Alive(Actor("a1", "counter"), "10.0.0.2:6000", "node-2", 1)).ok());
  auto found = directory->Get("counter", "");
  EXPECT_EQ(found->address, "10.0.0.2:6000");
  EXPECT_EQ(found->node_id, "node-2");
  EXPECT_EQ(found->restarts, 1);

  EXPECT_EQ(directory->Register(Actor("a1", "renamed")).status().code(),
            absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(directory->Died("a1", "its process died").ok());
  auto revived = directory->Register(Alive(Actor("a1", "counter"), "x", "node-2"));
  EXPECT_EQ(revived.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(revived.status().message(), HasSubstr("is dead (its process died)"));
}

TEST_F(ActorDirectoryTest, BadRegistrationsAreRefused) {
  auto directory = MakeDirectory();
  EXPECT_EQ(directory->Register(Actor("", "counter")).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(directory->Register(Actor("a1", "")).status().code(),
            absl::StatusCode::kInvalidArgument);
  ActorRecord restarting = Actor("a1", "counter");
  restarting.state = ActorState::kRestarting;
  EXPECT_EQ(directory->Register(restarting).status().code(), absl::StatusCode::kInvalidArgument);
  ActorRecord dead = Actor("a1", "counter");
  dead.state = ActorState::kDead;
  EXPECT_EQ(directory->Register(dead).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(directory->Died("nobody", "x").status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(ListedIds(*directory), IsEmpty());
}

TEST_F(ActorDirectoryTest, DyingAgainKeepsTheFirstCause) {
  auto directory = MakeDirectory();
  ASSERT_TRUE(directory->Register(Actor("a1", "counter")).ok());
  ASSERT_TRUE(directory->Died("a1", "killed by tessera::Kill").ok());
  auto again = directory->Died("a1", "its owner exited");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->death_cause, "killed by tessera::Kill");
}

TEST_F(ActorDirectoryTest, AnOwnersActorsDieWithItButDetachedOnesStay) {
  auto directory = MakeDirectory();
  ASSERT_TRUE(directory->Register(Actor("a1", "mine", "driver-1")).ok());
  ASSERT_TRUE(directory->Register(Alive(Actor("a2", "mine-too", "driver-1"), "x", "n")).ok());
  ASSERT_TRUE(directory->Register(Actor("a3", "theirs", "driver-2")).ok());
  ASSERT_TRUE(directory->Register(Actor("a4", "detached", "")).ok());

  EXPECT_THAT(directory->OwnerGone("driver-1", "its owner driver-1 exited"),
              UnorderedElementsAre("mine", "mine-too"));
  EXPECT_EQ(directory->Get("mine", "").status().code(), absl::StatusCode::kNotFound);
  bool more = false;
  for (const ActorRecord& actor : directory->List("", 10, &more)) {
    if (actor.owner == "driver-1") {
      EXPECT_EQ(actor.state, ActorState::kDead);
      EXPECT_EQ(actor.death_cause, "its owner driver-1 exited");
    }
  }
  EXPECT_TRUE(directory->Get("theirs", "").ok());
  EXPECT_TRUE(directory->Get("detached", "").ok());
  EXPECT_THAT(directory->OwnerGone("", "nobody"), IsEmpty());
  EXPECT_THAT(directory->OwnerGone("driver-1", "again"), IsEmpty());
}

ActorRecord Detached(ActorRecord actor) {
  actor.detached = true;
  return actor;
}

TEST(ActorInfoProtoTest, WhetherTheActorRunsCallsInOrderRoundTrips) {
  for (const bool in_order : {false, true}) {
    ActorRecord record = Actor("a1", "counter", "driver-1");
    record.calls_in_order = in_order;
    v1::ActorInfo info;
    ActorRecordToProto(record, &info);
    EXPECT_EQ(info.calls_in_order(), in_order);
    absl::StatusOr<ActorRecord> back = ActorRecordFromProto(info);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(back->calls_in_order, in_order);
  }
}

TEST_F(ActorDirectoryTest, AHandlesMetadataIsKeptAsRegistered) {
  auto directory = MakeDirectory();
  ActorRecord actor = Actor("a1", "counter");
  actor.handle_metadata = R"({"methods": ["add"]})";
  ASSERT_TRUE(directory->Register(actor).ok());
  // An update (its process came up) carries none: what was registered stays.
  ASSERT_TRUE(directory->Register(Alive(Actor("a1", "counter"), "10.0.0.1:5", "n1")).ok());
  auto found = directory->Get("counter", "");
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(found->handle_metadata, actor.handle_metadata);
  v1::ActorInfo info;
  ActorRecordToProto(*found, &info);
  EXPECT_EQ(info.handle_metadata(), actor.handle_metadata);
  EXPECT_EQ(ActorRecordFromProto(info)->handle_metadata, actor.handle_metadata);
}

TEST_F(ActorDirectoryTest, ADetachedActorOutlivesItsCreatorWithNoOwner) {
  auto directory = MakeDirectory();
  ActorRecord made = Alive(Detached(Actor("a1", "service", "driver-1")), "x", "node-1");
  made.worker_id = "w1";
  ASSERT_TRUE(directory->Register(made).ok());
  ASSERT_TRUE(directory->Register(Actor("a2", "plain", "driver-1")).ok());

  EXPECT_THAT(directory->OwnerGone("driver-1", "its owner driver-1 exited"),
              UnorderedElementsAre("plain"));
  auto service = directory->Get("service", "");
  ASSERT_TRUE(service.ok()) << service.status();
  EXPECT_EQ(service->state, ActorState::kAlive);
  EXPECT_TRUE(service->owner.empty());
  EXPECT_TRUE(service->detached);
  EXPECT_EQ(service->worker_id, "w1");
  EXPECT_THAT(directory->LiveOwners(), IsEmpty());
}

TEST_F(ActorDirectoryTest, TheExitOfADetachedActorsWorkerEndsItOnlyOnceNoDriverOwnsIt) {
  auto directory = MakeDirectory();
  ActorRecord made = Alive(Detached(Actor("a1", "service", "driver-1")), "x", "node-1");
  made.worker_id = "w1";
  ASSERT_TRUE(directory->Register(made).ok());
  // While its creator lives, the creator restarts it or reports it dead.
  auto owned = directory->WorkerExited("a1", "w1", "killed by signal 9 (SIGKILL)");
  ASSERT_TRUE(owned.ok()) << owned.status();
  EXPECT_EQ(owned->state, ActorState::kAlive);

  (void)directory->OwnerGone("driver-1", "its owner driver-1 exited");
  // A process it no longer runs in says nothing of it.
  auto stale = directory->WorkerExited("a1", "w0", "exited with code 1");
  ASSERT_TRUE(stale.ok()) << stale.status();
  EXPECT_EQ(stale->state, ActorState::kAlive);

  auto dead = directory->WorkerExited("a1", "w1", "killed by signal 9 (SIGKILL)");
  ASSERT_TRUE(dead.ok()) << dead.status();
  EXPECT_EQ(dead->state, ActorState::kDead);
  EXPECT_EQ(dead->death_cause, "killed by signal 9 (SIGKILL)");
  EXPECT_EQ(directory->Get("service", "").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(directory->WorkerExited("nobody", "w1", "x").status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(ActorDirectoryTest, TheActorsAliveOnADeadNodeRestartUnderTheirOwnerOrDieWhenDetached) {
  auto directory = MakeDirectory();
  ASSERT_TRUE(directory->Register(Alive(Actor("a1", "there"), "x", "node-1")).ok());
  ASSERT_TRUE(directory->Register(Alive(Actor("a2", "detached-there", ""), "y", "node-1")).ok());
  ASSERT_TRUE(directory->Register(Alive(Actor("a3", "elsewhere"), "z", "node-2")).ok());
  ASSERT_TRUE(directory->Register(Actor("a4", "pending")).ok());
  // Moved off node-1 before it died.
  ASSERT_TRUE(directory->Register(Alive(Actor("a5", "moved"), "w", "node-1")).ok());
  ASSERT_TRUE(directory->Register(Alive(Actor("a5", "moved"), "v", "node-2", 1)).ok());

  EXPECT_THAT(directory->NodeDead("node-1", "node node-1 declared dead"),
              UnorderedElementsAre("there", "detached-there"));
  // Its owner restarts it elsewhere: the name stayed its own meanwhile.
  auto there = directory->Get("there", "");
  ASSERT_TRUE(there.ok()) << there.status();
  EXPECT_EQ(there->state, ActorState::kRestarting);
  EXPECT_TRUE(there->node_id.empty());
  auto back = directory->Register(Alive(Actor("a1", "there"), "x2", "node-2", 1));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->state, ActorState::kAlive);
  EXPECT_EQ(back->node_id, "node-2");
  // A detached one has no owner to restart it.
  EXPECT_EQ(directory->Get("detached-there", "").status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(directory->Get("elsewhere", "").ok());
  EXPECT_TRUE(directory->Get("pending", "").ok());
  EXPECT_TRUE(directory->Get("moved", "").ok());
}

TEST_F(ActorDirectoryTest, OnlyTheNewestDeadAreKept) {
  auto directory = MakeDirectory(/*max_dead=*/2);
  for (const char* id : {"a1", "a2", "a3", "live"}) {
    ASSERT_TRUE(directory->Register(Actor(id, id)).ok());
  }
  // Dying order, not id order, decides.
  for (const char* id : {"a3", "a1", "a2"}) {
    clock_.Advance(absl::Seconds(1));
    ASSERT_TRUE(directory->Died(id, "done").ok());
  }
  EXPECT_THAT(ListedIds(*directory), ElementsAre("a1", "a2", "live"));
  EXPECT_FALSE(store_.Get(kActorsTable, "a3")->has_value());
  EXPECT_TRUE(store_.Get(kActorsTable, "a1")->has_value());
}

TEST_F(ActorDirectoryTest, ARestoredDirectoryKnowsWhatTheFormerOneStored) {
  {
    auto former = MakeDirectory();
    ASSERT_TRUE(
        former->Register(Alive(Actor("a1", "counter", "driver-1", "ns"), "x", "n1", 2)).ok());
    ASSERT_TRUE(former->Register(Actor("a2", "gone", "")).ok());
    ASSERT_TRUE(former->Register(Actor("a3", "older-gone")).ok());
    ASSERT_TRUE(former->Died("a3", "first").ok());
    clock_.Advance(absl::Seconds(1));
    ASSERT_TRUE(former->Died("a2", "second").ok());
  }
  auto directory = MakeDirectory(/*max_dead=*/1);
  ASSERT_TRUE(directory->Restore().ok());
  auto found = directory->Get("counter", "ns");
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(found->actor_id, "a1");
  EXPECT_EQ(found->address, "x");
  EXPECT_EQ(found->node_id, "n1");
  EXPECT_EQ(found->restarts, 2);
  EXPECT_EQ(found->owner, "driver-1");
  EXPECT_EQ(found->class_name, "Counter");
  // The name is held again; the dead ones' are free; the older dead is past retention.
  EXPECT_EQ(directory->Register(Actor("b1", "counter", "d", "ns")).status().code(),
            absl::StatusCode::kAlreadyExists);
  EXPECT_TRUE(directory->Register(Actor("b2", "gone", "d")).ok());
  EXPECT_THAT(ListedIds(*directory), ElementsAre("a1", "a2", "b2"));
  // The owner index came back too.
  EXPECT_THAT(directory->LiveOwners(), ElementsAre("d", "driver-1"));
  EXPECT_THAT(directory->OwnerGone("driver-1", "exited"), ElementsAre("counter"));
  EXPECT_THAT(directory->LiveOwners(), ElementsAre("d"));
}

TEST_F(ActorDirectoryTest, ACorruptRecordIsDataLossNamingItsKey) {
  ASSERT_TRUE(store_.Put(kActorsTable, "a1", "\xff\xff not a record").ok());
  auto directory = MakeDirectory();
  absl::Status restored = directory->Restore();
  EXPECT_EQ(restored.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(restored.message(), HasSubstr("actors/a1"));
}

TEST_F(ActorDirectoryTest, ARecordUnderAnotherKeyIsDataLoss) {
  {
    auto former = MakeDirectory();
    ASSERT_TRUE(former->Register(Actor("a1", "counter")).ok());
  }
  ASSERT_TRUE(store_.Put(kActorsTable, "a2", **store_.Get(kActorsTable, "a1")).ok());
  absl::Status restored = MakeDirectory()->Restore();
  EXPECT_EQ(restored.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(restored.message(), HasSubstr("actors/a2"));
}

TEST_F(ActorDirectoryTest, ListPagesByActorId) {
  auto directory = MakeDirectory();
  for (const char* id : {"c", "a", "d", "b"}) ASSERT_TRUE(directory->Register(Actor(id, id)).ok());
  ASSERT_TRUE(directory->Died("b", "done").ok());
  bool more = false;
  std::vector<ActorRecord> page = directory->List("", 2, &more);
  ASSERT_EQ(page.size(), 2u);
  EXPECT_EQ(page[0].actor_id, "a");
  EXPECT_EQ(page[1].actor_id, "b");
  EXPECT_EQ(page[1].state, ActorState::kDead);
  EXPECT_TRUE(more);
  page = directory->List("b", 2, &more);
  ASSERT_EQ(page.size(), 2u);
  EXPECT_EQ(page[0].actor_id, "c");
  EXPECT_EQ(page[1].actor_id, "d");
  EXPECT_FALSE(more);
  EXPECT_TRUE(directory->List("d", 2, &more).empty());
  EXPECT_FALSE(more);
}

TEST_F(ActorDirectoryTest, FailedWritesAreReportedOnceAndTheDirectoryGoesOn) {
  auto directory = MakeDirectory();
  store_.failing = true;
  ASSERT_TRUE(directory->Register(Actor("a1", "counter")).ok());
  EXPECT_TRUE(directory->Get("counter", "").ok());
  std::vector<std::string> failures = directory->TakeStoreFailures();
  ASSERT_EQ(failures.size(), 1u);
  EXPECT_THAT(failures[0], HasSubstr("actors/a1: redis is down"));
  EXPECT_THAT(directory->TakeStoreFailures(), IsEmpty());
  store_.failing = false;
  ASSERT_TRUE(directory->Died("a1", "done").ok());
  EXPECT_THAT(directory->TakeStoreFailures(), IsEmpty());
}

}  // namespace
}  // namespace tessera
