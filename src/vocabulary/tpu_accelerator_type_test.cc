#include "vocabulary/tpu_accelerator_type.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera {
namespace {

using ::testing::HasSubstr;

TEST(TpuAcceleratorTypeTest, Parses) {
  auto v6e = ParseTpuAcceleratorType("v6e-16");
  ASSERT_TRUE(v6e.ok());
  EXPECT_EQ(v6e->generation, TpuGeneration::kV6e);
  EXPECT_EQ(v6e->tensorcores, 16);
  EXPECT_EQ(v6e->chips(), 16);
  EXPECT_EQ(v6e->ToString(), "v6e-16");

  auto lite = ParseTpuAcceleratorType("v5litepod-16");
  ASSERT_TRUE(lite.ok());
  EXPECT_EQ(lite->generation, TpuGeneration::kV5litepod);
  EXPECT_EQ(ParseTpuAcceleratorType("v5e-8")->ToString(), "v5litepod-8");

  auto v7x = ParseTpuAcceleratorType("tpu7x-16");
  ASSERT_TRUE(v7x.ok());
  EXPECT_EQ(v7x->ToString(), "v7x-16");
  EXPECT_EQ(v7x->chips(), 8);
  EXPECT_EQ(ParseTpuAcceleratorType("TPU-V4-8")->chips(), 4);
  EXPECT_EQ(ParseTpuAcceleratorType("V5P-8")->ToString(), "v5p-8");
}

TEST(TpuAcceleratorTypeTest, Rejects) {
  const std::pair<const char*, const char*> cases[] = {
      {"", "malformed"},
      {"TPU-V6E", "malformed"},
      {"v6e", "malformed"},
      {"v6e-", "malformed"},
      {"6e-16", "malformed"},
      {"ve-16", "malformed"},
      {"v6e-1x", "malformed"},
      {"v6e1-16", "malformed"},
      {"v9z-16", "unknown TPU generation"},
      {"v6e-0", "between 1 and"},
      {"v6e-99999999999", "larger than"},
      {"v4-7", "not a whole number of v4 chips"},
  };
  for (const auto& [text, why] : cases) {
    auto t = ParseTpuAcceleratorType(text);
    ASSERT_FALSE(t.ok()) << text;
    EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(t.status().message()), HasSubstr(why)) << text;
  }
}

TEST(TpuAcceleratorTypeTest, PodType) {
  EXPECT_EQ(TpuPodType(TpuGeneration::kV6e, 16), "v6e-16");
  EXPECT_EQ(TpuPodType(TpuGeneration::kV4, 8), "v4-16");
  EXPECT_EQ(TpuPodType(TpuGeneration::kV7x, 8), "v7x-16");
  EXPECT_EQ(TpuPodType(TpuGeneration::kV5litepod, 4), "v5litepod-4");
}

}  // namespace
}  // namespace tessera
