// Large objects through the C++ API on a real cluster (docs/objects.md): values of 100 KiB or
// more go into the node stores instead of traveling inline; the driver reads its node's store
// zero-copy, pulls other nodes' objects through its agent, frees store space when the last ref
// goes, and reports an object whose node died as lost. This test binary is the driver and, in
// worker mode, the workers. The driver's node is "a" (the first agent of the state folder);
// tasks are pinned to "b" or "c" with the node-id label; "c" is the node the lost test kills.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "integration/api_test_cluster.h"
#include "integration/cluster_harness.h"
#include "objects/object_store_client.h"
#include "tessera/tessera.h"

namespace tessera::testing {
namespace {

using ::testing::HasSubstr;

constexpr size_t kTenMiB = size_t{10} << 20;

std::string Pattern(size_t size, int seed) {
  std::string out(size, '\0');
  for (size_t i = 0; i < size; ++i) out[i] = static_cast<char>((i * 131 + seed) & 0xff);
  return out;
}

std::string MakeBlob(int64_t size, int seed) { return Pattern(static_cast<size_t>(size), seed); }
TESSERA_REMOTE(MakeBlob);

// What the task saw of its argument: its size and whether it is the expected pattern.
std::string CheckBlob(std::string blob, int seed) {
  return absl::StrCat(blob.size(), blob == Pattern(blob.size(), seed) ? " equal" : " different",
                      " on ", GetRuntimeContext().node_id);
}
TESSERA_REMOTE(CheckBlob);

// The value behind the first ref of `refs` (a ref inside a value: the worker borrows it), read
// once `gate` exists: the driver makes it after dropping its own refs.
std::string ReadNestedOnceOpen(std::vector<ObjectRef<std::string>> refs, std::string gate) {
  const absl::Time until = absl::Now() + absl::Seconds(60);
  while (!std::filesystem::exists(gate) && absl::Now() < until) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  auto value = Get(refs.at(0), absl::Seconds(60));
  if (!value.ok()) throw std::runtime_error(std::string(value.status().message()));
  return absl::StrCat(value->size(), *value == Pattern(value->size(), 7) ? " equal" : " different");
}
TESSERA_REMOTE(ReadNestedOnceOpen);

class ApiObjectsIntegrationTest : public ApiClusterFixture {
 protected:
  static void SetUpTestSuite() {
    ClusterOptions options;
    options.nodes.push_back(NodeSpec{.id = "a", .hardware_yaml = CpuHost(2)});
    options.nodes.push_back(NodeSpec{.id = "b", .hardware_yaml = CpuHost(2)});
    options.nodes.push_back(NodeSpec{.id = "c", .hardware_yaml = CpuHost(2)});
    StartCluster(options);
  }

  // The stats of node `id`'s store, through its socket in the state folder.
  static ObjectStoreStats StoreStats(const std::string& id) {
    auto client = ObjectStoreClient::Connect(
        {.socket_path = absl::StrCat(cluster_->state_dir(), "/nodes/", id, "/objects.sock")});
    EXPECT_TRUE(client.ok()) << client.status();
    if (!client.ok()) return {};
    auto stats = (*client)->Stats();
    EXPECT_TRUE(stats.ok()) << stats.status();
    return stats.ok() ? *stats : ObjectStoreStats{};
  }

  static LabelSelector OnNode(const std::string& node) {
    return LabelSelector::Of({{"tessera.io/node-id", SelectorOperator::kIn, {node}}}).value();
  }
};

TEST_F(ApiObjectsIntegrationTest, LargePutIsStoredAndReadZeroCopy) {
  const uint64_t objects_before = StoreStats("a").num_objects;
  const internal::ObjectPathStats before = internal::GetObjectPathStats();
  const std::string value = Pattern(kTenMiB, 1);
  ObjectRef<std::string> ref = Put(value);
  EXPECT_EQ(StoreStats("a").num_objects, objects_before + 1);
  auto back = Get(ref, kPatience);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(*back == value);
  const internal::ObjectPathStats after = internal::GetObjectPathStats();
  EXPECT_EQ(after.store_puts, before.store_puts + 1);
  EXPECT_EQ(after.zero_copy_reads, before.zero_copy_reads + 1);
  EXPECT_EQ(after.inline_reads, before.inline_reads);
  EXPECT_EQ(after.pulls, before.pulls);

  // Small values stay inline.
  ObjectRef<int> small = Put(7);
  ASSERT_EQ(*Get(small, kPatience), 7);
  EXPECT_EQ(internal::GetObjectPathStats().inline_reads, after.inline_reads + 1);
  EXPECT_EQ(internal::GetObjectPathStats().store_puts, after.store_puts);
}

TEST_F(ApiObjectsIntegrationTest, LargeResultOnAnotherNodeIsPulledThroughTheAgents) {
  const internal::ObjectPathStats before = internal::GetObjectPathStats();
  ObjectRef<std::string> ref =
      Task(MakeBlob).LabelSelector(OnNode("b")).Remote(int64_t{kTenMiB}, 2);
  auto back = Get(ref, kPatience);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->size(), kTenMiB);
  EXPECT_TRUE(*back == Pattern(kTenMiB, 2));
  const internal::ObjectPathStats after = internal::GetObjectPathStats();
  EXPECT_EQ(after.pulls, before.pulls + 1);
  EXPECT_EQ(after.zero_copy_reads, before.zero_copy_reads + 1);
  // A second read finds the pulled copy here.
  ASSERT_TRUE(Get(ref, kPatience).ok());
  EXPECT_EQ(internal::GetObjectPathStats().pulls, after.pulls);
}

TEST_F(ApiObjectsIntegrationTest, LargePutAsArgumentOfATaskOnAnotherNode) {
  ObjectRef<std::string> blob = Put(Pattern(kTenMiB, 3));
  auto seen = Get(Task(CheckBlob).LabelSelector(OnNode("b")).Remote(blob, 3), kPatience);
  ASSERT_TRUE(seen.ok()) << seen.status();
  EXPECT_EQ(*seen, absl::StrCat(kTenMiB, " equal on b"));
}

TEST_F(ApiObjectsIntegrationTest, DroppingTheLastRefFreesStoreSpace) {
  const ObjectStoreStats a_before = StoreStats("a");
  const ObjectStoreStats b_before = StoreStats("b");
  {
    ObjectRef<std::string> put = Put(Pattern(kTenMiB, 4));
    ObjectRef<std::string> result =
        Task(MakeBlob).LabelSelector(OnNode("b")).Remote(int64_t{kTenMiB}, 5);
    ASSERT_TRUE(Get(result, kPatience).ok());  // pulled: a copy on a, the primary on b
    EXPECT_GE(StoreStats("a").allocated_bytes, a_before.allocated_bytes + 2 * kTenMiB);
    EXPECT_GE(StoreStats("b").allocated_bytes, b_before.allocated_bytes + kTenMiB);
  }
  EXPECT_EQ(StoreStats("a").allocated_bytes, a_before.allocated_bytes);
  EXPECT_EQ(StoreStats("a").num_objects, a_before.num_objects);
  EXPECT_EQ(StoreStats("b").allocated_bytes, b_before.allocated_bytes);
}

TEST_F(ApiObjectsIntegrationTest, ARefInsideAValueKeepsItsObjectAfterTheDriverDropsItsOwn) {
  const std::string gate = absl::StrCat(cluster_->state_dir(), "/nested-gate");
  ObjectRef<std::string> read;
  {
    ObjectRef<std::string> inner = Put(Pattern(kTenMiB, 7));
    read = Task(ReadNestedOnceOpen)
               .LabelSelector(OnNode("b"))
               .Remote(std::vector<ObjectRef<std::string>>{inner}, gate);
  }  // the driver's own refs to `inner` are gone; the task still holds it inside its argument
  std::ofstream(gate) << "open";
  auto seen = Get(read, kPatience);
  ASSERT_TRUE(seen.ok()) << seen.status();
  EXPECT_EQ(*seen, absl::StrCat(kTenMiB, " equal"));
}

TEST_F(ApiObjectsIntegrationTest, LargeResultOnANodeThatDiedIsLost) {
  ObjectRef<std::string> ref =
      Task(MakeBlob).LabelSelector(OnNode("c")).Remote(int64_t{kTenMiB}, 6);
  ASSERT_EQ(Wait(std::vector<ObjectRef<std::string>>{ref}, 1, kPatience).ready.size(), 1u);
  ASSERT_TRUE(cluster_->KillMachine("c").ok());
  auto back = Get(ref, kPatience);
  ASSERT_FALSE(back.ok());
  EXPECT_THAT(std::string(back.status().message()),
              HasSubstr(absl::StrCat("object ", ref.id().Hex(), " is lost: node c died")));
  // An argument resolution says the same.
  auto seen = Get(Task(CheckBlob).LabelSelector(OnNode("b")).Remote(ref, 6), kPatience);
  ASSERT_FALSE(seen.ok());
  EXPECT_THAT(std::string(seen.status().message()), HasSubstr("is lost: node c died"));
}

}  // namespace
}  // namespace tessera::testing
