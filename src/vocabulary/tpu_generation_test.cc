#include "vocabulary/tpu_generation.h"

#include "gtest/gtest.h"

namespace tessera {
namespace {

TEST(TpuGenerationTest, TableRows) {
  struct Row {
    TpuGeneration g;
    const char* name;
    int cores, multi, dims, resources;
    const char* gke;
  };
  const Row rows[] = {
      {TpuGeneration::kV2, "v2", 2, 4, 2, 1, ""},
      {TpuGeneration::kV3, "v3", 2, 4, 2, 1, "tpu-v3-slice"},
      {TpuGeneration::kV4, "v4", 2, 4, 3, 1, "tpu-v4-podslice"},
      {TpuGeneration::kV5p, "v5p", 2, 4, 3, 1, "tpu-v5p-slice"},
      {TpuGeneration::kV5litepod, "v5litepod", 1, 4, 2, 1, "tpu-v5-lite-podslice"},
      {TpuGeneration::kV6e, "v6e", 1, 4, 2, 1, "tpu-v6e-slice"},
      {TpuGeneration::kV7x, "v7x", 2, 4, 3, 2, "tpu7x"},
  };
  ASSERT_EQ(TpuGenerations().size(), std::size(rows));
  for (const Row& r : rows) {
    const TpuGenerationInfo& info = GenerationInfo(r.g);
    EXPECT_EQ(info.generation, r.g);
    EXPECT_EQ(info.name, r.name);
    EXPECT_EQ(info.cores_per_chip, r.cores) << r.name;
    EXPECT_EQ(info.chips_per_multi_host, r.multi) << r.name;
    EXPECT_EQ(info.dims, r.dims) << r.name;
    EXPECT_EQ(info.default_resources_per_chip, r.resources) << r.name;
    EXPECT_EQ(info.gke_accelerator, r.gke) << r.name;
    EXPECT_GT(info.ici_gigabytes_per_second, 0) << r.name;
  }
  const auto& lite = GenerationInfo(TpuGeneration::kV6e).single_host_chip_options;
  EXPECT_EQ(std::vector<int>(lite.begin(), lite.end()), (std::vector<int>{1, 4, 8}));
  const auto& v4 = GenerationInfo(TpuGeneration::kV4).single_host_chip_options;
  EXPECT_EQ(std::vector<int>(v4.begin(), v4.end()), (std::vector<int>{4}));
}

TEST(TpuGenerationTest, ParsesUserSpellings) {
  EXPECT_EQ(*ParseTpuGeneration("TPU-V6E"), TpuGeneration::kV6e);
  EXPECT_EQ(*ParseTpuGeneration("v6e"), TpuGeneration::kV6e);
  EXPECT_EQ(*ParseTpuGeneration(" V6E "), TpuGeneration::kV6e);
  EXPECT_EQ(*ParseTpuGeneration("v5e"), TpuGeneration::kV5litepod);
  EXPECT_EQ(*ParseTpuGeneration("TPU-V5LITEPOD"), TpuGeneration::kV5litepod);
  EXPECT_EQ(*ParseTpuGeneration("tpu7x"), TpuGeneration::kV7x);
  EXPECT_EQ(*ParseTpuGeneration("TPU-V7X"), TpuGeneration::kV7x);
  EXPECT_EQ(*ParseTpuGeneration("tpu-v4"), TpuGeneration::kV4);
  EXPECT_EQ(*ParseTpuGeneration("V5P"), TpuGeneration::kV5p);
}

TEST(TpuGenerationTest, RejectsUnknown) {
  for (const char* bad : {"", "v8", "TPU", "v6", "v6e-16", "gpu"}) {
    auto g = ParseTpuGeneration(bad);
    ASSERT_FALSE(g.ok()) << bad;
    EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(std::string(g.status().message()).find("unknown TPU generation"), std::string::npos);
  }
}

TEST(TpuGenerationTest, TypeStringsAndNormalisation) {
  EXPECT_EQ(TpuTypeString(TpuGeneration::kV6e), "TPU-V6E");
  EXPECT_EQ(TpuTypeString(TpuGeneration::kV5litepod), "TPU-V5LITEPOD");
  EXPECT_EQ(TpuTypeString(TpuGeneration::kV7x), "TPU-V7X");
  EXPECT_EQ(NormalizeTpuName("TPU-V7X"), "v7x");
  EXPECT_EQ(NormalizeTpuName("tpu7x-8"), "v7x-8");
  EXPECT_EQ(NormalizeTpuName("v6e-16"), "v6e-16");
  EXPECT_EQ(NormalizeTpuName("TPUv4-8"), "v4-8");
}

}  // namespace
}  // namespace tessera
