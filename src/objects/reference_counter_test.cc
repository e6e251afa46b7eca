#include "objects/reference_counter.h"

#include <map>
#include <random>
#include <set>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera {
namespace {

class ReferenceCounterTest : public ::testing::Test {
 protected:
  ReferenceCounter counter_{[this](const ZeroReferences& z) { freed_.push_back(z); }};
  std::vector<ZeroReferences> freed_;

  std::vector<ObjectId> FreedIds() const {
    std::vector<ObjectId> ids;
    for (const auto& z : freed_) ids.push_back(z.id);
    return ids;
  }
};

TEST_F(ReferenceCounterTest, AnOwnedObjectLivesWhileAnyCountIsPositive) {
  const ObjectId id = ObjectId::FromRandom();
  ASSERT_TRUE(counter_.AddOwnedObject(id, {}).ok());
  ASSERT_TRUE(counter_.AddSubmittedTaskReferences({id, id}).ok());  // a task takes it twice
  ASSERT_TRUE(counter_.AddBorrower(id, BorrowerId("w2")).ok());
  ASSERT_TRUE(counter_.AddBorrower(id, BorrowerId("w2")).ok());  // idempotent
  ASSERT_TRUE(counter_.RemoveLocalReference(id).ok());
  ASSERT_TRUE(counter_.RemoveSubmittedTaskReferences({id, id}).ok());
  EXPECT_TRUE(freed_.empty());
  auto counts = counter_.Counts(id);
  ASSERT_TRUE(counts.ok());
  EXPECT_EQ(counts->borrowers, 1);
  ASSERT_TRUE(counter_.RemoveBorrower(id, BorrowerId("w2")).ok());
  ASSERT_EQ(freed_.size(), 1u);
  EXPECT_EQ(freed_[0].id, id);
  EXPECT_TRUE(freed_[0].owned);
  EXPECT_FALSE(counter_.Has(id));
  EXPECT_EQ(counter_.AddLocalReference(id).code(), absl::StatusCode::kNotFound);
}

TEST_F(ReferenceCounterTest, MisuseChangesNothing) {
  const ObjectId id = ObjectId::FromRandom();
  const ObjectId unknown = ObjectId::FromRandom();
  ASSERT_TRUE(counter_.AddOwnedObject(id, {}).ok());
  EXPECT_EQ(counter_.AddOwnedObject(id, {}).code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(counter_.AddSubmittedTaskReferences({id, unknown}).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(counter_.Counts(id)->submitted, 0);
  ASSERT_TRUE(counter_.AddSubmittedTaskReferences({id}).ok());
  EXPECT_EQ(counter_.RemoveSubmittedTaskReferences({id, id}).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(counter_.Counts(id)->submitted, 1);
  EXPECT_EQ(counter_.RemoveBorrower(id, BorrowerId("nobody")).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(counter_.AddOwnedObject(ObjectId::FromRandom(), {.contained = {unknown}}).code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(counter_.AddContainedReferences(id, {id}).code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(counter_.RemoveLocalReference(id).ok());
  EXPECT_EQ(counter_.RemoveLocalReference(id).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(freed_.empty());
}

TEST_F(ReferenceCounterTest, AnOuterObjectKeepsItsInnerReferencesAlive) {
  const ObjectId inner = ObjectId::FromRandom();
  const ObjectId outer = ObjectId::FromRandom();
  const ObjectId outermost = ObjectId::FromRandom();
  ASSERT_TRUE(counter_.AddOwnedObject(inner, {}).ok());
  ASSERT_TRUE(counter_.AddOwnedObject(outer, {.contained = {inner}}).ok());
  ASSERT_TRUE(counter_.AddOwnedObject(outermost, {}).ok());
  ASSERT_TRUE(counter_.AddContainedReferences(outermost, {outer}).ok());  // value arrived later
  ASSERT_TRUE(counter_.RemoveLocalReference(inner).ok());
  ASSERT_TRUE(counter_.RemoveLocalReference(outer).ok());
  EXPECT_TRUE(freed_.empty());
  EXPECT_EQ(counter_.Counts(inner)->contained, 1);
  ASSERT_TRUE(counter_.RemoveLocalReference(outermost).ok());
  EXPECT_EQ(FreedIds(), (std::vector<ObjectId>{outermost, outer, inner}));
  EXPECT_EQ(counter_.size(), 0u);
}

TEST_F(ReferenceCounterTest, BorrowedObjectsReportTheirOwner) {
  const ObjectId id = ObjectId::FromRandom();
  const OwnerAddress owner{"node-1", "10.0.0.1:7000", "worker-9"};
  ASSERT_TRUE(counter_.AddBorrowedObject(id, owner).ok());
  ASSERT_TRUE(counter_.AddBorrowedObject(id, owner).ok());  // received twice
  ASSERT_TRUE(counter_.RemoveLocalReference(id).ok());
  EXPECT_TRUE(freed_.empty());
  ASSERT_TRUE(counter_.RemoveLocalReference(id).ok());
  ASSERT_EQ(freed_.size(), 1u);
  EXPECT_FALSE(freed_[0].owned);
  EXPECT_EQ(freed_[0].owner, owner);
}

TEST_F(ReferenceCounterTest, ADeadBorrowerHoldsNothing) {
  const ObjectId a = ObjectId::FromRandom();
  const ObjectId b = ObjectId::FromRandom();
  for (const ObjectId& id : {a, b}) {
    ASSERT_TRUE(counter_.AddOwnedObject(id, {}).ok());
    ASSERT_TRUE(counter_.AddBorrower(id, BorrowerId("dead")).ok());
    ASSERT_TRUE(counter_.RemoveLocalReference(id).ok());
  }
  ASSERT_TRUE(counter_.AddBorrower(b, BorrowerId("alive")).ok());
  counter_.RemoveBorrowerEverywhere(BorrowerId("dead"));
  EXPECT_EQ(FreedIds(), (std::vector<ObjectId>{a}));
}

TEST(ReferenceCounterCallbackTest, TheCallbackMayCallBackIn) {
  ReferenceCounter* self = nullptr;
  std::vector<ObjectId> freed;
  ReferenceCounter counter([&](const ZeroReferences& z) {
    freed.push_back(z.id);
    EXPECT_FALSE(self->Has(z.id));  // would deadlock if called under the lock
  });
  self = &counter;
  const ObjectId id = ObjectId::FromRandom();
  ASSERT_TRUE(counter.AddOwnedObject(id, {}).ok());
  ASSERT_TRUE(counter.RemoveLocalReference(id).ok());
  EXPECT_EQ(freed.size(), 1u);
}

TEST(ReferenceCounterThreadsTest, ConcurrentAddsAndRemovesFreeExactlyOnce) {
  std::atomic<int> freed{0};
  ReferenceCounter counter([&](const ZeroReferences&) { freed++; });
  std::vector<ObjectId> ids(100);
  for (ObjectId& id : ids) {
    id = ObjectId::FromRandom();
    ASSERT_TRUE(counter.AddOwnedObject(id, {}).ok());
  }
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int round = 0; round < 100; ++round) {
        for (const ObjectId& id : ids) {
          ASSERT_TRUE(counter.AddLocalReference(id).ok());
          ASSERT_TRUE(counter.AddSubmittedTaskReferences({id}).ok());
          ASSERT_TRUE(counter.RemoveSubmittedTaskReferences({id}).ok());
          ASSERT_TRUE(counter.RemoveLocalReference(id).ok());
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(freed.load(), 0);
  for (const ObjectId& id : ids) ASSERT_TRUE(counter.RemoveLocalReference(id).ok());
  EXPECT_EQ(freed.load(), 100);
}

// Property: over random sequences of add/remove/submit/finish/borrow/return/contain, an object is
// never freed while a model says it is referenced, and is freed exactly once as soon as the model
// says it is not.
TEST(ReferenceCounterPropertyTest, NeverFreedWhileReferencedAlwaysFreedOnceWhenNot) {
  for (uint32_t seed = 1; seed <= 200; ++seed) {
    std::mt19937 rng(seed);
    struct Model {
      int64_t local = 0;
      std::multiset<int> tasks;       // task ids holding it (one per argument slot)
      std::set<std::string> borrowers;
      int64_t contained = 0;
      std::vector<ObjectId> inner;
    };
    std::map<ObjectId, Model> live;
    std::set<ObjectId> freed_ids;
    std::vector<ObjectId> freed_order;
    ReferenceCounter counter([&](const ZeroReferences& z) { freed_order.push_back(z.id); });
    std::map<int, std::vector<ObjectId>> running_tasks;
    int next_task = 0;
    auto pick = [&]() -> std::optional<ObjectId> {
      if (live.empty()) return std::nullopt;
      auto it = live.begin();
      std::advance(it, rng() % live.size());
      return it->first;
    };
    auto model_referenced = [](const Model& m) {
      return m.local > 0 || !m.tasks.empty() || !m.borrowers.empty() || m.contained > 0;
    };
    // Applies the model's cascade after a decrement and checks the counter did the same.
    auto settle = [&]() {
      bool changed = true;
      std::set<ObjectId> expect_freed;
      while (changed) {
        changed = false;
        for (auto it = live.begin(); it != live.end();) {
          if (!model_referenced(it->second)) {
            for (const ObjectId& in : it->second.inner) live[in].contained -= 1;
            expect_freed.insert(it->first);
            freed_ids.insert(it->first);
            it = live.erase(it);
            changed = true;
          } else {
            ++it;
          }
        }
      }
      std::set<ObjectId> got(freed_order.begin(), freed_order.end());
      ASSERT_EQ(got.size(), freed_order.size()) << "freed twice, seed " << seed;
      ASSERT_EQ(got, expect_freed) << "seed " << seed;
      freed_order.clear();
    };

    for (int step = 0; step < 300; ++step) {
      const int op = static_cast<int>(rng() % 9);
      auto id = pick();
      if (op == 0 || !id) {  // a new Put, maybe containing refs to live objects
        const ObjectId fresh = ObjectId::FromRandom();
        OwnedObjectOptions options;
        if (id && rng() % 2 == 0) options.contained.push_back(*id);
        Model m;
        m.local = 1;
        m.inner = options.contained;
        for (const ObjectId& in : options.contained) live[in].contained += 1;
        ASSERT_TRUE(counter.AddOwnedObject(fresh, options).ok());
        live[fresh] = m;
      } else if (op == 1) {
        ASSERT_TRUE(counter.AddLocalReference(*id).ok());
        live[*id].local += 1;
      } else if (op == 2) {
        const bool ok = counter.RemoveLocalReference(*id).ok();
        ASSERT_EQ(ok, live[*id].local > 0) << "seed " << seed;
        if (ok) live[*id].local -= 1;
      } else if (op == 3) {  // submit a task taking one or two live refs
        std::vector<ObjectId> args = {*id};
        if (auto other = pick(); other && rng() % 2 == 0) args.push_back(*other);
        ASSERT_TRUE(counter.AddSubmittedTaskReferences(args).ok());
        for (const ObjectId& a : args) live[a].tasks.insert(next_task);
        running_tasks[next_task++] = args;
      } else if (op == 4 && !running_tasks.empty()) {  // a task finishes
        auto it = running_tasks.begin();
        std::advance(it, rng() % running_tasks.size());
        // The executor may have kept a borrowed copy: it is reported before the release.
        if (rng() % 3 == 0) {
          const std::string borrower = "w" + std::to_string(rng() % 3);
          ASSERT_TRUE(counter.AddBorrower(it->second[0], BorrowerId(borrower)).ok());
          live[it->second[0]].borrowers.insert(borrower);
        }
        ASSERT_TRUE(counter.RemoveSubmittedTaskReferences(it->second).ok());
        for (const ObjectId& a : it->second) live[a].tasks.erase(live[a].tasks.find(it->first));
        running_tasks.erase(it);
      } else if (op == 5) {
        const std::string borrower = "w" + std::to_string(rng() % 3);
        ASSERT_TRUE(counter.AddBorrower(*id, BorrowerId(borrower)).ok());
        live[*id].borrowers.insert(borrower);
      } else if (op == 6) {
        const std::string borrower = "w" + std::to_string(rng() % 3);
        const bool ok = counter.RemoveBorrower(*id, BorrowerId(borrower)).ok();
        ASSERT_EQ(ok, live[*id].borrowers.contains(borrower)) << "seed " << seed;
        live[*id].borrowers.erase(borrower);
      } else if (op == 7) {
        const std::string borrower = "w" + std::to_string(rng() % 3);
        counter.RemoveBorrowerEverywhere(BorrowerId(borrower));
        for (auto& [oid, m] : live) m.borrowers.erase(borrower);
      } else if (op == 8) {  // an op on a freed id changes nothing
        if (!freed_ids.empty()) {
          auto it = freed_ids.begin();
          std::advance(it, rng() % freed_ids.size());
          ASSERT_EQ(counter.AddLocalReference(*it).code(), absl::StatusCode::kNotFound);
        }
      }
      settle();
      if (::testing::Test::HasFatalFailure()) return;
      ASSERT_EQ(counter.size(), live.size()) << "seed " << seed;
    }
    // Drop everything: every object is freed exactly once.
    for (auto& [tid, args] : running_tasks) ASSERT_TRUE(counter.RemoveSubmittedTaskReferences(args).ok());
    for (auto& [oid, m] : live) m.tasks.clear();
    for (const char* b : {"w0", "w1", "w2"}) counter.RemoveBorrowerEverywhere(BorrowerId(b));
    for (auto& [oid, m] : live) m.borrowers.clear();
    std::vector<std::pair<ObjectId, int64_t>> locals;
    for (auto& [oid, m] : live) locals.emplace_back(oid, m.local);
    for (auto& [oid, n] : locals) {
      for (int64_t i = 0; i < n; ++i) ASSERT_TRUE(counter.RemoveLocalReference(oid).ok());
      live[oid].local = 0;
    }
    settle();
    if (::testing::Test::HasFatalFailure()) return;
    ASSERT_EQ(counter.size(), 0u);
    ASSERT_TRUE(live.empty());
  }
}

}  // namespace
}  // namespace tessera
