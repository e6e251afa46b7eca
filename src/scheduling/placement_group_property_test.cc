// Placement-group property test: random clusters x create / remove / fail-node / add-node
// events from fixed seeds. After every event: nothing is over-allocated (per node and per device
// instance), what the groups hold is exactly what the cluster holds, no bundle is split across
// nodes, STRICT groups keep their shape, removals return exactly what was taken, and the same
// seed gives the same decisions.
#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "scheduling/placement_group_scheduler.h"
#include "scheduling/scheduling_test_util.h"

namespace tessera {
namespace {

using testing_util::FullyLinked;
using testing_util::Res;
using testing_util::Spec;
using testing_util::TwoIslands;
using testing_util::ViewDigest;

constexpr int kSeeds = 200;
constexpr int kEventsPerSeed = 50;

NodeSpec RandomNode(std::mt19937& rng, int serial) {
  const std::string id = "n" + std::to_string(serial);
  const std::string cpu = "CPU=" + std::to_string(1 + rng() % 16);
  LabelSet labels = {{"zone", "z" + std::to_string(rng() % 3)}};
  switch (rng() % 4) {
    case 0: return Spec(id, cpu, labels);
    case 1: return Spec(id, cpu + ",GPU=8", labels, FullyLinked(8));
    case 2: return Spec(id, cpu + ",GPU=8", labels, TwoIslands());
    default: return Spec(id, cpu + ",GPU=2", labels);
  }
}

PlacementGroupSpec RandomGroup(std::mt19937& rng) {
  static const char* kBundles[] = {"CPU=1", "CPU=2,GPU=1", "GPU=0.5",  "GPU=2",
                                   "GPU=4", "CPU=4",       "GPU=0.25", "CPU=1,GPU=8"};
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

// A cluster and scheduler after a seed's events, with what is needed to register the same nodes
// again (a restarted head's view): every node in registration order, and those that failed.
struct History {
  ClusterView cluster;
  PlacementGroupScheduler pgs{&cluster};
  std::vector<NodeSpec> nodes;
  std::vector<NodeId> failed;
};

std::string RunSeed(uint32_t seed, History& history) {
  std::mt19937 rng(seed);
  ClusterView& cluster = history.cluster;
  PlacementGroupScheduler& pgs = history.pgs;
  auto add = [&](NodeSpec spec) {
    history.nodes.push_back(spec);
    return cluster.AddNode(std::move(spec)).ok();
  };
  int serial = 0;
  const int initial = 2 + static_cast<int>(rng() % 6);
  for (; serial < initial; ++serial) EXPECT_TRUE(add(RandomNode(rng, serial)));
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
      EXPECT_TRUE(add(RandomNode(rng, serial)));
      trace << "add n" << serial++;
      for (const RescheduleReport& r : pgs.OnClusterChanged()) {
        trace << " " << r.id << (r.placed ? " placed" : " waits");
      }
    } else {
      const NodeId victim("n" + std::to_string(rng() % serial));
      absl::StatusOr<std::vector<Allocation>> lost = cluster.FailNode(victim);
      if (lost.ok()) {
        history.failed.push_back(victim);
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
    History one, two;
    const std::string first = RunSeed(seed, one);
    if (::testing::Test::HasFailure()) return;
    EXPECT_EQ(first, RunSeed(seed, two));
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

// Each group as the head shows it, by name (or "pg-<id>" for an anonymous one): strategy,
// option, state, and each bundle's node, resources and device instances (not the view's
// allocation ids).
std::string GroupsDigest(const PlacementGroupScheduler& pgs) {
  std::map<std::string, std::string> by_name;
  for (const auto& [id, g] : pgs.groups()) {
    std::ostringstream out;
    out << PlacementStrategyName(g.spec.strategy) << " opt " << g.option << " "
        << PlacementGroupStateName(g.state);
    for (const auto& b : g.bundles) {
      if (!b) {
        out << " -";
        continue;
      }
      out << " " << b->node << ":" << b->allocation.resources.ToString();
      for (const DeviceGrant& d : b->allocation.devices) {
        for (size_t i = 0; i < d.instances.size(); ++i) {
          out << "/" << d.resource << d.instances[i] << "=" << d.amounts[i];
        }
      }
    }
    by_name[g.spec.name.empty() ? "pg-" + std::to_string(id) : g.spec.name] = out.str();
  }
  std::ostringstream out;
  for (const auto& [name, text] : by_name) out << name << ": " << text << "\n";
  return out.str();
}

// A restarted head: the same nodes register with a fresh view (the failed ones register and die
// again) and every group of `before` is restored, in `order` of its groups, named "pg-<old id>".
struct Restarted {
  ClusterView cluster;
  PlacementGroupScheduler pgs{&cluster};
};
void Restart(const History& before, const std::vector<size_t>& order, Restarted& after) {
  for (const NodeSpec& spec : before.nodes) ASSERT_TRUE(after.cluster.AddNode(spec).ok());
  for (const NodeId& id : before.failed) ASSERT_TRUE(after.cluster.FailNode(id).ok());
  std::vector<const PlacementGroup*> groups;
  for (const auto& [id, g] : before.pgs.groups()) groups.push_back(&g);
  for (size_t i : order) {
    const PlacementGroup& g = *groups[i];
    PlacementGroupSpec spec = g.spec;
    spec.name = "pg-" + std::to_string(g.id.value());
    std::vector<RestoredBundle> bundles;
    for (const auto& b : g.bundles) {
      bundles.push_back(b ? RestoredBundle{b->node, b->allocation.resources, b->allocation.devices}
                          : RestoredBundle{});
    }
    absl::StatusOr<PlacementGroupRestoreResult> r = after.pgs.Restore(spec, g.option, bundles);
    ASSERT_TRUE(r.ok()) << r.status();
    // Every held bundle is on a live node of the new view, with its instances free there.
    ASSERT_THAT(r->refused, ::testing::IsEmpty()) << r->explanation;
    ASSERT_EQ(r->state, g.state);
  }
}

// Random histories, then a restart restoring every group from what the first scheduler holds:
// in a shuffled order, the view and the groups equal the originals and the invariants hold; in
// id order, the restored scheduler then goes on exactly as the original (the same re-placements
// once a node is added).
TEST(PlacementGroupPropertyTest, RestoringEveryGroupIntoAFreshViewReproducesIt) {
  size_t restored = 0, waiting = 0;
  for (uint32_t seed = 1; seed <= kSeeds; ++seed) {
    SCOPED_TRACE(::testing::Message() << "seed " << seed);
    History before;
    (void)RunSeed(seed, before);
    if (::testing::Test::HasFailure()) return;
    for (const auto& [id, g] : before.pgs.groups()) {
      ++restored;
      waiting += g.state == PlacementGroupState::kRescheduling ? 1 : 0;
    }
    std::vector<size_t> order(before.pgs.groups().size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    Restarted in_order;
    Restart(before, order, in_order);
    std::shuffle(order.begin(), order.end(), std::mt19937(seed));
    Restarted shuffled;
    Restart(before, order, shuffled);
    if (::testing::Test::HasFatalFailure()) return;
    const std::string groups = GroupsDigest(before.pgs);
    const std::string view = ViewDigest(before.cluster);
    for (const Restarted* after : {&in_order, &shuffled}) {
      ASSERT_EQ(GroupsDigest(after->pgs), groups);
      ASSERT_EQ(ViewDigest(after->cluster), view);
      CheckInvariants(after->cluster, after->pgs);
    }
    // A node joins both clusters: both schedulers retry their waiting groups alike.
    const NodeSpec extra = Spec("extra", "CPU=16,GPU=8", {{"zone", "z0"}}, FullyLinked(8));
    ASSERT_TRUE(before.cluster.AddNode(extra).ok());
    ASSERT_TRUE(in_order.cluster.AddNode(extra).ok());
    (void)before.pgs.OnClusterChanged();
    (void)in_order.pgs.OnClusterChanged();
    ASSERT_EQ(GroupsDigest(in_order.pgs), GroupsDigest(before.pgs));
    ASSERT_EQ(ViewDigest(in_order.cluster), ViewDigest(before.cluster));
    CheckInvariants(in_order.cluster, in_order.pgs);
  }
  EXPECT_GT(restored, 400u);
  EXPECT_GT(waiting, 10u);  // RESCHEDULING groups, restored with bundles that have no node
}

}  // namespace
}  // namespace tessera
