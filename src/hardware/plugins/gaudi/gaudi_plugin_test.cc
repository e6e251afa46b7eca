#include "hardware/plugins/gaudi/gaudi_plugin.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "hardware/testing/plugin_test_support.h"

namespace tessera {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(GaudiPluginTest, Names) {
  auto p = MakeGaudiPlugin();
  EXPECT_EQ(p->family(), "gaudi");
  EXPECT_EQ(p->resource_name(), "HPU");
  EXPECT_EQ(p->visible_devices_env(), "HABANA_VISIBLE_MODULES");
}

TEST(GaudiPluginTest, WholeNumbersOnly) {
  auto p = MakeGaudiPlugin();
  EXPECT_TRUE(p->ValidateQuantity(*Quantity::Parse("2")).ok());
  EXPECT_EQ(p->ValidateQuantity(*Quantity::Parse("0.5")).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(p->ValidateQuantity(*Quantity::Parse("1.5")).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(GaudiPluginTest, MaskNamesModuleIds) {
  auto p = MakeGaudiPlugin();
  EXPECT_THAT(*p->ParseMask("4,5", {}), ElementsAre(4, 5));
  EXPECT_FALSE(p->ParseMask("x", {}).ok());
  const int modules[] = {2, 7};
  EXPECT_EQ(p->FormatMask(modules), "2,7");
  EXPECT_THAT(p->IsolationEnv(modules, {}),
              ElementsAre(EnvChange{"HABANA_VISIBLE_MODULES", std::string("2,7")}));
}

// The figures need HLML; the fixture's sysfs attributes describe the cards, not their load.
TEST(GaudiPluginTest, TelemetryReportsNoFiguresAndSaysTheyNeedHlml) {
  auto p = MakeGaudiPlugin();
  testing::FixtureHost host(testing::FixturePath("gaudi2-8"));
  const std::vector<Device> devices = p->Detect(host.context()).devices;
  ASSERT_EQ(devices.size(), 8u);
  auto reader =
      p->OpenTelemetry(TelemetryContext{Sysroot(testing::FixturePath("gaudi2-8")), {}, {}});
  const FamilyTelemetry reading = reader->Read(devices, absl::UnixEpoch());
  ASSERT_EQ(reading.devices.size(), 8u);
  for (size_t i = 0; i < devices.size(); ++i) {
    EXPECT_EQ(reading.devices[i].index, devices[i].index);
    EXPECT_FALSE(reading.devices[i].HasAnyFigure());
  }
  EXPECT_THAT(reading.warnings, ElementsAre(HasSubstr("come from HLML")));
}

}  // namespace
}  // namespace tessera
