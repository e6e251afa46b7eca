#include "vocabulary/tpu_topology.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera {
namespace {

using ::testing::HasSubstr;

TEST(TpuTopologyTest, Parses) {
  EXPECT_EQ(ParseTpuTopology("4x4")->dims, (std::vector<int>{4, 4}));
  EXPECT_EQ(ParseTpuTopology("2X2x2")->dims, (std::vector<int>{2, 2, 2}));
  EXPECT_EQ(ParseTpuTopology(" 16x16x24 ")->chips(), 16 * 16 * 24);
  EXPECT_EQ(ParseTpuTopology("2X4")->ToString(), "2x4");
}

TEST(TpuTopologyTest, RejectsMalformed) {
  const std::pair<const char*, const char*> cases[] = {
      {"", "empty"},
      {"0x4", "zero dimension"},
      {"4x", "empty dimension"},
      {"x4", "empty dimension"},
      {"4xx4", "empty dimension"},
      {"4", "1 dimension"},
      {"2x2x2x2", "more than 3"},
      {"4xa", "not a positive integer"},
      {"-4x4", "not a positive integer"},
      {"4 x4", "not a positive integer"},
      {"99999999999999999999x4", "larger than 1024"},
      {"2048x2", "larger than 1024"},
  };
  for (const auto& [text, why] : cases) {
    auto t = ParseTpuTopology(text);
    ASSERT_FALSE(t.ok()) << text;
    EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument) << text;
    EXPECT_THAT(std::string(t.status().message()), HasSubstr(why)) << text;
    EXPECT_EQ(std::string(t.status().message()).find('\n'), std::string::npos);
  }
}

bool Valid(TpuGeneration g, const char* shape) {
  auto t = ParseTpuTopology(shape);
  return t.ok() && ValidateTopology(g, *t).ok();
}

TEST(TpuTopologyTest, ValidShapesPerGeneration) {
  using G = TpuGeneration;
  for (const char* s : {"2x2", "4x4", "4x8", "8x8", "8x16", "16x16"}) {
    EXPECT_TRUE(Valid(G::kV2, s)) << s;
    EXPECT_TRUE(Valid(G::kV3, s)) << s;
  }
  EXPECT_FALSE(Valid(G::kV2, "16x32"));
  EXPECT_TRUE(Valid(G::kV3, "16x32"));
  EXPECT_TRUE(Valid(G::kV3, "32x32"));
  for (G g : {G::kV5litepod, G::kV6e}) {
    for (const char* s : {"1x1", "2x2", "2x4", "2x8", "4x4", "4x8", "8x8", "8x16", "16x16"}) {
      EXPECT_TRUE(Valid(g, s)) << s;
    }
    for (const char* s : {"4x2", "3x3", "1x2", "16x32", "2x2x1"}) EXPECT_FALSE(Valid(g, s)) << s;
  }
  for (const char* s : {"2x2x1", "2x2x2", "2x2x4", "2x4x4", "4x4x4", "4x4x8", "4x8x8", "8x8x8",
                        "8x8x16", "8x16x16"}) {
    EXPECT_TRUE(Valid(G::kV7x, s)) << s;
  }
  EXPECT_FALSE(Valid(G::kV7x, "4x4x12"));
  EXPECT_FALSE(Valid(G::kV7x, "4x4"));
}

TEST(TpuTopologyTest, V4AndV5pRules) {
  using G = TpuGeneration;
  for (const char* s :
       {"2x2x1", "2x2x2", "2x2x4", "2x4x4", "4x4x4", "4x8x16", "12x12x16", "8x4x12"}) {
    EXPECT_TRUE(Valid(G::kV4, s)) << s;
  }
  for (const char* s : {"16x16x16", "4x4x20", "4x4x2", "2x4x8", "6x4x4", "2x2x3", "4x4"}) {
    EXPECT_FALSE(Valid(G::kV4, s)) << s;
  }
  for (const char* s : {"2x2x1", "2x4x4", "16x16x24", "16x4x20", "12x12x24"}) {
    EXPECT_TRUE(Valid(G::kV5p, s)) << s;
  }
  for (const char* s : {"20x4x4", "4x4x28", "4x4x6", "2x2x8"}) {
    EXPECT_FALSE(Valid(G::kV5p, s)) << s;
  }
}

TEST(TpuTopologyTest, ErrorsNameTheProblem) {
  auto wrong_dims = ParseTpuTopologyFor(TpuGeneration::kV4, "4x4");
  ASSERT_FALSE(wrong_dims.ok());
  EXPECT_EQ(std::string(wrong_dims.status().message()),
            "topology \"4x4\" is 2D, but v4 slices are 3D (e.g. 2x2x1)");
  auto wrong_dims_2d = ParseTpuTopologyFor(TpuGeneration::kV6e, "2x2x2");
  ASSERT_FALSE(wrong_dims_2d.ok());
  EXPECT_THAT(std::string(wrong_dims_2d.status().message()), HasSubstr("v6e slices are 2D"));
  auto invalid = ParseTpuTopologyFor(TpuGeneration::kV6e, "3x3");
  ASSERT_FALSE(invalid.ok());
  EXPECT_EQ(std::string(invalid.status().message()),
            "topology \"3x3\" is not a valid v6e slice; valid: 1x1, 2x2, 2x4, 2x8, 4x4, 4x8, 8x8, "
            "8x16, 16x16");
  auto v5p = ParseTpuTopologyFor(TpuGeneration::kV5p, "2x2x3");
  ASSERT_FALSE(v5p.ok());
  EXPECT_THAT(std::string(v5p.status().message()),
              HasSubstr("AxBxC with A,B in {4,8,12,16}, C in {4,8,...,24}"));
  EXPECT_TRUE(ParseTpuTopologyFor(TpuGeneration::kV6e, "4X4").ok());
}

}  // namespace
}  // namespace tessera
