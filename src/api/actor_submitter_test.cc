// TaskSubmitter's actor path with fake leases and channels: order, restarts, retries, death, kill.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "api/submitter_test_fakes.h"
#include "api/task_submitter.h"

namespace tessera::api {
namespace {

using ::testing::HasSubstr;

class ActorSubmitterTest : public ::testing::Test {
 protected:
  // Batching off unless asked for (BatchingActorSubmitterTest): each call leaves at once.
  explicit ActorSubmitterTest(int max_batch_wait = 1)
      : submitter_(Options(max_batch_wait), &leases_,
                   [this](const ObjectId& id, absl::StatusOr<std::string> v) {
                     return outcomes_.emplace(id, std::move(v)).second;
                   }) {
    shape_.key = "actor:1|CPU=1|";
  }

  static SubmitterOptions Options(int max_batch_wait) {
    SubmitterOptions o;
    o.max_batch_wait = max_batch_wait;
    return o;
  }

  void Create(int max_restarts, int max_task_retries, int max_concurrency = 1) {
    ActorSpec actor;
    actor.display = "actor \"a\"";
    actor.class_name = "A";
    actor.actor_id = "ab12";
    actor.name = "a";
    actor.name_space = "ns";
    actor.max_restarts = max_restarts;
    actor.max_task_retries = max_task_retries;
    QueuedTask constructor;
    constructor.spec.set_task_id("ctor");
    constructor.spec.set_function("MakeA");
    constructor.spec.set_max_concurrency(max_concurrency);
    submitter_.CreateActor(shape_, actor, constructor);
  }

  ObjectId Call(const std::string& name, int max_task_retries = -1) {
    QueuedTask call;
    call.max_task_retries = max_task_retries;
    const TaskId id = TaskId::FromRandom();
    call.spec.set_task_id(id.Binary());
    call.spec.set_function(name);
    call.return_id = ObjectId::ForTaskReturn(id, 1);
    submitter_.SubmitActorCall(shape_.key, call);
    return call.return_id;
  }

  std::pair<WorkerHandle, std::shared_ptr<FakeChannel>> AddWorker() {
    auto channel = std::make_shared<FakeChannel>();
    const WorkerHandle h = submitter_.NewHandle();
    EXPECT_TRUE(submitter_.AddWorker(shape_.key, h, channel));
    return {h, channel};
  }

  static std::vector<std::string> Functions(const std::vector<v1::TaskSpec>& specs) {
    std::vector<std::string> out;
    for (const auto& s : specs) out.push_back(s.function());
    return out;
  }

  void Answer(WorkerHandle h, const v1::TaskSpec& spec) {
    v1::TaskResultBatch results;
    auto* r = results.add_results();
    r->set_task_id(spec.task_id());
    r->set_value(spec.function());
    submitter_.OnResults(h, results);
  }

  FakeLeases leases_;
  std::map<ObjectId, absl::StatusOr<std::string>> outcomes_;
  TaskSubmitter submitter_;
  LeaseShape shape_;
};

TEST_F(ActorSubmitterTest, AConstructorThatThrowsKillsTheActorWithItsError) {
  Create(/*max_restarts=*/3, /*max_task_retries=*/3);
  const ObjectId sent = Call("m1");
  auto [h, channel] = AddWorker();
  ASSERT_EQ(Functions(channel->sent), (std::vector<std::string>{"MakeA", "m1"}));
  v1::TaskResultBatch results;
  auto* r = results.add_results();
  r->set_task_id(channel->sent[0].task_id());
  r->mutable_error()->set_kind("application");
  r->mutable_error()->set_type("std::runtime_error");
  r->mutable_error()->set_message("no config");
  submitter_.OnResults(h, results);
  const ObjectId later = Call("m2");
  for (const ObjectId& id : {sent, later}) {
    ASSERT_EQ(outcomes_.count(id), 1u);
    EXPECT_EQ(outcomes_.at(id).status().code(), absl::StatusCode::kUnavailable);
    EXPECT_THAT(
        std::string(outcomes_.at(id).status().message()),
        HasSubstr(
            "actor \"a\" is dead: its constructor MakeA threw std::runtime_error: no config"));
  }
  EXPECT_TRUE(channel->closed);            // its worker is let go
  EXPECT_EQ(leases_.requests.size(), 1u);  // and not restarted: it would throw again
  // The worker's own answer for m1 ("no instance") arrives later and is not delivered.
  Answer(h, channel->sent[1]);
  EXPECT_EQ(outcomes_.at(sent).status().code(), absl::StatusCode::kUnavailable);
}

TEST_F(ActorSubmitterTest, ConstructorFirstThenCallsInSequenceOrder) {
  Create(0, 0);
  EXPECT_EQ(leases_.requests.size(), 1u);
  Call("m1");
  Call("m2");
  auto [h, channel] = AddWorker();
  Call("m3");
  ASSERT_EQ(Functions(channel->sent), (std::vector<std::string>{"MakeA", "m1", "m2", "m3"}));
  EXPECT_EQ(channel->sent[0].kind(), v1::ACTOR_CREATE);
  for (int i = 1; i < 4; ++i) {
    EXPECT_EQ(channel->sent[i].kind(), v1::ACTOR_METHOD);
    EXPECT_EQ(channel->sent[i].sequence(), i);
  }
  // An actor's worker is never let go for being idle, and no second worker is asked for.
  for (const auto& spec : channel->sent) Answer(h, spec);
  submitter_.ReapIdle(absl::Now() + absl::Hours(1));
  EXPECT_FALSE(channel->closed);
  EXPECT_EQ(leases_.requests.size(), 1u);
  EXPECT_EQ(outcomes_.size(), 3u);  // the constructor's outcome is not an object
}

TEST_F(ActorSubmitterTest, RestartRerunsConstructorAndRetriesPendingCallsInOrder) {
  Create(1, 1);
  auto [h, channel] = AddWorker();
  const ObjectId a = Call("a");
  Call("b");
  Call("c");
  Answer(h, channel->sent[0]);  // constructor
  Answer(h, channel->sent[1]);  // a
  submitter_.WorkerDied(h, "killed by signal 9 (SIGKILL)");
  EXPECT_EQ(leases_.requests.size(), 2u);
  auto [h2, channel2] = AddWorker();
  ASSERT_EQ(Functions(channel2->sent), (std::vector<std::string>{"MakeA", "b", "c"}));
  EXPECT_EQ(channel2->sent[1].sequence(), 2);
  EXPECT_EQ(channel2->sent[2].sequence(), 3);
  EXPECT_EQ(channel2->sent[1].attempt(), 1);
  EXPECT_EQ(submitter_.stats().retries, 2);
  EXPECT_TRUE(outcomes_.at(a).ok());
}

TEST_F(ActorSubmitterTest, CallsWithoutRetriesFailNamingTheCause) {
  Create(1, 0);
  auto [h, channel] = AddWorker();
  const ObjectId a = Call("a");
  submitter_.WorkerDied(h, "killed by signal 9 (SIGKILL)");
  ASSERT_EQ(outcomes_.count(a), 1u);
  EXPECT_EQ(outcomes_.at(a).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(outcomes_.at(a).status().message()), HasSubstr("SIGKILL"));
  // Restarted all the same: the next call runs on the new worker.
  auto [h2, channel2] = AddWorker();
  Call("b");
  EXPECT_EQ(Functions(channel2->sent), (std::vector<std::string>{"MakeA", "b"}));
}

// The default batching: calls wait for a batch while their actor runs others.
class BatchingActorSubmitterTest : public ActorSubmitterTest {
 protected:
  BatchingActorSubmitterTest() : ActorSubmitterTest(SubmitterOptions().max_batch_wait) {}
};

TEST_F(BatchingActorSubmitterTest, CallsKeptBackForABatchFailWithTheDeathAsSentOnesDo) {
  Create(1, 0);
  auto [h, channel] = AddWorker();
  Answer(h, channel->Unanswered().at(0));  // constructed
  const ObjectId a = Call("a");            // sent at once: the actor had nothing to do
  const ObjectId b = Call("b");            // kept back for a batch while "a" runs
  EXPECT_EQ(Functions(channel->sent), (std::vector<std::string>{"MakeA", "a"}));
  submitter_.WorkerDied(h, "killed by signal 9 (SIGKILL)");
  for (const ObjectId& id : {a, b}) {
    ASSERT_EQ(outcomes_.count(id), 1u);
    EXPECT_THAT(std::string(outcomes_.at(id).status().message()), HasSubstr("SIGKILL"));
  }
  auto [h2, channel2] = AddWorker();
  EXPECT_EQ(Functions(channel2->sent), (std::vector<std::string>{"MakeA"}));
}

TEST_F(BatchingActorSubmitterTest, AnActorThatRunsCallsConcurrentlyGetsEachCallAtOnce) {
  Create(0, 0, /*max_concurrency=*/2);
  auto [h, channel] = AddWorker();
  Answer(h, channel->Unanswered().at(0));
  Call("wait_for_signal");
  Call("signal");  // what the first waits for: never kept back
  EXPECT_EQ(Functions(channel->sent),
            (std::vector<std::string>{"MakeA", "wait_for_signal", "signal"}));
}

TEST_F(BatchingActorSubmitterTest, AnotherDriversActorIsBatchedOnlyWhenItRunsCallsInOrder) {
  for (const bool in_order : {false, true}) {
    LeaseShape shape;
    shape.key = in_order ? "attached:in-order" : "attached:concurrent";
    ActorSpec actor;
    actor.display = "actor \"b\"";
    actor.calls_in_order = in_order;
    auto channel = std::make_shared<FakeChannel>();
    submitter_.AttachActor(shape, actor, submitter_.NewHandle(), channel);
    for (const char* name : {"first", "second"}) {
      QueuedTask call;
      call.spec.set_task_id(TaskId::FromRandom().Binary());
      call.spec.set_function(name);
      submitter_.SubmitActorCall(shape.key, call);
    }
    // The second waits for a batch behind the first only when the actor runs one at a time.
    EXPECT_EQ(channel->sent.size(), in_order ? 1u : 2u) << shape.key;
  }
}

TEST_F(ActorSubmitterTest, ACallsOwnMaxTaskRetriesTakesThePlaceOfTheActors) {
  Create(1, 0);
  auto [h, channel] = AddWorker();
  const ObjectId kept = Call("kept", /*max_task_retries=*/1);
  const ObjectId lost = Call("lost");
  submitter_.WorkerDied(h, "killed by signal 9 (SIGKILL)");
  // The call without retries fails at once, before the restart, with Ray's ActorDiedError text.
  ASSERT_EQ(outcomes_.count(lost), 1u);
  EXPECT_EQ(outcomes_.count(kept), 0u);
  const std::string text(outcomes_.at(lost).status().message());
  EXPECT_EQ(text.rfind("The actor died unexpectedly before finishing this task.\n"
                       "\tclass_name: A\n\tactor_id: ab12\n\tname: a\n\tnamespace: ns\n",
                       0),
            0u)
      << text;
  EXPECT_THAT(text, HasSubstr("SIGKILL"));
  auto [h2, channel2] = AddWorker();
  EXPECT_EQ(Functions(channel2->sent), (std::vector<std::string>{"MakeA", "kept"}));
}

TEST_F(ActorSubmitterTest, AfterTheLastRestartEveryCallFailsDead) {
  Create(0, 3);
  auto [h, channel] = AddWorker();
  const ObjectId a = Call("a");
  submitter_.WorkerDied(h, "exited with code 3");
  EXPECT_EQ(leases_.requests.size(), 1u);  // no new worker
  ASSERT_EQ(outcomes_.count(a), 1u);
  EXPECT_THAT(std::string(outcomes_.at(a).status().message()),
              HasSubstr("actor \"a\" is dead: its process died (exited with code 3)"));
  const ObjectId b = Call("b");
  ASSERT_EQ(outcomes_.count(b), 1u);
  EXPECT_THAT(std::string(outcomes_.at(b).status().message()), HasSubstr("is dead"));
}

TEST_F(ActorSubmitterTest, KillFailsPendingAndLaterCallsAndLetsTheWorkerGo) {
  Create(5, 5);
  auto [h, channel] = AddWorker();
  const ObjectId a = Call("a");
  submitter_.KillActor(shape_.key);
  EXPECT_TRUE(channel->closed);
  EXPECT_TRUE(channel->exit_asked);  // its process ends now, detached or not
  EXPECT_THAT(std::string(outcomes_.at(a).status().message()),
              HasSubstr("is dead: killed by tessera::Kill"));
  submitter_.WorkerDied(h, "exited with code 0");  // its exit afterwards changes nothing
  EXPECT_EQ(leases_.requests.size(), 1u);
  const ObjectId b = Call("b");
  EXPECT_THAT(std::string(outcomes_.at(b).status().message()),
              HasSubstr("killed by tessera::Kill"));
}

TEST_F(ActorSubmitterTest, ALeaseThatCannotBeGrantedKillsTheActor) {
  Create(0, 0);
  const ObjectId a = Call("a");
  submitter_.LeaseFailed(shape_.key, absl::ResourceExhaustedError("infeasible: no GPU"), true);
  EXPECT_THAT(std::string(outcomes_.at(a).status().message()),
              HasSubstr("is dead: its worker could not start: infeasible"));
}

// What the driver tells the head's actor directory: each restart, then the one death.
TEST_F(ActorSubmitterTest, TheObserverHearsEachRestartAndTheDeathOnce) {
  std::vector<std::string> heard;
  submitter_.SetActorObserver([&](const std::string& key, const ActorChange& change) {
    heard.push_back(absl::StrCat(key, " ",
                                 change.kind == ActorChange::Kind::kDead ? "dead" : "restarting",
                                 " ", change.restarts, ": ", change.cause));
  });
  Create(/*max_restarts=*/1, /*max_task_retries=*/0);
  auto [h1, c1] = AddWorker();
  submitter_.WorkerDied(h1, "killed by signal 9 (SIGKILL)");
  auto [h2, c2] = AddWorker();
  submitter_.WorkerDied(h2, "exited with code 3");
  submitter_.KillActor(shape_.key);  // dead already: nothing more to hear
  EXPECT_THAT(heard, ::testing::ElementsAre(
                         "actor:1|CPU=1| restarting 1: killed by signal 9 (SIGKILL)",
                         "actor:1|CPU=1| dead 1: its process died (exited with code 3) and it was "
                         "restarted 1 times (max_restarts 1)"));
}

TEST_F(ActorSubmitterTest, TheObserverHearsAKill) {
  std::vector<std::string> causes;
  submitter_.SetActorObserver(
      [&](const std::string&, const ActorChange& change) { causes.push_back(change.cause); });
  Create(5, 5);
  auto [h, channel] = AddWorker();
  submitter_.KillActor(shape_.key);
  submitter_.WorkerDied(h, "exited with code 0");
  EXPECT_THAT(causes, ::testing::ElementsAre("killed by tessera::Kill"));
}

}  // namespace
}  // namespace tessera::api
