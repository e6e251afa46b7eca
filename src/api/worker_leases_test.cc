// WorkerLeases against a fake node agent (a gRPC server on loopback, port 0): a granted worker
// that never calls WorkerReady is killed after ready_timeout, its lease counts as a start
// failure, and after max_start_failures the waiting task fails saying why; the watcher thread of
// every lease that ended is joined, however many leases a driver holds over its life.
#include "api/worker_leases.h"

#include <signal.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "api/task_submitter.h"
#include "grpcpp/grpcpp.h"
#include "tessera/v1/node_agent.grpc.pb.h"

namespace tessera::api {
namespace {

using ::testing::HasSubstr;

// Grants every lease a new worker that never starts serving; KillWorker ends its watch with a
// SIGKILL exit. With `exit_at_once`, every worker exits (code 1) as soon as it is watched.
class FakeAgent final : public v1::NodeAgent::Service {
 public:
  explicit FakeAgent(bool exit_at_once = false) : exit_at_once_(exit_at_once) {}

  grpc::Status RequestLease(grpc::ServerContext*, const v1::LeaseRequest*,
                            v1::LeaseReply* reply) override {
    if (on_lease) on_lease();
    absl::MutexLock lock(&mu_);
    v1::LeaseGrant* grant = reply->mutable_granted();
    grant->set_worker_id(absl::StrCat("w-", ++granted_));
    grant->set_lease_id(absl::StrCat("l-", granted_));
    grant->set_node_id("n1");
    return grpc::Status::OK;
  }
  grpc::Status WatchWorker(grpc::ServerContext* context, const v1::WatchWorkerRequest* request,
                           grpc::ServerWriter<v1::WorkerEvent>* writer) override {
    if (exit_at_once_) {
      v1::WorkerEvent event;
      event.mutable_exit()->set_exit_code(1);
      event.mutable_exit()->set_reason("exited with code 1");
      writer->Write(event);
      return grpc::Status::OK;
    }
    {
      absl::MutexLock lock(&mu_);
      auto done = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return killed_.count(request->worker_id()) > 0 || context->IsCancelled();
      };
      while (!done()) mu_.AwaitWithTimeout(absl::Condition(&done), absl::Milliseconds(10));
      if (killed_.count(request->worker_id()) == 0) return grpc::Status::CANCELLED;
    }
    v1::WorkerEvent event;
    event.mutable_exit()->set_exit_code(-1);
    event.mutable_exit()->set_signal(SIGKILL);
    event.mutable_exit()->set_reason("killed by signal 9 (SIGKILL)");
    writer->Write(event);
    return grpc::Status::OK;
  }
  grpc::Status KillWorker(grpc::ServerContext*, const v1::KillWorkerRequest* request,
                          v1::KillWorkerResponse*) override {
    absl::MutexLock lock(&mu_);
    killed_.insert(request->worker_id());
    kill_signals_.push_back(request->signal());
    return grpc::Status::OK;
  }

  std::vector<int> kill_signals() {
    absl::MutexLock lock(&mu_);
    return kill_signals_;
  }

  // Called at the start of every RequestLease, on a gRPC thread; set before leases are asked.
  std::function<void()> on_lease;

 private:
  const bool exit_at_once_;
  absl::Mutex mu_;
  int granted_ ABSL_GUARDED_BY(mu_) = 0;
  std::set<std::string> killed_ ABSL_GUARDED_BY(mu_);
  std::vector<int> kill_signals_ ABSL_GUARDED_BY(mu_);
};

TEST(WorkerLeasesTest, AWorkerThatNeverSaysReadyIsKilledAndCountsAsAStartFailure) {
  FakeAgent agent;
  int port = 0;
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&agent);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);

  absl::Mutex mu;
  std::vector<absl::Status> outcomes;
  SubmitterOptions submitter_options;
  submitter_options.max_start_failures = 2;
  TaskSubmitter submitter(submitter_options, nullptr,
                          [&](const ObjectId&, absl::StatusOr<std::string> value) {
                            absl::MutexLock lock(&mu);
                            outcomes.push_back(value.status());
                            return true;
                          });
  WorkerLeasesOptions options;
  options.agent_address = absl::StrCat("127.0.0.1:", port);
  options.forward_output = false;
  options.ready_timeout = absl::Milliseconds(100);
  auto leases = std::make_unique<WorkerLeases>(options, &submitter);
  submitter.SetLeaseSource(leases.get());

  LeaseShape shape;
  shape.key = "CPU=1|";
  QueuedTask task;
  task.spec.set_task_id("t1");
  task.spec.set_function("F");
  task.return_id = ObjectId::FromRandom();
  submitter.Submit(shape, std::move(task));

  {
    absl::MutexLock lock(&mu);
    auto answered = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return !outcomes.empty(); };
    ASSERT_TRUE(mu.AwaitWithTimeout(absl::Condition(&answered), absl::Seconds(60)));
    ASSERT_EQ(outcomes.size(), 1u);
    EXPECT_EQ(outcomes[0].code(), absl::StatusCode::kUnavailable);
    EXPECT_THAT(std::string(outcomes[0].message()),
                HasSubstr("its worker w-2 did not say ready within 100ms and was killed"));
  }
  // Each of the two workers was killed with SIGKILL, and each lease was a start failure.
  EXPECT_EQ(agent.kill_signals(), (std::vector<int>{SIGKILL, SIGKILL}));
  const TaskStats stats = submitter.stats();
  EXPECT_EQ(stats.leases_requested, 2);
  EXPECT_EQ(stats.workers_started, 0);
  EXPECT_EQ(stats.failed, 1);

  leases->Shutdown();
  submitter.Shutdown();
  server->Shutdown();
}

TEST(WorkerLeasesTest, TheWatcherOfEveryLeaseThatEndedIsJoined) {
  FakeAgent agent(/*exit_at_once=*/true);
  int port = 0;
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&agent);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);

  // Each worker exits before it is ready: a start failure, and the submitter leases again, so
  // one task makes kLeases leases, one after the other, before it fails.
  constexpr int kLeases = 40;
  absl::Mutex mu;
  std::vector<absl::Status> outcomes;
  SubmitterOptions submitter_options;
  submitter_options.max_start_failures = kLeases;
  TaskSubmitter submitter(submitter_options, nullptr,
                          [&](const ObjectId&, absl::StatusOr<std::string> value) {
                            absl::MutexLock lock(&mu);
                            outcomes.push_back(value.status());
                            return true;
                          });
  WorkerLeasesOptions options;
  options.agent_address = absl::StrCat("127.0.0.1:", port);
  options.forward_output = false;
  auto leases = std::make_unique<WorkerLeases>(options, &submitter);
  submitter.SetLeaseSource(leases.get());
  // Watcher threads alive as each lease is asked for: at most the few whose leases are ending.
  std::atomic<size_t> most_watchers{0};
  agent.on_lease = [&] {
    const size_t now = leases->watcher_threads_for_tests();
    size_t seen = most_watchers.load();
    while (now > seen && !most_watchers.compare_exchange_weak(seen, now)) {
    }
  };

  LeaseShape shape;
  shape.key = "CPU=1|";
  QueuedTask task;
  task.spec.set_task_id("t1");
  task.spec.set_function("F");
  task.return_id = ObjectId::FromRandom();
  submitter.Submit(shape, std::move(task));
  {
    absl::MutexLock lock(&mu);
    auto answered = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return !outcomes.empty(); };
    ASSERT_TRUE(mu.AwaitWithTimeout(absl::Condition(&answered), absl::Seconds(60)));
    EXPECT_THAT(std::string(outcomes[0].message()), HasSubstr("exited before it was ready"));
  }
  EXPECT_EQ(submitter.stats().leases_requested, kLeases);
  EXPECT_LE(most_watchers.load(), 10u);

  // Every lease has ended: every watcher is joined, without a shutdown.
  const absl::Time give_up = absl::Now() + absl::Seconds(30);
  while (leases->watcher_threads_for_tests() != 0 && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  EXPECT_EQ(leases->watcher_threads_for_tests(), 0u);

  leases->Shutdown();
  submitter.Shutdown();
  server->Shutdown();
}

}  // namespace
}  // namespace tessera::api
