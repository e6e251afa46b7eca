// Placement-group property test: random clusters x create / remove / fail-node / add-node
// events from fixed seeds. After every event: nothing is over-allocated (per node and per device
// instance), what the groups hold is exactly what the cluster holds, no bundle is split across
// nodes, STRICT groups keep their shape, removals return exactly what was taken, and the same
// seed gives the same decisions.
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "scheduling/placement_group_scheduler.h"
#include "scheduling/scheduling_test_util.h"

namespace tessera {
namespace {

using testing_util::FullyLinked;
using testing_util::Res;
using testing_util::Spec;
using testing_util::TwoIslands;

constexpr int kSeeds = 200;
constexpr int kEventsPerSeed = 50;

NodeSpec RandomNode(std::mt19937& rng, int serial) {
  const std::string id = "n" + std::to_string(serial);
  const std::string cpu = "CPU=" + std::to_string(1 + rng() % 16);
  LabelSet labels = {{"zone", "z" + std::to_string(rng() % 3)}};
  switch (rng() % 4) {
    case 0:
      return Spec(id, cpu, labels);
    case 1:
      return Spec(id, cpu + ",GPU=8", labels, FullyLinked(8));
    case 2:
      return Spec(id, cpu + ",GPU=8", labels, TwoIslands());
    default:
      return Spec(id, cpu + ",GPU=2", labels);
  }
}

PlacementGroupSpec RandomGroup(std::mt19937& rng) {
  static const char* kBundles[] = {"CPU=1",   "CPU=2,GPU=1", "GPU=0.5", "GPU=2",
                                   "GPU=4",   "CPU=4",       "GPU=0.25", "CPU=1,GPU=8"};
  static const PlacementStrategy kStrategies[] = {
      PlacementStrategy::kPack, PlacementStrategy::kSpread, PlacementStrategy::kStrictPack,
      PlacementStrategy::kStrictSpread};
  PlacementGroupSpec spec;
  spec.strategy = kStrategies[rng() % 4];
  auto option = [&] {
    BundleOption o;
    const int n = 1 + static_cast<int>(rng() % 5);
    const bool zoned = rng() % 3 == 0;
    for (int i = 0; i < n; ++i) {
      o.bundles.push_back(Res(kBundles[rng() % std::size(kBundles)]));
      if (zoned) o.selectors.push_back(*ParseLabelSelector("zone=z" + std::to_string(rng() % 3)));
    }
    return o;
  };
  spec.primary = option();
  if (rng() % 3 == 0) spec.fallbacks.push_back(option());
  return spec;
}

// What the groups hold must be exactly what the cluster holds, and never more than the totals.
void CheckInvariants(const ClusterView& cluster, const PlacementGroupScheduler& pgs) {
  std::map<std::string, ResourceSet> used;
  std::map<std::pair<std::string, std::string>, std::vector<int64_t>> device_used;
  for (const auto& [id, g] : pgs.groups()) {
    const BundleOption& option = *OptionsInOrder(g.spec)[g.option];
    std::set<std::string> nodes;
    size_t placed = 0;
    for (size_t b = 0; b < g.bundles.size(); ++b) {
      if (!g.bundles[b]) continue;
      ++placed;
      const Allocation& a = g.bundles[b]->allocation;
      // One allocation on one node with the bundle's whole demand: never split.
      ASSERT_EQ(a.node, g.bundles[b]->node);
      ASSERT_EQ(a.resources, option.bundles[b]);
      const Allocation* held = cluster.FindAllocation(a.id);
      ASSERT_NE(held, nullptr) << "group " << id << " bundle " << b << " is not held";
      ASSERT_EQ(*held, a);
      nodes.insert(a.node.value());
      used[a.node.value()] = *used[a.node.value()].Plus(a.resources);
      for (const DeviceGrant& d : a.devices) {
        auto& per = device_used[{a.node.value(), d.resource}];
        for (size_t i = 0; i < d.instances.size(); ++i) {
          if (per.size() <= static_cast<size_t>(d.instances[i])) per.resize(d.instances[i] + 1);
          per[d.instances[i]] += d.amounts[i].raw();
        }
      }
    }
    if (g.state == PlacementGroupState::kCreated) {
      ASSERT_EQ(placed, g.bundles.size()) << "group " << id;
      if (g.spec.strategy == PlacementStrategy::kStrictPack) {
        ASSERT_EQ(nodes.size(), 1u);
      }
      if (g.spec.strategy == PlacementStrategy::kStrictSpread) {
        ASSERT_EQ(nodes.size(), placed);
      }
    }
  }
  for (NodeIndex n = 0; n < cluster.slot_count(); ++n) {
    const NodeRecord& record = cluster.node(n);
    if (record.removed || record.state == NodeState::kDead) continue;
    absl::StatusOr<ResourceSet> expected = record.total.Minus(used[record.id.value()]);
    ASSERT_TRUE(expected.ok()) << "over-allocated " << record.id;
    ASSERT_EQ(record.available, *expected) << record.id;
    for (const DeviceInstances& d : record.devices) {
      const auto& per = device_used[{record.id.value(), d.resource}];
      for (size_t i = 0; i < d.available.size(); ++i) {
        const int64_t taken = i < per.size() ? per[i] : 0;
        ASSERT_LE(taken, Quantity::kScale);
        ASSERT_EQ(d.available[i].raw(), Quantity::kScale - taken) << record.id << " " << i;
      }
    }
  }
}

std::string RunSeed(uint32_t seed) {
  std::mt19937 rng(seed);
  ClusterView cluster;
  int serial = 0;
  const int initial = 2 + static_cast<int>(rng() % 6);
  for (; serial < initial; ++serial) EXPECT_TRUE(cluster.AddNode(RandomNode(rng, serial)).ok());
  PlacementGroupScheduler pgs(&cluster);
  std::ostringstream trace;
  for (int event = 0; event < kEventsPerSeed; ++event) {
    const int kind = static_cast<int>(rng() % 10);
    if (kind < 5) {
      absl::StatusOr<PlacementGroupResult> r = pgs.Create(RandomGroup(rng));
      EXPECT_TRUE(r.ok()) << r.status();
      if (!r.ok()) continue;
      trace << "create " << ScheduleStatusName(r->status) << " opt " << r->option;
      for (const BundlePlacement& b : r->bundles) {
        trace << " " << b.node;
        for (const DeviceGrant& g : b.allocation.devices) {
          for (int i : g.instances) trace << "/" << g.resource << i;
        }
      }
      if (!r->explanation.empty()) trace << " " << r->explanation;
    } else if (kind < 8 && !pgs.groups().empty()) {
      auto it = pgs.groups().begin();
      std::advance(it, rng() % pgs.groups().size());
      std::vector<Allocation> expected;
      for (const auto& b : it->second.bundles) {
        if (b) expected.push_back(b->allocation);
      }
      const PlacementGroupId id = it->second.id;
      absl::StatusOr<std::vector<Allocation>> back = pgs.Remove(id);
      EXPECT_TRUE(back.ok()) << back.status();
      if (back.ok()) {
        EXPECT_EQ(*back, expected);  // exactly what was taken
      }
      trace << "remove " << id;
    } else if (kind == 8) {
      EXPECT_TRUE(cluster.AddNode(RandomNode(rng, serial)).ok());
      trace << "add n" << serial++;
      for (const RescheduleReport& r : pgs.OnClusterChanged()) {
        trace << " " << r.id << (r.placed ? " placed" : " waits");
      }
    } else {
      const NodeId victim("n" + std::to_string(rng() % serial));
      absl::StatusOr<std::vector<Allocation>> lost = cluster.FailNode(victim);
      if (lost.ok()) {
        trace << "fail " << victim << " lost " << lost->size();
        for (const RescheduleReport& r : pgs.OnNodeFailed(victim, *lost)) {
          trace << " " << r.id << (r.placed ? " placed" : " waits: " + r.explanation);
        }
      }
    }
    trace << "\n";
    CheckInvariants(cluster, pgs);
    if (::testing::Test::HasFatalFailure()) break;
  }
  return trace.str();
}

TEST(PlacementGroupPropertyTest, InvariantsHoldAndDecisionsRepeat) {
  size_t created = 0, removed = 0, failed = 0, replaced = 0;
  for (uint32_t seed = 1; seed <= kSeeds; ++seed) {
    SCOPED_TRACE(::testing::Message() << "seed " << seed);
    const std::string first = RunSeed(seed);
    if (::testing::Test::HasFailure()) return;
    EXPECT_EQ(first, RunSeed(seed));
    auto count = [&](std::string_view word) {
      size_t n = 0;
      for (size_t at = 0; (at = first.find(word, at)) != std::string::npos; ++at) ++n;
      return n;
    };
    created += count("create PLACED");
    removed += count("remove ");
    failed += count("fail ");
    replaced += count(" placed");
  }
  EXPECT_GT(created, 1000u);
  EXPECT_GT(removed, 500u);
  EXPECT_GT(failed, 100u);
  EXPECT_GT(replaced, 20u);
}

}  // namespace
}  // namespace tessera
