#include "node/telemetry_sampler.h"

#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/log_line.h"
#include "process/resource_usage.h"

namespace tessera {
namespace {

// Warnings logged at most this many times in all, so a flapping source cannot fill the log.
constexpr size_t kMaxWarningsLogged = 64;

uint64_t Fnv1a(std::string_view text) {
  uint64_t hash = 14695981039346656037ull;
  for (unsigned char c : text) {
    hash ^= c;
    hash *= 1099511628211ull;
  }
  return hash;
}

NodeTelemetryOptions WithSeed(NodeTelemetryOptions options, const NodeId& node) {
  if (options.simulation_seed == 0) options.simulation_seed = Fnv1a(node.value());
  return options;
}

}  // namespace

TelemetrySampler::DeviceNames TelemetrySampler::NamesOf(const NodeHardware& hardware) {
  DeviceNames names;
  for (const VisibleFamily& family : hardware.VisibleFamilies()) {
    if (family.plugin == nullptr) continue;
    for (size_t i = 0; i < family.visible.size(); ++i) {
      const Device& device = family.visible[i];
      names[{device.family, device.index}] =
          DeviceName{device.type, std::string(family.plugin->resource_name()), static_cast<int>(i)};
    }
  }
  return names;
}

BusyDevices BusyDevicesOfLeases(const NodeHardware& hardware,
                                const std::vector<LeaseRecord>& leases) {
  BusyDevices busy;
  const std::vector<VisibleFamily> families = hardware.VisibleFamilies();
  for (const LeaseRecord& lease : leases) {
    for (const DeviceGrant& grant : lease.allocation.devices) {
      for (const VisibleFamily& family : families) {
        if (family.plugin == nullptr || family.plugin->resource_name() != grant.resource) {
          continue;
        }
        for (int instance : grant.instances) {
          if (instance < 0 || static_cast<size_t>(instance) >= family.visible.size()) continue;
          busy[std::string(family.plugin->family())].insert(family.visible[instance].index);
        }
      }
    }
  }
  return busy;
}

TelemetrySampler::TelemetrySampler(const AgentState* state, TelemetrySamplerOptions options)
    : state_(state),
      options_(std::move(options)),
      names_(NamesOf(state->hardware())),
      reader_(state->hardware(), Sysroot(options_.sysroot), options_.environment,
              WithSeed(options_.telemetry, state->node_id())) {}

std::unique_ptr<TelemetrySampler> TelemetrySampler::Start(const AgentState* state,
                                                          TelemetrySamplerOptions options) {
  std::unique_ptr<TelemetrySampler> sampler(new TelemetrySampler(state, std::move(options)));
  TelemetrySampler* self = sampler.get();
  sampler->thread_ = std::thread([self] { self->Loop(); });
  return sampler;
}

TelemetrySampler::~TelemetrySampler() { Stop(); }

void TelemetrySampler::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

NodeReading TelemetrySampler::Latest() const {
  absl::MutexLock lock(&mu_);
  return latest_;
}

void TelemetrySampler::Loop() {
  while (true) {
    ReadOnce();
    absl::MutexLock lock(&mu_);
    if (mu_.AwaitWithTimeout(absl::Condition(&stop_), options_.interval)) return;
  }
}

void TelemetrySampler::ReadOnce() {
  const absl::Time now = options_.clock->Now();
  const NodeHardware& hardware = state_->hardware();
  NodeTelemetry telemetry = reader_.Read(now, BusyDevicesOfLeases(hardware, state_->Leases()));
  for (const std::string& warning : telemetry.warnings) {
    if (warned_.size() >= kMaxWarningsLogged || !warned_.insert(warning).second) continue;
    LogLine(
        absl::StrCat("node agent ", state_->node_id().value(), ": device telemetry: ", warning));
  }
  NodeReading reading;
  reading.read_at = now;
  for (DeviceTelemetry& device : telemetry.devices) {
    DeviceReading named;
    auto name = names_.find({device.family, device.index});
    if (name != names_.end()) {
      named.type = name->second.type;
      named.resource = name->second.resource;
      named.instance = name->second.instance;
    }
    named.telemetry = std::move(device);
    reading.devices.push_back(std::move(named));
  }

  std::vector<WorkerUsageReading> usage;
  for (const WorkerRecord& worker : state_->Workers()) {
    if (worker.state != WorkerState::kRunning || worker.pid <= 0) continue;
    WorkerUsageReading one;
    one.worker = worker.id;
    one.job_id = worker.job_id;
    auto read = ReadResourceUsage({.pid = worker.pid, .proc_root = options_.proc_root});
    // NotFound: it exited since the list was taken; it is left out.
    if (!read.ok()) continue;
    one.cpu_seconds = read->cpu_seconds;
    one.memory_bytes = read->memory_bytes;
    usage.push_back(std::move(one));
  }
  reading.workers = workers_.Update(now, usage);

  absl::MutexLock lock(&mu_);
  latest_ = std::move(reading);
}

}  // namespace tessera
