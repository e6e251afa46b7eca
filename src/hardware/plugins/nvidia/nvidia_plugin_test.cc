// The nvidia plugin's non-detection rules: identity, quantities, masks, isolation environment.
#include "hardware/plugins/nvidia/nvidia_plugin.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace tessera {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<Device> ThreeGpus() {
  std::vector<Device> devices;
  const char* uuids[] = {"GPU-5a1e0000-6c1d-4e3a-9b2f-8d1f00000000",
                         "GPU-5a1e0001-6c1d-4e3a-9b2f-8d1f00000001",
                         "GPU-77aa0002-6c1d-4e3a-9b2f-8d1f00000002"};
  for (int i = 0; i < 3; ++i) {
    devices.push_back(Device{.family = "nvidia", .index = i, .uuid = uuids[i]});
  }
  return devices;
}

TEST(NvidiaPluginTest, Identity) {
  auto p = MakeNvidiaPlugin();
  EXPECT_EQ(p->family(), "nvidia");
  EXPECT_EQ(p->resource_name(), "GPU");
  EXPECT_EQ(p->visible_devices_env(), "CUDA_VISIBLE_DEVICES");
  EXPECT_TRUE(p->unit_instance());
}

TEST(NvidiaPluginTest, QuantitiesBelowOneOrWholeAreAllowed) {
  auto p = MakeNvidiaPlugin();
  for (const char* ok : {"0.0001", "0.25", "0.5", "0.9999", "1", "2", "8", "16"}) {
    EXPECT_TRUE(p->ValidateQuantity(*Quantity::Parse(ok)).ok()) << ok;
  }
}

TEST(NvidiaPluginTest, FractionsAboveOneAreRefused) {
  auto p = MakeNvidiaPlugin();
  for (const char* bad : {"1.5", "2.25", "1.0001"}) {
    const absl::Status s = p->ValidateQuantity(*Quantity::Parse(bad));
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(s.message(), HasSubstr(bad));
    EXPECT_THAT(s.message(), HasSubstr("a whole number of devices or a fraction below 1"));
  }
}

TEST(NvidiaPluginTest, ZeroAndNegativeAreRefused) {
  auto p = MakeNvidiaPlugin();
  const absl::Status zero = p->ValidateQuantity(Quantity::FromInt(0));
  EXPECT_EQ(zero.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(zero.message(), "GPU: 0 is not a positive quantity; omit the resource to request none");
  const absl::Status neg = p->ValidateQuantity(Quantity::FromRaw(-5000));
  EXPECT_EQ(neg.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(neg.message(), "GPU: -0.5 is negative");
}

TEST(NvidiaPluginTest, MaskOfOrdinals) {
  auto p = MakeNvidiaPlugin();
  EXPECT_THAT(*p->ParseMask("2,0", ThreeGpus()), ElementsAre(2, 0));
  EXPECT_THAT(*p->ParseMask(" 1 , 2 ", ThreeGpus()), ElementsAre(1, 2));
  EXPECT_TRUE(p->ParseMask("", ThreeGpus())->empty());
  EXPECT_TRUE(p->ParseMask("NoDevFiles", ThreeGpus())->empty());
  const std::vector<int> ids = {0, 2};
  EXPECT_EQ(p->FormatMask(ids), "0,2");
}

TEST(NvidiaPluginTest, MaskOfUuidsResolvesThroughDevices) {
  auto p = MakeNvidiaPlugin();
  auto parsed = p->ParseMask(
      "GPU-77aa0002-6c1d-4e3a-9b2f-8d1f00000002,0,GPU-5a1e0001-6c1d-4e3a-9b2f-8d1f00000001",
      ThreeGpus());
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_THAT(*parsed, ElementsAre(2, 0, 1));
  // CUDA accepts a prefix that names exactly one GPU.
  EXPECT_THAT(*p->ParseMask("GPU-77aa", ThreeGpus()), ElementsAre(2));
}

TEST(NvidiaPluginTest, UnknownOrAmbiguousUuidIsAnErrorNamingIt) {
  auto p = MakeNvidiaPlugin();
  auto unknown = p->ParseMask("0,GPU-deadbeef-0000", ThreeGpus());
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(unknown.status().message(), HasSubstr("GPU-deadbeef-0000"));
  EXPECT_THAT(unknown.status().message(), HasSubstr("matches no GPU"));
  auto ambiguous = p->ParseMask("GPU-5a1e000", ThreeGpus());
  EXPECT_THAT(ambiguous.status().message(), HasSubstr("more than one GPU"));
}

TEST(NvidiaPluginTest, MigMasksAreNotSupportedYet) {
  auto p = MakeNvidiaPlugin();
  auto mig = p->ParseMask("MIG-4f2a9c1e-1b7d-5e3a-8c2f-0d9e8b7a6c5d", ThreeGpus());
  EXPECT_EQ(mig.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(mig.status().message(), HasSubstr("MIG masks are not supported yet"));
}

TEST(NvidiaPluginTest, BadEntriesAndDuplicatesAreErrors) {
  auto p = MakeNvidiaPlugin();
  for (const char* bad : {"zero", "-1", "0,,1", "1.5"}) {
    auto r = p->ParseMask(bad, ThreeGpus());
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(r.status().message(), HasSubstr("CUDA_VISIBLE_DEVICES")) << bad;
  }
  auto twice = p->ParseMask("1,GPU-5a1e0001-6c1d-4e3a-9b2f-8d1f00000001", ThreeGpus());
  EXPECT_THAT(twice.status().message(), HasSubstr("GPU 1 is listed twice"));
}

TEST(NvidiaPluginTest, IsolationSetsMaskAndPciBusOrder) {
  auto p = MakeNvidiaPlugin();
  const std::vector<int> assigned = {2, 0};
  EXPECT_THAT(p->IsolationEnv(assigned, ThreeGpus()),
              ElementsAre(EnvChange{"CUDA_VISIBLE_DEVICES", "2,0"},
                          EnvChange{"CUDA_DEVICE_ORDER", "PCI_BUS_ID"}));
}

}  // namespace
}  // namespace tessera
