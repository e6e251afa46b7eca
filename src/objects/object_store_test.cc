#include "objects/object_store.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera {
namespace {

using ::testing::HasSubstr;

const StoreClientId kA{1};
const StoreClientId kB{2};
constexpr uint64_t kKiB = 1024;

ObjectStore MakeStore(uint64_t capacity) { return ObjectStore(ObjectStoreOptions{capacity}); }

absl::Status Put(ObjectStore& store, const ObjectId& id, uint64_t size,
                 CreateObjectOptions options = {}) {
  auto loc = store.Create(kA, id, size, "meta", options);
  if (!loc.ok()) return loc.status();
  return store.Seal(kA, id);
}

TEST(ObjectStoreTest, CreateSealGetReleaseDelete) {
  ObjectStore store = MakeStore(64 * kKiB);
  const ObjectId id = ObjectId::FromRandom();
  auto loc = store.Create(kA, id, 1000, "m", {});
  ASSERT_TRUE(loc.ok()) << loc.status();
  EXPECT_EQ(loc->data_size, 1000u);
  EXPECT_FALSE(store.Contains(id));
  EXPECT_EQ(store.Get(kB, id).status().code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(store.Seal(kA, id).ok());
  EXPECT_TRUE(store.Contains(id));
  auto got = store.Get(kB, id);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->offset, loc->offset);
  EXPECT_EQ(got->metadata, "m");
  ASSERT_TRUE(store.Release(kB, id).ok());
  EXPECT_EQ(store.Release(kB, id).code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(store.Delete(id).ok());
  EXPECT_FALSE(store.Contains(id));
  EXPECT_EQ(store.Stats().allocated_bytes, 0u);
}

TEST(ObjectStoreTest, OnlyTheCreatorSealsOrAborts) {
  ObjectStore store = MakeStore(64 * kKiB);
  const ObjectId id = ObjectId::FromRandom();
  ASSERT_TRUE(store.Create(kA, id, 10, "", {}).ok());
  EXPECT_EQ(store.Seal(kB, id).code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(store.Abort(kB, id).code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(store.Delete(id).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(store.Create(kB, id, 10, "", {}).status().code(), absl::StatusCode::kAlreadyExists);
  ASSERT_TRUE(store.Abort(kA, id).ok());
  EXPECT_EQ(store.Stats().num_objects, 0u);
  ASSERT_TRUE(store.Create(kB, id, 10, "", {}).ok());  // the id is free again
  ASSERT_TRUE(store.Seal(kB, id).ok());
  EXPECT_EQ(store.Seal(kB, id).code(), absl::StatusCode::kFailedPrecondition);
}

TEST(ObjectStoreTest, DeleteOfAPinnedObjectWaitsForTheLastRelease) {
  ObjectStore store = MakeStore(64 * kKiB);
  const ObjectId id = ObjectId::FromRandom();
  ASSERT_TRUE(Put(store, id, 100).ok());
  ASSERT_TRUE(store.Get(kA, id).ok());
  ASSERT_TRUE(store.Get(kB, id).ok());
  ASSERT_TRUE(store.Get(kB, id).ok());
  ASSERT_TRUE(store.Delete(id).ok());
  EXPECT_FALSE(store.Contains(id));
  EXPECT_EQ(store.Get(kA, id).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store.Create(kA, id, 1, "", {}).status().code(), absl::StatusCode::kAlreadyExists);
  ASSERT_TRUE(store.Release(kA, id).ok());
  ASSERT_TRUE(store.Release(kB, id).ok());
  EXPECT_GT(store.Stats().allocated_bytes, 0u);  // kB still holds one pin
  ASSERT_TRUE(store.Release(kB, id).ok());
  EXPECT_EQ(store.Stats().allocated_bytes, 0u);
}

TEST(ObjectStoreTest, DisconnectReleasesPinsAndAbortsUnsealed) {
  ObjectStore store = MakeStore(64 * kKiB);
  const ObjectId sealed = ObjectId::FromRandom();
  const ObjectId unsealed = ObjectId::FromRandom();
  ASSERT_TRUE(Put(store, sealed, 100).ok());
  ASSERT_TRUE(store.Get(kB, sealed).ok());
  ASSERT_TRUE(store.Get(kB, sealed).ok());
  ASSERT_TRUE(store.Delete(sealed).ok());
  ASSERT_TRUE(store.Create(kB, unsealed, 100, "", {}).ok());
  store.DisconnectClient(kB);
  const ObjectStoreStats stats = store.Stats();
  EXPECT_EQ(stats.num_objects, 0u);
  EXPECT_EQ(stats.allocated_bytes, 0u);
}

TEST(ObjectStoreTest, TooLargeIsRefusedUpFrontAndFullIsResourceExhausted) {
  ObjectStore store = MakeStore(64 * kKiB);
  auto huge = store.Create(kA, ObjectId::FromRandom(), 64 * kKiB + 1, "", {});
  EXPECT_EQ(huge.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(huge.status().message(), HasSubstr("can never fit"));
  ASSERT_TRUE(Put(store, ObjectId::FromRandom(), 40 * kKiB).ok());  // primary: not evictable
  auto full = store.Create(kA, ObjectId::FromRandom(), 30 * kKiB, "", {});
  EXPECT_EQ(full.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(full.status().message(), HasSubstr("object store full"));
  EXPECT_EQ(store.Stats().evictions, 0u);
}

TEST(ObjectStoreTest, EvictsLeastRecentlyUsedEvictableUnpinnedOnly) {
  ObjectStore store = MakeStore(100 * kKiB);
  const CreateObjectOptions secondary{.evictable = true};
  const ObjectId primary = ObjectId::FromRandom();
  const ObjectId old_copy = ObjectId::FromRandom();
  const ObjectId pinned_copy = ObjectId::FromRandom();
  const ObjectId used_copy = ObjectId::FromRandom();
  // Laid out in this order; old_copy sits next to the free tail so one eviction makes room.
  ASSERT_TRUE(Put(store, primary, 20 * kKiB).ok());
  ASSERT_TRUE(Put(store, pinned_copy, 20 * kKiB, secondary).ok());
  ASSERT_TRUE(Put(store, used_copy, 20 * kKiB, secondary).ok());
  ASSERT_TRUE(Put(store, old_copy, 20 * kKiB, secondary).ok());
  ASSERT_TRUE(store.Get(kB, pinned_copy).ok());
  ASSERT_TRUE(store.Get(kB, used_copy).ok());  // a use moves it to the recent end
  ASSERT_TRUE(store.Release(kB, used_copy).ok());
  EXPECT_EQ(store.Stats().num_evictable, 2u);

  // 20 KiB free: a 30 KiB object needs one eviction, the least recently used: old_copy, though
  // used_copy was sealed before it.
  ASSERT_TRUE(Put(store, ObjectId::FromRandom(), 30 * kKiB).ok());
  EXPECT_FALSE(store.Contains(old_copy));
  EXPECT_TRUE(store.Contains(used_copy));
  EXPECT_TRUE(store.Contains(pinned_copy));
  EXPECT_TRUE(store.Contains(primary));
  EXPECT_EQ(store.Stats().evictions, 1u);

  // Nothing but used_copy can go now; 30 KiB more does not fit even after evicting it.
  auto full = store.Create(kA, ObjectId::FromRandom(), 30 * kKiB, "", {});
  EXPECT_EQ(full.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(store.Contains(pinned_copy));
  EXPECT_TRUE(store.Contains(primary));
}

TEST(ObjectStoreTest, MetadataIsBounded) {
  ObjectStore store(ObjectStoreOptions{.capacity_bytes = 4096, .max_metadata_bytes = 8});
  auto r = store.Create(kA, ObjectId::FromRandom(), 1, "123456789", {});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store.Stats().num_objects, 0u);
}

}  // namespace
}  // namespace tessera
