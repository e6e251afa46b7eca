// Property tests: random clusters and event sequences from fixed seeds. Invariants checked after
// every event: nothing is over-allocated (per node and per device instance), availability equals
// totals minus what is held, releases return exactly what was taken, and the same seed gives
// the same decisions.
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "scheduling/scheduling_test_util.h"
#include "scheduling/task_scheduler.h"

namespace tessera {
namespace {

using testing_util::FullyLinked;
using testing_util::Res;
using testing_util::Spec;
using testing_util::TwoIslands;

constexpr int kSeeds = 300;
constexpr int kEventsPerSeed = 60;

NodeSpec RandomNode(std::mt19937& rng, int serial) {
  const int cpus = 1 + static_cast<int>(rng() % 16);
  const int shape = static_cast<int>(rng() % 4);
  LabelSet labels = {{"zone", "z" + std::to_string(rng() % 3)}};
  const std::string id = "n" + std::to_string(serial);
  const std::string cpu = "CPU=" + std::to_string(cpus);
  if (shape == 0) return Spec(id, cpu, labels);
  if (shape == 1) return Spec(id, cpu + ",GPU=8", labels, FullyLinked(8));
  if (shape == 2) return Spec(id, cpu + ",GPU=8", labels, TwoIslands());
  return Spec(id, cpu + ",GPU=2", labels);  // unlinked devices
}

SchedulingRequest RandomRequest(std::mt19937& rng, int64_t id) {
  static const char* kDemands[] = {"CPU=1",          "CPU=0.5", "CPU=2,GPU=1", "GPU=0.5",
                                   "GPU=0.25",       "GPU=2",   "GPU=4",       "CPU=3,GPU=8",
                                   "CPU=1,GPU=0.75", "GPU=3",   "CPU=20"};
  SchedulingRequest r;
  r.id = RequestId(id);
  r.resources = Res(kDemands[rng() % std::size(kDemands)]);
  r.strategy = rng() % 2 ? NodeRanking::kSpread : NodeRanking::kDefault;
  if (rng() % 3 == 0) {
    std::vector<LabelSelector> options = {*ParseLabelSelector("zone=z" + std::to_string(rng() % 4)),
                                          *ParseLabelSelector("zone=in(z0,z1)")};
    r.selectors = FallbackList::FromSelectors(std::move(options));
  }
  if (rng() % 5 == 0) r.local_node = NodeId("n" + std::to_string(rng() % 8));
  if (rng() % 7 == 0) {
    r.affinity = NodeAffinity{NodeId("n" + std::to_string(rng() % 8)),
                              rng() % 2 ? AffinityKind::kHard : AffinityKind::kSoft};
  }
  return r;
}

// Availability must equal totals minus the held allocations, per node and per device.
void CheckInvariants(const ClusterView& cluster, const std::map<int64_t, Allocation>& held) {
  std::map<std::string, ResourceSet> used;
  std::map<std::pair<std::string, std::string>, std::vector<int64_t>> device_used;
  for (const auto& [id, a] : held) {
    used[a.node.value()] = *used[a.node.value()].Plus(a.resources);
    for (const DeviceGrant& g : a.devices) {
      auto& per = device_used[{a.node.value(), g.resource}];
      for (size_t i = 0; i < g.instances.size(); ++i) {
        if (per.size() <= static_cast<size_t>(g.instances[i])) per.resize(g.instances[i] + 1);
        per[g.instances[i]] += g.amounts[i].raw();
      }
    }
  }
  for (NodeIndex n = 0; n < cluster.slot_count(); ++n) {
    const NodeRecord& record = cluster.node(n);
    if (record.removed || record.state == NodeState::kDead) continue;
    absl::StatusOr<ResourceSet> expected = record.total.Minus(used[record.id.value()]);
    ASSERT_TRUE(expected.ok()) << "over-allocated " << record.id << ": " << expected.status();
    ASSERT_EQ(record.available, *expected) << record.id;
    for (const DeviceInstances& d : record.devices) {
      const auto& per = device_used[{record.id.value(), d.resource}];
      for (size_t i = 0; i < d.available.size(); ++i) {
        const int64_t taken = i < per.size() ? per[i] : 0;
        ASSERT_LE(taken, Quantity::kScale) << record.id << " " << d.resource << " " << i;
        ASSERT_EQ(d.available[i].raw(), Quantity::kScale - taken) << record.id << " " << i;
      }
    }
  }
}

// Runs one seed; returns the decision trace.
std::string RunSeed(uint32_t seed) {
  std::mt19937 rng(seed);
  ClusterView cluster;
  int serial = 0;
  const int initial = 1 + static_cast<int>(rng() % 6);
  for (; serial < initial; ++serial) EXPECT_TRUE(cluster.AddNode(RandomNode(rng, serial)).ok());
  TaskScheduler scheduler(&cluster, SchedulerOptions{.pack_threshold = (rng() % 4) / 4.0 + 0.25});
  std::map<int64_t, Allocation> held;
  std::ostringstream trace;
  for (int event = 0; event < kEventsPerSeed; ++event) {
    const int kind = static_cast<int>(rng() % 10);
    if (kind < 5) {
      absl::StatusOr<ScheduleResult> r = scheduler.Schedule(RandomRequest(rng, event));
      EXPECT_TRUE(r.ok()) << r.status();
      if (!r.ok()) continue;
      if (r->placement) {
        const Allocation& a = r->placement->allocation;
        trace << "place " << a.node << " opt " << r->placement->option << " "
              << a.resources.ToString();
        for (const DeviceGrant& g : a.devices) {
          for (int i : g.instances) trace << " " << g.resource << i;
        }
        held.emplace(a.id.value(), a);
      } else {
        trace << ScheduleStatusName(r->status) << " " << r->explanation;
      }
    } else if (kind < 8 && !held.empty()) {
      auto it = held.begin();
      std::advance(it, rng() % held.size());
      absl::StatusOr<Allocation> back = cluster.Release(AllocationId(it->first));
      EXPECT_TRUE(back.ok()) << back.status();
      if (back.ok()) {
        EXPECT_EQ(*back, it->second);  // exactly what was taken
      }
      trace << "release " << it->first;
      held.erase(it);
    } else if (kind == 8) {
      EXPECT_TRUE(cluster.AddNode(RandomNode(rng, serial)).ok());
      trace << "add n" << serial++;
      for (RequestId id : scheduler.OnClusterChanged()) trace << " ready " << id;
    } else {
      const NodeId victim("n" + std::to_string(rng() % serial));
      if (rng() % 2) {
        absl::StatusOr<std::vector<Allocation>> lost = cluster.FailNode(victim);
        if (lost.ok()) {
          for (const Allocation& a : *lost) {
            EXPECT_EQ(held.at(a.id.value()), a);
            held.erase(a.id.value());
          }
          trace << "fail " << victim << " lost " << lost->size();
        }
      } else {
        trace << "drain " << victim << " " << cluster.SetDraining(victim, rng() % 2).ok();
      }
    }
    trace << "\n";
    CheckInvariants(cluster, held);
    if (::testing::Test::HasFatalFailure()) break;
  }
  return trace.str();
}

TEST(SchedulingPropertyTest, InvariantsHoldAndDecisionsRepeat) {
  size_t placed = 0, released = 0, lost = 0;
  for (uint32_t seed = 1; seed <= kSeeds; ++seed) {
    SCOPED_TRACE(::testing::Message() << "seed " << seed);
    const std::string first = RunSeed(seed);
    if (::testing::Test::HasFailure()) return;
    EXPECT_EQ(first, RunSeed(seed));
    for (size_t at = 0; (at = first.find("place ", at)) != std::string::npos; ++at) ++placed;
    for (size_t at = 0; (at = first.find("release ", at)) != std::string::npos; ++at) ++released;
    for (size_t at = 0; (at = first.find("fail ", at)) != std::string::npos; ++at) ++lost;
  }
  // The sequences exercise every event kind, many times.
  EXPECT_GT(placed, 2000u);
  EXPECT_GT(released, 1000u);
  EXPECT_GT(lost, 100u);
}

}  // namespace
}  // namespace tessera
