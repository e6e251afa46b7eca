// Node telemetry: the live figures of every device a node advertises, one reader per family,
// for the node agent's metrics, the dashboard and `tessera hardware`.
//
//   NodeTelemetryReader reader(node_hardware, Sysroot("/"), Environment::FromProcess(), {});
//   NodeTelemetry now = reader.Read(absl::Now(), busy);  // every few seconds; total
//
// Covered devices: each advertised family's visible devices, in registry order and then instance
// order (the devices the node offers to tasks). A simulated node (its families' probe is
// "simulated") reads nothing from disk: its figures come from SimulatedTelemetryModel, driven by
// `busy`, the devices that workers hold.
// Not thread-safe: one caller drives a reader. A Read costs what each family's reader costs
// (telemetry_reader.h).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "hardware/accelerator_plugin.h"
#include "hardware/device_telemetry.h"
#include "hardware/node_discovery.h"
#include "hardware/simulated/simulated_telemetry.h"

namespace tessera {

// The physical indices of the devices that workers hold, by family ("nvidia" -> {0, 3}).
using BusyDevices = std::map<std::string, std::set<int>, std::less<>>;

struct NodeTelemetryOptions {
  TelemetryOptions telemetry;
  // The simulated model's seed (e.g. a hash of the node id, so nodes differ).
  uint64_t simulation_seed = 0;
};

struct NodeTelemetry {
  std::vector<DeviceTelemetry> devices;
  // The families' warnings about their sources, each prefixed "<family>: ".
  std::vector<std::string> warnings;
};

class NodeTelemetryReader {
 public:
  // `sysroot` and `env` are the node's (as discovery read them); both are ignored for a
  // simulated node. Opens each family's reader, which opens its sources on the first Read.
  NodeTelemetryReader(const NodeHardware& hardware, const Sysroot& sysroot, const Environment& env,
                      const NodeTelemetryOptions& options);
  ~NodeTelemetryReader();
  NodeTelemetryReader(const NodeTelemetryReader&) = delete;
  NodeTelemetryReader& operator=(const NodeTelemetryReader&) = delete;

  // One reading at `now` (a monotonic clock's reading; see TelemetryReader::Read).
  NodeTelemetry Read(absl::Time now, const BusyDevices& busy = {});

 private:
  struct Family {
    std::string name;
    std::vector<Device> devices;
    std::unique_ptr<TelemetryReader> reader;         // a probed family
    std::unique_ptr<SimulatedTelemetryModel> model;  // a simulated one
  };
  std::vector<Family> families_;
};

// One reading without keeping readers, for a one-shot report: figures derived from two samples
// (power from energy counters, NVIDIA GPM activity) are absent.
NodeTelemetry ReadNodeTelemetry(const NodeHardware& hardware, const Sysroot& sysroot,
                                const Environment& env, const NodeTelemetryOptions& options,
                                absl::Time now, const BusyDevices& busy = {});

}  // namespace tessera
