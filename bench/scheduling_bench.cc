// Task-decision throughput of the scheduling core on synthetic clusters: n nodes with 8
// NVSwitch-linked GPUs each and realistic labels (accelerator type, 4 zones, 16 node groups).
// Each iteration schedules a task and releases it, so the cluster stays steady: a 1-GPU task
// (default and SPREAD strategies) and a CPU-only task (some nodes without GPUs, or none).
// Placement groups: each iteration creates a group (1, 8 or 64 bundles, STRICT_PACK or SPREAD)
// and removes it; the bundle search (what runs when the greedy pass strands a bundle) is timed
// on its own with 64 bundles, half of them confined to one node group. Slices: on a cluster
// whose nodes include 1k v6e-16 slices (4 hosts of 4 chips each), each iteration reserves 1 or
// 4 whole slices and releases them. The same groups and slices through the ReservationEngine
// (BM_Engine*), as the head and the simulator place them: the engine's cost over the scheduler's.
#include <malloc.h>

#include <memory>
#include <optional>
#include <string>

#include "benchmark/benchmark.h"
#include "hardware/node_label_keys.h"
#include "scheduling/bundle_search.h"
#include "scheduling/cluster_view.h"
#include "scheduling/domain_group_scheduler.h"
#include "scheduling/placement_group_scheduler.h"
#include "scheduling/reservation_engine.h"
#include "scheduling/task_scheduler.h"
#include "vocabulary/slice_shape.h"

namespace tessera {
namespace {

DeviceTopologyPtr NvSwitch8() {
  auto t = std::make_shared<DeviceTopology>();
  t->count = 8;
  for (int i = 0; i < 8; ++i) {
    t->numa_node.push_back(i / 4);
    t->nearest_nic.push_back("mlx5_" + std::to_string(i / 2));
  }
  for (int a = 0; a < 8; ++a) {
    for (int b = a + 1; b < 8; ++b) {
      t->links.push_back(DeviceLink{a, b, LinkKind::kNvSwitch, 18, 450, BandwidthClass::kHigh});
    }
  }
  return t;
}

struct Cluster {
  ClusterView view;
  double bytes_per_node = 0;
};

// Builds the cluster and measures the heap it took (malloc's in-use bytes before and after).
// The last `cpu_only_nodes` nodes have CPUs and memory but no GPUs.
std::unique_ptr<Cluster> Build(int nodes, int cpu_only_nodes = 0) {
  const size_t before = mallinfo2().uordblks;
  auto cluster = std::make_unique<Cluster>();
  const DeviceTopologyPtr topology = NvSwitch8();
  const ResourceSet resources = *ParseResourceSet("CPU=192,GPU=8,memory=2TiB");
  const ResourceSet cpu_only = *ParseResourceSet("CPU=192,memory=2TiB");
  for (int i = 0; i < nodes; ++i) {
    const bool has_gpus = i < nodes - cpu_only_nodes;
    NodeSpec spec;
    spec.id = NodeId("node-" + std::to_string(i));
    spec.resources = has_gpus ? resources : cpu_only;
    spec.labels = {{std::string(labels::kAvailabilityZone), "z" + std::to_string(i % 4 + 1)},
                   {std::string(labels::kNodeGroup), "group-" + std::to_string(i % 16)}};
    if (has_gpus) {
      spec.labels.emplace(std::string(labels::kAcceleratorType), "H100");
      spec.devices.emplace("GPU", topology);
    }
    if (!cluster->view.AddNode(std::move(spec)).ok()) return nullptr;
  }
  const size_t after = mallinfo2().uordblks;
  cluster->bytes_per_node = static_cast<double>(after - before) / nodes;
  return cluster;
}

// The cluster, or nullptr with the benchmark marked skipped when it could not be built.
std::unique_ptr<Cluster> OrSkip(benchmark::State& state, std::unique_ptr<Cluster> cluster) {
  if (cluster == nullptr) state.SkipWithError("building the cluster failed");
  return cluster;
}

enum Selector { kNoSelector = 0, kZoneSelector = 1 };

// Schedules and releases one request per iteration; shared by the policy benchmarks below.
void RunDecisions(benchmark::State& state, Cluster& cluster, const SchedulingRequest& request) {
  TaskScheduler scheduler(&cluster.view);
  for (auto _ : state) {
    absl::StatusOr<ScheduleResult> result = scheduler.Schedule(request);
    if (!result.ok() || !result->placement) {
      state.SkipWithError("a decision failed");
      return;
    }
    benchmark::DoNotOptimize(result->placement->node);
    if (!cluster.view.Release(result->placement->allocation.id).ok()) {
      state.SkipWithError("a release failed");
      return;
    }
  }
  state.counters["decisions/s"] =
      benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}

// The loop of every reserve-then-release benchmark: `reserve()` holds one group or slice
// reservation and returns what `release(held)` gives back, or nullopt when it failed.
template <typename Reserve, typename Release>
void ReserveReleaseLoop(benchmark::State& state, const char* rate, Reserve reserve,
                        Release release) {
  for (auto _ : state) {
    auto held = reserve();
    if (!held.has_value()) {
      state.SkipWithError("a reservation failed");
      return;
    }
    if (!release(*held)) {
      state.SkipWithError("a release failed");
      return;
    }
  }
  state.counters[rate] =
      benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}

void BM_OneGpuTaskDecision(benchmark::State& state) {
  const int nodes = static_cast<int>(state.range(0));
  std::unique_ptr<Cluster> cluster = OrSkip(state, Build(nodes));
  if (cluster == nullptr) return;
  SchedulingRequest request;
  request.id = RequestId(1);
  request.resources = *ParseResourceSet("CPU=1,GPU=1");
  if (state.range(1) == kZoneSelector) {
    request.selectors = FallbackList::FromSelectors(
        {*ParseLabelSelector("tessera.io/availability-zone=in(z1,z2)")});
  }
  RunDecisions(state, *cluster, request);
  state.counters["bytes/node"] = cluster->bytes_per_node;
}
BENCHMARK(BM_OneGpuTaskDecision)
    ->ArgNames({"nodes", "selector"})
    ->ArgsProduct({{1000, 10000, 50000}, {kNoSelector, kZoneSelector}})
    ->Unit(benchmark::kMicrosecond);

// A SPREAD task asking for one GPU: the round robin over the nodes where it fits.
void BM_SpreadTaskDecision(benchmark::State& state) {
  std::unique_ptr<Cluster> cluster = OrSkip(state, Build(static_cast<int>(state.range(0))));
  if (cluster == nullptr) return;
  SchedulingRequest request;
  request.id = RequestId(1);
  request.resources = *ParseResourceSet("CPU=1,GPU=1");
  request.strategy = NodeRanking::kSpread;
  RunDecisions(state, *cluster, request);
}
BENCHMARK(BM_SpreadTaskDecision)
    ->ArgNames({"nodes"})
    ->Arg(1000)
    ->Arg(10000)
    ->Arg(50000)
    ->Unit(benchmark::kMicrosecond);

// A CPU-only task (CPU=1) with the default strategy; `cpu_only_percent` of the nodes have no
// GPUs (0: every node has GPUs, so the nodes-without-accelerators pool is empty and the
// decision falls back to all nodes).
void BM_CpuOnlyTaskDecision(benchmark::State& state) {
  const int nodes = static_cast<int>(state.range(0));
  const int cpu_only = static_cast<int>(nodes * state.range(1) / 100);
  std::unique_ptr<Cluster> cluster = OrSkip(state, Build(nodes, cpu_only));
  if (cluster == nullptr) return;
  SchedulingRequest request;
  request.id = RequestId(1);
  request.resources = *ParseResourceSet("CPU=1");
  RunDecisions(state, *cluster, request);
}
BENCHMARK(BM_CpuOnlyTaskDecision)
    ->ArgNames({"nodes", "cpu_only_percent"})
    ->ArgsProduct({{1000, 10000, 50000}, {0, 25}})
    ->Unit(benchmark::kMicrosecond);

void BM_PlacementGroupCreateRemove(benchmark::State& state) {
  const int nodes = static_cast<int>(state.range(0));
  std::unique_ptr<Cluster> cluster = OrSkip(state, Build(nodes));
  if (cluster == nullptr) return;
  PlacementGroupScheduler groups(&cluster->view);
  PlacementGroupSpec spec;
  spec.strategy = state.range(2) == 0 ? PlacementStrategy::kStrictPack : PlacementStrategy::kSpread;
  spec.primary.bundles.assign(state.range(1), *ParseResourceSet("CPU=1,GPU=1"));
  ReserveReleaseLoop(
      state, "groups/s",
      [&]() -> std::optional<PlacementGroupId> {
        absl::StatusOr<PlacementGroupResult> result = groups.Create(spec);
        if (!result.ok() || !result->id) return std::nullopt;
        benchmark::DoNotOptimize(result->bundles);
        return result->id;
      },
      [&](PlacementGroupId id) { return groups.Remove(id).ok(); });
}
// Third argument: 0 STRICT_PACK, 1 SPREAD.
BENCHMARK(BM_PlacementGroupCreateRemove)
    ->ArgNames({"nodes", "bundles", "spread"})
    ->ArgsProduct({{1000, 10000, 50000}, {1, 8}, {0, 1}})
    ->Args({10000, 64, 1})
    ->Unit(benchmark::kMicrosecond);

// The same groups through the ReservationEngine, as the head and `tessera schedule` place them
// (the record by name, the id map, the outcome): its cost over PlacementGroupScheduler's alone
// is the ratio of the two in one run.
void BM_EngineGroupCreateRemove(benchmark::State& state) {
  const int nodes = static_cast<int>(state.range(0));
  std::unique_ptr<Cluster> cluster = OrSkip(state, Build(nodes));
  if (cluster == nullptr) return;
  ReservationEngine engine(&cluster->view);
  PlacementGroupSpec spec;
  spec.name = "bench";
  spec.strategy = state.range(2) == 0 ? PlacementStrategy::kStrictPack : PlacementStrategy::kSpread;
  spec.primary.bundles.assign(state.range(1), *ParseResourceSet("CPU=1,GPU=1"));
  ReserveReleaseLoop(
      state, "groups/s",
      [&]() -> std::optional<std::string> {
        absl::StatusOr<ReservationOutcome> outcome = engine.CreatePlacementGroup(spec);
        if (!outcome.ok() || outcome->status != ReservationStatus::kPlaced) return std::nullopt;
        return outcome->name;
      },
      [&](const std::string& name) { return engine.Remove(name).ok(); });
}
BENCHMARK(BM_EngineGroupCreateRemove)
    ->ArgNames({"nodes", "bundles", "spread"})
    ->ArgsProduct({{1000, 10000, 50000}, {1, 8}, {0, 1}})
    ->Args({10000, 64, 1})
    ->Unit(benchmark::kMicrosecond);

void BM_BundleSearch(benchmark::State& state) {
  std::unique_ptr<Cluster> cluster = OrSkip(state, Build(static_cast<int>(state.range(0))));
  if (cluster == nullptr) return;
  BundleOption option;
  const LabelSelector group = *ParseLabelSelector(std::string(labels::kNodeGroup) + "=group-3");
  for (int b = 0; b < 64; ++b) {
    option.bundles.push_back(*ParseResourceSet(b % 2 == 0 ? "CPU=1,GPU=1" : "CPU=4,GPU=2"));
    option.selectors.push_back(b < 32 ? LabelSelector() : group);
  }
  BundleSearchRequest request;
  request.option = &option;
  request.strategy = static_cast<PlacementStrategy>(state.range(1));
  for (int b = 0; b < 64; ++b) request.todo.push_back(b);
  for (auto _ : state) {
    BundleSearchResult result = SearchBundles(cluster->view, request);
    if (result.outcome != SearchOutcome::kFound) {
      state.SkipWithError("the search found no placement");
      return;
    }
    for (const auto& [bundle, allocation] : result.taken) {
      if (!cluster->view.Release(allocation.id).ok()) {
        state.SkipWithError("a release failed");
        return;
      }
    }
  }
  state.counters["searches/s"] =
      benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}
// Second argument: the PlacementStrategy (0 PACK, 1 SPREAD, 2 STRICT_PACK, 3 STRICT_SPREAD).
BENCHMARK(BM_BundleSearch)
    ->ArgNames({"nodes", "strategy"})
    ->ArgsProduct({{10000}, {0, 1, 3}})
    ->Unit(benchmark::kMicrosecond);

// `nodes` in all: 1k v6e-16 slices (4k hosts with slice labels and TPU=4), the rest GPU nodes.
std::unique_ptr<Cluster> BuildWithSlices(int nodes) {
  constexpr int kSlices = 1000;
  constexpr int kHostsPerSlice = 4;
  std::unique_ptr<Cluster> cluster = Build(nodes - kSlices * kHostsPerSlice);
  if (cluster == nullptr) return nullptr;
  const ResourceSet resources = *ParseResourceSet("CPU=180,TPU=4,memory=720GB");
  for (int s = 0; s < kSlices; ++s) {
    const std::string slice = "v6e-" + std::to_string(s);
    for (int w = 0; w < kHostsPerSlice; ++w) {
      NodeSpec spec;
      spec.id = NodeId(slice + "-w" + std::to_string(w));
      spec.resources = resources;
      spec.labels = {{std::string(labels::kAcceleratorType), "TPU-V6E"},
                     {std::string(labels::kTpuSliceName), slice},
                     {std::string(labels::kTpuWorkerId), std::to_string(w)},
                     {std::string(labels::kTpuTopology), "4x4"},
                     {std::string(labels::kTpuPodType), "v6e-16"}};
      if (!cluster->view.AddNode(std::move(spec)).ok()) return nullptr;
    }
  }
  return cluster;
}

// `count` whole v6e 4x4 slices.
DomainGroupRequest SliceRequest(int count) {
  DomainGroupRequest request;
  request.name = "bench";
  DomainAlternative alt;
  alt.shape = *MakeSliceShape(TpuGeneration::kV6e, {{4, 4}});
  alt.count = count;
  request.alternatives.push_back(alt);
  return request;
}

void BM_SliceReserveRelease(benchmark::State& state) {
  std::unique_ptr<Cluster> cluster =
      OrSkip(state, BuildWithSlices(static_cast<int>(state.range(0))));
  if (cluster == nullptr) return;
  DomainGroupScheduler slices(&cluster->view);
  const DomainGroupRequest request = SliceRequest(static_cast<int>(state.range(1)));
  ReserveReleaseLoop(
      state, "reservations/s",
      [&]() -> std::optional<DomainGroupId> {
        absl::StatusOr<DomainGroupResult> result = slices.ReserveSlices(request);
        if (!result.ok() || !result->id) return std::nullopt;
        benchmark::DoNotOptimize(result->bundles);
        return result->id;
      },
      [&](DomainGroupId id) { return slices.Release(id).ok(); });
}
BENCHMARK(BM_SliceReserveRelease)
    ->ArgNames({"nodes", "slices"})
    ->ArgsProduct({{10000, 50000}, {1, 4}})
    ->Unit(benchmark::kMicrosecond);

// Slice reservations through the ReservationEngine (see BM_EngineGroupCreateRemove).
void BM_EngineSliceReserveRelease(benchmark::State& state) {
  std::unique_ptr<Cluster> cluster =
      OrSkip(state, BuildWithSlices(static_cast<int>(state.range(0))));
  if (cluster == nullptr) return;
  ReservationEngine engine(&cluster->view);
  const DomainGroupRequest request = SliceRequest(static_cast<int>(state.range(1)));
  ReserveReleaseLoop(
      state, "reservations/s",
      [&]() -> std::optional<std::string> {
        absl::StatusOr<ReservationOutcome> outcome = engine.ReserveSlices(request);
        if (!outcome.ok() || outcome->status != ReservationStatus::kPlaced) return std::nullopt;
        return outcome->name;
      },
      [&](const std::string& name) { return engine.Remove(name).ok(); });
}
BENCHMARK(BM_EngineSliceReserveRelease)
    ->ArgNames({"nodes", "slices"})
    ->ArgsProduct({{10000, 50000}, {1, 4}})
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace tessera

BENCHMARK_MAIN();
