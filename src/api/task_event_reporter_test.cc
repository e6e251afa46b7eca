// TaskEventReporter against a real gRPC server on loopback serving a head (HeadJobs) that records
// reports.
#include "api/task_event_reporter.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "rpc/channel.h"
#include "rpc/server.h"

namespace tessera::api {
namespace {

constexpr char kToken[] = "0123456789abcdef";

class RecordingHead : public v1::HeadJobs::Service {
 public:
  grpc::Status ReportTaskEvents(grpc::ServerContext*, const v1::ReportTaskEventsRequest* request,
                                v1::ReportTaskEventsResponse*) override {
    absl::MutexLock lock(&mu);
    if (refuse) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "restarting");
    reports.push_back(*request);
    return grpc::Status::OK;
  }
  int Runs() {
    absl::MutexLock lock(&mu);
    int n = 0;
    for (const auto& report : reports) n += report.events_size();
    return n;
  }
  absl::Mutex mu;
  bool refuse = false;
  std::vector<v1::ReportTaskEventsRequest> reports;
};

class TaskEventReporterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    rpc::ServerOptions options;
    options.token = kToken;
    auto server = rpc::RpcServer::Start(options, {&head_});
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    stub_ = v1::HeadJobs::NewStub(rpc::MakeChannel(server_->address(), kToken));
  }
  std::unique_ptr<TaskEventReporter> Reporter(size_t max_pending = 100) {
    TaskEventReporterOptions options;
    options.job_id = "driver-1";
    options.interval = absl::Hours(1);  // only Stop sends: the test decides when
    options.max_pending = max_pending;
    return std::make_unique<TaskEventReporter>(stub_.get(), options);
  }
  // Hands the reporter one run of `name`.
  static void AddRun(TaskEventReporter& reporter, const std::string& name) {
    std::vector<TaskRun> runs(1);
    runs[0].name = std::make_shared<const std::string>(name);
    reporter.Add(runs);
  }

  RecordingHead head_;
  std::unique_ptr<rpc::RpcServer> server_;
  std::unique_ptr<v1::HeadJobs::Stub> stub_;
};

TEST_F(TaskEventReporterTest, StopSendsEveryRunWithItsJob) {
  auto reporter = Reporter();
  AddRun(*reporter, "f");
  AddRun(*reporter, "g");
  reporter->Stop();
  ASSERT_EQ(head_.reports.size(), 1u);
  EXPECT_EQ(head_.reports[0].job_id(), "driver-1");
  ASSERT_EQ(head_.reports[0].events_size(), 2);
  EXPECT_EQ(head_.reports[0].events(1).name(), "g");
  EXPECT_EQ(head_.reports[0].dropped(), 0);
  EXPECT_EQ(reporter->dropped(), 0);
}

// The plain records become TaskEvents only when sent: every field, the words of kinds and
// outcomes, and the worker's identity shared by its runs.
TEST_F(TaskEventReporterTest, EveryFieldOfARunReachesTheHeadInWords) {
  auto reporter = Reporter();
  auto worker = std::make_shared<const WorkerIdentity>(WorkerIdentity{"n1", "w-7", 99});
  std::vector<TaskRun> runs(2);
  runs[0].task_id = ToRunId(std::string(TaskId::kSize, 'a'));
  runs[0].actor_id = ToRunId(std::string(TaskId::kSize, 'b'));
  runs[0].kind = v1::ACTOR_METHOD;
  runs[0].attempt = 2;
  runs[0].name = std::make_shared<const std::string>("Counter.add");
  runs[0].worker = worker;
  runs[0].submit_time_us = 10;
  runs[0].start_time_us = 20;
  runs[0].end_time_us = 30;
  runs[0].outcome = TaskRun::Outcome::kRetried;
  runs[0].detail = "ValueError";
  runs[1].kind = v1::ACTOR_CREATE;
  runs[1].worker = worker;
  runs[1].outcome = TaskRun::Outcome::kWorkerDied;
  runs[1].detail = "killed by signal 9 (SIGKILL)";
  reporter->Add(runs);
  EXPECT_TRUE(runs.empty());
  reporter->Stop();
  ASSERT_EQ(head_.Runs(), 2);
  const v1::TaskEvent& call = head_.reports[0].events(0);
  EXPECT_EQ(call.task_id(), std::string(TaskId::kSize, 'a'));
  EXPECT_EQ(call.actor_id(), std::string(TaskId::kSize, 'b'));
  EXPECT_EQ(call.kind(), "actor_call");
  EXPECT_EQ(call.attempt(), 2);
  EXPECT_EQ(call.name(), "Counter.add");
  EXPECT_EQ(call.node_id(), "n1");
  EXPECT_EQ(call.worker_id(), "w-7");
  EXPECT_EQ(call.worker_pid(), 99);
  EXPECT_EQ(call.submit_time_us(), 10);
  EXPECT_EQ(call.start_time_us(), 20);
  EXPECT_EQ(call.end_time_us(), 30);
  EXPECT_EQ(call.outcome(), "retried: ValueError");
  const v1::TaskEvent& constructor = head_.reports[0].events(1);
  EXPECT_EQ(constructor.kind(), "actor_create");
  EXPECT_EQ(constructor.worker_id(), "w-7");
  EXPECT_EQ(constructor.outcome(), "worker died: killed by signal 9 (SIGKILL)");
}

TEST_F(TaskEventReporterTest, ABatchPastTheBoundKeepsWhatFits) {
  auto reporter = Reporter(/*max_pending=*/3);
  AddRun(*reporter, "a");
  std::vector<TaskRun> batch(4);
  reporter->Add(batch);
  reporter->Stop();
  ASSERT_EQ(head_.Runs(), 3);
  EXPECT_EQ(head_.reports[0].dropped(), 2);
  EXPECT_EQ(reporter->dropped(), 2);
}

TEST_F(TaskEventReporterTest, RunsPastTheBoundAreDroppedAndTheHeadIsToldHowMany) {
  auto reporter = Reporter(/*max_pending=*/2);
  for (const char* name : {"a", "b", "c", "d"}) AddRun(*reporter, name);
  reporter->Stop();
  ASSERT_EQ(head_.Runs(), 2);
  EXPECT_EQ(head_.reports[0].dropped(), 2);
  EXPECT_EQ(reporter->dropped(), 2);
}

TEST_F(TaskEventReporterTest, AReportTheHeadRefusesIsCountedInTheNextOne) {
  TaskEventReporterOptions options;
  options.job_id = "driver-1";
  options.interval = absl::Milliseconds(20);
  TaskEventReporter reporter(stub_.get(), options);
  {
    absl::MutexLock lock(&head_.mu);
    head_.refuse = true;
  }
  AddRun(reporter, "lost");
  while (reporter.dropped() == 0) absl::SleepFor(absl::Milliseconds(10));
  {
    absl::MutexLock lock(&head_.mu);
    head_.refuse = false;
  }
  AddRun(reporter, "kept");
  reporter.Stop();
  absl::MutexLock lock(&head_.mu);
  int64_t told = 0;
  int kept = 0;
  for (const auto& report : head_.reports) {
    told += report.dropped();
    kept += report.events_size();
  }
  EXPECT_EQ(told, 1);
  EXPECT_EQ(kept, 1);
}

}  // namespace
}  // namespace tessera::api
