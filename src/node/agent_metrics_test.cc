// AgentMetrics over a real AgentState and a reading the test writes: the resource series show
// capacity, what leases reserve and (only) what was measured as used; a device figure the device
// does not measure has no series; device and worker series follow the latest reading; counters
// exist from the start and count; the object store's counts. Read back through the text format.
#include "node/agent_metrics.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"
#include "metrics/exposition.h"
#include "metrics/exposition_parser.h"
#include "node/agent_test_util.h"

namespace tessera {
namespace {

using metrics::ParsedExposition;
using node_testing::Res;
using Labels = std::vector<std::pair<std::string, std::string>>;

// A reading the test sets, handed to AgentMetrics as the sampler's latest.
class FakeReading {
 public:
  void Set(NodeReading reading) {
    absl::MutexLock lock(&mu_);
    reading_ = std::move(reading);
  }
  std::function<NodeReading()> Source() {
    return [this] {
      absl::MutexLock lock(&mu_);
      return reading_;
    };
  }

 private:
  absl::Mutex mu_;
  NodeReading reading_ ABSL_GUARDED_BY(mu_);
};

ParsedExposition Scrape(const metrics::MetricRegistry& registry) {
  auto parsed = metrics::ParsePrometheusText(metrics::RenderPrometheusText(registry));
  EXPECT_TRUE(parsed.ok()) << parsed.status();
  return parsed.ok() ? *std::move(parsed) : ParsedExposition();
}

bool HasFamily(const ParsedExposition& scrape, const std::string& name) {
  return scrape.types.contains(name);
}

Labels Resource(std::string resource) {
  return {{"node", "n1"}, {"resource", std::move(resource)}};
}

DeviceReading TpuChip(int index) {
  DeviceReading device;
  device.telemetry.family = "tpu";
  device.telemetry.index = index;
  device.telemetry.source = "libtpu";
  device.type = "TPU-V6E";
  device.resource = "TPU";
  device.instance = index;
  return device;
}

TEST(AgentMetricsTest, ResourcesShowCapacityAndWhatLeasesAndBundlesReserve) {
  auto state = node_testing::MakeState("h100-sxm-8.yaml");
  metrics::MetricRegistry registry;
  auto agent_metrics = AgentMetrics::Create(registry, {.state = state.get()});
  ASSERT_TRUE(agent_metrics.ok()) << agent_metrics.status();

  ParsedExposition idle = Scrape(registry);
  EXPECT_EQ(idle.types.at("tessera_node_resource_capacity"), "gauge");
  EXPECT_EQ(idle.Value("tessera_node_resource_capacity", Resource("GPU")), 8);
  EXPECT_EQ(idle.Value("tessera_node_resource_capacity", Resource("CPU")), 224);
  EXPECT_EQ(idle.Value("tessera_node_resource_capacity", Resource("memory")),
            2.0 * (uint64_t{1} << 40));
  EXPECT_EQ(idle.Value("tessera_node_resource_reserved", Resource("GPU")), 0);

  auto lease = state->TryLease({.resources = Res("GPU=2,CPU=4")});
  ASSERT_TRUE(lease.ok() && lease->lease.has_value());
  ASSERT_TRUE(state->PrepareBundles("pg-1", {{.index = 0, .resources = Res("CPU=8")}}).ok());
  ParsedExposition held = Scrape(registry);
  EXPECT_EQ(held.Value("tessera_node_resource_reserved", Resource("GPU")), 2);
  EXPECT_EQ(held.Value("tessera_node_resource_reserved", Resource("CPU")), 12);
  EXPECT_EQ(held.Value("tessera_node_resource_reserved", Resource("memory")), 0);
  // Without measurements there is no "used" at all: a reservation is not use.
  EXPECT_FALSE(HasFamily(held, "tessera_node_resource_used"));
}

TEST(AgentMetricsTest, UsedIsWhatTheWorkersWereMeasuredToUse) {
  auto state = node_testing::MakeState("h100-sxm-8.yaml");
  ASSERT_TRUE(state->TryLease({.resources = Res("GPU=8,CPU=200")}).ok());
  FakeReading reading;
  metrics::MetricRegistry registry;
  auto agent_metrics =
      AgentMetrics::Create(registry, {.state = state.get(), .latest = reading.Source()});
  ASSERT_TRUE(agent_metrics.ok()) << agent_metrics.status();
  EXPECT_FALSE(HasFamily(Scrape(registry), "tessera_node_resource_used"))
      << "nothing measured before the first reading";

  NodeReading measured;
  measured.read_at = absl::Now();
  measured.workers.cpu_cores = 1.5;
  measured.workers.memory_bytes = 4096;
  reading.Set(measured);
  ParsedExposition scrape = Scrape(registry);
  EXPECT_EQ(scrape.Value("tessera_node_resource_used", Resource("CPU")), 1.5);
  EXPECT_EQ(scrape.Value("tessera_node_resource_used", Resource("memory")), 4096);
  EXPECT_FALSE(scrape.Value("tessera_node_resource_used", Resource("GPU")).has_value())
      << "GPUs are all leased, but nothing measures their use as a resource";
}

TEST(AgentMetricsTest, AFigureTheDeviceDoesNotMeasureHasNoSeries) {
  auto state = node_testing::MakeState("tpu-v6e-4x4-worker0.yaml");
  FakeReading reading;
  metrics::MetricRegistry registry;
  auto agent_metrics =
      AgentMetrics::Create(registry, {.state = state.get(), .latest = reading.Source()});
  ASSERT_TRUE(agent_metrics.ok()) << agent_metrics.status();

  NodeReading now;
  now.read_at = absl::Now();
  now.devices.push_back(TpuChip(0));
  now.devices[0].telemetry.duty_cycle_ratio = 0.5;
  now.devices[0].telemetry.memory_used_bytes = 1 << 20;
  now.devices[0].telemetry.energy_joules = 12.5;
  now.devices.push_back(TpuChip(1));  // nothing read
  reading.Set(now);

  ParsedExposition scrape = Scrape(registry);
  const Labels chip0 = {{"node", "n1"},
                        {"family", "tpu"},
                        {"index", "0"},
                        {"type", "TPU-V6E"},
                        {"slice", "my-v6e-slice"}};
  EXPECT_EQ(scrape.Value("tessera_device_duty_cycle_ratio", chip0), 0.5);
  EXPECT_EQ(scrape.Value("tessera_device_memory_used_bytes", chip0), 1 << 20);
  EXPECT_EQ(scrape.Value("tessera_device_energy_joules_total", chip0), 12.5);
  EXPECT_EQ(scrape.types.at("tessera_device_energy_joules_total"), "counter");
  // libtpu measures no utilization, power or temperature here: no series, not zeros.
  for (const char* absent :
       {"tessera_device_utilization_ratio", "tessera_device_power_watts",
        "tessera_device_temperature_celsius", "tessera_device_memory_total_bytes"}) {
    EXPECT_FALSE(HasFamily(scrape, absent)) << absent;
  }
  for (const metrics::ParsedSample& sample : scrape.samples) {
    for (const auto& [name, value] : sample.labels) {
      EXPECT_FALSE(name == "index" && value == "1") << sample.name << " of a chip read nothing";
    }
  }
}

TEST(AgentMetricsTest, WorkerSeriesFollowTheLatestReading) {
  auto state = node_testing::MakeState("cpu-only.yaml");
  FakeReading reading;
  metrics::MetricRegistry registry;
  auto agent_metrics =
      AgentMetrics::Create(registry, {.state = state.get(), .latest = reading.Source()});
  ASSERT_TRUE(agent_metrics.ok()) << agent_metrics.status();

  NodeReading running;
  running.read_at = absl::Now();
  running.workers.workers.push_back(
      {.worker = WorkerId("w-1"), .job_id = "job-a", .cpu_seconds = 2.5, .memory_bytes = 100});
  running.workers.workers.push_back({.worker = WorkerId("w-2")});  // nothing could be read
  reading.Set(running);
  ParsedExposition scrape = Scrape(registry);
  const Labels w1 = {{"node", "n1"}, {"worker", "w-1"}, {"job", "job-a"}};
  EXPECT_EQ(scrape.Value("tessera_worker_cpu_seconds_total", w1), 2.5);
  EXPECT_EQ(scrape.types.at("tessera_worker_cpu_seconds_total"), "counter");
  EXPECT_EQ(scrape.Value("tessera_worker_memory_bytes", w1), 100);
  size_t worker_samples = 0;
  for (const metrics::ParsedSample& sample : scrape.samples) {
    worker_samples +=
        sample.name.starts_with("tessera_worker_c") || sample.name.starts_with("tessera_worker_m");
  }
  EXPECT_EQ(worker_samples, 2u) << "w-2 measured nothing: no series";

  running.workers.workers.clear();
  reading.Set(running);
  scrape = Scrape(registry);
  EXPECT_FALSE(HasFamily(scrape, "tessera_worker_cpu_seconds_total")) << "w-1 exited";
  EXPECT_FALSE(HasFamily(scrape, "tessera_worker_memory_bytes"));
}

TEST(AgentMetricsTest, CountersExistFromTheStartAndCount) {
  auto state = node_testing::MakeState("cpu-only.yaml");
  metrics::MetricRegistry registry;
  auto created = AgentMetrics::Create(registry, {.state = state.get()});
  ASSERT_TRUE(created.ok()) << created.status();
  AgentMetrics& agent_metrics = **created;
  const Labels node = {{"node", "n1"}};
  auto outcome = [](const char* word) { return Labels{{"node", "n1"}, {"outcome", word}}; };
  auto reason = [](const char* word) { return Labels{{"node", "n1"}, {"reason", word}}; };

  ParsedExposition fresh = Scrape(registry);
  for (const char* word : {"granted", "spilled_back", "refused", "failed"}) {
    EXPECT_EQ(fresh.Value("tessera_leases_total", outcome(word)), 0) << word;
  }
  for (const char* word : {"succeeded", "failed", "signaled", "killed", "out_of_memory"}) {
    EXPECT_EQ(fresh.Value("tessera_workers_exited_total", reason(word)), 0) << word;
  }
  EXPECT_EQ(fresh.Value("tessera_workers_started_total", node), 0);
  EXPECT_EQ(fresh.Value("tessera_workers_running", node), 0);

  agent_metrics.CountLease(LeaseAnswer::kGranted);
  agent_metrics.CountLease(LeaseAnswer::kGranted);
  agent_metrics.CountLease(LeaseAnswer::kSpilledBack);
  agent_metrics.CountWorkerStarted();
  agent_metrics.CountWorkerStartFailure();
  agent_metrics.CountWorkerExit(WorkerExitClass::kKilled);
  ASSERT_TRUE(state->TryLease({.resources = Res("CPU=1")}).ok());  // a worker starting
  ParsedExposition after = Scrape(registry);
  EXPECT_EQ(after.Value("tessera_leases_total", outcome("granted")), 2);
  EXPECT_EQ(after.Value("tessera_leases_total", outcome("spilled_back")), 1);
  EXPECT_EQ(after.Value("tessera_leases_total", outcome("refused")), 0);
  EXPECT_EQ(after.Value("tessera_workers_started_total", node), 1);
  EXPECT_EQ(after.Value("tessera_worker_start_failures_total", node), 1);
  EXPECT_EQ(after.Value("tessera_workers_exited_total", reason("killed")), 1);
  EXPECT_EQ(after.Value("tessera_workers_running", node), 1);
}

TEST(AgentMetricsTest, TheObjectStoreCountsItsBytesObjectsAndEvictions) {
  auto state = node_testing::MakeState("cpu-only.yaml");
  ObjectStore store(ObjectStoreOptions{.capacity_bytes = 4096});
  metrics::MetricRegistry registry;
  auto agent_metrics =
      AgentMetrics::Create(registry, {.state = state.get(), .object_store = &store});
  ASSERT_TRUE(agent_metrics.ok()) << agent_metrics.status();
  const StoreClientId client{1};
  const ObjectId first = ObjectId::FromRandom();
  ASSERT_TRUE(store.Create(client, first, 3000, "", {.evictable = true}).ok());
  ASSERT_TRUE(store.Seal(client, first).ok());
  // Does not fit beside the first: the first is evicted.
  const ObjectId second = ObjectId::FromRandom();
  ASSERT_TRUE(store.Create(client, second, 3000, "", {}).ok());

  ParsedExposition scrape = Scrape(registry);
  const Labels node = {{"node", "n1"}};
  EXPECT_EQ(scrape.Value("tessera_object_store_capacity_bytes", node), 4096);
  EXPECT_GE(scrape.Value("tessera_object_store_used_bytes", node).value_or(0), 3000);
  EXPECT_EQ(scrape.Value("tessera_object_store_objects", node), 1);
  EXPECT_EQ(scrape.Value("tessera_object_store_evictions_total", node), 1);
  EXPECT_EQ(scrape.types.at("tessera_object_store_evictions_total"), "counter");

  // Without a store there is no store series.
  metrics::MetricRegistry other;
  auto without = AgentMetrics::Create(other, {.state = state.get()});
  ASSERT_TRUE(without.ok());
  EXPECT_FALSE(HasFamily(Scrape(other), "tessera_object_store_capacity_bytes"));
}

TEST(AgentMetricsTest, OneAgentMetricsPerRegistry) {
  auto state = node_testing::MakeState("cpu-only.yaml");
  metrics::MetricRegistry registry;
  auto first = AgentMetrics::Create(registry, {.state = state.get()});
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(AgentMetrics::Create(registry, {.state = state.get()}).status().code(),
            absl::StatusCode::kAlreadyExists);
  first->reset();
  EXPECT_TRUE(AgentMetrics::Create(registry, {.state = state.get()}).ok())
      << "a removed AgentMetrics leaves its callback families free";
}

TEST(ClassifyWorkerExitTest, OutOfMemoryThenTheAgentsKillsThenSignalsThenTheExitCode) {
  auto exited = [](WorkerExitInfo exit, std::string kill_cause = "") {
    WorkerRecord worker;
    worker.state = WorkerState::kExited;
    worker.exit = std::move(exit);
    worker.kill_cause = std::move(kill_cause);
    return ClassifyWorkerExit(worker);
  };
  EXPECT_EQ(exited({.exit_code = 0}), WorkerExitClass::kSucceeded);
  EXPECT_EQ(exited({.exit_code = 3}), WorkerExitClass::kFailed);
  EXPECT_EQ(exited({.exit_code = -1, .signal = 11}), WorkerExitClass::kSignaled);
  EXPECT_EQ(exited({.exit_code = -1, .signal = 15}, "after a KillWorker request"),
            WorkerExitClass::kKilled);
  EXPECT_EQ(exited({.exit_code = 0}, "as the node agent shut down"), WorkerExitClass::kKilled);
  EXPECT_EQ(exited({.exit_code = -1, .signal = 9, .out_of_memory = true}, "after a request"),
            WorkerExitClass::kOutOfMemory);
  EXPECT_EQ(ClassifyWorkerExit(WorkerRecord{}), WorkerExitClass::kFailed);
  EXPECT_EQ(WorkerExitClassName(WorkerExitClass::kOutOfMemory), "out_of_memory");
  EXPECT_EQ(LeaseAnswerName(LeaseAnswer::kSpilledBack), "spilled_back");
}

}  // namespace
}  // namespace tessera
