#include "api/lease_shape_key.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <set>

namespace tessera::api {
namespace {

ResourceSet Amounts(std::map<std::string, double> amounts) {
  return ResourceSet::FromAmounts(amounts).value();
}

LabelSelector Zone(std::string zone) {
  LabelSelector selector;
  EXPECT_TRUE(selector.AddConstraint({"zone", SelectorOperator::kIn, {std::move(zone)}}).ok());
  return selector;
}

TEST(LeaseShapeKeyTest, TasksAskingTheSameShareAShapeAndAnyDifferenceSplitsThem) {
  std::map<LeaseShapeKey, int, LeaseShapeKeyLess> shapes;
  auto shape_of = [&](const TaskOptions& options) {
    auto it = shapes.find(options);
    if (it == shapes.end()) {
      it = shapes.emplace(LeaseShapeKey::Of(options), static_cast<int>(shapes.size())).first;
    }
    return it->second;
  };
  const TaskOptions plain;
  const int first = shape_of(plain);
  EXPECT_EQ(shape_of(TaskOptions{}), first);

  TaskOptions gpu;
  gpu.resources = Amounts({{"CPU", 1}, {"GPU", 1}});
  TaskOptions zoned;
  zoned.label_selectors = {Zone("a")};
  TaskOptions other_zone;
  other_zone.label_selectors = {Zone("b")};
  TaskOptions spread;
  spread.strategy = SpreadScheduling{};
  TaskOptions hard;
  hard.strategy = NodeAffinityScheduling{NodeId("n1"), false};
  TaskOptions soft;
  soft.strategy = NodeAffinityScheduling{NodeId("n1"), true};
  TaskOptions bundle0;
  bundle0.strategy = PlacementGroupScheduling{PlacementGroupName("g"), 0};
  TaskOptions bundle1;
  bundle1.strategy = PlacementGroupScheduling{PlacementGroupName("g"), 1};
  TaskOptions env;
  env.env = {{"A", "1"}};
  TaskOptions files;
  auto folders = std::make_shared<RuntimeEnvFiles>();
  folders->key = "wd=env-1";
  files.runtime_env_files = folders;

  std::set<int> seen = {first};
  for (const TaskOptions* options :
       {&gpu, &zoned, &other_zone, &spread, &hard, &soft, &bundle0, &bundle1, &env, &files}) {
    const int shape = shape_of(*options);
    EXPECT_TRUE(seen.insert(shape).second) << "shares shape " << shape;
    EXPECT_EQ(shape_of(*options), shape) << "the same options find their shape again";
  }
  EXPECT_EQ(shapes.size(), 11u);
  // What is not part of the worker (retries, returns) does not split shapes.
  TaskOptions retried;
  retried.max_retries = 0;
  retried.num_returns = 2;
  EXPECT_EQ(shape_of(retried), first);
}

}  // namespace
}  // namespace tessera::api
