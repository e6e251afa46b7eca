// BundleSearch on its own: the step budget, and what it holds when it stops.
#include "scheduling/bundle_search.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "scheduling/scheduling_test_util.h"

namespace tessera {
namespace {

using testing_util::FullyLinked;
using testing_util::MustAdd;
using testing_util::Res;
using testing_util::Spec;
using testing_util::ViewDigest;

// Searches `count` bundles of `demand` each, all still to place, with the given strategy.
BundleSearchResult SearchAlike(ClusterView& cluster, int count, const char* demand,
                               PlacementStrategy strategy) {
  BundleOption option;
  option.bundles.assign(count, Res(demand));
  BundleSearchRequest request;
  request.option = &option;
  request.strategy = strategy;
  for (int i = 0; i < count; ++i) request.todo.push_back(i);
  return SearchBundles(cluster, request);
}

// Two three-CPU nodes, three two-CPU bundles: 6 CPUs free for 6 asked, but one bundle per
// node; no assignment, found only by trying them.
TEST(BundleSearchTest, StopsAtItsStepBudgetHoldingNothing) {
  ClusterView cluster;
  MustAdd(cluster, Spec("n0", "CPU=3"));
  MustAdd(cluster, Spec("n1", "CPU=3"));
  BundleOption option;
  option.bundles = {Res("CPU=2"), Res("CPU=2"), Res("CPU=2")};
  BundleSearchRequest request;
  request.option = &option;
  request.strategy = PlacementStrategy::kSpread;
  request.todo = {0, 1, 2};
  const std::string before = ViewDigest(cluster);

  request.max_steps = 1;
  BundleSearchResult stopped = SearchBundles(cluster, request);
  EXPECT_EQ(stopped.outcome, SearchOutcome::kGaveUp);
  EXPECT_TRUE(stopped.taken.empty());
  EXPECT_EQ(ViewDigest(cluster), before);

  request.max_steps = kMaxSearchSteps;
  BundleSearchResult none = SearchBundles(cluster, request);
  EXPECT_EQ(none.outcome, SearchOutcome::kNone);
  EXPECT_GT(none.steps, 1);
  EXPECT_EQ(ViewDigest(cluster), before);
}

// Identical bundles are tried in one order only: five CPU=2 bundles on four CPU=3 nodes (room
// for 12 CPUs, but one bundle per node) fail after a handful of allocations, not after the 4!
// orders of the first four that a plain backtracking tries.
TEST(BundleSearchTest, IdenticalBundlesAreNotPermuted) {
  ClusterView cluster;
  for (int i = 0; i < 4; ++i) MustAdd(cluster, Spec("n" + std::to_string(i), "CPU=3"));
  BundleSearchResult result = SearchAlike(cluster, 5, "CPU=2", PlacementStrategy::kPack);
  EXPECT_EQ(result.outcome, SearchOutcome::kNone);
  EXPECT_LE(result.steps, 16);  // 15; a plain backtracking tries 64
}

// More demanded than the candidate nodes have free in all: no allocation is tried.
TEST(BundleSearchTest, ADemandBeyondTheCandidatesFreeSumTriesNothing) {
  ClusterView cluster;
  for (int i = 0; i < 4; ++i) {
    MustAdd(cluster, Spec("n" + std::to_string(i), "CPU=1,GPU=1", {}, FullyLinked(1)));
  }
  BundleSearchResult result = SearchAlike(cluster, 5, "GPU=1", PlacementStrategy::kSpread);
  EXPECT_EQ(result.outcome, SearchOutcome::kNone);
  EXPECT_EQ(result.steps, 0);
}

TEST(BundleSearchTest, IdleFeasibilityIgnoresWhatIsTakenNow) {
  ClusterView cluster;
  MustAdd(cluster, Spec("n0", "CPU=2", {{"zone", "a"}}));
  ASSERT_TRUE(cluster.Allocate(0, Res("CPU=2")).ok());
  BundleOption option;
  option.bundles = {Res("CPU=1"), Res("CPU=1")};
  option.selectors.assign(2, *ParseLabelSelector("zone=a"));
  BundleSearchRequest request;
  request.option = &option;
  request.strategy = PlacementStrategy::kPack;
  request.todo = {0, 1};
  EXPECT_EQ(SearchBundles(cluster, request).outcome, SearchOutcome::kNone);
  EXPECT_EQ(CheckIdleFeasibility(cluster, request).outcome, SearchOutcome::kFound);
  request.strategy = PlacementStrategy::kStrictSpread;
  IdleFeasibility spread = CheckIdleFeasibility(cluster, request);
  EXPECT_EQ(spread.outcome, SearchOutcome::kNone);
  EXPECT_EQ(spread.why,
            "STRICT_SPREAD: bundles 0, 1 (CPU=1 with selector zone=a) need 2 nodes; only 1 can "
            "hold any of them (n0)");
}

}  // namespace
}  // namespace tessera
