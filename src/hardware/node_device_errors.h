// NodeDeviceErrorWatch: the driver and runtime messages about a node's devices, one
// DeviceErrorReader per advertised family (AcceleratorPlugin::OpenErrorWatch), for the failure
// reasons of the node agent's workers: a snapshot of the devices a worker holds when it starts,
// the messages about them since when it fails.
//
//   NodeDeviceErrorWatch watch(node_hardware, Sysroot("/"), {});
//   NodeErrorSnapshot start = watch.Snapshot({{"nvidia", {gpu0}}}, absl::Now());
//   DeviceErrorReport seen = watch.MessagesSince(start, absl::Now());
//
// A simulated node (its families' probe is "simulated") reads nothing and reports nothing.
// Thread-safe: one mutex serializes the readers. Each call costs what the families' readers cost
// (device_error_reader.h: bounded, never blocking).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "hardware/device_error_reader.h"
#include "hardware/node_discovery.h"

namespace tessera {

// The devices a worker holds, by family name ("nvidia" -> its Devices).
using HeldDevices = std::map<std::string, std::vector<Device>, std::less<>>;

struct NodeErrorSnapshot {
  HeldDevices devices;
  std::map<std::string, DeviceErrorSnapshot, std::less<>> families;
};

class NodeDeviceErrorWatch {
 public:
  // `sysroot` is the node's (as discovery read it); ignored for a simulated node. Opens each
  // advertised family's reader.
  NodeDeviceErrorWatch(const NodeHardware& hardware, const Sysroot& sysroot,
                       const DeviceErrorOptions& options);
  ~NodeDeviceErrorWatch();
  NodeDeviceErrorWatch(const NodeDeviceErrorWatch&) = delete;
  NodeDeviceErrorWatch& operator=(const NodeDeviceErrorWatch&) = delete;

  // Where the sources of `devices` stand at `now` (the wall clock). Families without a reader
  // here are left out.
  NodeErrorSnapshot Snapshot(HeldDevices devices, absl::Time now) ABSL_LOCKS_EXCLUDED(mu_);
  // The messages about the snapshot's devices since it was taken, family by family in registry
  // order; warnings are prefixed "<family>: ".
  DeviceErrorReport MessagesSince(const NodeErrorSnapshot& snapshot, absl::Time now)
      ABSL_LOCKS_EXCLUDED(mu_);
  // DeviceErrorReader::Poll of every family (between workers' starts and exits).
  void Poll() ABSL_LOCKS_EXCLUDED(mu_);
  // True when some family has a reader (a probed node with an advertised family).
  bool watches_anything() const { return watches_anything_; }

 private:
  struct Family {
    std::string name;
    std::unique_ptr<DeviceErrorReader> reader;
  };
  absl::Mutex mu_;
  std::vector<Family> families_ ABSL_GUARDED_BY(mu_);
  bool watches_anything_ = false;  // set once by the constructor
};

}  // namespace tessera
