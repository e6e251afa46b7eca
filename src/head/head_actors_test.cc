// The head's actor RPCs (head_actors.cc) on a HeadService with a fake clock and an in-memory
// store: proto round trips and status codes, ListActors' pages and tokens, request limits, the
// owner's exit or silence, and a second head restored from the first one's store.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "base/clock.h"
#include "head/head_service.h"
#include "head/state_store.h"
#include "scheduling/scheduling_test_util.h"
#include "wire/proto_convert.h"

namespace tessera {
namespace {

using ::testing::HasSubstr;

class HeadActorsTest : public ::testing::Test {
 protected:
  HeadActorsTest() {
    head_ = std::make_unique<HeadService>(Options());
    RegisterNode(*head_, "n1");
  }

  // The node the actors run on (no agent is called in these tests).
  static void RegisterNode(HeadService& head, const std::string& id) {
    v1::RegisterNodeRequest request;
    wire::NodeToProto(testing_util::Spec(id, "CPU=4"), "127.0.0.1:1", "i1", request.mutable_node());
    v1::RegisterNodeResponse response;
    ASSERT_TRUE(head.nodes().RegisterNode(nullptr, &request, &response).ok());
  }

  HeadServiceOptions Options() {
    HeadServiceOptions options;
    options.clock = &clock_;
    options.store = &store_;
    options.driver_timeout = absl::Seconds(10);
    options.agent_clients = [](const std::string&, const std::string&) {
      return std::shared_ptr<NodeAgentClient>();  // no agent is called in these tests
    };
    return options;
  }

  static v1::ActorInfo Actor(const std::string& id, const std::string& name,
                             const std::string& owner = "driver-1") {
    v1::ActorInfo actor;
    actor.set_actor_id(id);
    actor.set_name(name);
    actor.set_class_name("Counter");
    actor.set_owner(owner);
    actor.set_state(v1::ACTOR_STATE_PENDING);
    return actor;
  }

  grpc::Status Register(const v1::ActorInfo& actor, v1::ActorInfo* out = nullptr) {
    v1::RegisterActorRequest request;
    *request.mutable_actor() = actor;
    v1::ActorInfo response;
    grpc::Status status = head_->actors().RegisterActor(nullptr, &request, &response);
    if (out != nullptr) *out = response;
    return status;
  }
  grpc::Status Lookup(const std::string& name, v1::ActorInfo* out = nullptr,
                      HeadService* head = nullptr) {
    v1::GetActorRequest request;
    request.set_name(name);
    v1::ActorInfo response;
    grpc::Status status =
        (head != nullptr ? head : head_.get())->actors().GetActor(nullptr, &request, &response);
    if (out != nullptr) *out = response;
    return status;
  }
  grpc::Status Died(const std::string& id, const std::string& cause) {
    v1::ActorDiedRequest request;
    request.set_actor_id(id);
    request.set_death_cause(cause);
    v1::ActorInfo response;
    return head_->actors().ActorDied(nullptr, &request, &response);
  }

  FakeClock clock_;
  InMemoryStateStore store_;
  std::unique_ptr<HeadService> head_;
};

TEST_F(HeadActorsTest, RegisterUpdateLookUpAndDieThroughTheRpcs) {
  v1::ActorInfo stored;
  ASSERT_TRUE(Register(Actor("a1", "counter"), &stored).ok());
  EXPECT_EQ(stored.state(), v1::ACTOR_STATE_PENDING);

  v1::ActorInfo alive = Actor("a1", "counter");
  alive.set_state(v1::ACTOR_STATE_ALIVE);
  alive.set_address("127.0.0.1:5000");
  alive.set_node_id("n1");
  alive.set_restarts(2);
  ASSERT_TRUE(Register(alive).ok());
  v1::ActorInfo found;
  ASSERT_TRUE(Lookup("counter", &found).ok());
  EXPECT_EQ(found.SerializeAsString(), alive.SerializeAsString());

  grpc::Status twin = Register(Actor("a2", "counter", "driver-2"));
  EXPECT_EQ(twin.error_code(), grpc::StatusCode::ALREADY_EXISTS);
  EXPECT_THAT(twin.error_message(), HasSubstr("held by live actor a1"));

  ASSERT_TRUE(Died("a1", "killed by tessera::Kill").ok());
  EXPECT_EQ(Lookup("counter").error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(Register(alive).error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(Died("nobody", "x").error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(HeadActorsTest, BadRequestsAreOneLineInvalidArguments) {
  v1::ActorInfo unspecified = Actor("a1", "counter");
  unspecified.set_state(v1::ACTOR_STATE_UNSPECIFIED);
  grpc::Status status = Register(unspecified);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("actor.state"));

  status = Register(Actor("a1", std::string(300, 'n')));
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("actor.name has 300 characters"));

  v1::ActorInfo long_class = Actor("a1", "counter");
  long_class.set_class_name(std::string(2000, 'c'));
  EXPECT_EQ(Register(long_class).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  v1::ActorInfo big_metadata = Actor("a1", "counter");
  big_metadata.set_handle_metadata(std::string(64 * 1024 + 1, 'x'));
  status = Register(big_metadata);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("actor.handle_metadata has 65537 bytes"));
  EXPECT_EQ(Register(Actor("", "counter")).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(Lookup("").error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(Died("", "x").error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(HeadActorsTest, ListActorsPagesByActorIdWithItsOwnTokens) {
  for (const char* id : {"e", "c", "a", "d", "b"}) ASSERT_TRUE(Register(Actor(id, id)).ok());
  ASSERT_TRUE(Died("c", "done").ok());
  std::vector<std::string> ids;
  v1::ListRequest request;
  request.set_page_size(2);
  int pages = 0;
  do {
    v1::ListActorsResponse page;
    ASSERT_TRUE(head_->actors().ListActors(nullptr, &request, &page).ok());
    EXPECT_LE(page.actors_size(), 2);
    for (const v1::ActorInfo& actor : page.actors()) ids.push_back(actor.actor_id());
    request.set_page_token(page.next_page_token());
    ++pages;
  } while (!request.page_token().empty());
  EXPECT_THAT(ids, ::testing::ElementsAre("a", "b", "c", "d", "e"));
  EXPECT_EQ(pages, 3);

  v1::ListRequest foreign;
  foreign.set_page_token("nodes:a");
  v1::ListActorsResponse page;
  EXPECT_EQ(head_->actors().ListActors(nullptr, &foreign, &page).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(HeadActorsTest, AnExitedOwnersActorsDieButDetachedOnesStay) {
  ASSERT_TRUE(Register(Actor("a1", "owned", "driver-1")).ok());
  ASSERT_TRUE(Register(Actor("a2", "detached", "")).ok());
  v1::DriverExitedRequest exited;
  exited.set_driver_id("driver-1");
  v1::DriverExitedResponse response;
  ASSERT_TRUE(head_->reservations().DriverExited(nullptr, &exited, &response).ok());
  EXPECT_EQ(Lookup("owned").error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_TRUE(Lookup("detached").ok());
}

// Registering with an owner is a sign of life: an owner that never calls KeepDriverAlive is
// still timed out, and takes its actors with it.
TEST_F(HeadActorsTest, ASilentOwnersActorsDieAfterTheDriverTimeout) {
  ASSERT_TRUE(Register(Actor("a1", "owned", "driver-1")).ok());
  clock_.Advance(absl::Seconds(5));
  head_->Tick();
  EXPECT_TRUE(Lookup("owned").ok());
  clock_.Advance(absl::Seconds(6));
  head_->Tick();
  EXPECT_EQ(Lookup("owned").error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(HeadActorsTest, ARestoredHeadKnowsTheNamesTheFormerOneHeld) {
  v1::ActorInfo alive = Actor("a1", "counter");
  alive.set_state(v1::ACTOR_STATE_ALIVE);
  alive.set_address("127.0.0.1:5000");
  alive.set_node_id("n1");
  ASSERT_TRUE(Register(alive).ok());
  head_.reset();
  auto restarted = std::make_unique<HeadService>(Options());
  ASSERT_TRUE(restarted->Restore().ok());  // n1 comes back with the nodes table
  v1::ActorInfo found;
  ASSERT_TRUE(Lookup("counter", &found, restarted.get()).ok());
  EXPECT_EQ(found.SerializeAsString(), alive.SerializeAsString());
}

TEST_F(HeadActorsTest, AnActorOnANodeDeclaredDeadRestartsUnderItsOwnerAndCannotBeAliveThere) {
  v1::ActorInfo alive = Actor("a1", "counter");
  alive.set_state(v1::ACTOR_STATE_ALIVE);
  alive.set_address("127.0.0.1:5000");
  alive.set_node_id("n1");
  ASSERT_TRUE(Register(alive).ok());
  for (int i = 0; i < 24; ++i) {  // n1 falls silent past the node timeout, checked every 250 ms
    clock_.Advance(absl::Milliseconds(250));
    head_->Tick();
  }
  v1::ActorInfo found;
  ASSERT_TRUE(Lookup("counter", &found).ok());  // its name is still its own
  EXPECT_EQ(found.state(), v1::ACTOR_STATE_RESTARTING);
  EXPECT_TRUE(found.node_id().empty());
  // A late report from the dead node is refused; the owner's restart elsewhere is taken.
  grpc::Status late = Register(alive);
  EXPECT_EQ(late.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(late.error_message(), HasSubstr("node n1"));
  RegisterNode(*head_, "n2");
  v1::ActorInfo moved = alive;
  moved.set_node_id("n2");
  moved.set_restarts(1);
  ASSERT_TRUE(Register(moved).ok());
  ASSERT_TRUE(Lookup("counter", &found).ok());
  EXPECT_EQ(found.node_id(), "n2");
  EXPECT_EQ(found.state(), v1::ACTOR_STATE_ALIVE);
}

}  // namespace
}  // namespace tessera
