// RunLeaseRound with fake calls: the head picks when no agent is given, spillbacks are followed
// to the granting agent, a refusal keeps its word and explanation, and the hop limit ends it.
#include "client/lease_round.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace tessera::client {
namespace {

// Agents that spill every lease on to the next ("a1" -> "a2" -> ...) until `grant_at`.
struct FakeCluster {
  int grant_at = 3;
  std::vector<std::string> asked;  // "pick" or the address of each RequestLease
  std::vector<int> hops;

  LeaseRoundCalls Calls() {
    LeaseRoundCalls calls;
    calls.pick_node = [this](const tessera::v1::ResourceRequest&,
                             tessera::v1::PickNodeResponse* picked) {
      asked.push_back("pick");
      picked->set_address("a1");
      return absl::OkStatus();
    };
    calls.request_lease = [this](const std::string& address, const tessera::v1::LeaseRequest& l,
                                 tessera::v1::LeaseReply* reply) {
      asked.push_back(address);
      hops.push_back(l.hops());
      const int n = std::stoi(address.substr(1));
      if (n == grant_at) {
        reply->mutable_granted()->set_worker_id("w");
      } else if (n < 0) {
        reply->set_status(tessera::v1::PICK_STATUS_INFEASIBLE);
      } else {
        reply->set_status(tessera::v1::PICK_STATUS_PENDING);
        reply->set_explanation("busy at " + address);
        reply->mutable_spillback()->set_address("a" + std::to_string(n + 1));
      }
      return absl::OkStatus();
    };
    calls.request_id = [] { return std::string("id"); };
    return calls;
  }
};

TEST(LeaseRoundTest, TheHeadPicksAndSpillbacksAreFollowedToTheGrant) {
  FakeCluster cluster;
  auto round = RunLeaseRound({}, "", cluster.Calls());
  ASSERT_TRUE(round.ok()) << round.status();
  ASSERT_TRUE(round->grant.has_value());
  EXPECT_EQ(round->address, "a3");
  EXPECT_EQ(cluster.asked, (std::vector<std::string>{"pick", "a1", "a2", "a3"}));
  EXPECT_EQ(cluster.hops, (std::vector<int>{0, 1, 2}));
}

TEST(LeaseRoundTest, TheHopLimitEndsTheRoundWithTheLastExplanation) {
  FakeCluster cluster;
  cluster.grant_at = 100;
  auto round = RunLeaseRound({}, "a1", cluster.Calls());
  ASSERT_TRUE(round.ok()) << round.status();
  EXPECT_FALSE(round->grant.has_value());
  EXPECT_TRUE(round->hop_limit);
  EXPECT_EQ(round->status, tessera::v1::PICK_STATUS_PENDING);
  EXPECT_EQ(cluster.asked.size(), static_cast<size_t>(kMaxLeaseHops + 1));
  EXPECT_EQ(round->explanation, "busy at a" + std::to_string(kMaxLeaseHops + 1));
}

TEST(LeaseRoundTest, ARefusalWithoutSpillbackEndsTheRoundAndACallErrorIsReturned) {
  FakeCluster cluster;
  auto round = RunLeaseRound({}, "a-1", cluster.Calls());
  ASSERT_TRUE(round.ok());
  EXPECT_EQ(round->status, tessera::v1::PICK_STATUS_INFEASIBLE);
  EXPECT_FALSE(round->hop_limit);

  LeaseRoundCalls failing = cluster.Calls();
  failing.request_lease = [](const std::string&, const tessera::v1::LeaseRequest&,
                             tessera::v1::LeaseReply*) {
    return absl::UnavailableError("agent down");
  };
  EXPECT_EQ(RunLeaseRound({}, "a1", failing).status().message(), "agent down");
}

TEST(LeaseRoundTest, AnUnreachableAgentTheHeadPickedIsLeftOutAndTheHeadAskedAgain) {
  // The head still lists dead node "n1" (its machine is gone); live "n2" grants.
  std::vector<std::string> asked;
  std::vector<std::vector<std::string>> excluded;
  LeaseRoundCalls calls;
  calls.pick_node = [&](const tessera::v1::ResourceRequest&, tessera::v1::PickNodeResponse* p) {
    asked.push_back("pick");
    p->set_node_id("n1");
    p->set_address("dead:1");
    return absl::OkStatus();
  };
  calls.pick_node_excluding = [&](const tessera::v1::ResourceRequest&,
                                  const std::vector<std::string>& exclude,
                                  tessera::v1::PickNodeResponse* p) {
    asked.push_back("pick");
    excluded.push_back(exclude);
    p->set_node_id("n2");
    p->set_address("live:2");
    return absl::OkStatus();
  };
  calls.request_lease = [&](const std::string& address, const tessera::v1::LeaseRequest&,
                            tessera::v1::LeaseReply* reply) {
    asked.push_back(address);
    if (address == "dead:1") return absl::UnavailableError("connection refused");
    reply->mutable_granted()->set_worker_id("w");
    return absl::OkStatus();
  };
  calls.request_id = [] { return std::string("id"); };
  auto round = RunLeaseRound({}, "", calls);
  ASSERT_TRUE(round.ok()) << round.status();
  ASSERT_TRUE(round->grant.has_value());
  EXPECT_EQ(round->address, "live:2");
  EXPECT_EQ(asked, (std::vector<std::string>{"pick", "dead:1", "pick", "live:2"}));
  EXPECT_EQ(excluded, (std::vector<std::vector<std::string>>{{"n1"}}));
  EXPECT_EQ(round->unreachable, (std::vector<std::string>{"n1"}));

  // Without pick_node_excluding (or for the first agent, which the caller chose) the error ends
  // the round as before.
  calls.pick_node_excluding = nullptr;
  EXPECT_EQ(RunLeaseRound({}, "", calls).status().message(), "connection refused");
}

TEST(LeaseRoundTest, ASpilledBackUnreachableAgentIsLeftOutToo) {
  std::vector<std::string> asked;
  LeaseRoundCalls calls;
  calls.pick_node = [&](const tessera::v1::ResourceRequest&, tessera::v1::PickNodeResponse*) {
    return absl::InternalError("not called: an agent is given");
  };
  calls.pick_node_excluding = [&](const tessera::v1::ResourceRequest&,
                                  const std::vector<std::string>& exclude,
                                  tessera::v1::PickNodeResponse* p) {
    asked.push_back("pick without " + exclude.front());
    p->set_status(tessera::v1::PICK_STATUS_PENDING);
    p->set_explanation("no node fits now");
    return absl::OkStatus();  // names no node
  };
  calls.request_lease = [&](const std::string& address, const tessera::v1::LeaseRequest&,
                            tessera::v1::LeaseReply* reply) {
    asked.push_back(address);
    if (address == "dead:1") return absl::UnavailableError("connection refused");
    reply->set_status(tessera::v1::PICK_STATUS_PENDING);
    reply->mutable_spillback()->set_node_id("n1");
    reply->mutable_spillback()->set_address("dead:1");
    return absl::OkStatus();
  };
  calls.request_id = [] { return std::string("id"); };
  auto round = RunLeaseRound({}, "local:0", calls);
  ASSERT_TRUE(round.ok()) << round.status();
  EXPECT_FALSE(round->grant.has_value());
  EXPECT_EQ(round->status, tessera::v1::PICK_STATUS_PENDING);
  EXPECT_EQ(round->explanation, "no node fits now");
  EXPECT_EQ(asked, (std::vector<std::string>{"local:0", "dead:1", "pick without n1"}));
}

}  // namespace
}  // namespace tessera::client
