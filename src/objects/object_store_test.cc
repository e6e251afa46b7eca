#include "objects/object_store.h"

#include <sys/stat.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

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
  EXPECT_EQ(huge.status().code(), absl::StatusCode::kResourceExhausted);
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

TEST(ObjectStoreTest, FullWithoutSpillingNamesTheSizes) {
  ObjectStore store = MakeStore(64 * kKiB);
  ASSERT_TRUE(Put(store, ObjectId::FromRandom(), 40 * kKiB).ok());
  auto full = store.Create(kA, ObjectId::FromRandom(), 30 * kKiB, "", {});
  ASSERT_EQ(full.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(full.status().message(), HasSubstr("object store full"));
  EXPECT_THAT(full.status().message(),
              HasSubstr("needs 30.0 KiB; capacity 64.0 KiB, 40.0 KiB used"));
  EXPECT_THAT(full.status().message(), HasSubstr("used"));
  EXPECT_THAT(full.status().message(), HasSubstr("spilling is off"));
}

TEST(ObjectStoreTest, OwnerDiedDeletesEverythingItOwnsAndRefusesItsLaterCreates) {
  ObjectStore store = MakeStore(64 * kKiB);
  const ObjectId unpinned = ObjectId::FromRandom();
  const ObjectId pinned = ObjectId::FromRandom();
  const ObjectId unsealed = ObjectId::FromRandom();
  const ObjectId other = ObjectId::FromRandom();
  ASSERT_TRUE(Put(store, unpinned, 1000, {.owner = "driver-1"}).ok());
  ASSERT_TRUE(Put(store, pinned, 1000, {.owner = "driver-1"}).ok());
  ASSERT_TRUE(Put(store, other, 1000, {.owner = "driver-2"}).ok());
  ASSERT_TRUE(store.Create(kB, unsealed, 1000, "", {.owner = "driver-1"}).ok());
  ASSERT_TRUE(store.Get(kB, pinned).ok());

  EXPECT_EQ(store.OwnerDied("driver-1"), 2);
  EXPECT_FALSE(store.Contains(unpinned));
  EXPECT_FALSE(store.Contains(pinned));
  EXPECT_TRUE(store.Contains(other));
  EXPECT_EQ(store.Seal(kB, unsealed).code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(store.Release(kB, pinned).ok());
  EXPECT_EQ(store.Stats().num_objects, 1u);
  auto late = store.Create(kA, ObjectId::FromRandom(), 10, "", {.owner = "driver-1"});
  EXPECT_EQ(late.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(late.status().message(), HasSubstr("owner driver-1 died"));
  EXPECT_EQ(store.OwnerDied("driver-1"), 0);  // idempotent
  EXPECT_EQ(store.DeclareOwner(kA, "driver-1").code(), absl::StatusCode::kFailedPrecondition);
}

TEST(ObjectStoreTest, LastConnectionOfAnOwnerClosingDeletesItsObjects) {
  ObjectStore store = MakeStore(64 * kKiB);
  const StoreClientId driver{10};
  const StoreClientId driver_again{11};
  const StoreClientId worker{12};
  ASSERT_TRUE(store.DeclareOwner(driver, "driver-1").ok());
  ASSERT_TRUE(store.DeclareOwner(driver_again, "driver-1").ok());
  EXPECT_EQ(store.DeclareOwner(driver, "driver-2").code(), absl::StatusCode::kInvalidArgument);
  // A worker writes a result its owner (the driver) counts references for.
  const ObjectId result = ObjectId::FromRandom();
  ASSERT_TRUE(store.Create(worker, result, 2000, "", {.owner = "driver-1"}).ok());
  ASSERT_TRUE(store.Seal(worker, result).ok());
  store.DisconnectClient(worker);  // the worker exits: the result stays for its owner
  EXPECT_TRUE(store.Contains(result));
  store.DisconnectClient(driver);
  EXPECT_TRUE(store.Contains(result));  // another connection of the owner is still there
  store.DisconnectClient(driver_again);
  EXPECT_FALSE(store.Contains(result));
  EXPECT_EQ(store.Stats().allocated_bytes, 0u);
}

class SpillTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/tessera_spill_test_XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
    memory_.assign(64 * kKiB, 0);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  ObjectStore MakeSpillingStore() {
    return ObjectStore(ObjectStoreOptions{
        .capacity_bytes = 64 * kKiB, .memory = memory_.data(), .spill_dir = dir_});
  }
  absl::Status PutFilled(ObjectStore& store, const ObjectId& id, uint64_t size, char fill) {
    auto loc = store.Create(kA, id, size, "", {.owner = "driver-1"});
    if (!loc.ok()) return loc.status();
    std::memset(memory_.data() + loc->offset, fill, size);
    return store.Seal(kA, id);
  }
  size_t SpillFiles() const {
    size_t n = 0;
    for ([[maybe_unused]] const auto& f : std::filesystem::directory_iterator(dir_)) ++n;
    return n;
  }

  std::string dir_;
  std::vector<uint8_t> memory_;
};

TEST_F(SpillTest, FullStoreSpillsTheLeastRecentlyUsedPrimaryAndGetReadsItBack) {
  ObjectStore store = MakeSpillingStore();
  const ObjectId first = ObjectId::FromRandom();
  const ObjectId second = ObjectId::FromRandom();
  const ObjectId third = ObjectId::FromRandom();
  ASSERT_TRUE(PutFilled(store, first, 30 * kKiB, 'a').ok());
  ASSERT_TRUE(PutFilled(store, second, 30 * kKiB, 'b').ok());
  ASSERT_TRUE(PutFilled(store, third, 30 * kKiB, 'c').ok());  // spills `first`
  ObjectStoreStats stats = store.Stats();
  EXPECT_EQ(stats.spills, 1u);
  EXPECT_EQ(stats.num_spilled, 1u);
  EXPECT_EQ(stats.spilled_bytes, 30 * kKiB);
  EXPECT_TRUE(store.Contains(first));
  const std::string file = dir_ + "/" + first.Hex();
  struct stat st {};
  ASSERT_EQ(stat(file.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(st.st_size, static_cast<off_t>(30 * kKiB));

  // Reading it back spills another (second is now the least recently used) and removes the file.
  auto got = store.Get(kB, first);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(memory_.data() + got->offset), 30 * kKiB),
            std::string(30 * kKiB, 'a'));
  stats = store.Stats();
  EXPECT_EQ(stats.restores, 1u);
  EXPECT_EQ(stats.spills, 2u);
  EXPECT_FALSE(std::filesystem::exists(file));
  EXPECT_TRUE(std::filesystem::exists(dir_ + "/" + second.Hex()));
  ASSERT_TRUE(store.Release(kB, first).ok());

  // Deleting a spilled object removes its file; its owner dying removes the rest.
  ASSERT_TRUE(store.Delete(second).ok());
  EXPECT_EQ(SpillFiles(), 0u);
  ASSERT_TRUE(PutFilled(store, second, 30 * kKiB, 'd').ok());
  EXPECT_EQ(SpillFiles(), 1u);
  EXPECT_EQ(store.OwnerDied("driver-1"), 3);
  EXPECT_EQ(SpillFiles(), 0u);
  stats = store.Stats();
  EXPECT_EQ(stats.num_objects, 0u);
  EXPECT_EQ(stats.num_spilled, 0u);
  EXPECT_EQ(stats.allocated_bytes, 0u);
}

TEST_F(SpillTest, PinnedObjectsAreNeverSpilledAndWhatStillDoesNotFitIsRefused) {
  ObjectStore store = MakeSpillingStore();
  const ObjectId held = ObjectId::FromRandom();
  ASSERT_TRUE(PutFilled(store, held, 40 * kKiB, 'a').ok());
  ASSERT_TRUE(store.Get(kB, held).ok());
  auto full = store.Create(kA, ObjectId::FromRandom(), 30 * kKiB, "", {});
  ASSERT_EQ(full.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(full.status().message(), HasSubstr("nothing more can be spilled"));
  EXPECT_EQ(store.Stats().spills, 0u);
  EXPECT_EQ(SpillFiles(), 0u);
}

TEST_F(SpillTest, ASpillThatCannotBeWrittenIsReportedInTheRefusal) {
  ObjectStore store = MakeSpillingStore();
  ASSERT_TRUE(PutFilled(store, ObjectId::FromRandom(), 40 * kKiB, 'a').ok());
  std::filesystem::remove_all(dir_);
  auto full = store.Create(kA, ObjectId::FromRandom(), 30 * kKiB, "", {});
  ASSERT_EQ(full.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(full.status().message(), HasSubstr("spilling failed: cannot create"));
  std::filesystem::create_directory(dir_);
}

}  // namespace
}  // namespace tessera
