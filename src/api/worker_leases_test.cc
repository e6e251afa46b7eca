// WorkerLeases against fake node agents and a fake head (gRPC servers on loopback, port 0): a
// granted worker that never calls WorkerReady is killed after ready_timeout, its lease counts as
// a start failure, and after max_start_failures the waiting task fails saying why; the thread of
// every lease that ended is joined, however many leases a driver holds over its life; an agent
// that never answers a lease request holds up no other shape's lease, and the request is
// cancelled and sent to another node once the head declares the agent's node dead.
#include "api/worker_leases.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "api/task_submitter.h"
#include "grpcpp/grpcpp.h"
#include "rpc/server.h"
#include "tessera/v1/head.grpc.pb.h"
#include "tessera/v1/node_agent.grpc.pb.h"

namespace tessera::api {
namespace {

using ::testing::HasSubstr;

// Grants every lease a new worker that never starts serving; KillWorker ends its watch with a
// SIGKILL exit. With `exit_at_once`, every worker exits (code 1) as soon as it is watched.
class FakeAgent final : public v1::NodeAgent::Service {
 public:
  explicit FakeAgent(bool exit_at_once = false) : exit_at_once_(exit_at_once) {}

  grpc::Status RequestLease(grpc::ServerContext*, const v1::LeaseRequest* request,
                            v1::LeaseReply* reply) override {
    if (on_lease) on_lease();
    absl::MutexLock lock(&mu_);
    granted_affinities_.push_back(request->request().affinity_node_id());
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
  // The affinity_node_id of every lease granted, in order (tests tell their shapes by it).
  std::vector<std::string> granted_affinities() {
    absl::MutexLock lock(&mu_);
    return granted_affinities_;
  }

  // Called at the start of every RequestLease, on a gRPC thread; set before leases are asked.
  std::function<void()> on_lease;

 private:
  const bool exit_at_once_;
  absl::Mutex mu_;
  int granted_ ABSL_GUARDED_BY(mu_) = 0;
  std::set<std::string> killed_ ABSL_GUARDED_BY(mu_);
  std::vector<int> kill_signals_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> granted_affinities_ ABSL_GUARDED_BY(mu_);
};

// Never answers a lease request: each call waits until its caller cancels it (a deadline, or
// cancelled on purpose) or the agent is let go, as an agent whose process is stopped would.
class SilentAgent final : public v1::NodeAgent::Service {
 public:
  grpc::Status RequestLease(grpc::ServerContext* context, const v1::LeaseRequest*,
                            v1::LeaseReply*) override {
    absl::MutexLock lock(&mu_);
    ++calls_;
    ++open_;
    auto done = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return let_go_ || context->IsCancelled();
    };
    while (!done()) mu_.AwaitWithTimeout(absl::Condition(&done), absl::Milliseconds(10));
    --open_;
    if (absl::Now() + absl::Seconds(1) < absl::FromChrono(context->deadline())) ++cut_short_;
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, "the silent agent was let go");
  }

  int calls() {
    absl::MutexLock lock(&mu_);
    return calls_;
  }
  int open() {
    absl::MutexLock lock(&mu_);
    return open_;
  }
  // Calls that ended well before their deadline (cancelled, or let go).
  int cut_short() {
    absl::MutexLock lock(&mu_);
    return cut_short_;
  }
  void LetGo() {
    absl::MutexLock lock(&mu_);
    let_go_ = true;
  }

 private:
  absl::Mutex mu_;
  int calls_ ABSL_GUARDED_BY(mu_) = 0;
  int open_ ABSL_GUARDED_BY(mu_) = 0;
  int cut_short_ ABSL_GUARDED_BY(mu_) = 0;
  bool let_go_ ABSL_GUARDED_BY(mu_) = false;
};

// The head's HeadNodes service over two nodes, "silent" and "good". PickNode places a request on
// its affinity_node_id's node, unless that node is excluded: then on "good". ListNodes reports
// "silent" DEAD once told.
class FakeHead final : public v1::HeadNodes::Service {
 public:
  FakeHead(std::string silent_address, std::string good_address)
      : silent_address_(std::move(silent_address)), good_address_(std::move(good_address)) {}

  grpc::Status PickNode(grpc::ServerContext*, const v1::PickNodeRequest* request,
                        v1::PickNodeResponse* response) override {
    const auto& excluded = request->exclude_node_ids();
    std::string node = request->request().affinity_node_id();
    if (std::find(excluded.begin(), excluded.end(), node) != excluded.end()) node = "good";
    response->set_node_id(node);
    response->set_address(node == "silent" ? silent_address_ : good_address_);
    response->set_status(v1::PICK_STATUS_PLACED);
    return grpc::Status::OK;
  }
  grpc::Status ListNodes(grpc::ServerContext*, const v1::ListRequest*,
                         v1::ListNodesResponse* response) override {
    v1::NodeInfo* good = response->add_nodes();
    good->mutable_node()->set_node_id("good");
    good->mutable_node()->set_address(good_address_);
    good->set_state(v1::NODE_STATE_ALIVE);
    v1::NodeInfo* silent = response->add_nodes();
    silent->mutable_node()->set_node_id("silent");
    silent->mutable_node()->set_address(silent_address_);
    silent->set_state(silent_dead_.load() ? v1::NODE_STATE_DEAD : v1::NODE_STATE_ALIVE);
    return grpc::Status::OK;
  }

  void DeclareSilentDead() { silent_dead_ = true; }

 private:
  const std::string silent_address_;
  const std::string good_address_;
  std::atomic<bool> silent_dead_{false};
};

constexpr char kToken[] = "worker-leases-test-token";

// Serves `service` on loopback as a cluster process does (mutual TLS from kToken).
std::unique_ptr<rpc::RpcServer> Serve(grpc::Service* service, std::string* address) {
  rpc::ServerOptions options;
  options.token = kToken;
  auto server = rpc::RpcServer::Start(options, {service});
  if (!server.ok()) return nullptr;
  *address = (*server)->address();
  return *std::move(server);
}

// Waits for `done`, at most `limit` (a bound against hanging, far above what it takes).
bool Eventually(const std::function<bool()>& done, absl::Duration limit = absl::Seconds(60)) {
  const absl::Time give_up = absl::Now() + limit;
  while (!done()) {
    if (absl::Now() >= give_up) return false;
    absl::SleepFor(absl::Milliseconds(1));
  }
  return true;
}

TEST(WorkerLeasesTest, AWorkerThatNeverSaysReadyIsKilledAndCountsAsAStartFailure) {
  FakeAgent agent;
  std::string agent_address;
  std::unique_ptr<rpc::RpcServer> server = Serve(&agent, &agent_address);
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
  options.token = kToken;
  options.agent_address = agent_address;
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

TEST(WorkerLeasesTest, TheThreadOfEveryLeaseThatEndedIsJoined) {
  FakeAgent agent(/*exit_at_once=*/true);
  std::string agent_address;
  std::unique_ptr<rpc::RpcServer> server = Serve(&agent, &agent_address);
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
  options.token = kToken;
  options.agent_address = agent_address;
  options.forward_output = false;
  auto leases = std::make_unique<WorkerLeases>(options, &submitter);
  submitter.SetLeaseSource(leases.get());
  // Lease threads alive as each lease is asked for: this one and the few whose leases are ending.
  std::atomic<size_t> most_watchers{0};
  agent.on_lease = [&] {
    const size_t now = leases->lease_threads_for_tests();
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

  // Every lease has ended: every lease thread is joined, without a shutdown.
  const absl::Time give_up = absl::Now() + absl::Seconds(30);
  while (leases->lease_threads_for_tests() != 0 && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  EXPECT_EQ(leases->lease_threads_for_tests(), 0u);

  leases->Shutdown();
  submitter.Shutdown();
  server->Shutdown();
}

TEST(WorkerLeasesTest, AnAgentThatNeverAnswersHoldsUpNoOtherLeaseAndIsLeftWhenItsNodeDies) {
  SilentAgent silent;
  FakeAgent good;
  std::string silent_address;
  std::string good_address;
  std::unique_ptr<rpc::RpcServer> silent_server = Serve(&silent, &silent_address);
  std::unique_ptr<rpc::RpcServer> good_server = Serve(&good, &good_address);
  ASSERT_NE(silent_server, nullptr);
  ASSERT_NE(good_server, nullptr);
  FakeHead head(silent_address, good_address);
  std::string head_address;
  std::unique_ptr<rpc::RpcServer> head_server = Serve(&head, &head_address);
  ASSERT_NE(head_server, nullptr);

  TaskSubmitter submitter(SubmitterOptions{}, nullptr,
                          [](const ObjectId&, absl::StatusOr<std::string>) { return true; });
  WorkerLeasesOptions options;
  options.token = kToken;
  options.head_address = head_address;
  options.state_dir = ::testing::TempDir() + "/worker_leases_test_no_state";  // no local agent
  options.forward_output = false;
  options.node_check_interval = absl::Milliseconds(10);
  auto leases = std::make_unique<WorkerLeases>(options, &submitter);
  submitter.SetLeaseSource(leases.get());
  auto submit = [&](const std::string& node) {
    LeaseShape shape;
    shape.key = absl::StrCat("CPU=1|node=", node);
    shape.request.set_affinity_node_id(node);
    QueuedTask task;
    task.spec.set_task_id(absl::StrCat("t-", node));
    task.spec.set_function("F");
    task.return_id = ObjectId::FromRandom();
    submitter.Submit(shape, std::move(task));
  };

  // A lease for the silent node's shape is asked of its agent, which does not answer.
  submit("silent");
  ASSERT_TRUE(Eventually([&] { return silent.open() == 1; }));
  // Another shape's lease is granted meanwhile, that first request still open: with one thread
  // for every request it would wait for the silent agent's attempts to run out (60 s).
  submit("good");
  ASSERT_TRUE(Eventually([&] { return good.granted_affinities().size() == 1; }));
  EXPECT_EQ(good.granted_affinities(), (std::vector<std::string>{"good"}));
  EXPECT_EQ(silent.open(), 1);
  EXPECT_EQ(silent.calls(), 1);

  // Once the head says the silent node is dead, its request is cancelled (not left to its 20 s
  // deadline and the retries after it) and the lease is granted by another node.
  head.DeclareSilentDead();
  ASSERT_TRUE(Eventually([&] { return good.granted_affinities().size() == 2; }));
  EXPECT_EQ(good.granted_affinities(), (std::vector<std::string>{"good", "silent"}));
  EXPECT_TRUE(Eventually([&] { return silent.open() == 0; }));
  EXPECT_EQ(silent.calls(), 1);      // one attempt: never asked again
  EXPECT_EQ(silent.cut_short(), 1);  // cancelled, not timed out

  // Both workers exit (their leases end at once: no wait for them at shutdown).
  silent.LetGo();
  submitter.Shutdown();
  for (const char* worker : {"w-1", "w-2"}) {
    v1::KillWorkerRequest kill;
    kill.set_worker_id(worker);
    v1::KillWorkerResponse killed;
    good.KillWorker(nullptr, &kill, &killed);
  }
  leases->Shutdown();
  head_server->Shutdown();
  good_server->Shutdown();
  silent_server->Shutdown();
}

}  // namespace
}  // namespace tessera::api
