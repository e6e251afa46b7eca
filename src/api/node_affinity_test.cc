#include "api/node_affinity.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace tessera::api {
namespace {

using ::testing::HasSubstr;

TEST(NodeAffinityTest, NoNodeLeavesTheRequestAlone) {
  v1::ResourceRequest request;
  ASSERT_TRUE(ApplyNodeAffinity(TaskOptions{}, &request).ok());
  EXPECT_EQ(request.affinity_node_id(), "");
  EXPECT_FALSE(request.affinity_soft());
  EXPECT_EQ(NodeAffinityKey(TaskOptions{}), "");
}

TEST(NodeAffinityTest, HardAndSoftAreCarriedAndKeyedApart) {
  TaskOptions hard;
  hard.node_affinity = "cpu2";
  v1::ResourceRequest request;
  ASSERT_TRUE(ApplyNodeAffinity(hard, &request).ok());
  EXPECT_EQ(request.affinity_node_id(), "cpu2");
  EXPECT_FALSE(request.affinity_soft());

  TaskOptions soft = hard;
  soft.node_affinity_soft = true;
  v1::ResourceRequest soft_request;
  ASSERT_TRUE(ApplyNodeAffinity(soft, &soft_request).ok());
  EXPECT_EQ(soft_request.affinity_node_id(), "cpu2");
  EXPECT_TRUE(soft_request.affinity_soft());

  EXPECT_EQ(NodeAffinityKey(hard), "|node=cpu2");
  EXPECT_EQ(NodeAffinityKey(soft), "|node~=cpu2");
}

TEST(NodeAffinityTest, BadOptionsAreOneLineErrorsAndChangeNothing) {
  v1::ResourceRequest request;
  request.set_placement_group("");

  TaskOptions soft_alone;
  soft_alone.node_affinity_soft = true;
  absl::Status s = ApplyNodeAffinity(soft_alone, &request);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("soft without a node id"));

  TaskOptions bad_id;
  bad_id.node_affinity = "no spaces allowed";
  s = ApplyNodeAffinity(bad_id, &request);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("\"no spaces allowed\": not a node id"));
  EXPECT_EQ(std::string(s.message()).find('\n'), std::string::npos);

  TaskOptions with_group;
  with_group.node_affinity = "cpu2";
  with_group.placement_group = "pg1";
  s = ApplyNodeAffinity(with_group, &request);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("placement group \"pg1\""));

  EXPECT_EQ(request.affinity_node_id(), "");
  EXPECT_FALSE(request.affinity_soft());
}

}  // namespace
}  // namespace tessera::api
