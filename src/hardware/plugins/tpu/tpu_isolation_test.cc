#include "hardware/plugins/tpu/tpu_isolation.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "hardware/plugins/tpu/tpu_plugin.h"

namespace tessera {
namespace {

using ::testing::ElementsAre;

const std::string kFixtures = std::string(TESSERA_SOURCE_DIR) + "/tests/fixtures/hardware";

std::vector<Device> Devices(const std::string& machine, std::optional<std::string> r = {}) {
  const std::string root = kFixtures + "/" + machine;
  Sysroot sysroot(root);
  Environment env = Environment::ForSysroot(sysroot);
  if (r.has_value()) env.Set("TESSERA_TPU_RESOURCE_PER_CHIP", *r);
  PciInventory pci = PciInventory::Scan(sysroot, nullptr);
  DetectionOptions options;
  return MakeTpuPlugin()->Detect(DetectionContext{sysroot, env, pci, options}).devices;
}

EnvChanges Env(const std::vector<Device>& devices, std::vector<int> assigned) {
  return MakeTpuPlugin()->IsolationEnv(assigned, devices);
}

EnvChange Set(std::string_view name, std::string value) { return {std::string(name), value}; }
EnvChange Unset(std::string_view name) { return {std::string(name), std::nullopt}; }

// v5e-8: a 2x4 host grid, chips numbered x fastest: 0 1 / 2 3 / 4 5 / 6 7.
class TpuIsolationTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(v5e_.size(), 8u); }
  const std::vector<Device> v5e_ = Devices("tpu-v5e-8");
};

TEST_F(TpuIsolationTest, OneChip) {
  EXPECT_THAT(Env(v5e_, {5}),
              ElementsAre(Set("TPU_VISIBLE_CHIPS", "5"), Set("TPU_CHIPS_PER_HOST_BOUNDS", "1,1,1"),
                          Set("TPU_HOST_BOUNDS", "1,1,1")));
}

TEST_F(TpuIsolationTest, TwoNeighboursFollowTheGrid) {
  EXPECT_THAT(Env(v5e_, {0, 1}), ElementsAre(Set("TPU_VISIBLE_CHIPS", "0,1"),
                                             Set("TPU_CHIPS_PER_HOST_BOUNDS", "2,1,1"),
                                             Set("TPU_HOST_BOUNDS", "1,1,1")));
  EXPECT_THAT(Env(v5e_, {3, 1}), ElementsAre(Set("TPU_VISIBLE_CHIPS", "1,3"),
                                             Set("TPU_CHIPS_PER_HOST_BOUNDS", "1,2,1"),
                                             Set("TPU_HOST_BOUNDS", "1,1,1")));
}

TEST_F(TpuIsolationTest, FourOfEightAsABox) {
  EXPECT_THAT(Env(v5e_, {4, 5, 6, 7}), ElementsAre(Set("TPU_VISIBLE_CHIPS", "4,5,6,7"),
                                                   Set("TPU_CHIPS_PER_HOST_BOUNDS", "2,2,1"),
                                                   Set("TPU_HOST_BOUNDS", "1,1,1")));
  EXPECT_THAT(Env(v5e_, {0, 2, 4, 6}), ElementsAre(Set("TPU_VISIBLE_CHIPS", "0,2,4,6"),
                                                   Set("TPU_CHIPS_PER_HOST_BOUNDS", "1,4,1"),
                                                   Set("TPU_HOST_BOUNDS", "1,1,1")));
}

TEST_F(TpuIsolationTest, NonRectangleSetsOnlyTheMask) {
  EXPECT_THAT(Env(v5e_, {0, 1, 2}),
              ElementsAre(Set("TPU_VISIBLE_CHIPS", "0,1,2"), Unset("TPU_CHIPS_PER_HOST_BOUNDS"),
                          Unset("TPU_HOST_BOUNDS")));
  EXPECT_THAT(Env(v5e_, {0, 3}),
              ElementsAre(Set("TPU_VISIBLE_CHIPS", "0,3"), Unset("TPU_CHIPS_PER_HOST_BOUNDS"),
                          Unset("TPU_HOST_BOUNDS")));
}

TEST_F(TpuIsolationTest, AllChipsUnsetEverything) {
  EXPECT_THAT(Env(v5e_, {7, 6, 5, 4, 3, 2, 1, 0}),
              ElementsAre(Unset("TPU_VISIBLE_CHIPS"), Unset("TPU_CHIPS_PER_HOST_BOUNDS"),
                          Unset("TPU_HOST_BOUNDS")));
}

TEST(TpuIsolationR2Test, UnitsCollapseToChips) {
  const std::vector<Device> v6e = Devices("tpu-v6e-4x4-worker2", "2");
  ASSERT_EQ(v6e.size(), 8u);
  // One unit of chip 0: the mask still names the whole chip.
  EXPECT_THAT(Env(v6e, {1}),
              ElementsAre(Set("TPU_VISIBLE_CHIPS", "0"), Set("TPU_CHIPS_PER_HOST_BOUNDS", "1,1,1"),
                          Set("TPU_HOST_BOUNDS", "1,1,1")));
  // Units 0,1 (chip 0) and 4 (chip 2): chips 0 and 2 are neighbours along y.
  EXPECT_THAT(Env(v6e, {0, 1, 4}), ElementsAre(Set("TPU_VISIBLE_CHIPS", "0,2"),
                                               Set("TPU_CHIPS_PER_HOST_BOUNDS", "1,2,1"),
                                               Set("TPU_HOST_BOUNDS", "1,1,1")));
  // One unit of every chip covers the host.
  EXPECT_THAT(Env(v6e, {0, 3, 4, 7}),
              ElementsAre(Unset("TPU_VISIBLE_CHIPS"), Unset("TPU_CHIPS_PER_HOST_BOUNDS"),
                          Unset("TPU_HOST_BOUNDS")));
  EXPECT_THAT(ChipsOfIndices(std::vector<int>{7, 6, 2}, v6e), ElementsAre(1, 3));
}

TEST(TpuIsolationFallbackTest, DevicesWithoutCoordinatesUseTheHostBlock) {
  std::vector<Device> plain;
  for (int i = 0; i < 4; ++i) plain.push_back(Device{.family = "tpu", .index = i});
  EXPECT_THAT(Env(plain, {0, 2}), ElementsAre(Set("TPU_VISIBLE_CHIPS", "0,2"),
                                              Set("TPU_CHIPS_PER_HOST_BOUNDS", "1,2,1"),
                                              Set("TPU_HOST_BOUNDS", "1,1,1")));
}

}  // namespace
}  // namespace tessera
