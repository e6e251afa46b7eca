#include "api/task_submitter.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "api/error_payloads.h"
#include "api/submitter_test_fakes.h"
#include "objects/object_location.h"

namespace tessera::api {
namespace {

using ::testing::HasSubstr;

// A task of another shape ("CPU=3|"), whose lease the fake never grants.
LeaseShape SubmitOtherShape(TaskSubmitter& submitter);

class SubmitterTest : public ::testing::Test {
 protected:
  explicit SubmitterTest(int max_batch_wait = SubmitterOptions().max_batch_wait)
      : submitter_(Options(max_batch_wait), &leases_,
                   [this](const ObjectId& id, absl::StatusOr<std::string> v) {
                     return outcomes_.emplace(id, std::move(v)).second;
                   }) {
    shape_.key = "CPU=1|";
  }
  static SubmitterOptions Options(int max_batch_wait) {
    SubmitterOptions o;
    o.idle_timeout = absl::Seconds(1);
    o.max_batch_wait = max_batch_wait;
    return o;
  }

  ObjectId Submit(int max_retries = 3) {
    QueuedTask task;
    const TaskId id = TaskId::FromRandom();
    task.spec.set_task_id(id.Binary());
    task.spec.set_function("f");
    task.return_id = ObjectId::ForTaskReturn(id, 1);
    task.max_retries = max_retries;
    submitter_.Submit(shape_, task);
    return task.return_id;
  }

  std::pair<WorkerHandle, std::shared_ptr<FakeChannel>> AddWorker() {
    auto channel = std::make_shared<FakeChannel>();
    const WorkerHandle h = submitter_.NewHandle();
    EXPECT_TRUE(submitter_.AddWorker(shape_.key, h, channel));
    return {h, channel};
  }

  // Answers every unanswered task of `channel` with its id as the value, `run_nanos` each.
  void AnswerAll(WorkerHandle h, FakeChannel& channel, int64_t run_nanos = 1000,
                 bool lends_objects = false) {
    v1::TaskResultBatch results;
    for (const auto& t : channel.Unanswered()) {
      auto* r = results.add_results();
      r->set_task_id(t.task_id());
      r->set_value("ok:" + t.task_id());
      r->set_run_nanos(run_nanos);
      channel.answered.insert(t.task_id());
    }
    results.set_lends_objects(lends_objects);
    submitter_.OnResults(h, results);
  }

  // A worker that lends objects, idle while another shape has waited past hand_over_after for
  // a lease; the submitter has reaped once since.
  std::pair<WorkerHandle, std::shared_ptr<FakeChannel>> IdleLenderWhileAShapeWaits() {
    Submit();
    auto [h, channel] = AddWorker();
    AnswerAll(h, *channel, 1000, /*lends_objects=*/true);
    SubmitOtherShape(submitter_);
    submitter_.ReapIdle(absl::Now() + absl::Milliseconds(300));
    return {h, channel};
  }

  FakeLeases leases_;
  std::map<ObjectId, absl::StatusOr<std::string>> outcomes_;
  TaskSubmitter submitter_;
  LeaseShape shape_;
};

TEST_F(SubmitterTest, QueuesUntilAWorkerAndAsksForOneLeaseAtATime) {
  Submit();
  Submit();
  EXPECT_EQ(leases_.requests.size(), 1u);  // one outstanding request per shape
  EXPECT_EQ(submitter_.queued(shape_.key), 2u);
  auto [h, channel] = AddWorker();
  // Durations unknown yet: one task in flight per worker, another worker asked for.
  EXPECT_EQ(channel->Unanswered().size(), 1u);
  EXPECT_EQ(leases_.requests.size(), 2u);
  AnswerAll(h, *channel);
  AnswerAll(h, *channel);
  EXPECT_EQ(outcomes_.size(), 2u);
  for (auto& [id, v] : outcomes_) EXPECT_TRUE(v.ok());
}

TEST_F(SubmitterTest, ShortTasksPipelineDeepAndDoNotGrowWorkers) {
  Submit();
  auto [h, channel] = AddWorker();
  AnswerAll(h, *channel, /*run_nanos=*/2000);  // 2 us a task
  const size_t requests_before = leases_.requests.size();
  EXPECT_GE(submitter_.in_flight_cap(shape_.key), 500);
  for (int i = 0; i < 300; ++i) Submit();
  // 300 tasks of 2 us are 0.6 ms of work: not worth another worker. They went out in batches
  // of 64 behind the first (the worker was busy), the rest when it has nothing left to run.
  EXPECT_EQ(channel->Unanswered().size(), 257u);
  EXPECT_EQ(submitter_.queued(shape_.key), 43u);
  EXPECT_LE(leases_.requests.size(), requests_before + 0);
  AnswerAll(h, *channel, /*run_nanos=*/2000);
  EXPECT_EQ(channel->Unanswered().size(), 43u);
  EXPECT_EQ(submitter_.queued(shape_.key), 0u);
}

TEST_F(SubmitterTest, ABusyWorkerGetsBatchesAnIdleOneEachTaskAtOnce) {
  Submit();
  auto [h, channel] = AddWorker();
  AnswerAll(h, *channel, /*run_nanos=*/2000);
  // Idle: the next task goes at once, alone.
  Submit();
  ASSERT_EQ(channel->batches.size(), 2u);
  EXPECT_EQ(channel->batches.back().tasks_size(), 1);
  // Busy: the following ones wait until 64 make a batch, then leave together.
  for (int i = 0; i < 63; ++i) Submit();
  EXPECT_EQ(channel->batches.size(), 2u);
  EXPECT_EQ(submitter_.queued(shape_.key), 63u);
  Submit();
  ASSERT_EQ(channel->batches.size(), 3u);
  EXPECT_EQ(channel->batches.back().tasks_size(), 64);
  // Slow tasks (a cap of 1) are never kept back.
  AnswerAll(h, *channel, /*run_nanos=*/100'000'000);
  Submit();
  EXPECT_EQ(channel->batches.back().tasks_size(), 1);
}

// Batching off: every task leaves as soon as its worker has room.
class UnbatchedSubmitterTest : public SubmitterTest {
 protected:
  UnbatchedSubmitterTest() : SubmitterTest(/*max_batch_wait=*/1) {}
};

TEST_F(SubmitterTest, LongTasksGoOneAtATimeAndGrowWorkers) {
  Submit();
  auto [h, channel] = AddWorker();
  AnswerAll(h, *channel, /*run_nanos=*/100'000'000);  // 100 ms a task
  EXPECT_EQ(submitter_.in_flight_cap(shape_.key), 1);
  for (int i = 0; i < 4; ++i) Submit();
  EXPECT_EQ(channel->Unanswered().size(), 1u);
  EXPECT_EQ(submitter_.queued(shape_.key), 3u);
  EXPECT_EQ(leases_.requests.size(), 2u);  // the first lease, and one more for the backlog
  auto [h2, channel2] = AddWorker();
  EXPECT_EQ(channel2->Unanswered().size(), 1u);
  EXPECT_EQ(submitter_.queued(shape_.key), 2u);
}

TEST_F(SubmitterTest, DeadWorkersTasksRetryThenFailNamingTheCause) {
  const ObjectId retried = Submit(/*max_retries=*/1);
  auto [h, channel] = AddWorker();
  submitter_.WorkerDied(h, "killed by signal 9 (SIGKILL)");
  EXPECT_EQ(outcomes_.count(retried), 0u);
  auto [h2, channel2] = AddWorker();
  ASSERT_EQ(channel2->Unanswered().size(), 1u);
  EXPECT_EQ(channel2->Unanswered()[0].attempt(), 1);
  submitter_.WorkerDied(h2, "killed by signal 9 (SIGKILL)");
  ASSERT_EQ(outcomes_.count(retried), 1u);
  const absl::Status& status = outcomes_.at(retried).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(status.message()), HasSubstr("killed by signal 9 (SIGKILL)"));
  EXPECT_THAT(std::string(status.message()), HasSubstr("each of 2 attempts"));
  EXPECT_EQ(ErrorKindOf(status), "WORKER_CRASHED");
  const TaskStats stats = submitter_.stats();
  EXPECT_EQ(stats.retries, 1);
  EXPECT_EQ(stats.failed, 1);
  EXPECT_EQ(stats.workers_died, 2);
}

// Every run that ends is told to the event sink once: with the worker's times and identity,
// and its outcome in words.
TEST_F(SubmitterTest, EveryRunThatEndsIsToldToTheTaskEventSink) {
  std::vector<v1::TaskEvent> events;
  submitter_.SetTaskEventSink([&](std::vector<TaskRun>& runs) {
    for (const TaskRun& run : runs) ToTaskEvent(run, &events.emplace_back());
  });
  Submit(/*max_retries=*/1);
  const ObjectId failing = Submit(/*max_retries=*/0);
  auto channel = std::make_shared<FakeChannel>();
  const WorkerHandle h = submitter_.NewHandle();
  ASSERT_TRUE(submitter_.AddWorker(shape_.key, h, channel, WorkerIdentity{"n1", "w-1", 4242}));
  ASSERT_EQ(channel->Unanswered().size(), 1u);  // one at a time until durations are known
  v1::TaskResultBatch results;
  v1::TaskResult* ok = results.add_results();
  ok->set_task_id(channel->Unanswered()[0].task_id());
  ok->set_value("v");
  ok->set_start_time_us(1'000'000);
  ok->set_end_time_us(1'000'250);
  channel->answered.insert(ok->task_id());
  submitter_.OnResults(h, results);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].name(), "f");
  EXPECT_EQ(events[0].kind(), "task");
  EXPECT_EQ(events[0].node_id(), "n1");
  EXPECT_EQ(events[0].worker_id(), "w-1");
  EXPECT_EQ(events[0].worker_pid(), 4242);
  EXPECT_EQ(events[0].start_time_us(), 1'000'000);
  EXPECT_EQ(events[0].end_time_us(), 1'000'250);
  EXPECT_GT(events[0].submit_time_us(), 0);
  EXPECT_EQ(events[0].outcome(), "ok");
  // An application error, then a run lost with its worker.
  ASSERT_EQ(channel->Unanswered().size(), 1u);
  v1::TaskResultBatch failed;
  v1::TaskResult* error = failed.add_results();
  error->set_task_id(channel->Unanswered()[0].task_id());
  error->mutable_error()->set_kind("application");
  error->mutable_error()->set_type("ValueError");
  channel->answered.insert(error->task_id());
  submitter_.OnResults(h, failed);
  ASSERT_EQ(outcomes_.count(failing), 1u);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[1].outcome(), "error: ValueError");
  Submit();
  ASSERT_EQ(channel->Unanswered().size(), 1u);
  submitter_.WorkerDied(h, "killed by signal 9 (SIGKILL)");
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[2].outcome(), "worker died: killed by signal 9 (SIGKILL)");
  EXPECT_EQ(events[2].start_time_us(), 0);
  EXPECT_GT(events[2].end_time_us(), 0);
}

TEST_F(SubmitterTest, ResultsAreDeliveredOnce) {
  Submit();
  auto [h, channel] = AddWorker();
  const v1::TaskSpec sent = channel->Unanswered().at(0);
  v1::TaskResultBatch results;
  auto* r = results.add_results();
  r->set_task_id(sent.task_id());
  r->set_value("first");
  submitter_.OnResults(h, results);
  results.mutable_results(0)->set_value("second");
  submitter_.OnResults(h, results);
  ASSERT_EQ(outcomes_.size(), 1u);
  EXPECT_EQ(*outcomes_.begin()->second, "first");
  EXPECT_EQ(submitter_.stats().duplicate_results, 1);
  EXPECT_EQ(submitter_.stats().succeeded, 1);
}

TEST_F(SubmitterTest, ApplicationErrorsAreNotRetried) {
  const ObjectId id = Submit();
  auto [h, channel] = AddWorker();
  v1::TaskResultBatch results;
  auto* r = results.add_results();
  r->set_task_id(channel->Unanswered().at(0).task_id());
  r->mutable_error()->set_kind("application");
  r->mutable_error()->set_type("std::runtime_error");
  r->mutable_error()->set_message("bad input");
  r->mutable_error()->set_exception("serialized exception");
  r->mutable_error()->set_traceback("remote traceback");
  submitter_.OnResults(h, results);
  ASSERT_EQ(outcomes_.count(id), 1u);
  const absl::Status& status = outcomes_.at(id).status();
  EXPECT_EQ(status.message(), "task f failed: std::runtime_error: bad input");
  // What a Python caller re-raises travels with the status.
  EXPECT_EQ(ErrorKindOf(status), "TASK_ERROR");
  EXPECT_EQ(ExceptionOf(status), "serialized exception");
  EXPECT_EQ(TracebackOf(status), "remote traceback");
  EXPECT_EQ(submitter_.stats().retries, 0);
}

// A result its node's store refused fails the task once, as ObjectStoreFullError: not retried
// (the next run would make the same result), not a crashed worker.
TEST_F(SubmitterTest, AResultTheStoreRefusedFailsOnceAsObjectStoreFull) {
  const ObjectId id = Submit(/*max_retries=*/3);
  auto [h, channel] = AddWorker();
  v1::TaskResultBatch results;
  auto* r = results.add_results();
  r->set_task_id(channel->Unanswered().at(0).task_id());
  *r->mutable_error() = ResultNotStoredError(absl::ResourceExhaustedError(
      "object store full: object x of 32.0 MiB can never fit: the object store holds 24.0 MiB"));
  submitter_.OnResults(h, results);
  ASSERT_EQ(outcomes_.count(id), 1u);
  const absl::Status& status = outcomes_.at(id).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(status.message(),
            "task f: its result was not stored: object store full: object x of 32.0 MiB can "
            "never fit: the object store holds 24.0 MiB");
  EXPECT_EQ(ErrorKindOf(status), "OBJECT_STORE_FULL");
  EXPECT_EQ(submitter_.stats().retries, 0);
}

TEST_F(SubmitterTest, PermanentLeaseFailureFailsWaitingTasks) {
  const ObjectId id = Submit();
  submitter_.LeaseFailed(shape_.key, absl::ResourceExhaustedError("infeasible: no GPU"), true);
  ASSERT_EQ(outcomes_.count(id), 1u);
  EXPECT_EQ(outcomes_.at(id).status().message(), "task f: infeasible: no GPU");
  EXPECT_EQ(ErrorKindOf(outcomes_.at(id).status()), "TASK_UNSCHEDULABLE");
}

TEST_F(SubmitterTest, StartFailuresRetryThenFail) {
  const ObjectId id = Submit();
  submitter_.LeaseFailed(shape_.key, absl::UnavailableError("exited before ready"), false);
  EXPECT_EQ(leases_.requests.size(), 2u);
  EXPECT_EQ(outcomes_.count(id), 0u);
  submitter_.LeaseFailed(shape_.key, absl::UnavailableError("exited before ready"), false);
  submitter_.LeaseFailed(shape_.key, absl::UnavailableError("exited before ready"), false);
  ASSERT_EQ(outcomes_.count(id), 1u);
}

TEST_F(SubmitterTest, AQueuedTaskCancelledFailsAtOnceAndNeverRuns) {
  const ObjectId id = Submit();
  ASSERT_TRUE(submitter_.Cancel(id, /*force=*/false, /*recursive=*/true).ok());
  ASSERT_EQ(outcomes_.count(id), 1u);
  EXPECT_EQ(ErrorKindOf(outcomes_.at(id).status()), "TASK_CANCELLED");
  auto [h, channel] = AddWorker();
  EXPECT_TRUE(channel->sent.empty());
}

TEST_F(SubmitterTest, ARunningTaskCancelledAsksItsWorkerAndEndsCancelled) {
  const ObjectId id = Submit();
  auto [h, channel] = AddWorker();
  const std::string task_id = channel->Unanswered().at(0).task_id();
  ASSERT_TRUE(submitter_.Cancel(id, /*force=*/false, /*recursive=*/true).ok());
  ASSERT_EQ(channel->cancels.size(), 1u);
  EXPECT_EQ(channel->cancels[0].task_id, task_id);
  EXPECT_FALSE(channel->cancels[0].force);
  EXPECT_TRUE(channel->cancels[0].recursive);
  EXPECT_EQ(outcomes_.count(id), 0u);  // until the worker answers
  // Interrupted, the task stops with an error of its own: it ends cancelled.
  v1::TaskResultBatch results;
  auto* r = results.add_results();
  r->set_task_id(task_id);
  r->mutable_error()->set_kind("application");
  r->mutable_error()->set_type("KeyboardInterrupt");
  submitter_.OnResults(h, results);
  ASSERT_EQ(outcomes_.count(id), 1u);
  EXPECT_EQ(ErrorKindOf(outcomes_.at(id).status()), "TASK_CANCELLED");
}

TEST_F(SubmitterTest, AForcedCancelEndsWorkerCrashedAndIsNeverRetried) {
  const ObjectId id = Submit(/*max_retries=*/3);
  auto [h, channel] = AddWorker();
  ASSERT_TRUE(submitter_.Cancel(id, /*force=*/true, /*recursive=*/false).ok());
  EXPECT_TRUE(channel->cancels.at(0).force);
  submitter_.WorkerDied(h, "killed by signal 9 (SIGKILL)");
  ASSERT_EQ(outcomes_.count(id), 1u);
  EXPECT_EQ(ErrorKindOf(outcomes_.at(id).status()), "WORKER_CRASHED");
  EXPECT_EQ(submitter_.stats().retries, 0);
}

TEST_F(UnbatchedSubmitterTest, AForcedCancelSendsTheWorkersOtherTasksElsewhere) {
  // Short tasks pipeline onto one worker.
  const ObjectId first = Submit();
  auto [h, channel] = AddWorker();
  AnswerAll(h, *channel, /*run_nanos=*/1000);
  const ObjectId target = Submit();
  const ObjectId sibling = Submit();
  ASSERT_EQ(channel->Unanswered().size(), 2u);
  ASSERT_TRUE(submitter_.Cancel(target, /*force=*/true, /*recursive=*/false).ok());
  // The sibling is not left to die with the worker: it waits for another one.
  EXPECT_EQ(submitter_.queued(shape_.key), 1u);
  submitter_.WorkerDied(h, "killed by signal 9 (SIGKILL)");
  EXPECT_EQ(ErrorKindOf(outcomes_.at(target).status()), "WORKER_CRASHED");
  EXPECT_EQ(outcomes_.count(sibling), 0u);
  auto [h2, channel2] = AddWorker();
  ASSERT_EQ(channel2->Unanswered().size(), 1u);
  EXPECT_EQ(channel2->Unanswered()[0].attempt(), 0);  // the move cost it no attempt
  AnswerAll(h2, *channel2);
  EXPECT_TRUE(outcomes_.at(sibling).ok());
  EXPECT_TRUE(outcomes_.at(first).ok());
}

TEST_F(SubmitterTest, ACancelBeforeSubmitDropsTheLaterSubmit) {
  QueuedTask task;
  const TaskId tid = TaskId::FromRandom();
  task.spec.set_task_id(tid.Binary());
  task.spec.set_function("f");
  task.return_id = ObjectId::ForTaskReturn(tid, 1);
  ASSERT_TRUE(submitter_.Cancel(task.return_id, false, true).ok());
  EXPECT_EQ(ErrorKindOf(outcomes_.at(task.return_id).status()), "TASK_CANCELLED");
  submitter_.Submit(shape_, task);  // its arguments resolved after the cancel
  EXPECT_EQ(submitter_.queued(shape_.key), 0u);
  EXPECT_TRUE(leases_.requests.empty());
}

TEST_F(SubmitterTest, ACancelOfAFinishedTaskLeavesNoMarkBehind) {
  QueuedTask task;
  const TaskId tid = TaskId::FromRandom();
  task.spec.set_task_id(tid.Binary());
  task.spec.set_function("f");
  task.return_id = ObjectId::ForTaskReturn(tid, 1);
  outcomes_.emplace(task.return_id, std::string("done"));  // it finished before the cancel
  ASSERT_TRUE(submitter_.Cancel(task.return_id, false, true).ok());
  EXPECT_EQ(*outcomes_.at(task.return_id), "done");
  // Nothing waits to drop a later Submit of that id: the mark went with the ignored outcome.
  submitter_.Submit(shape_, task);
  EXPECT_EQ(submitter_.queued(shape_.key), 1u);
}

TEST_F(SubmitterTest, ARetryableErrorRunsAgainWithinMaxRetriesThenFails) {
  const ObjectId id = Submit(/*max_retries=*/1);
  auto [h, channel] = AddWorker();
  // The task's latest send fails with a retryable error.
  auto fail = [&](int attempt) {
    const v1::TaskSpec& sent = channel->sent.back();
    EXPECT_EQ(sent.attempt(), attempt);
    v1::TaskResultBatch results;
    auto* r = results.add_results();
    r->set_task_id(sent.task_id());
    r->mutable_error()->set_kind("application");
    r->mutable_error()->set_type("Flaky");
    r->mutable_error()->set_retryable(true);
    submitter_.OnResults(h, results);
  };
  fail(0);
  EXPECT_EQ(outcomes_.count(id), 0u);  // sent again
  EXPECT_EQ(channel->sent.size(), 2u);
  EXPECT_EQ(submitter_.stats().retries, 1);
  fail(1);
  ASSERT_EQ(outcomes_.count(id), 1u);  // out of retries: the error stands
  EXPECT_EQ(ErrorKindOf(outcomes_.at(id).status()), "TASK_ERROR");
}

TEST_F(SubmitterTest, IdleWorkersAreLetGo) {
  Submit();
  auto [h, channel] = AddWorker();
  AnswerAll(h, *channel);
  submitter_.ReapIdle(absl::Now());
  EXPECT_FALSE(channel->closed);
  submitter_.ReapIdle(absl::Now() + absl::Seconds(2));
  EXPECT_TRUE(channel->closed);
  EXPECT_EQ(submitter_.workers(shape_.key), 0u);
  submitter_.WorkerDied(h, "exited with code 0");  // its exit after being let go: nothing to do
  EXPECT_EQ(submitter_.stats().workers_died, 0);
}

LeaseShape SubmitOtherShape(TaskSubmitter& submitter) {
  LeaseShape other;
  other.key = "CPU=3|";
  QueuedTask task;
  const TaskId id = TaskId::FromRandom();
  task.spec.set_task_id(id.Binary());
  task.return_id = ObjectId::ForTaskReturn(id, 1);
  submitter.Submit(other, task);
  return other;
}

TEST_F(SubmitterTest, AWorkerWhoseObjectsAreBorrowedOutlivesItsIdleTimeout) {
  Submit();
  auto [h, channel] = AddWorker();
  AnswerAll(h, *channel, 1000, /*lends_objects=*/true);
  submitter_.ReapIdle(absl::Now() + absl::Seconds(30));
  EXPECT_FALSE(channel->closed);  // the owner of objects others still read
  // A batch with no results says nothing is borrowed any more: it goes idle as any other.
  submitter_.OnResults(h, v1::TaskResultBatch());
  submitter_.ReapIdle(absl::Now() + absl::Seconds(2));
  EXPECT_TRUE(channel->closed);
}

TEST_F(SubmitterTest, AWorkerWhoseObjectsAreBorrowedGivesItsLeaseToAWaitingShapeAndStays) {
  auto [h, channel] = IdleLenderWhileAShapeWaits();
  // Work waiting for its lease gets the lease; the process stays, the owner of what is lent.
  EXPECT_EQ(leases_.returned, std::vector<WorkerHandle>{h});
  EXPECT_FALSE(channel->closed);
  EXPECT_EQ(submitter_.workers(shape_.key), 0u);
  // It runs nothing more: its shape's next task waits for a lease of its own.
  const size_t sent = channel->sent.size();
  const size_t requests = leases_.requests.size();
  Submit();
  EXPECT_EQ(channel->sent.size(), sent);
  EXPECT_EQ(leases_.requests.size(), requests + 1);
  EXPECT_EQ(leases_.requests.back(), shape_.key);
  // Given back once only, whatever asks again.
  submitter_.ReapIdle(absl::Now() + absl::Seconds(30));
  submitter_.HandBackIfIdle(h, absl::Now() + absl::Seconds(30));
  EXPECT_EQ(leases_.returned.size(), 1u);
  EXPECT_FALSE(channel->closed);
  // Nothing is borrowed any more: it goes.
  submitter_.OnResults(h, v1::TaskResultBatch());
  EXPECT_TRUE(channel->closed);
}

TEST_F(SubmitterTest, AWorkerWhoseLeaseCannotGoBackAloneIsClosedForAWaitingShape) {
  leases_.can_return = false;  // its lease holds devices
  auto [h, channel] = IdleLenderWhileAShapeWaits();
  EXPECT_EQ(leases_.returned, std::vector<WorkerHandle>{h});
  EXPECT_TRUE(channel->closed);
}

TEST_F(SubmitterTest, ALeaseWantedOnItsNodeTakesTheLeaseOfALendingWorkerNotItsProcess) {
  Submit();
  auto [h, channel] = AddWorker();
  AnswerAll(h, *channel, 1000, /*lends_objects=*/true);
  submitter_.HandBackIfIdle(h, absl::Now() + absl::Milliseconds(300));
  EXPECT_EQ(leases_.returned, std::vector<WorkerHandle>{h});
  EXPECT_FALSE(channel->closed);
  EXPECT_EQ(submitter_.workers(shape_.key), 0u);
  // A worker that lends nothing is closed as before.
  auto [h2, channel2] = AddWorker();
  AnswerAll(h2, *channel2);
  submitter_.HandBackIfIdle(h2, absl::Now() + absl::Milliseconds(300));
  EXPECT_TRUE(channel2->closed);
  EXPECT_EQ(leases_.returned.size(), 1u);
}

TEST_F(SubmitterTest, IdleWorkersAreHandedBackAtOnceWhileAnotherShapeWaitsForALease) {
  Submit();
  auto [h, channel] = AddWorker();
  AnswerAll(h, *channel);  // idle now, well within idle_timeout
  const LeaseShape other = SubmitOtherShape(submitter_);
  ASSERT_EQ(leases_.requests.back(), other.key);
  // The other shape has just asked: nothing is handed back yet.
  submitter_.ReapIdle(absl::Now());
  EXPECT_FALSE(channel->closed);
  // It has waited past hand_over_after with no worker: the idle one goes, long before 1 s.
  submitter_.ReapIdle(absl::Now() + absl::Milliseconds(300));
  EXPECT_TRUE(channel->closed);
  EXPECT_EQ(submitter_.workers(shape_.key), 0u);
}

TEST_F(SubmitterTest, AWaitingShapeDoesNotTakeABusyWorker) {
  Submit();
  auto [h, channel] = AddWorker();  // its task is in flight
  const LeaseShape other = SubmitOtherShape(submitter_);
  submitter_.ReapIdle(absl::Now() + absl::Milliseconds(300));
  EXPECT_FALSE(channel->closed);
  AnswerAll(h, *channel);
  submitter_.ReapIdle(absl::Now() + absl::Milliseconds(600));
  EXPECT_TRUE(channel->closed);  // idle since its answer, past hand_over_after
}

TEST_F(SubmitterTest, AWorkerIsHandedBackWhenItsNodeWantsALeaseOnceIdleAWhile) {
  Submit();
  auto [h, channel] = AddWorker();
  submitter_.HandBackIfIdle(h, absl::Now() + absl::Milliseconds(300));
  EXPECT_FALSE(channel->closed);  // busy: its task runs
  AnswerAll(h, *channel);
  submitter_.HandBackIfIdle(h, absl::Now());
  EXPECT_FALSE(channel->closed);  // idle only just now: its next task may be on the way
  submitter_.HandBackIfIdle(h, absl::Now() + absl::Milliseconds(300));
  EXPECT_TRUE(channel->closed);
  EXPECT_EQ(submitter_.workers(shape_.key), 0u);
}

}  // namespace
}  // namespace tessera::api
