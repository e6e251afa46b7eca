#include "hardware/node_labels.h"

#include <gtest/gtest.h>

#include "hardware/node_label_keys.h"

namespace tessera {
namespace {

TEST(DeploymentLabelsTest, MapsEachVariableToItsLabel) {
  Environment env;
  env.Set("TESSERA_NODE_MARKET_TYPE", "spot");
  env.Set("TESSERA_NODE_ZONE", " us-central2-b ");
  env.Set("TESSERA_NODE_REGION", "us-central2");
  env.Set("TESSERA_NODE_GROUP", "tpu-workers");
  LabelSet labels;
  std::vector<std::string> warnings;
  AddDeploymentLabels(env, labels, warnings);
  EXPECT_TRUE(warnings.empty());
  EXPECT_EQ(labels.at(std::string(labels::kMarketType)), "spot");
  EXPECT_EQ(labels.at(std::string(labels::kAvailabilityZone)), "us-central2-b");
  EXPECT_EQ(labels.at(std::string(labels::kAvailabilityRegion)), "us-central2");
  EXPECT_EQ(labels.at(std::string(labels::kNodeGroup)), "tpu-workers");
}

TEST(DeploymentLabelsTest, InvalidValuesAreSkippedWithAWarning) {
  Environment env;
  env.Set("TESSERA_NODE_ZONE", "not a zone!");
  LabelSet labels;
  std::vector<std::string> warnings;
  AddDeploymentLabels(env, labels, warnings);
  EXPECT_TRUE(labels.empty());
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_EQ(warnings[0].rfind("TESSERA_NODE_ZONE=\"not a zone!\" ignored: ", 0), 0u) << warnings[0];
}

TEST(DeploymentLabelsTest, UnsetVariablesAddNothing) {
  LabelSet labels;
  std::vector<std::string> warnings;
  AddDeploymentLabels(Environment(), labels, warnings);
  EXPECT_TRUE(labels.empty());
  EXPECT_TRUE(warnings.empty());
}

}  // namespace
}  // namespace tessera
