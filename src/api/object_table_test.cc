#include "api/object_table.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>

namespace tessera::api {
namespace {

TEST(ObjectTableTest, PendingThenCompletedOnce) {
  ObjectTable table;
  const ObjectId id = ObjectId::FromRandom();
  table.AddPending(id);
  EXPECT_EQ(table.Get(id, absl::Now()).status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(table.Complete(id, std::string("v1")));
  EXPECT_FALSE(table.Complete(id, std::string("v2")));  // a duplicate is refused
  EXPECT_EQ(*table.Get(id, absl::InfiniteFuture()), "v1");
}

TEST(ObjectTableTest, GetWakesWhenAnotherThreadCompletes) {
  ObjectTable table;
  const ObjectId id = ObjectId::FromRandom();
  table.AddPending(id);
  std::thread t([&] { table.Complete(id, std::string("late")); });
  EXPECT_EQ(*table.Get(id, absl::Now() + absl::Seconds(60)), "late");
  t.join();
}

TEST(ObjectTableTest, ErrorsAndReleasedObjects) {
  ObjectTable table;
  const ObjectId id = ObjectId::FromRandom();
  table.AddPending(id);
  table.Complete(id, absl::UnknownError("boom"));
  EXPECT_EQ(table.Get(id, absl::InfiniteFuture()).status().message(), "boom");
  table.Release(id);
  EXPECT_EQ(table.Get(id, absl::InfiniteFuture()).status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(table.Complete(id, std::string("x")));  // unwanted now: dropped
  EXPECT_EQ(table.size(), 0u);
}

TEST(ObjectTableTest, WaitCountsDoneEntries) {
  ObjectTable table;
  const ObjectId a = ObjectId::FromRandom(), b = ObjectId::FromRandom();
  table.AddValue(a, "x");
  table.AddPending(b);
  EXPECT_EQ(table.Wait({a, b}, 1, absl::InfiniteFuture()), (std::vector<bool>{true, false}));
  EXPECT_EQ(table.Wait({a, b}, 2, absl::Now() + absl::Milliseconds(1)),
            (std::vector<bool>{true, false}));
  table.Complete(b, std::string("y"));
  EXPECT_EQ(table.Wait({a, b}, 2, absl::InfiniteFuture()), (std::vector<bool>{true, true}));
}

TEST(ObjectTableTest, WaitStopsAtTheFirstFailureWhenAsked) {
  ObjectTable table;
  const ObjectId slow = ObjectId::FromRandom(), failed = ObjectId::FromRandom();
  table.AddPending(slow);
  table.AddPending(failed);
  EXPECT_TRUE(table.Failure(failed).ok());  // pending: no failure yet
  std::thread t([&] { table.Complete(failed, absl::UnknownError("boom")); });
  // Waiting for both would wait forever for `slow`; the failure ends the wait.
  EXPECT_EQ(table.Wait({slow, failed}, 2, absl::InfiniteFuture(), /*stop_at_failure=*/true),
            (std::vector<bool>{false, true}));
  t.join();
  EXPECT_EQ(table.Failure(failed).message(), "boom");
  EXPECT_TRUE(table.Failure(slow).ok());
  // Without it, a failure is one more done entry.
  EXPECT_EQ(table.Wait({slow, failed}, 2, absl::Now() + absl::Milliseconds(1)),
            (std::vector<bool>{false, true}));
}

TEST(ObjectTableTest, OnReadyRunsOnceDone) {
  ObjectTable table;
  const ObjectId id = ObjectId::FromRandom();
  table.AddPending(id);
  std::string seen;
  table.OnReady(id, [&](const absl::StatusOr<std::string>& v) { seen = *v; });
  EXPECT_EQ(seen, "");
  table.Complete(id, std::string("now"));
  EXPECT_EQ(seen, "now");
  std::string again;
  table.OnReady(id, [&](const absl::StatusOr<std::string>& v) { again = *v; });
  EXPECT_EQ(again, "now");
}

TEST(ObjectTableTest, DropHookSeesReleasedValuesAndUnwantedResults) {
  std::vector<std::pair<ObjectId, std::string>> dropped;
  ObjectTable table(
      [&](const ObjectId& id, const std::string& value) { dropped.emplace_back(id, value); });
  const ObjectId put = ObjectId::FromRandom();
  table.AddValue(put, "stored-put");
  table.Release(put);
  const ObjectId pending = ObjectId::FromRandom();
  table.AddPending(pending);
  table.Release(pending);  // not done: nothing to drop yet
  EXPECT_TRUE(table.Complete(pending, std::string("late-result")));
  const ObjectId failed = ObjectId::FromRandom();
  table.AddPending(failed);
  table.Release(failed);
  EXPECT_TRUE(table.Complete(failed, absl::InternalError("boom")));  // an error holds nothing
  ASSERT_EQ(dropped.size(), 2u);
  EXPECT_EQ(dropped[0], std::make_pair(put, std::string("stored-put")));
  EXPECT_EQ(dropped[1], std::make_pair(pending, std::string("late-result")));
}

TEST(ObjectTableTest, AnEntryLivesWhileLocalReferencesOrBorrowersDo) {
  int drops = 0;
  ObjectTable table([&](const ObjectId&, const std::string&) { ++drops; });
  const ObjectId put = ObjectId::FromRandom();
  table.AddValue(put, "lent");
  ASSERT_TRUE(table.AddLocal(put));
  ASSERT_TRUE(table.AddLocal(put));
  EXPECT_TRUE(table.UpdateBorrows(put, "worker-a", +1));
  EXPECT_TRUE(table.UpdateBorrows(put, "worker-a", +1));
  EXPECT_TRUE(table.UpdateBorrows(put, "worker-b", +1));
  EXPECT_EQ(table.BorrowedCount(), 1u);
  table.Release(put);
  table.Release(put);  // no local reference left: the borrowers keep it
  EXPECT_EQ(*table.Get(put, absl::Now()), "lent");
  EXPECT_TRUE(table.UpdateBorrows(put, "worker-a", -2));
  EXPECT_EQ(table.Borrowers(put), (std::vector<std::pair<std::string, int64_t>>{{"worker-b", 1}}));
  EXPECT_EQ(drops, 0);
  EXPECT_TRUE(table.UpdateBorrows(put, "worker-b", -1));  // the last count: it goes
  EXPECT_EQ(drops, 1);
  EXPECT_EQ(table.BorrowedCount(), 0u);
  EXPECT_EQ(table.size(), 0u);
  EXPECT_FALSE(table.UpdateBorrows(put, "worker-b", +1));  // gone: a late count changes nothing
  EXPECT_FALSE(table.AddLocal(put));

  // A task's future result lent inside a value outlives the submitter's own reference.
  const ObjectId pending = ObjectId::FromRandom();
  table.AddPending(pending);
  ASSERT_TRUE(table.AddLocal(pending));
  EXPECT_TRUE(table.UpdateBorrows(pending, "worker-a", +1));
  table.Release(pending);
  EXPECT_TRUE(table.Complete(pending, std::string("later")));
  EXPECT_EQ(*table.Get(pending, absl::Now()), "later");
  EXPECT_TRUE(table.UpdateBorrows(pending, "worker-a", -1));
  EXPECT_EQ(drops, 2);

  // A borrower that is gone: its counts are forgotten, and what only it held goes.
  const ObjectId lent = ObjectId::FromRandom();
  table.AddValue(lent, "lent to a process that died");
  EXPECT_TRUE(table.UpdateBorrows(lent, "10.0.0.9:4000", +2));
  EXPECT_EQ(table.AllBorrowers(), std::vector<std::string>{"10.0.0.9:4000"});
  table.DropBorrower("10.0.0.9:4000");
  EXPECT_EQ(drops, 3);
  EXPECT_EQ(table.BorrowedCount(), 0u);
  EXPECT_TRUE(table.AllBorrowers().empty());
}

// A stand-in for the references a value keeps: counts how many live.
class CountedReference final : public internal::LocalReference {
 public:
  explicit CountedReference(int* live) : live_(live) { ++*live_; }
  ~CountedReference() override { --*live_; }

 private:
  int* live_;
};

TEST(ObjectTableTest, AValueKeepsTheReferencesInsideItUntilItGoes) {
  int live = 0;
  ObjectTable table(nullptr, [&](const std::string& value) {
    ObjectTable::Holds holds;
    if (value == "with-refs") {
      holds.push_back(std::make_shared<CountedReference>(&live));
      holds.push_back(std::make_shared<CountedReference>(&live));
    }
    return holds;
  });
  const ObjectId put = ObjectId::FromRandom();
  table.AddValue(put, "with-refs");
  EXPECT_EQ(live, 2);
  table.Release(put);
  EXPECT_EQ(live, 0);

  const ObjectId result = ObjectId::FromRandom();
  table.AddPending(result);
  ASSERT_TRUE(table.AddLocal(result));
  EXPECT_TRUE(table.Complete(result, std::string("with-refs")));
  EXPECT_EQ(live, 2);
  // A second result for the same object is refused: what it lent goes back at once.
  EXPECT_FALSE(table.Complete(result, std::string("with-refs")));
  EXPECT_EQ(live, 2);
  table.Release(result);
  EXPECT_EQ(live, 0);
  // A result nobody wants any more holds nothing either.
  EXPECT_TRUE(table.Complete(ObjectId::FromRandom(), std::string("with-refs")));
  EXPECT_EQ(live, 0);
}

}  // namespace
}  // namespace tessera::api
