// TaskEventReporter against a real gRPC server on loopback serving a head that records reports.
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

class RecordingHead : public v1::Head::Service {
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
    stub_ = v1::Head::NewStub(rpc::MakeChannel(server_->address()));
  }
  std::unique_ptr<TaskEventReporter> Reporter(size_t max_pending = 100) {
    TaskEventReporterOptions options;
    options.token = kToken;
    options.job_id = "driver-1";
    options.interval = absl::Hours(1);  // only Stop sends: the test decides when
    options.max_pending = max_pending;
    return std::make_unique<TaskEventReporter>(stub_.get(), options);
  }
  static v1::TaskEvent TaskRun(const std::string& name) {
    v1::TaskEvent event;
    event.set_name(name);
    return event;
  }

  RecordingHead head_;
  std::unique_ptr<rpc::RpcServer> server_;
  std::unique_ptr<v1::Head::Stub> stub_;
};

TEST_F(TaskEventReporterTest, StopSendsEveryRunWithItsJob) {
  auto reporter = Reporter();
  reporter->Add(TaskRun("f"));
  reporter->Add(TaskRun("g"));
  reporter->Stop();
  ASSERT_EQ(head_.reports.size(), 1u);
  EXPECT_EQ(head_.reports[0].job_id(), "driver-1");
  ASSERT_EQ(head_.reports[0].events_size(), 2);
  EXPECT_EQ(head_.reports[0].events(1).name(), "g");
  EXPECT_EQ(head_.reports[0].dropped(), 0);
  EXPECT_EQ(reporter->dropped(), 0);
}

TEST_F(TaskEventReporterTest, RunsPastTheBoundAreDroppedAndTheHeadIsToldHowMany) {
  auto reporter = Reporter(/*max_pending=*/2);
  for (const char* name : {"a", "b", "c", "d"}) reporter->Add(TaskRun(name));
  reporter->Stop();
  ASSERT_EQ(head_.Runs(), 2);
  EXPECT_EQ(head_.reports[0].dropped(), 2);
  EXPECT_EQ(reporter->dropped(), 2);
}

TEST_F(TaskEventReporterTest, AReportTheHeadRefusesIsCountedInTheNextOne) {
  TaskEventReporterOptions options;
  options.token = kToken;
  options.job_id = "driver-1";
  options.interval = absl::Milliseconds(20);
  TaskEventReporter reporter(stub_.get(), options);
  {
    absl::MutexLock lock(&head_.mu);
    head_.refuse = true;
  }
  reporter.Add(TaskRun("lost"));
  while (reporter.dropped() == 0) absl::SleepFor(absl::Milliseconds(10));
  {
    absl::MutexLock lock(&head_.mu);
    head_.refuse = false;
  }
  reporter.Add(TaskRun("kept"));
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
