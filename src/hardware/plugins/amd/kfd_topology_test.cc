#include "hardware/plugins/amd/kfd_topology.h"

#include "gtest/gtest.h"
#include "hardware/testing/fake_tree.h"
#include "hardware/testing/plugin_test_support.h"

namespace tessera {
namespace {

TEST(KfdTopologyTest, ReadsMi300xNodesInNumericOrder) {
  Sysroot root(testing::FixturePath("mi300x-8"));
  std::vector<std::string> warnings;
  auto nodes = ReadKfdTopology(root, &warnings);
  ASSERT_TRUE(nodes.ok()) << nodes.status();
  ASSERT_EQ(nodes->size(), 10u);
  EXPECT_TRUE(warnings.empty());
  EXPECT_FALSE((*nodes)[0].is_gpu);
  EXPECT_FALSE((*nodes)[1].is_gpu);
  for (int i = 2; i < 10; ++i) {
    EXPECT_EQ((*nodes)[i].id, i);
    EXPECT_TRUE((*nodes)[i].is_gpu);
    EXPECT_EQ((*nodes)[i].memory_bytes, 205822885888u);
    ASSERT_EQ((*nodes)[i].io_links.size(), 8u);
    int xgmi = 0;
    for (const KfdIoLink& l : (*nodes)[i].io_links) xgmi += l.type == kKfdIoLinkXgmi;
    EXPECT_EQ(xgmi, 7);
  }
}

TEST(KfdTopologyTest, NumericOrderBeyondNineAndUnreadableNodeWarns) {
  testing::FakeTree t;
  const std::string nodes(kKfdTopologyNodes);
  t.Write(nodes + "/10/properties", "simd_count 4\n");
  t.Write(nodes + "/9/properties", "simd_count 0\n");
  t.Mkdir(nodes + "/2");  // no properties file
  std::vector<std::string> warnings;
  auto read = ReadKfdTopology(Sysroot(t.root()), &warnings);
  ASSERT_TRUE(read.ok());
  ASSERT_EQ(read->size(), 2u);
  EXPECT_EQ((*read)[0].id, 9);
  EXPECT_EQ((*read)[1].id, 10);
  EXPECT_TRUE((*read)[1].is_gpu);
  EXPECT_TRUE(testing::AnyContains(warnings, "KFD node 2 skipped"));
}

TEST(KfdTopologyTest, MissingTopologyIsNotFound) {
  testing::FakeTree t;
  std::vector<std::string> warnings;
  EXPECT_EQ(ReadKfdTopology(Sysroot(t.root()), &warnings).status().code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace tessera
