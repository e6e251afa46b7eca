#include "hardware/plugins/neuron/neuron_plugin.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

TEST(NeuronPluginTest, Names) {
  auto p = MakeNeuronPlugin();
  EXPECT_EQ(p->family(), "neuron");
  EXPECT_EQ(p->resource_name(), "neuron_cores");
  EXPECT_EQ(p->visible_devices_env(), "NEURON_RT_VISIBLE_CORES");
}

TEST(NeuronPluginTest, WholeNumbersOnly) {
  auto p = MakeNeuronPlugin();
  EXPECT_TRUE(p->ValidateQuantity(*Quantity::Parse("32")).ok());
  EXPECT_EQ(p->ValidateQuantity(*Quantity::Parse("0.5")).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(p->ValidateQuantity(*Quantity::Parse("2.5")).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(NeuronPluginTest, MaskAcceptsListsAndRanges) {
  auto p = MakeNeuronPlugin();
  EXPECT_THAT(*p->ParseMask("0-3,8", {}), ElementsAre(0, 1, 2, 3, 8));
  EXPECT_THAT(*p->ParseMask("5,4", {}), ElementsAre(5, 4));
  EXPECT_THAT(*p->ParseMask("", {}), IsEmpty());
  auto bad = p->ParseMask("4-2", {});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("NEURON_RT_VISIBLE_CORES"), std::string::npos);
  const int cores[] = {2, 3};
  EXPECT_EQ(p->FormatMask(cores), "2,3");
  EXPECT_THAT(p->IsolationEnv(cores, {}),
              ElementsAre(EnvChange{"NEURON_RT_VISIBLE_CORES", std::string("2,3")}));
}

}  // namespace
}  // namespace tessera
