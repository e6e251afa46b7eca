#include "hardware/plugins/common/sysfs_properties.h"

#include "gtest/gtest.h"

namespace tessera {
namespace {

TEST(SysfsPropertiesTest, ParsesSpaceAndEqualsSeparatedPairs) {
  auto p = SysfsProperties::Parse("simd_count 1216\nvendor_id 4098\nDRIVER=amdgpu\n\n  weird\n");
  EXPECT_EQ(p.GetUnsigned("simd_count"), 1216u);
  EXPECT_EQ(p.GetUnsigned("vendor_id"), 0x1002u);
  EXPECT_EQ(p.Get("DRIVER"), "amdgpu");
  EXPECT_FALSE(p.Get("weird").has_value());  // a name without a value is skipped
  EXPECT_FALSE(p.Get("missing").has_value());
}

TEST(SysfsPropertiesTest, NumbersAreDecimalOrHexAndMalformedIsNullopt) {
  auto p = SysfsProperties::Parse("a 0x74a1\nb 18446744073709551615\nc 12abc\nd -1\n");
  EXPECT_EQ(p.GetUnsigned("a"), 0x74a1u);
  EXPECT_EQ(p.GetUnsigned("b"), 18446744073709551615ull);  // unique_id spans all 64 bits
  EXPECT_FALSE(p.GetUnsigned("c").has_value());
  EXPECT_FALSE(p.GetUnsigned("d").has_value());
}

TEST(SysfsPropertiesTest, ReadReportsMissingFile) {
  Sysroot root("/nonexistent-tessera-root");
  auto p = SysfsProperties::Read(root, "/sys/properties");
  EXPECT_EQ(p.status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace tessera
