// The scheduler's explanation of a replica that cannot be placed, from the head in process: it
// names the resource that is short and who holds it, and is empty when the replica fits.
#include "serve_runtime/head_actor_records.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>

#include "base/clock.h"
#include "head/head_service.h"
#include "head/head_service_test_util.h"
#include "head/state_store.h"
#include "scheduling/scheduling_test_util.h"
#include "wire/proto_convert.h"

namespace tessera::serve {
namespace {

using ::testing::HasSubstr;

class HeadPendingExplanationTest : public ::testing::Test {
 protected:
  HeadPendingExplanationTest() {
    HeadServiceOptions options;
    options.clock = &clock_;
    options.store = &store_;
    options.agent_clients = [this](const std::string& node, const std::string&) {
      std::shared_ptr<head_testing::FakeAgent>& agent = agents_[node];
      if (agent == nullptr) agent = std::make_shared<head_testing::FakeAgent>();
      return agent;
    };
    head_ = std::make_unique<HeadService>(std::move(options));
    v1::RegisterNodeRequest request;
    wire::NodeToProto(testing_util::Spec("cpu-0", "CPU=4"), "127.0.0.1:1", "i1",
                      request.mutable_node());
    v1::RegisterNodeResponse response;
    EXPECT_TRUE(head_->nodes().RegisterNode(nullptr, &request, &response).ok());
  }

  void Hold(const std::string& group, const std::string& resources) {
    v1::CreatePlacementGroupRequest request;
    request.set_name(group);
    request.set_strategy(v1::PLACEMENT_STRATEGY_PACK);
    wire::ResourcesToProto(testing_util::Res(resources),
                           request.mutable_primary()->add_bundles()->mutable_resources());
    v1::PlacementGroupInfo info;
    ASSERT_TRUE(head_->reservations().CreatePlacementGroup(nullptr, &request, &info).ok());
    ASSERT_EQ(info.state(), v1::PLACEMENT_GROUP_STATE_CREATED) << info.explanation();
  }

  static ActorOptions Asking(const std::string& resources) {
    ActorOptions options;
    options.resources = testing_util::Res(resources);
    return options;
  }

  FakeClock clock_;
  InMemoryStateStore store_;
  std::map<std::string, std::shared_ptr<head_testing::FakeAgent>> agents_;
  std::unique_ptr<HeadService> head_;
};

TEST_F(HeadPendingExplanationTest, NamesTheResourceThatIsShortAndWhoHoldsIt) {
  const auto explain = HeadPendingExplanation(head_.get());
  EXPECT_EQ(explain(Asking("CPU=1")), "") << "it fits now: nothing to explain";
  Hold("hog", "CPU=4");
  const std::string why = explain(Asking("CPU=1"));
  EXPECT_THAT(why, HasSubstr("could fit CPU=1"));
  EXPECT_THAT(why, HasSubstr("available CPU: 0; held by placement group hog"));
  // More than the cluster could ever hold: the head says so.
  EXPECT_THAT(explain(Asking("CPU=16")), HasSubstr("CPU"));
}

}  // namespace
}  // namespace tessera::serve
