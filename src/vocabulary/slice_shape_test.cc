#include "vocabulary/slice_shape.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera {
namespace {

using ::testing::HasSubstr;

SliceShape Shape(TpuGeneration g, const char* topology, std::optional<int> per_host = {}) {
  auto t = ParseTpuTopology(topology);
  EXPECT_TRUE(t.ok()) << topology;
  auto shape = MakeSliceShape(g, *t, per_host);
  EXPECT_TRUE(shape.ok()) << topology << ": " << shape.status();
  return shape.ok() ? *shape : SliceShape{};
}

// reference §7.5
TEST(SliceShapeTest, DerivedQuantitiesTable) {
  struct Row {
    TpuGeneration g;
    const char* topology;
    int chips, hosts;
    const char* pod_type;
  };
  const Row rows[] = {
      {TpuGeneration::kV5litepod, "2x2", 4, 1, "v5litepod-4"},
      {TpuGeneration::kV5litepod, "2x4", 8, 1, "v5litepod-8"},
      {TpuGeneration::kV6e, "4x4", 16, 4, "v6e-16"},
      {TpuGeneration::kV6e, "8x8", 64, 16, "v6e-64"},
      {TpuGeneration::kV4, "2x2x2", 8, 2, "v4-16"},
      {TpuGeneration::kV4, "2x2x4", 16, 4, "v4-32"},
      {TpuGeneration::kV5p, "2x2x1", 4, 1, "v5p-8"},
      {TpuGeneration::kV7x, "2x2x2", 8, 2, "v7x-16"},
  };
  for (const Row& r : rows) {
    const SliceShape s = Shape(r.g, r.topology);
    EXPECT_EQ(s.chips, r.chips) << r.topology;
    EXPECT_EQ(s.hosts, r.hosts) << r.topology;
    EXPECT_EQ(s.pod_type, r.pod_type) << r.topology;
  }
}

// reference §7.6 (2D: v6e; 2x4 as two 4-chip hosts, the multi-host reading of the table)
TEST(SliceShapeTest, WorkerGrid2D) {
  struct Row {
    const char* topology;
    std::vector<int> grid;
    const char* host_bounds;
  };
  const Row rows[] = {
      {"2x2", {1, 1}, "1,1,1"}, {"4x4", {2, 2}, "2,2,1"},  {"4x8", {2, 4}, "2,4,1"},
      {"8x8", {4, 4}, "4,4,1"}, {"8x16", {4, 8}, "4,8,1"}, {"16x16", {8, 8}, "8,8,1"},
  };
  for (const Row& r : rows) {
    const SliceShape s = Shape(TpuGeneration::kV6e, r.topology);
    EXPECT_EQ(s.worker_grid, r.grid) << r.topology;
    EXPECT_EQ(s.host_bounds, r.host_bounds) << r.topology;
    EXPECT_EQ(s.chips_per_host_bounds, "2,2,1") << r.topology;
  }
  const SliceShape two_hosts = Shape(TpuGeneration::kV6e, "2x4", 4);
  EXPECT_EQ(two_hosts.worker_grid, (std::vector<int>{1, 2}));
  EXPECT_EQ(two_hosts.hosts, 2);
  EXPECT_EQ(two_hosts.host_bounds, "1,2,1");
  EXPECT_EQ(two_hosts.pod_type, "v6e-8");
}

TEST(SliceShapeTest, WorkerGrid3D) {
  EXPECT_EQ(Shape(TpuGeneration::kV4, "2x2x1").worker_grid, (std::vector<int>{1, 1, 1}));
  EXPECT_EQ(Shape(TpuGeneration::kV4, "2x2x4").worker_grid, (std::vector<int>{1, 1, 4}));
  EXPECT_EQ(Shape(TpuGeneration::kV4, "2x2x2").host_bounds, "1,1,2");
  const SliceShape big = Shape(TpuGeneration::kV5p, "16x16x24");
  EXPECT_EQ(big.worker_grid, (std::vector<int>{8, 8, 24}));
  EXPECT_EQ(big.hosts, 8 * 8 * 24);
  EXPECT_EQ(big.pod_type, "v5p-12288");
  const SliceShape v7x = Shape(TpuGeneration::kV7x, "2x2x2");
  EXPECT_EQ(v7x.resources_per_chip, 2);
  EXPECT_EQ(v7x.cores_per_chip, 2);
  EXPECT_EQ(v7x.chips_per_host_bounds, "2,2,1");
}

TEST(SliceShapeTest, SingleHostLiteShapes) {
  const SliceShape one = Shape(TpuGeneration::kV5litepod, "1x1");
  EXPECT_EQ(one.chips_per_host, 1);
  EXPECT_EQ(one.pod_type, "v5litepod-1");
  EXPECT_EQ(one.chips_per_host_bounds, "1,1,1");
  const SliceShape eight = Shape(TpuGeneration::kV5litepod, "2x4");
  EXPECT_EQ(eight.chips_per_host, 8);
  EXPECT_EQ(eight.worker_grid, (std::vector<int>{1, 1}));
  EXPECT_EQ(eight.chips_per_host_bounds, "2,4,1");
  EXPECT_EQ(eight.host_bounds, "1,1,1");
  EXPECT_EQ(DefaultChipsPerHost(TpuGeneration::kV6e, *ParseTpuTopology("2x8")), 4);
  EXPECT_EQ(Shape(TpuGeneration::kV6e, "2x8").worker_grid, (std::vector<int>{1, 4}));
}

TEST(SliceShapeTest, BadChipsPerHost) {
  auto t = ParseTpuTopology("4x4");
  auto eight = MakeSliceShape(TpuGeneration::kV6e, *t, 8);
  ASSERT_FALSE(eight.ok());
  EXPECT_THAT(std::string(eight.status().message()),
              HasSubstr("chips per host 8 does not fit a v6e 4x4 slice"));
  auto one = MakeSliceShape(TpuGeneration::kV6e, *ParseTpuTopology("2x2"), 1);
  EXPECT_FALSE(one.ok());
  auto v4 = MakeSliceShape(TpuGeneration::kV4, *ParseTpuTopology("2x2x2"), 8);
  EXPECT_FALSE(v4.ok());
  auto untiled = MakeSliceShape(TpuGeneration::kV6e, *ParseTpuTopology("1x1"), 4);
  ASSERT_FALSE(untiled.ok());
  EXPECT_THAT(std::string(untiled.status().message()), HasSubstr("not tiled"));
}

TEST(SliceShapeTest, ParseSliceShape) {
  auto s = ParseSliceShape("TPU-V6E", "4x4", std::nullopt);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->accelerator_type, "TPU-V6E");
  EXPECT_EQ(s->gke_accelerator, "tpu-v6e-slice");
  EXPECT_EQ(s->topology.ToString(), "4x4");
  EXPECT_EQ(s->chips, 16);
  EXPECT_EQ(s->hosts, 4);
  EXPECT_EQ(s->chips_per_host, 4);
  EXPECT_EQ(s->pod_type, "v6e-16");
  EXPECT_EQ(s->host_bounds, "2,2,1");
  EXPECT_EQ(s->chips_per_host_bounds, "2,2,1");
  EXPECT_EQ(s->cores_per_chip, 1);
  EXPECT_EQ(s->resources_per_chip, 1);
  EXPECT_TRUE(s->multi_host());

  EXPECT_EQ(ParseSliceShape("v5e", "2x4", 4)->hosts, 2);
  EXPECT_EQ(ParseSliceShape("v6e-16", "4x4", std::nullopt)->pod_type, "v6e-16");
  EXPECT_EQ(ParseSliceShape("tpu7x-16", "2x2x2", std::nullopt)->pod_type, "v7x-16");

  auto mismatch = ParseSliceShape("v6e-8", "4x4", std::nullopt);
  ASSERT_FALSE(mismatch.ok());
  EXPECT_EQ(std::string(mismatch.status().message()),
            "accelerator type v6e-8 has 8 chips, but topology 4x4 has 16");
  auto unknown = ParseSliceShape("H100", "4x4", std::nullopt);
  ASSERT_FALSE(unknown.ok());
  EXPECT_THAT(std::string(unknown.status().message()), HasSubstr("neither a TPU generation"));
  auto invalid = ParseSliceShape("TPU-V6E", "3x3", std::nullopt);
  ASSERT_FALSE(invalid.ok());
  EXPECT_THAT(std::string(invalid.status().message()), HasSubstr("valid: 1x1, 2x2"));
  EXPECT_FALSE(ParseSliceShape("TPU-V4", "4x4", std::nullopt).ok());
  EXPECT_FALSE(ParseSliceShape("TPU-V6E", "4xx4", std::nullopt).ok());
}

TEST(SliceShapeTest, HostChipCoordinates) {
  const SliceShape s = Shape(TpuGeneration::kV6e, "4x4");
  EXPECT_EQ(*WorkerCoordinates(s, 2), (ChipCoord{0, 1, 0}));
  auto chips = HostChipCoordinates(s, 2);
  ASSERT_TRUE(chips.ok());
  EXPECT_EQ(*chips, (std::vector<ChipCoord>{{0, 2, 0}, {1, 2, 0}, {0, 3, 0}, {1, 3, 0}}));
  EXPECT_EQ(HostChipCoordinates(s, 3)->front(), (ChipCoord{2, 2, 0}));
  auto out = HostChipCoordinates(s, 4);
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(std::string(out.status().message()), HasSubstr("worker id 4 is not a host"));
  EXPECT_FALSE(HostChipCoordinates(s, -1).ok());

  const SliceShape v4 = Shape(TpuGeneration::kV4, "2x2x4");
  EXPECT_EQ(HostChipCoordinates(v4, 3)->back(), (ChipCoord{1, 1, 3}));
  const SliceShape eight = Shape(TpuGeneration::kV5litepod, "2x4");
  EXPECT_EQ(HostChipCoordinates(eight, 0)->size(), 8u);
}

}  // namespace
}  // namespace tessera
