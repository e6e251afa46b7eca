#include "node/agent_metrics.h"

#include <initializer_list>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/ignore_status.h"
#include "base/status_macros.h"
#include "hardware/node_label_keys.h"

namespace tessera {
namespace {

using metrics::CallbackRegistration;
using metrics::MetricRegistry;
using metrics::SampleSink;

constexpr LeaseAnswer kLeaseAnswers[] = {LeaseAnswer::kGranted, LeaseAnswer::kSpilledBack,
                                         LeaseAnswer::kRefused, LeaseAnswer::kFailed};
constexpr WorkerExitClass kExitClasses[] = {WorkerExitClass::kOutOfMemory, WorkerExitClass::kKilled,
                                            WorkerExitClass::kSignaled, WorkerExitClass::kSucceeded,
                                            WorkerExitClass::kFailed};

// The resources whose use the sampler measures, and how: the workers' CPU cores in use and the
// workers' memory. Other resources have no "used" series (what is reserved is not use).
constexpr std::string_view kCpuResource = "CPU";
constexpr std::string_view kMemoryResource = "memory";

// One device figure: its family and how to get it from a reading (nullopt: not measured).
struct DeviceFigure {
  const char* name;
  const char* help;
  bool counter;
  std::optional<double> (*get)(const DeviceTelemetry&);
};

template <typename T>
std::optional<double> AsDouble(const std::optional<T>& value) {
  if (!value.has_value()) return std::nullopt;
  return static_cast<double>(*value);
}

const DeviceFigure kDeviceFigures[] = {
    {"tessera_device_utilization_ratio",
     "Share of the last sample window in which the device ran work (0..1).", false,
     [](const DeviceTelemetry& t) { return t.utilization_ratio; }},
    {"tessera_device_duty_cycle_ratio",
     "Share of time the device's tensor cores ran a program (TPU duty cycle, 0..1).", false,
     [](const DeviceTelemetry& t) { return t.duty_cycle_ratio; }},
    {"tessera_device_sm_activity_ratio",
     "Average share of the streaming multiprocessors that were busy (0..1).", false,
     [](const DeviceTelemetry& t) { return t.sm_activity_ratio; }},
    {"tessera_device_tensor_activity_ratio", "Share of time the tensor or matrix units ran (0..1).",
     false, [](const DeviceTelemetry& t) { return t.tensor_activity_ratio; }},
    {"tessera_device_memory_busy_ratio",
     "Share of time device memory was being read or written (0..1).", false,
     [](const DeviceTelemetry& t) { return t.memory_busy_ratio; }},
    {"tessera_device_memory_bandwidth_ratio",
     "Device memory bandwidth used over its theoretical peak (0..1).", false,
     [](const DeviceTelemetry& t) { return t.memory_bandwidth_ratio; }},
    {"tessera_device_memory_used_bytes", "Device memory in use.", false,
     [](const DeviceTelemetry& t) { return AsDouble(t.memory_used_bytes); }},
    {"tessera_device_memory_total_bytes", "Device memory in all.", false,
     [](const DeviceTelemetry& t) { return AsDouble(t.memory_total_bytes); }},
    {"tessera_device_power_watts", "Power the device draws.", false,
     [](const DeviceTelemetry& t) { return t.power_watts; }},
    {"tessera_device_power_ratio",
     "Power the device draws over its maximum (for devices that report no watts, 0..1).", false,
     [](const DeviceTelemetry& t) { return t.power_ratio; }},
    {"tessera_device_energy_joules_total",
     "Energy the device used since its driver loaded (restarts at 0 when it reloads).", true,
     [](const DeviceTelemetry& t) { return t.energy_joules; }},
    {"tessera_device_temperature_celsius", "Temperature of the device's die.", false,
     [](const DeviceTelemetry& t) { return t.temperature_celsius; }},
    {"tessera_device_memory_temperature_celsius", "Temperature of the device's memory.", false,
     [](const DeviceTelemetry& t) { return t.memory_temperature_celsius; }},
};

// Adds one sample to a scrape. A sample with unusable labels is left out; the scrape goes on.
void EmitSample(SampleSink& sink, std::initializer_list<std::string_view> label_values,
                double value) {
  IgnoreStatus(sink.Emit(label_values, value),
               "a sample with unusable labels is left out; the scrape goes on");
}

// Keeps a family's collect callback registered for as long as `kept` lives.
absl::Status KeepRegistration(std::vector<CallbackRegistration>& kept,
                              absl::StatusOr<CallbackRegistration> registration) {
  if (!registration.ok()) return registration.status();
  kept.push_back(*std::move(registration));
  return absl::OkStatus();
}

// A family of samples collected at each scrape: a counter or a gauge.
absl::StatusOr<CallbackRegistration> AddCallbackFamily(MetricRegistry& registry, bool counter,
                                                       metrics::MetricDefinition definition,
                                                       metrics::CollectCallback collect) {
  return counter ? registry.AddCallbackCounter(std::move(definition), std::move(collect))
                 : registry.AddCallbackGauge(std::move(definition), std::move(collect));
}

std::string SliceOf(const AgentState& state) {
  auto it = state.spec().labels.find(labels::kTpuSliceName);
  return it == state.spec().labels.end() ? "" : it->second;
}

}  // namespace

std::string_view LeaseAnswerName(LeaseAnswer answer) {
  switch (answer) {
    case LeaseAnswer::kGranted: return "granted";
    case LeaseAnswer::kSpilledBack: return "spilled_back";
    case LeaseAnswer::kRefused: return "refused";
    case LeaseAnswer::kFailed: return "failed";
  }
  return "failed";
}

std::string_view WorkerExitClassName(WorkerExitClass reason) {
  switch (reason) {
    case WorkerExitClass::kOutOfMemory: return "out_of_memory";
    case WorkerExitClass::kKilled: return "killed";
    case WorkerExitClass::kSignaled: return "signaled";
    case WorkerExitClass::kSucceeded: return "succeeded";
    case WorkerExitClass::kFailed: return "failed";
  }
  return "failed";
}

WorkerExitClass ClassifyWorkerExit(const WorkerRecord& worker) {
  if (!worker.exit.has_value()) return WorkerExitClass::kFailed;
  const WorkerExitInfo& exit = *worker.exit;
  if (exit.out_of_memory) return WorkerExitClass::kOutOfMemory;
  if (!worker.kill_cause.empty()) return WorkerExitClass::kKilled;
  if (exit.signal != 0) return WorkerExitClass::kSignaled;
  return exit.exit_code == 0 ? WorkerExitClass::kSucceeded : WorkerExitClass::kFailed;
}

AgentMetrics::AgentMetrics(AgentMetricsSources sources)
    : sources_(std::move(sources)),
      node_(sources_.state->node_id().value()),
      slice_(SliceOf(*sources_.state)) {}

absl::StatusOr<std::unique_ptr<AgentMetrics>> AgentMetrics::Create(MetricRegistry& registry,
                                                                   AgentMetricsSources sources) {
  if (sources.state == nullptr) return absl::InvalidArgumentError("AgentMetrics needs the state");
  std::unique_ptr<AgentMetrics> out(new AgentMetrics(std::move(sources)));
  TESSERA_RETURN_IF_ERROR(out->RegisterCounters(registry));
  TESSERA_RETURN_IF_ERROR(out->RegisterResourceFamilies(registry));
  if (out->sources_.latest) {
    TESSERA_RETURN_IF_ERROR(out->RegisterDeviceFamilies(registry));
    TESSERA_RETURN_IF_ERROR(out->RegisterWorkerFamilies(registry));
  }
  if (out->sources_.object_store != nullptr) {
    TESSERA_RETURN_IF_ERROR(out->RegisterObjectStoreFamilies(registry));
  }
  return out;
}

absl::Status AgentMetrics::RegisterCounters(MetricRegistry& registry) {
  TESSERA_ASSIGN_OR_RETURN(
      metrics::CounterFamily * leases,
      registry.AddCounter({.name = "tessera_leases_total",
                           .help = "Lease requests this agent answered, by outcome (granted, "
                                   "spilled_back, refused, failed).",
                           .label_names = {"node", "outcome"}}));
  for (LeaseAnswer answer : kLeaseAnswers) {
    TESSERA_ASSIGN_OR_RETURN(metrics::Counter * child,
                             leases->WithLabels({node_, LeaseAnswerName(answer)}));
    leases_.push_back(child);
  }
  TESSERA_ASSIGN_OR_RETURN(metrics::CounterFamily * started,
                           registry.AddCounter({.name = "tessera_workers_started_total",
                                                .help = "Worker processes this agent started.",
                                                .label_names = {"node"}}));
  TESSERA_ASSIGN_OR_RETURN(workers_started_, started->WithLabels({node_}));
  TESSERA_ASSIGN_OR_RETURN(
      metrics::CounterFamily * failures,
      registry.AddCounter({.name = "tessera_worker_start_failures_total",
                           .help = "Workers of granted leases that could not be started.",
                           .label_names = {"node"}}));
  TESSERA_ASSIGN_OR_RETURN(worker_start_failures_, failures->WithLabels({node_}));
  TESSERA_ASSIGN_OR_RETURN(
      metrics::CounterFamily * exits,
      registry.AddCounter({.name = "tessera_workers_exited_total",
                           .help = "Worker processes that ended, by reason (succeeded, failed, "
                                   "signaled, killed, out_of_memory).",
                           .label_names = {"node", "reason"}}));
  worker_exits_.resize(std::size(kExitClasses));
  for (WorkerExitClass reason : kExitClasses) {
    TESSERA_ASSIGN_OR_RETURN(worker_exits_[static_cast<size_t>(reason)],
                             exits->WithLabels({node_, WorkerExitClassName(reason)}));
  }
  return KeepRegistration(
      callbacks_,
      registry.AddCallbackGauge(
          {.name = "tessera_workers_running",
           .help = "Worker processes of this agent that have not exited (starting or running).",
           .label_names = {"node"}},
          [this](SampleSink& sink) {
            EmitSample(sink, {node_}, sources_.state->running_workers());
          }));
}

absl::Status AgentMetrics::RegisterResourceFamilies(MetricRegistry& registry) {
  const std::vector<std::string> labels = {"node", "resource"};
  TESSERA_RETURN_IF_ERROR(KeepRegistration(
      callbacks_,
      registry.AddCallbackGauge(
          {.name = "tessera_node_resource_capacity",
           .help = "What the node offers of each resource (CPU in cores, memory in bytes, "
                   "devices in count).",
           .label_names = labels},
          [this](SampleSink& sink) {
            for (const auto& [name, quantity] : sources_.state->spec().resources) {
              EmitSample(sink, {node_, name}, quantity.ToDouble());
            }
          })));
  TESSERA_RETURN_IF_ERROR(KeepRegistration(
      callbacks_,
      registry.AddCallbackGauge(
          {.name = "tessera_node_resource_reserved",
           .help = "What leases and bundles hold of each resource (units as for capacity).",
           .label_names = labels},
          [this](SampleSink& sink) {
            const ResourceSet available = sources_.state->Available();
            for (const auto& [name, quantity] : sources_.state->spec().resources) {
              const int64_t held = quantity.raw() - available.Get(name).raw();
              EmitSample(sink, {node_, name}, Quantity::FromRaw(held).ToDouble());
            }
          })));
  if (!sources_.latest) return absl::OkStatus();
  return KeepRegistration(
      callbacks_,
      registry.AddCallbackGauge(
          {.name = "tessera_node_resource_used",
           .help = "What the node's running workers use, as measured: CPU cores (the rate of "
                   "their CPU seconds) and memory bytes. Other resources have no series.",
           .label_names = labels},
          [this](SampleSink& sink) {
            const NodeReading reading = sources_.latest();
            if (reading.read_at == absl::InfinitePast()) return;  // nothing measured yet
            const ResourceSet& total = sources_.state->spec().resources;
            if (total.Get(kCpuResource).raw() > 0) {
              EmitSample(sink, {node_, kCpuResource}, reading.workers.cpu_cores);
            }
            if (total.Get(kMemoryResource).raw() > 0) {
              EmitSample(sink, {node_, kMemoryResource},
                         static_cast<double>(reading.workers.memory_bytes));
            }
          }));
}

absl::Status AgentMetrics::RegisterDeviceFamilies(MetricRegistry& registry) {
  for (const DeviceFigure& figure : kDeviceFigures) {
    metrics::MetricDefinition definition{
        .name = figure.name,
        .help = figure.help,
        .label_names = {"node", "family", "index", "type", "slice"}};
    auto emit = [this, get = figure.get](SampleSink& sink) {
      for (const DeviceReading& device : sources_.latest().devices) {
        const std::optional<double> value = get(device.telemetry);
        if (!value.has_value()) continue;  // not measured: no series
        EmitSample(sink,
                   {node_, device.telemetry.family, absl::StrCat(device.telemetry.index),
                    device.type, slice_},
                   *value);
      }
    };
    TESSERA_RETURN_IF_ERROR(KeepRegistration(
        callbacks_, AddCallbackFamily(registry, figure.counter, std::move(definition), emit)));
  }
  return absl::OkStatus();
}

absl::Status AgentMetrics::RegisterWorkerFamilies(MetricRegistry& registry) {
  const std::vector<std::string> labels = {"node", "worker", "job"};
  TESSERA_RETURN_IF_ERROR(KeepRegistration(
      callbacks_,
      registry.AddCallbackCounter(
          {.name = "tessera_worker_cpu_seconds_total",
           .help = "CPU time of a running worker process and the children it waited for.",
           .label_names = labels},
          [this](SampleSink& sink) {
            for (const WorkerUsage& worker : sources_.latest().workers.workers) {
              if (!worker.cpu_seconds.has_value()) continue;
              EmitSample(sink, {node_, worker.worker.value(), worker.job_id}, *worker.cpu_seconds);
            }
          })));
  return KeepRegistration(
      callbacks_, registry.AddCallbackGauge(
                      {.name = "tessera_worker_memory_bytes",
                       .help = "Resident memory of a running worker process.",
                       .label_names = labels},
                      [this](SampleSink& sink) {
                        for (const WorkerUsage& worker : sources_.latest().workers.workers) {
                          if (!worker.memory_bytes.has_value()) continue;
                          EmitSample(sink, {node_, worker.worker.value(), worker.job_id},
                                     static_cast<double>(*worker.memory_bytes));
                        }
                      }));
}

absl::Status AgentMetrics::RegisterObjectStoreFamilies(MetricRegistry& registry) {
  struct StoreFigure {
    const char* name;
    const char* help;
    bool counter;
    uint64_t (*get)(const ObjectStoreStats&);
  };
  static const StoreFigure kStoreFigures[] = {
      {"tessera_object_store_capacity_bytes", "Size of the node's shared-memory object store.",
       false, [](const ObjectStoreStats& s) { return s.capacity_bytes; }},
      {"tessera_object_store_used_bytes",
       "Object store bytes allocated to objects (alignment padding included).", false,
       [](const ObjectStoreStats& s) { return s.allocated_bytes; }},
      {"tessera_object_store_pinned_bytes",
       "Object store bytes of objects pinned by a reader or being created.", false,
       [](const ObjectStoreStats& s) { return s.pinned_bytes; }},
      {"tessera_object_store_objects", "Objects in the store, sealed or not.", false,
       [](const ObjectStoreStats& s) { return s.num_objects; }},
      {"tessera_object_store_evictions_total", "Objects evicted from the store.", true,
       [](const ObjectStoreStats& s) { return s.evictions; }},
      {"tessera_object_store_evicted_bytes_total", "Bytes of the objects evicted from the store.",
       true, [](const ObjectStoreStats& s) { return s.evicted_bytes; }},
  };
  for (const StoreFigure& figure : kStoreFigures) {
    metrics::MetricDefinition definition{
        .name = figure.name, .help = figure.help, .label_names = {"node"}};
    auto emit = [this, get = figure.get](SampleSink& sink) {
      EmitSample(sink, {node_}, static_cast<double>(get(sources_.object_store->Stats())));
    };
    TESSERA_RETURN_IF_ERROR(KeepRegistration(
        callbacks_, AddCallbackFamily(registry, figure.counter, std::move(definition), emit)));
  }
  return absl::OkStatus();
}

void AgentMetrics::CountLease(LeaseAnswer answer) {
  leases_[static_cast<size_t>(answer)]->Increment();
}

void AgentMetrics::CountWorkerStarted() { workers_started_->Increment(); }

void AgentMetrics::CountWorkerStartFailure() { worker_start_failures_->Increment(); }

void AgentMetrics::CountWorkerExit(WorkerExitClass reason) {
  worker_exits_[static_cast<size_t>(reason)]->Increment();
}

}  // namespace tessera
