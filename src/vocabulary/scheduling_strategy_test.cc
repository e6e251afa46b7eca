#include "vocabulary/scheduling_strategy.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>

#include "vocabulary/task_options.h"

namespace tessera {
namespace {

using ::testing::StartsWith;

TEST(SchedulingStrategyTest, EachKindValidatesItsOwnFields) {
  EXPECT_TRUE(ValidateSchedulingStrategy(DefaultScheduling{}).ok());
  EXPECT_TRUE(ValidateSchedulingStrategy(SpreadScheduling{}).ok());
  EXPECT_TRUE(ValidateSchedulingStrategy(NodeAffinityScheduling{NodeId("cpu2"), true}).ok());
  EXPECT_TRUE(
      ValidateSchedulingStrategy(PlacementGroupScheduling{PlacementGroupName("g"), 1}).ok());

  EXPECT_THAT(
      std::string(
          ValidateSchedulingStrategy(NodeAffinityScheduling{NodeId("not a node")}).message()),
      StartsWith("node affinity \"not a node\": not a node id: label value \"not a node\""));
  EXPECT_EQ(ValidateSchedulingStrategy(NodeAffinityScheduling{}).message(),
            "node affinity \"\": not a node id: empty");
  EXPECT_EQ(ValidateSchedulingStrategy(PlacementGroupScheduling{}).message(),
            "placement group strategy: the group has no name");
  EXPECT_EQ(
      ValidateSchedulingStrategy(PlacementGroupScheduling{PlacementGroupName("g"), -2}).message(),
      "placement group \"g\": bundle index -2 is below -1 (-1: any bundle)");
}

TEST(SchedulingStrategyTest, DescribesEachKindForMessages) {
  EXPECT_EQ(DescribeSchedulingStrategy(DefaultScheduling{}), "DEFAULT");
  EXPECT_EQ(DescribeSchedulingStrategy(SpreadScheduling{}), "SPREAD");
  EXPECT_EQ(DescribeSchedulingStrategy(NodeAffinityScheduling{NodeId("n1"), true}),
            "node affinity n1 (soft)");
  EXPECT_EQ(DescribeSchedulingStrategy(PlacementGroupScheduling{PlacementGroupName("g"), -1}),
            "placement group g any bundle");
  EXPECT_EQ(DescribeSchedulingStrategy(PlacementGroupScheduling{PlacementGroupName("g"), 2}),
            "placement group g bundle 2");
}

TEST(SchedulingStrategyTest, StrategiesOrderSoTheyCanKeyAMap) {
  std::set<SchedulingStrategy> seen = {DefaultScheduling{}, SpreadScheduling{},
                                       NodeAffinityScheduling{NodeId("a"), false},
                                       NodeAffinityScheduling{NodeId("a"), true},
                                       PlacementGroupScheduling{PlacementGroupName("g"), 0}};
  EXPECT_EQ(seen.size(), 5u);
  EXPECT_EQ(seen.count(NodeAffinityScheduling{NodeId("a"), true}), 1u);
  EXPECT_EQ(seen.count(PlacementGroupScheduling{PlacementGroupName("g"), 1}), 0u);
}

TEST(TaskOptionsTest, ATaskOrAnActorHoldsOneCpuUnlessAsked) {
  EXPECT_EQ(TaskOptions{}.resources.ToString(), "CPU=1");
  EXPECT_EQ(ActorOptions{}.resources.ToString(), "CPU=1");
  EXPECT_TRUE(std::holds_alternative<DefaultScheduling>(TaskOptions{}.strategy));
}

}  // namespace
}  // namespace tessera
