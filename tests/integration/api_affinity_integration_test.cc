// Node affinity of tasks and actors on a real cluster (cpu1, gpu1, cpu2): hard runs only on the
// named node, and fails naming it when it is unknown or dead; soft prefers the node and runs
// elsewhere when it is dead.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <memory>
#include <string>

#include "integration/api_test_cluster.h"
#include "integration/cluster_harness.h"
#include "tessera/tessera.h"

namespace tessera::testing {
namespace {

using ::testing::HasSubstr;

std::string WhereAmI(int) { return GetRuntimeContext().node_id; }
TESSERA_REMOTE(WhereAmI);

class Locator {
 public:
  std::string Node() { return GetRuntimeContext().node_id; }
};
std::unique_ptr<Locator> MakeLocator() { return std::make_unique<Locator>(); }
TESSERA_ACTOR(MakeLocator);
TESSERA_ACTOR_METHOD(&Locator::Node);

class ApiAffinityTest : public ApiClusterSuite<4, 1> {};

TEST_F(ApiAffinityTest, HardAffinityRunsOnTheNamedNode) {
  for (const std::string node : {"cpu2", "gpu1", "cpu1"}) {
    auto where = Get(Task(WhereAmI).NodeAffinity(NodeId(node)).Remote(0), kPatience);
    ASSERT_TRUE(where.ok()) << where.status();
    EXPECT_EQ(*where, node);
  }
  ActorHandle<Locator> actor = Actor(MakeLocator).NodeAffinity(NodeId("cpu2")).Remote();
  auto where = Get(actor.Task(&Locator::Node).Remote(), kPatience);
  ASSERT_TRUE(where.ok()) << where.status();
  EXPECT_EQ(*where, "cpu2");
  ASSERT_OK(Kill(actor));
}

TEST_F(ApiAffinityTest, HardAffinityToAnUnknownNodeFailsNamingIt) {
  auto where = Get(Task(WhereAmI).NodeAffinity(NodeId("nowhere")).Remote(0), kPatience);
  ASSERT_FALSE(where.ok());
  EXPECT_THAT(std::string(where.status().message()), HasSubstr("affinity node nowhere"));

  auto bad = Get(Task(WhereAmI).NodeAffinity(NodeId("not a node")).Remote(0));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
}

// Last in the suite: it loses cpu2.
TEST_F(ApiAffinityTest, ZSoftAffinityToADeadNodeRunsElsewhereHardFails) {
  ASSERT_OK(cluster_->KillMachine("cpu2").status());
  ASSERT_OK(cluster_->WaitNodes({"cpu2"}, v1::NODE_STATE_DEAD));
  auto soft = Get(Task(WhereAmI).NodeAffinity(NodeId("cpu2"), /*soft=*/true).Remote(0), kPatience);
  ASSERT_TRUE(soft.ok()) << soft.status();
  EXPECT_NE(*soft, "cpu2");
  auto hard = Get(Task(WhereAmI).NodeAffinity(NodeId("cpu2")).Remote(0), kPatience);
  ASSERT_FALSE(hard.ok());
  EXPECT_THAT(std::string(hard.status().message()), HasSubstr("affinity node cpu2"));
}

}  // namespace
}  // namespace tessera::testing
