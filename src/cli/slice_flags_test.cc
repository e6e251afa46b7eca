#include "cli/slice_flags.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <vector>

namespace tessera::cli {
namespace {

using ::testing::HasSubstr;

TEST(SliceFlagsTest, AGenerationOrAPodTypeWithItsTopology) {
  absl::StatusOr<SliceShape> generation =
      ParseSliceFlags("--accelerator/--topology", "TPU-V6E", "4x4");
  ASSERT_TRUE(generation.ok()) << generation.status();
  EXPECT_EQ(generation->generation, TpuGeneration::kV6e);
  EXPECT_EQ(generation->topology.dims, (std::vector<int>{4, 4}));
  EXPECT_EQ(generation->hosts, 4);
  absl::StatusOr<SliceShape> pod_type =
      ParseSliceFlags("--accelerator/--topology", "v6e-16", "4x4");
  ASSERT_TRUE(pod_type.ok()) << pod_type.status();
  EXPECT_EQ(pod_type->pod_type, "v6e-16");
  EXPECT_EQ(ParseSliceFlags("f", "v5e", "2x4")->generation, TpuGeneration::kV5litepod);
}

TEST(SliceFlagsTest, ErrorsNameTheFlagsOnOneLine) {
  EXPECT_EQ(ParseSliceFlags("--accelerator/--topology", "TPU-V9Z", "4x4").status().message(),
            "--accelerator/--topology: unknown TPU generation \"TPU-V9Z\" (known: v2, v3, v4, v5p, "
            "v5litepod (v5e), v6e, v7x, also spelled TPU-V6E)");
  EXPECT_THAT(ParseSliceFlags("--accelerator/--topology", "TPU-V6E", "3x3").status().message(),
              HasSubstr("--accelerator/--topology: topology \"3x3\" is not a valid v6e slice"));
  // A pod type's chips must be the topology's: refused here, before any call to the head.
  EXPECT_EQ(
      ParseSliceFlags("--fallback \"v6e-8:4x4\"", "v6e-8", "4x4").status().message(),
      "--fallback \"v6e-8:4x4\": accelerator type v6e-8 has 8 chips, but topology 4x4 has 16");
  EXPECT_THAT(ParseSliceFlags("--accelerator/--topology", "TPU-V6E", "").status().message(),
              HasSubstr("--accelerator/--topology: topology is empty"));
}

}  // namespace
}  // namespace tessera::cli
