#include "hardware/plugins/amd/amd_plugin.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

TEST(AmdPluginTest, Names) {
  auto p = MakeAmdPlugin();
  EXPECT_EQ(p->family(), "amd");
  EXPECT_EQ(p->resource_name(), "GPU");
  EXPECT_EQ(p->visible_devices_env(), "HIP_VISIBLE_DEVICES");
  EXPECT_TRUE(p->unit_instance());
}

TEST(AmdPluginTest, QuantityAllowsFractionsBelowOneAndWholeNumbers) {
  auto p = MakeAmdPlugin();
  EXPECT_TRUE(p->ValidateQuantity(*Quantity::Parse("0.5")).ok());
  EXPECT_TRUE(p->ValidateQuantity(*Quantity::Parse("4")).ok());
  EXPECT_EQ(p->ValidateQuantity(*Quantity::Parse("1.5")).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(AmdPluginTest, MaskParseAndFormat) {
  auto p = MakeAmdPlugin();
  std::vector<Device> devices(2);
  devices[0].index = 0;
  devices[0].uuid = "GPU-2a19c3f0d5e6b700";
  devices[1].index = 1;
  devices[1].uuid = "GPU-2a19c3f0d5e6b701";
  EXPECT_THAT(*p->ParseMask("1,0", devices), ElementsAre(1, 0));
  EXPECT_THAT(*p->ParseMask("GPU-2a19c3f0d5e6b701, 0", devices), ElementsAre(1, 0));
  EXPECT_THAT(*p->ParseMask("", devices), IsEmpty());
  EXPECT_THAT(*p->ParseMask("NoDevFiles", devices), IsEmpty());
  EXPECT_FALSE(p->ParseMask("GPU-ffff", devices).ok());
  EXPECT_FALSE(p->ParseMask("a", devices).ok());
  const int idx[] = {2, 5};
  EXPECT_EQ(p->FormatMask(idx), "2,5");
}

TEST(AmdPluginTest, IsolationSetsHipVisibleDevices) {
  auto p = MakeAmdPlugin();
  const int idx[] = {3};
  EXPECT_THAT(p->IsolationEnv(idx, {}),
              ElementsAre(EnvChange{"HIP_VISIBLE_DEVICES", std::string("3")}));
}

}  // namespace
}  // namespace tessera
