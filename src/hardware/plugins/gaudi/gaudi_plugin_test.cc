#include "hardware/plugins/gaudi/gaudi_plugin.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera {
namespace {

using ::testing::ElementsAre;

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

}  // namespace
}  // namespace tessera
