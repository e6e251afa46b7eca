#include "serve/request_router.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/clock.h"

namespace tessera::serve {
namespace {

using ::testing::Each;
using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::Pair;
using ::testing::UnorderedElementsAre;

// How long a test waits for the router's thread to reach a point before it fails (never reached
// when the router works). Real time, only to observe an event, never to time one.
constexpr absl::Duration kPatience = absl::Seconds(30);

bool WaitUntil(const std::function<bool()>& done) {
  const absl::Time give_up = absl::Now() + kPatience;
  while (!done()) {
    if (absl::Now() >= give_up) return false;
    absl::SleepFor(absl::Milliseconds(1));
  }
  return true;
}

absl::StatusOr<ProbeReply> Reply(int64_t queue_len) { return ProbeReply{.queue_len = queue_len}; }

RouterReplica Replica(std::string id, int64_t max_ongoing_requests = 5, std::string node = "n9",
                      std::string zone = "", std::vector<std::string> models = {}) {
  return RouterReplica{.replica_id = std::move(id),
                       .node_id = std::move(node),
                       .availability_zone = std::move(zone),
                       .max_ongoing_requests = max_ongoing_requests,
                       .multiplexed_model_ids = std::move(models)};
}

// A prober the test answers: each probe is recorded (replica, when, deadline) and waits for
// Answer, unless its replica has an automatic answer, which it gets at once (inside Probe).
class FakeProber : public ReplicaProber {
 public:
  struct Sent {
    std::string replica_id;
    absl::Time at;
    absl::Time deadline;
  };

  explicit FakeProber(Clock* clock) : clock_(clock) {}

  void Probe(const std::string& replica_id, absl::Time deadline, ProbeCallback callback) override {
    std::optional<absl::StatusOr<ProbeReply>> automatic;
    {
      absl::MutexLock lock(&mu_);
      sent_.push_back({replica_id, clock_->Now(), deadline});
      auto found = automatic_.find(replica_id);
      if (found == automatic_.end()) {
        waiting_.emplace_back(replica_id, std::move(callback));
        return;
      }
      automatic = found->second;
    }
    callback(*automatic);
  }

  void AutoAnswer(const std::string& replica_id, absl::StatusOr<ProbeReply> reply) {
    absl::MutexLock lock(&mu_);
    automatic_.insert_or_assign(replica_id, std::move(reply));
  }

  // Answers every waiting probe of `replica_id`; how many there were.
  int Answer(const std::string& replica_id, const absl::StatusOr<ProbeReply>& reply) {
    std::vector<ProbeCallback> due;
    {
      absl::MutexLock lock(&mu_);
      for (auto it = waiting_.begin(); it != waiting_.end();) {
        if (it->first == replica_id) {
          due.push_back(std::move(it->second));
          it = waiting_.erase(it);
        } else {
          ++it;
        }
      }
    }
    for (ProbeCallback& callback : due) callback(reply);
    return static_cast<int>(due.size());
  }

  // Answers only the newest waiting probe of `replica_id`; false when none waits.
  bool AnswerNewest(const std::string& replica_id, const absl::StatusOr<ProbeReply>& reply) {
    ProbeCallback due;
    {
      absl::MutexLock lock(&mu_);
      for (auto it = waiting_.rbegin(); it != waiting_.rend(); ++it) {
        if (it->first != replica_id) continue;
        due = std::move(it->second);
        waiting_.erase(std::next(it).base());
        break;
      }
    }
    if (!due) return false;
    due(reply);
    return true;
  }

  std::vector<Sent> sent() const {
    absl::MutexLock lock(&mu_);
    return sent_;
  }
  size_t sent_count() const {
    absl::MutexLock lock(&mu_);
    return sent_.size();
  }
  std::vector<std::string> sent_to() const {
    absl::MutexLock lock(&mu_);
    std::vector<std::string> ids;
    for (const Sent& sent : sent_) ids.push_back(sent.replica_id);
    return ids;
  }

 private:
  Clock* const clock_;
  mutable absl::Mutex mu_;
  std::vector<Sent> sent_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, absl::StatusOr<ProbeReply>> automatic_ ABSL_GUARDED_BY(mu_);
  std::vector<std::pair<std::string, ProbeCallback>> waiting_ ABSL_GUARDED_BY(mu_);
};

// The callbacks' calls, in order.
class Recorder {
 public:
  RouteCallback For(const std::string& request_id) {
    return [this, request_id](absl::StatusOr<std::string> result) {
      absl::MutexLock lock(&mu_);
      calls_.emplace_back(request_id, std::move(result));
    };
  }

  size_t size() const {
    absl::MutexLock lock(&mu_);
    return calls_.size();
  }
  bool WaitForCalls(size_t n) const {
    return WaitUntil([&] { return size() >= n; });
  }
  // The request ids in the order their callbacks were called.
  std::vector<std::string> Order() const {
    absl::MutexLock lock(&mu_);
    std::vector<std::string> order;
    for (const auto& [request_id, result] : calls_) order.push_back(request_id);
    return order;
  }
  int CallsOf(const std::string& request_id) const {
    absl::MutexLock lock(&mu_);
    int calls = 0;
    for (const auto& [id, result] : calls_) calls += id == request_id ? 1 : 0;
    return calls;
  }
  // The first result of `request_id` (Unknown when it has none).
  absl::StatusOr<std::string> ResultOf(const std::string& request_id) const {
    absl::MutexLock lock(&mu_);
    for (const auto& [id, result] : calls_) {
      if (id == request_id) return result;
    }
    return absl::UnknownError("no call");
  }
  // The replica `request_id` was routed to, or what it got instead.
  std::string RoutedTo(const std::string& request_id) const {
    const absl::StatusOr<std::string> result = ResultOf(request_id);
    return result.ok() ? *result : result.status().ToString();
  }

 private:
  mutable absl::Mutex mu_;
  std::vector<std::pair<std::string, absl::StatusOr<std::string>>> calls_ ABSL_GUARDED_BY(mu_);
};

class RouterTest : public ::testing::Test {
 protected:
  std::unique_ptr<PowerOfTwoChoicesRouter> MakeRouter(RouterOptions options = {}) {
    options.clock = &clock_;
    options.prober = &prober_;
    options.seed = 7;
    auto router = PowerOfTwoChoicesRouter::Create(std::move(options));
    EXPECT_TRUE(router.ok()) << router.status();
    if (!router.ok()) return nullptr;
    return *std::move(router);
  }

  PowerOfTwoChoicesRouter::Ticket Route(PowerOfTwoChoicesRouter& router, const std::string& id,
                                        const std::string& model = "") {
    return router.Route({.request_id = id, .multiplexed_model_id = model}, recorder_.For(id));
  }

  bool WaitForProbes(size_t n) {
    return WaitUntil([&] { return prober_.sent_count() >= n; });
  }

  FakeClock clock_;
  FakeProber prober_{&clock_};
  Recorder recorder_;
};

TEST_F(RouterTest, PicksTheShorterQueueOfTheTwo) {
  auto router = MakeRouter();
  ASSERT_NE(router, nullptr);
  ASSERT_TRUE(router->UpdateReplicas({Replica("a"), Replica("b")}).ok());
  Route(*router, "r1");
  ASSERT_TRUE(WaitForProbes(2));
  EXPECT_EQ(prober_.Answer("a", Reply(3)), 1);
  EXPECT_EQ(prober_.Answer("b", Reply(1)), 1);
  ASSERT_TRUE(recorder_.WaitForCalls(1));
  EXPECT_EQ(recorder_.RoutedTo("r1"), "b");

  // Both cached now (a 3, b 2 with the send counted): b again, without a probe.
  Route(*router, "r2");
  ASSERT_TRUE(recorder_.WaitForCalls(2));
  EXPECT_EQ(recorder_.RoutedTo("r2"), "b");
  EXPECT_EQ(prober_.sent_count(), 2u);
  const RouterStats stats = router->Stats();
  EXPECT_THAT(stats.request_router_queue_len, ElementsAre(Pair("a", 3), Pair("b", 3)));
  EXPECT_EQ(stats.num_router_requests_total, 2);
  EXPECT_EQ(stats.probes_sent, 2);
}

TEST_F(RouterTest, NeverSendsToAReplicaAtItsMaxOngoingRequests) {
  auto router = MakeRouter();
  ASSERT_NE(router, nullptr);
  ASSERT_TRUE(
      router->UpdateReplicas({Replica("a", /*max_ongoing_requests=*/2), Replica("b")}).ok());
  Route(*router, "r1");
  ASSERT_TRUE(WaitForProbes(2));
  // a's queue is shorter but full; b's is longer and has room.
  EXPECT_EQ(prober_.Answer("a", Reply(2)), 1);
  EXPECT_EQ(prober_.Answer("b", Reply(4)), 1);
  ASSERT_TRUE(recorder_.WaitForCalls(1));
  EXPECT_EQ(recorder_.RoutedTo("r1"), "b");
}

TEST_F(RouterTest, ServesWaitingRequestsInArrivalOrder) {
  auto router = MakeRouter();
  ASSERT_NE(router, nullptr);
  for (const char* id : {"r1", "r2", "r3", "r4"}) Route(*router, id);
  prober_.AutoAnswer("a", Reply(0));
  ASSERT_TRUE(router->UpdateReplicas({Replica("a", /*max_ongoing_requests=*/10)}).ok());
  ASSERT_TRUE(recorder_.WaitForCalls(4));
  EXPECT_THAT(recorder_.Order(), ElementsAre("r1", "r2", "r3", "r4"));
  EXPECT_EQ(recorder_.RoutedTo("r4"), "a");
  EXPECT_EQ(router->NumQueued(), 0);
}

TEST_F(RouterTest, RefusesPastMaxQueuedRequestsWithRaysBackPressureText) {
  auto router = MakeRouter({.max_queued_requests = 2});
  ASSERT_NE(router, nullptr);
  Route(*router, "r1");
  Route(*router, "r2");
  const PowerOfTwoChoicesRouter::Ticket refused = Route(*router, "r3");
  ASSERT_TRUE(recorder_.WaitForCalls(1));
  const absl::StatusOr<std::string> result = recorder_.ResultOf("r3");
  EXPECT_EQ(result.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(std::string(result.status().message()),
            "Request dropped due to backpressure (num_queued_requests=2, "
            "max_queued_requests=2).");
  EXPECT_EQ(router->NumQueued(), 2);
  EXPECT_FALSE(router->Cancel(refused));
  EXPECT_EQ(router->Stats().deployment_queued_queries, 2);
}

TEST_F(RouterTest, CancelBeforeAssignmentDropsTheRequest) {
  auto router = MakeRouter();
  ASSERT_NE(router, nullptr);
  const PowerOfTwoChoicesRouter::Ticket first = Route(*router, "r1");
  Route(*router, "r2");
  EXPECT_TRUE(router->Cancel(first));
  EXPECT_FALSE(router->Cancel(first));
  ASSERT_TRUE(recorder_.WaitForCalls(1));
  EXPECT_EQ(recorder_.ResultOf("r1").status().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(router->NumQueued(), 1);

  prober_.AutoAnswer("a", Reply(0));
  ASSERT_TRUE(router->UpdateReplicas({Replica("a")}).ok());
  ASSERT_TRUE(recorder_.WaitForCalls(2));
  EXPECT_EQ(recorder_.RoutedTo("r2"), "a");
  EXPECT_EQ(recorder_.CallsOf("r1"), 1);
  EXPECT_EQ(router->Stats().num_router_requests_total, 1);
}

TEST_F(RouterTest, WithoutReplicasRequestsWaitForAnUpdate) {
  auto router = MakeRouter();
  ASSERT_NE(router, nullptr);
  EXPECT_FALSE(router->HasQueuedWorkWithoutReplicas());
  Route(*router, "r1");
  EXPECT_EQ(router->NumQueued(), 1);
  EXPECT_TRUE(router->HasQueuedWorkWithoutReplicas());
  EXPECT_EQ(router->Stats().num_scheduling_tasks, 0);
  EXPECT_EQ(prober_.sent_count(), 0u);

  prober_.AutoAnswer("a", Reply(0));
  ASSERT_TRUE(router->UpdateReplicas({Replica("a")}).ok());
  ASSERT_TRUE(recorder_.WaitForCalls(1));
  EXPECT_EQ(recorder_.RoutedTo("r1"), "a");
  EXPECT_EQ(router->NumQueued(), 0);
  EXPECT_FALSE(router->HasQueuedWorkWithoutReplicas());
}

TEST_F(RouterTest, BacksOffZeroThenDoublingFrom25msUpTo500msAndProbeDeadlinesDouble) {
  auto router = MakeRouter();
  ASSERT_NE(router, nullptr);
  ASSERT_TRUE(router->UpdateReplicas({Replica("a", /*max_ongoing_requests=*/1)}).ok());
  const absl::Time start = clock_.Now();
  Route(*router, "r1");
  ASSERT_TRUE(WaitForProbes(1));
  ASSERT_EQ(prober_.Answer("a", Reply(1)), 1);  // full
  // The first retry goes at once: no time passes before its probe.
  ASSERT_TRUE(WaitForProbes(2));
  EXPECT_EQ(prober_.sent()[1].at, start);
  ASSERT_EQ(prober_.Answer("a", Reply(1)), 1);

  const std::vector<absl::Duration> waits = {absl::Milliseconds(25),  absl::Milliseconds(50),
                                             absl::Milliseconds(100), absl::Milliseconds(200),
                                             absl::Milliseconds(400), absl::Milliseconds(500),
                                             absl::Milliseconds(500)};
  for (size_t k = 0; k < waits.size(); ++k) {
    const int64_t rounds = static_cast<int64_t>(k) + 2;
    ASSERT_TRUE(WaitUntil([&] { return router->Stats().backoff_rounds == rounds; }));
    const RouterStats stats = router->Stats();
    EXPECT_EQ(stats.num_scheduling_tasks_in_backoff, 1);
    EXPECT_EQ(stats.next_retry_at - clock_.Now(), waits[k]) << "wait " << k;
    EXPECT_EQ(prober_.sent_count(), k + 2);  // nothing sent while it waits
    clock_.Advance(waits[k]);
    ASSERT_TRUE(WaitForProbes(k + 3));
    EXPECT_EQ(prober_.sent().back().at, clock_.Now());
    const bool last = k + 1 == waits.size();
    ASSERT_EQ(prober_.Answer("a", Reply(last ? 0 : 1)), 1);
  }
  ASSERT_TRUE(recorder_.WaitForCalls(1));
  EXPECT_EQ(recorder_.RoutedTo("r1"), "a");

  std::vector<absl::Duration> deadlines;
  for (const FakeProber::Sent& sent : prober_.sent()) deadlines.push_back(sent.deadline - sent.at);
  const absl::Duration second = absl::Seconds(1);
  EXPECT_THAT(deadlines,
              ElementsAre(absl::Milliseconds(100), absl::Milliseconds(200), absl::Milliseconds(400),
                          absl::Milliseconds(800), second, second, second, second, second));
  EXPECT_EQ(router->Stats().num_scheduling_tasks_in_backoff, 0);
}

TEST_F(RouterTest, AnExpiredCacheEntryIsProbedAgain) {
  auto router = MakeRouter();
  ASSERT_NE(router, nullptr);
  prober_.AutoAnswer("a", Reply(0));
  ASSERT_TRUE(router->UpdateReplicas({Replica("a")}).ok());
  Route(*router, "r1");
  ASSERT_TRUE(recorder_.WaitForCalls(1));
  Route(*router, "r2");  // from the cache
  ASSERT_TRUE(recorder_.WaitForCalls(2));
  EXPECT_EQ(prober_.sent_count(), 1u);

  clock_.Advance(absl::Seconds(10));  // still valid at exactly 10 s
  EXPECT_THAT(router->Stats().request_router_queue_len, ElementsAre(Pair("a", 2)));
  clock_.Advance(absl::Milliseconds(1));
  EXPECT_THAT(router->Stats().request_router_queue_len, IsEmpty());
  Route(*router, "r3");
  ASSERT_TRUE(recorder_.WaitForCalls(3));
  EXPECT_EQ(prober_.sent_count(), 2u);
  EXPECT_EQ(recorder_.RoutedTo("r3"), "a");
}

TEST_F(RouterTest, AReplicaThatDoesNotAnswerInTimeIsSkipped) {
  auto router = MakeRouter();
  ASSERT_NE(router, nullptr);
  ASSERT_TRUE(router->UpdateReplicas({Replica("a"), Replica("b")}).ok());
  Route(*router, "r1");
  ASSERT_TRUE(WaitForProbes(2));
  EXPECT_EQ(prober_.Answer("b", Reply(3)), 1);
  clock_.Advance(absl::Milliseconds(100));  // a's deadline
  ASSERT_TRUE(recorder_.WaitForCalls(1));
  EXPECT_EQ(recorder_.RoutedTo("r1"), "b");
  // a's late answer changes nothing, though shorter.
  EXPECT_EQ(prober_.Answer("a", Reply(0)), 1);
  EXPECT_THAT(router->Stats().request_router_queue_len, ElementsAre(Pair("b", 4)));
}

TEST_F(RouterTest, AReplicaWhoseActorDiedIsDroppedUntilAnUpdateNamesIt) {
  auto router = MakeRouter();
  ASSERT_NE(router, nullptr);
  ASSERT_TRUE(router->UpdateReplicas({Replica("a"), Replica("b")}).ok());
  Route(*router, "r1");
  ASSERT_TRUE(WaitForProbes(2));
  EXPECT_EQ(prober_.Answer("a", ReplicaDiedError("a")), 1);
  EXPECT_EQ(prober_.Answer("b", Reply(2)), 1);
  ASSERT_TRUE(recorder_.WaitForCalls(1));
  EXPECT_EQ(recorder_.RoutedTo("r1"), "b");
  EXPECT_EQ(router->Stats().num_replicas, 1);

  // Only b is left to choose: from the cache, nothing probed.
  Route(*router, "r2");
  ASSERT_TRUE(recorder_.WaitForCalls(2));
  EXPECT_EQ(recorder_.RoutedTo("r2"), "b");
  EXPECT_EQ(prober_.sent_count(), 2u);

  ASSERT_TRUE(router->UpdateReplicas({Replica("a"), Replica("b")}).ok());
  EXPECT_EQ(router->Stats().num_replicas, 2);
}

TEST_F(RouterTest, OnReplicaDiedDropsTheReplicaUntilAnUpdateNamesIt) {
  auto router = MakeRouter();
  ASSERT_NE(router, nullptr);
  prober_.AutoAnswer("a", Reply(0));
  prober_.AutoAnswer("b", Reply(3));
  ASSERT_TRUE(router->UpdateReplicas({Replica("a"), Replica("b")}).ok());
  Route(*router, "r1");
  ASSERT_TRUE(recorder_.WaitForCalls(1));
  EXPECT_EQ(recorder_.RoutedTo("r1"), "a");

  // r1's call found a's actor dead: a is chosen no more, though its cached queue is shorter.
  router->OnReplicaDied("a");
  EXPECT_EQ(router->Stats().num_replicas, 1);
  Route(*router, "r2");
  ASSERT_TRUE(recorder_.WaitForCalls(2));
  EXPECT_EQ(recorder_.RoutedTo("r2"), "b");
  router->OnReplicaDied("unknown");  // nothing to drop: nothing changes
  EXPECT_EQ(router->Stats().num_replicas, 1);

  ASSERT_TRUE(router->UpdateReplicas({Replica("a"), Replica("b")}).ok());
  EXPECT_EQ(router->Stats().num_replicas, 2);
}

TEST_F(RouterTest, AnUnavailableReplicaLosesItsCachedQueueLength) {
  auto router = MakeRouter();
  ASSERT_NE(router, nullptr);
  ASSERT_TRUE(router->UpdateReplicas({Replica("a", /*max_ongoing_requests=*/1)}).ok());
  Route(*router, "r1");
  ASSERT_TRUE(WaitForProbes(1));
  EXPECT_EQ(prober_.Answer("a", Reply(0)), 1);
  ASSERT_TRUE(recorder_.WaitForCalls(1));
  EXPECT_THAT(router->Stats().request_router_queue_len, ElementsAre(Pair("a", 1)));

  // Full in the cache: probed again, and it cannot be reached.
  Route(*router, "r2");
  ASSERT_TRUE(WaitForProbes(2));
  EXPECT_EQ(prober_.Answer("a", ReplicaUnavailableError("a")), 1);
  ASSERT_TRUE(WaitUntil([&] { return router->Stats().backoff_rounds == 1; }));
  EXPECT_THAT(router->Stats().request_router_queue_len, IsEmpty());
  EXPECT_EQ(router->Stats().num_replicas, 1);
}

TEST_F(RouterTest, PrefersReplicasHoldingTheModelThenFallsBackAfterTheWait) {
  auto router = MakeRouter();
  ASSERT_NE(router, nullptr);
  ASSERT_TRUE(
      router
          ->UpdateReplicas({Replica("a", /*max_ongoing_requests=*/1, "n1", "", {"m1"}),
                            Replica("b", 5, "n2", "", {"m2", "m3"}), Replica("c", 5, "n3", "", {})})
          .ok());
  prober_.AutoAnswer("a", Reply(0));
  prober_.AutoAnswer("b", Reply(0));
  prober_.AutoAnswer("c", Reply(0));
  Route(*router, "r1", "m1");
  ASSERT_TRUE(recorder_.WaitForCalls(1));
  EXPECT_EQ(recorder_.RoutedTo("r1"), "a");
  EXPECT_THAT(prober_.sent_to(), ElementsAre("a"));

  // a is full now: m1's requests keep to a for the wait (at least 1 s) ...
  prober_.AutoAnswer("a", Reply(1));
  Route(*router, "r2", "m1");
  // (a full: retried at once, then after 25 ms)
  ASSERT_TRUE(WaitUntil([&] { return router->Stats().backoff_rounds == 2; }));
  EXPECT_THAT(prober_.sent_to(), Each("a"));
  clock_.Advance(absl::Milliseconds(900));
  ASSERT_TRUE(WaitUntil([&] { return router->Stats().backoff_rounds == 3; }));
  EXPECT_THAT(prober_.sent_to(), Each("a"));
  EXPECT_EQ(recorder_.size(), 1u);
  // ... then go to the replicas with the fewest models loaded (c), not to any.
  clock_.Advance(absl::Seconds(2));
  ASSERT_TRUE(recorder_.WaitForCalls(2));
  EXPECT_EQ(recorder_.RoutedTo("r2"), "c");
}

TEST_F(RouterTest, AReplicaFoundForAModelGoesToTheOldestRequestOfThatModel) {
  auto router = MakeRouter();
  ASSERT_NE(router, nullptr);
  ASSERT_TRUE(router->UpdateReplicas({Replica("a", 5, "n1", "", {"m1"})}).ok());
  Route(*router, "r1");
  Route(*router, "r2", "m1");
  ASSERT_TRUE(WaitForProbes(2));  // r1's routing task probes a, then r2's does
  ASSERT_TRUE(prober_.AnswerNewest("a", Reply(0)));
  ASSERT_TRUE(recorder_.WaitForCalls(1));
  EXPECT_THAT(recorder_.Order(), ElementsAre("r2"));  // not to r1, though older
  EXPECT_EQ(prober_.Answer("a", Reply(0)), 1);
  ASSERT_TRUE(recorder_.WaitForCalls(2));
  EXPECT_THAT(recorder_.Order(), ElementsAre("r2", "r1"));
}

TEST_F(RouterTest, AModelLoadedNowhereGoesToAReplicaWithTheFewestModels) {
  auto router = MakeRouter();
  ASSERT_NE(router, nullptr);
  ASSERT_TRUE(router
                  ->UpdateReplicas({Replica("a", 5, "n1", "", {"m1"}),
                                    Replica("b", 5, "n2", "", {"m2"}), Replica("c", 5, "n3")})
                  .ok());
  prober_.AutoAnswer("c", Reply(4));
  Route(*router, "r1", "m9");
  ASSERT_TRUE(recorder_.WaitForCalls(1));
  EXPECT_EQ(recorder_.RoutedTo("r1"), "c");
  EXPECT_THAT(prober_.sent_to(), ElementsAre("c"));
}

TEST_F(RouterTest, PrefersTheCallersNodeOnceThenItsZone) {
  auto router = MakeRouter({.self_node_id = "n1",
                            .self_availability_zone = "az1",
                            .prefer_local_node = true,
                            .prefer_local_az = true});
  ASSERT_NE(router, nullptr);
  ASSERT_TRUE(
      router
          ->UpdateReplicas({Replica("local", /*max_ongoing_requests=*/1, "n1", "az1"),
                            Replica("zone", 5, "n2", "az1"), Replica("far1", 5, "n3", "az2"),
                            Replica("far2", 5, "n4", "az2")})
          .ok());
  prober_.AutoAnswer("local", Reply(0));
  prober_.AutoAnswer("zone", Reply(0));
  Route(*router, "r1");
  ASSERT_TRUE(recorder_.WaitForCalls(1));
  EXPECT_EQ(recorder_.RoutedTo("r1"), "local");
  EXPECT_THAT(prober_.sent_to(), ElementsAre("local"));

  // The node's replica is full now: the zone's is tried next, at once (no backoff).
  prober_.AutoAnswer("local", Reply(1));
  Route(*router, "r2");
  ASSERT_TRUE(recorder_.WaitForCalls(2));
  EXPECT_EQ(recorder_.RoutedTo("r2"), "zone");
  // r1's try of the node; r2's try of the node, then of the zone (both of its replicas).
  const std::vector<std::string> probed = prober_.sent_to();
  ASSERT_EQ(probed.size(), 4u);
  EXPECT_EQ(probed[1], "local");
  EXPECT_THAT(probed, UnorderedElementsAre("local", "local", "local", "zone"));
  EXPECT_EQ(router->Stats().backoff_rounds, 0);
}

TEST_F(RouterTest, ARejectedRequestWaitsAgainAtTheFront) {
  auto router = MakeRouter();
  ASSERT_NE(router, nullptr);
  ASSERT_TRUE(router->UpdateReplicas({Replica("a")}).ok());
  Route(*router, "r2");
  Route(*router, "r3");
  ASSERT_TRUE(WaitForProbes(2));  // one routing task per request, each probing a
  router->OnReplicaRejected("a", 7, {.request_id = "r1"}, recorder_.For("r1"));
  EXPECT_THAT(router->Stats().request_router_queue_len, ElementsAre(Pair("a", 7)));
  EXPECT_EQ(router->NumQueued(), 3);

  prober_.AutoAnswer("a", Reply(0));
  EXPECT_EQ(prober_.Answer("a", Reply(0)), 2);
  ASSERT_TRUE(recorder_.WaitForCalls(3));
  EXPECT_THAT(recorder_.Order(), ElementsAre("r1", "r2", "r3"));
}

TEST_F(RouterTest, OnRequestFinishedCountsTheCachedQueueDown) {
  auto router = MakeRouter();
  ASSERT_NE(router, nullptr);
  prober_.AutoAnswer("a", Reply(2));
  ASSERT_TRUE(router->UpdateReplicas({Replica("a")}).ok());
  Route(*router, "r1");
  ASSERT_TRUE(recorder_.WaitForCalls(1));
  EXPECT_THAT(router->Stats().request_router_queue_len, ElementsAre(Pair("a", 3)));
  router->OnRequestFinished("a");
  EXPECT_THAT(router->Stats().request_router_queue_len, ElementsAre(Pair("a", 2)));
  router->OnRequestFinished("unknown");  // nothing cached: nothing changes
  EXPECT_THAT(router->Stats().request_router_queue_len, ElementsAre(Pair("a", 2)));
}

TEST_F(RouterTest, DestroyingTheRouterCancelsWaitingRequests) {
  {
    auto router = MakeRouter();
    ASSERT_NE(router, nullptr);
    Route(*router, "r1");
  }
  EXPECT_EQ(recorder_.CallsOf("r1"), 1);
  EXPECT_EQ(recorder_.ResultOf("r1").status().code(), absl::StatusCode::kCancelled);
}

TEST_F(RouterTest, BadReplicaSetsChangeNothing) {
  auto router = MakeRouter();
  ASSERT_NE(router, nullptr);
  ASSERT_TRUE(router->UpdateReplicas({Replica("a")}).ok());
  EXPECT_EQ(router->UpdateReplicas({Replica("b"), Replica("b")}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(router->UpdateReplicas({Replica("")}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(router->UpdateReplicas({Replica("c", /*max_ongoing_requests=*/0)}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(router->Stats().num_replicas, 1);
}

TEST(RouterOptionsTest, OutOfRangeOptionsAreRefused) {
  FakeClock clock;
  FakeProber prober(&clock);
  EXPECT_EQ(PowerOfTwoChoicesRouter::Create({.clock = &clock}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PowerOfTwoChoicesRouter::Create(
                {.clock = &clock, .prober = &prober, .max_queued_requests = 0})
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PowerOfTwoChoicesRouter::Create(
                {.clock = &clock, .prober = &prober, .max_backoff = absl::ZeroDuration()})
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PowerOfTwoChoicesRouter::Create(
                {.clock = &clock, .prober = &prober, .backoff_multiplier = 0.5})
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(PowerOfTwoChoicesRouter::Create(
                  {.clock = &clock, .prober = &prober, .max_queued_requests = -1})
                  .ok());
}

}  // namespace
}  // namespace tessera::serve
