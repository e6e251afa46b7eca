#include "hardware/plugins/intel_gpu/intel_gpu_plugin.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "hardware/plugins/intel_gpu/intel_gpu_ids.h"

namespace tessera {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

std::vector<Device> ThreeDevices() {
  std::vector<Device> devices(3);
  for (int i = 0; i < 3; ++i) devices[i].index = i;
  return devices;
}

TEST(IntelGpuPluginTest, Names) {
  auto p = MakeIntelGpuPlugin();
  EXPECT_EQ(p->family(), "intel-gpu");
  EXPECT_EQ(p->resource_name(), "GPU");
  EXPECT_EQ(p->visible_devices_env(), "ONEAPI_DEVICE_SELECTOR");
}

TEST(IntelGpuPluginTest, TypeFromLastTwoWords) {
  EXPECT_EQ(IntelGpuType("Intel(R) Data Center GPU Max 1550"), "Intel-GPU-Max-1550");
  EXPECT_EQ(IntelGpuType("Intel(R) Data Center GPU Max 1100"), "Intel-GPU-Max-1100");
  EXPECT_EQ(IntelGpuType("Intel(R) Data Center GPU Flex 170"), "Intel-GPU-Flex-170");
}

TEST(IntelGpuPluginTest, Quantity) {
  auto p = MakeIntelGpuPlugin();
  EXPECT_TRUE(p->ValidateQuantity(*Quantity::Parse("0.5")).ok());
  EXPECT_TRUE(p->ValidateQuantity(*Quantity::Parse("2")).ok());
  EXPECT_EQ(p->ValidateQuantity(*Quantity::Parse("1.5")).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(IntelGpuPluginTest, MaskParse) {
  auto p = MakeIntelGpuPlugin();
  const auto devices = ThreeDevices();
  EXPECT_THAT(*p->ParseMask("level_zero:0,1", devices), ElementsAre(0, 1));
  EXPECT_THAT(*p->ParseMask("Level_Zero:2", devices), ElementsAre(2));
  EXPECT_THAT(*p->ParseMask("level_zero:*", devices), ElementsAre(0, 1, 2));
  EXPECT_THAT(*p->ParseMask("opencl:*;level_zero:1", devices), ElementsAre(1));
  EXPECT_THAT(*p->ParseMask("opencl:0", devices), IsEmpty());
  EXPECT_THAT(*p->ParseMask("", devices), IsEmpty());
  EXPECT_FALSE(p->ParseMask("0,1", devices).ok());
  EXPECT_FALSE(p->ParseMask("level_zero:0.1", devices).ok());
  EXPECT_FALSE(p->ParseMask("!level_zero:0", devices).ok());
  auto bad = p->ParseMask("level_zero:x", devices);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("ONEAPI_DEVICE_SELECTOR"), std::string::npos);
}

TEST(IntelGpuPluginTest, MaskFormatRoundTrips) {
  auto p = MakeIntelGpuPlugin();
  const int idx[] = {0, 2};
  EXPECT_EQ(p->FormatMask(idx), "level_zero:0,2");
  EXPECT_THAT(*p->ParseMask(p->FormatMask(idx), ThreeDevices()), ElementsAre(0, 2));
  EXPECT_EQ(p->FormatMask({}), "");
}

TEST(IntelGpuPluginTest, IsolationPinsCardsAndPciOrder) {
  auto p = MakeIntelGpuPlugin();
  const int idx[] = {1};
  EXPECT_THAT(p->IsolationEnv(idx, {}),
              ElementsAre(EnvChange{"ONEAPI_DEVICE_SELECTOR", std::string("level_zero:1")},
                          EnvChange{"ZE_FLAT_DEVICE_HIERARCHY", std::string("COMPOSITE")},
                          EnvChange{"ZE_ENABLE_PCI_ID_DEVICE_ORDER", std::string("1")}));
}

}  // namespace
}  // namespace tessera
