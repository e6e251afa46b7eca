// TelemetrySampler: the node agent's live figures, read on one thread of its own every few
// seconds (2 s by default): each advertised device's telemetry (NodeTelemetryReader, fed the
// devices that current leases hold, so a simulated node's leased device shows work) and each
// running worker's CPU time and memory (process/resource_usage.h, through WorkerUsageTracker for
// the CPU cores in use). /metrics and the heartbeat read the latest reading; neither starts one,
// so a scrape never waits on a driver and scrapes never change the CPU rates.
//
//   auto sampler = TelemetrySampler::Start(&state, {.interval = absl::Seconds(2)});
//   NodeReading now = sampler->Latest();   // a copy; read_at is InfinitePast before the first
//
// The first reading is taken at once on the sampler's thread (opening NVML or libtpu may take a
// while; the agent does not wait for it). A telemetry warning (a source that cannot be read) is
// logged once, not at every reading.
//
// Threading: thread-safe; Latest may be called from any thread. Cost of a reading: the families'
// reads (telemetry_reader.h) plus two or three small /proc files per running worker.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/clock.h"
#include "hardware/device_telemetry.h"
#include "hardware/environment.h"
#include "hardware/node_telemetry.h"
#include "node/agent_state.h"
#include "node/worker_usage_tracker.h"

namespace tessera {

// One device's figures with what names it: its type, and its resource and instance index on
// the node (what the head knows it by).
struct DeviceReading {
  DeviceTelemetry telemetry;  // family, physical index, figures
  std::string type;           // Device::type, e.g. "H100"; "" when unknown
  std::string resource;       // the family's resource, e.g. "GPU"
  int instance = 0;           // instance index among the node's devices of that resource
};

struct NodeReading {
  absl::Time read_at = absl::InfinitePast();  // InfinitePast: nothing read yet
  std::vector<DeviceReading> devices;         // every advertised device, in instance order
  NodeWorkerUsage workers;                    // the running workers
};

struct TelemetrySamplerOptions {
  absl::Duration interval = absl::Seconds(2);
  // The node's tree and environment, as discovery read them (ignored for a simulated node).
  std::string sysroot = "/";
  Environment environment;
  // A simulation_seed of 0 is replaced by a hash of the node id (FNV-1a), so simulated nodes
  // differ from each other and each keeps its figures across restarts.
  NodeTelemetryOptions telemetry;
  // Where the workers' /proc files are (tests point it at a fake tree).
  std::string proc_root = "/proc";
  // What each reading is stamped with (the interval between readings is real time). Not owned.
  Clock* clock = Clock::Real();
};

class TelemetrySampler {
 public:
  // `state` must outlive the sampler. Starts the thread.
  static std::unique_ptr<TelemetrySampler> Start(const AgentState* state,
                                                 TelemetrySamplerOptions options);
  ~TelemetrySampler();  // Stop()
  TelemetrySampler(const TelemetrySampler&) = delete;
  TelemetrySampler& operator=(const TelemetrySampler&) = delete;

  // Stops the thread and waits for a reading in progress. Latest keeps answering. Idempotent.
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);

  NodeReading Latest() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  TelemetrySampler(const AgentState* state, TelemetrySamplerOptions options);
  void Loop() ABSL_LOCKS_EXCLUDED(mu_);
  // One reading, stored as the latest (only the sampler's thread calls it).
  void ReadOnce() ABSL_LOCKS_EXCLUDED(mu_);

  // What names each covered device, by (family, physical index).
  struct DeviceName {
    std::string type;
    std::string resource;
    int instance = 0;
  };
  using DeviceNames = std::map<std::pair<std::string, int>, DeviceName>;
  static DeviceNames NamesOf(const NodeHardware& hardware);

  const AgentState* const state_;
  const TelemetrySamplerOptions options_;
  const DeviceNames names_;  // the hardware never changes
  // Used by the sampler's thread only.
  NodeTelemetryReader reader_;
  WorkerUsageTracker workers_;
  std::set<std::string> warned_;  // telemetry warnings logged so far

  mutable absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  NodeReading latest_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

// The physical indices of the devices `leases` hold (a fraction counts), by family: what the
// simulated model is driven by. Grants of resources that name no advertised family are ignored.
BusyDevices BusyDevicesOfLeases(const NodeHardware& hardware,
                                const std::vector<LeaseRecord>& leases);

}  // namespace tessera
