// Placement groups against an exhaustive solver: on random small clusters, some of their
// resources already taken, a random group (1 to 5 bundles, selectors, any strategy) is placed by
// PlacementGroupScheduler::Create exactly when some assignment of bundles to nodes exists, as
// the solver finds by trying every one; the placement it returns is one the solver accepts; and
// a group that is not placed is INFEASIBLE exactly when no assignment exists on the idle
// cluster. The solver knows the placement rules, not the scheduler's code: per node, the sum of
// the bundles' plain resources within what is free, and whole devices and fractions fitted
// device by device (a whole device needs a free one, a fraction one with that much left).
#include <algorithm>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "scheduling/bundle_search.h"
#include "scheduling/placement_group_scheduler.h"
#include "scheduling/scheduling_test_util.h"

namespace tessera {
namespace {

using testing_util::FullyLinked;
using testing_util::Res;
using testing_util::Spec;
using testing_util::ViewDigest;

constexpr int kSeeds = 2000;

// What the solver knows of a node: its labels, its free plain resources and its free amount per
// device, either as it is now or as it would be idle.
struct NodeFacts {
  std::string id;
  LabelSet labels;
  ResourceSet free;           // every resource; device resources are checked per device below
  std::vector<Quantity> gpu;  // free amount of each GPU
};

std::vector<NodeFacts> Facts(const ClusterView& cluster, bool idle) {
  std::vector<NodeFacts> out;
  for (NodeIndex n = 0; n < cluster.slot_count(); ++n) {
    const NodeRecord& r = cluster.node(n);
    NodeFacts f{r.id.value(), r.labels, idle ? r.total : r.available, {}};
    if (const DeviceInstances* d = r.FindDevices("GPU")) {
      f.gpu =
          idle ? std::vector<Quantity>(d->available.size(), Quantity::FromInt(1)) : d->available;
    }
    out.push_back(std::move(f));
  }
  return out;
}

// Whether the GPU demands (whole counts and fractions) fit the free amounts, trying every way.
bool GpusFit(std::vector<Quantity> free, std::vector<Quantity> demands) {
  if (demands.empty()) return true;
  const Quantity q = demands.back();
  demands.pop_back();
  if (q.IsInteger()) {
    // k whole devices: choose k fully free ones (which ones does not matter: all are alike).
    int64_t k = q.WholePart();
    for (Quantity& f : free) {
      if (k > 0 && f == Quantity::FromInt(1)) {
        f = Quantity();
        --k;
      }
    }
    return k == 0 && GpusFit(free, demands);
  }
  for (size_t i = 0; i < free.size(); ++i) {
    if (free[i] < q) continue;
    std::vector<Quantity> after = free;
    after[i] = *Quantity::CheckedSub(after[i], q);
    if (GpusFit(after, demands)) return true;
  }
  return false;
}

bool NodeHolds(const NodeFacts& node, const BundleOption& option, const std::vector<int>& bundles) {
  ResourceSet sum;
  std::vector<Quantity> gpus;
  for (int b : bundles) {
    if (!BundleSelector(option, b).Matches(node.labels)) return false;
    sum = *sum.Plus(option.bundles[b]);
    const Quantity g = option.bundles[b].Get("GPU");
    if (!g.IsZero()) gpus.push_back(g);
  }
  if (!node.free.Contains(sum)) return false;
  // Whole devices first: then every choice of free whole devices is as good as another.
  std::sort(gpus.begin(), gpus.end(),
            [](Quantity a, Quantity b) { return a.IsInteger() < b.IsInteger(); });
  return GpusFit(node.gpu, gpus);
}

bool Valid(const std::vector<NodeFacts>& nodes, const BundleOption& option,
           PlacementStrategy strategy, const std::vector<int>& assignment) {
  const std::set<int> distinct(assignment.begin(), assignment.end());
  if (strategy == PlacementStrategy::kStrictPack && distinct.size() != 1) return false;
  if (strategy == PlacementStrategy::kStrictSpread && distinct.size() != assignment.size()) {
    return false;
  }
  std::map<int, std::vector<int>> by_node;
  for (size_t b = 0; b < assignment.size(); ++b)
    by_node[assignment[b]].push_back(static_cast<int>(b));
  for (const auto& [n, bundles] : by_node) {
    if (!NodeHolds(nodes[n], option, bundles)) return false;
  }
  return true;
}

bool AnyAssignment(const std::vector<NodeFacts>& nodes, const BundleOption& option,
                   PlacementStrategy strategy) {
  const size_t count = option.bundles.size();
  std::vector<int> assignment(count, 0);
  while (true) {
    if (Valid(nodes, option, strategy, assignment)) return true;
    size_t i = 0;
    while (i < count && ++assignment[i] == static_cast<int>(nodes.size())) assignment[i++] = 0;
    if (i == count) return false;
  }
}

void AddRandomNodes(std::mt19937& rng, ClusterView& cluster) {
  const int count = 2 + static_cast<int>(rng() % 4);
  for (int i = 0; i < count; ++i) {
    const std::string cpu = "CPU=" + std::to_string(1 + rng() % 4);
    LabelSet labels = {{"zone", rng() % 2 == 0 ? "a" : "b"},
                       {"rack", "r" + std::to_string(rng() % 2)}};
    const int gpus = static_cast<int>(rng() % 3);
    if (gpus == 0) {
      testing_util::MustAdd(cluster, Spec("n" + std::to_string(i), cpu, labels));
    } else {
      testing_util::MustAdd(
          cluster, Spec("n" + std::to_string(i), cpu + ",GPU=" + std::to_string(gpus), labels,
                        FullyLinked(gpus)));
    }
  }
}

// Some of the cluster already taken by tasks.
void TakeSome(std::mt19937& rng, ClusterView& cluster) {
  static const char* kTasks[] = {"CPU=1", "GPU=0.5", "GPU=1", "CPU=1,GPU=0.25", "GPU=0.75"};
  const int tasks = static_cast<int>(rng() % 7);
  for (int t = 0; t < tasks; ++t) {
    (void)cluster.Allocate(static_cast<NodeIndex>(rng() % cluster.slot_count()),
                           Res(kTasks[rng() % std::size(kTasks)]));
  }
}

PlacementGroupSpec RandomGroup(std::mt19937& rng) {
  static const char* kBundles[] = {"CPU=1",    "CPU=2",       "GPU=1", "GPU=0.5",
                                   "GPU=0.25", "CPU=1,GPU=1", "GPU=2"};
  static const char* kSelectors[] = {"", "", "zone=a", "zone=b", "rack=r0", "zone=a,rack=r1"};
  static const PlacementStrategy kStrategies[] = {
      PlacementStrategy::kPack, PlacementStrategy::kSpread, PlacementStrategy::kStrictPack,
      PlacementStrategy::kStrictSpread};
  PlacementGroupSpec spec;
  spec.strategy = kStrategies[rng() % 4];
  const int n = 1 + static_cast<int>(rng() % 5);
  const bool selected = rng() % 2 == 0;
  for (int i = 0; i < n; ++i) {
    spec.primary.bundles.push_back(Res(kBundles[rng() % std::size(kBundles)]));
    if (selected) {
      spec.primary.selectors.push_back(
          *ParseLabelSelector(kSelectors[rng() % std::size(kSelectors)]));
    }
  }
  return spec;
}

TEST(BundleSearchPropertyTest, PlacedExactlyWhenTheExhaustiveSolverFindsAnAssignment) {
  int placed = 0, pending = 0, infeasible = 0;
  for (int seed = 0; seed < kSeeds; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937 rng(seed);
    ClusterView cluster;
    AddRandomNodes(rng, cluster);
    TakeSome(rng, cluster);
    const PlacementGroupSpec spec = RandomGroup(rng);
    const std::vector<NodeFacts> now = Facts(cluster, /*idle=*/false);
    const std::vector<NodeFacts> idle = Facts(cluster, /*idle=*/true);
    const std::string before = ViewDigest(cluster);
    const bool exists = AnyAssignment(now, spec.primary, spec.strategy);
    const bool ever = AnyAssignment(idle, spec.primary, spec.strategy);

    PlacementGroupScheduler pgs(&cluster);
    absl::StatusOr<PlacementGroupResult> r = pgs.Create(spec);
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_EQ(r->status == ScheduleStatus::kPlaced, exists)
        << PlacementStrategyName(spec.strategy) << ": " << r->explanation << "\n"
        << before;
    if (exists) {
      ++placed;
      std::vector<int> assignment;
      for (const BundlePlacement& b : r->bundles) assignment.push_back(*cluster.Find(b.node));
      EXPECT_TRUE(Valid(now, spec.primary, spec.strategy, assignment));
      continue;
    }
    EXPECT_EQ(ViewDigest(cluster), before) << "a group that is not placed holds nothing";
    EXPECT_EQ(r->status == ScheduleStatus::kInfeasible, !ever) << r->explanation;
    EXPECT_FALSE(r->explanation.empty());
    (ever ? pending : infeasible) += 1;
  }
  // The seeds reach every outcome.
  EXPECT_GT(placed, kSeeds / 10);
  EXPECT_GT(pending, kSeeds / 20);
  EXPECT_GT(infeasible, kSeeds / 20);
}

}  // namespace
}  // namespace tessera
