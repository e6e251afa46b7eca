// AcceleratorPlugin: everything Tessera knows about one accelerator family (NVIDIA, AMD, Intel
// GPU, Google TPU, AWS Neuron, Intel Gaudi). Core code never names a concrete plugin; the
// registry (plugin_registry.h) lists them once. Every plugin passes one conformance suite.
// Besides detection and isolation, a plugin opens its family's live device figures
// (OpenTelemetry, telemetry_reader.h) and its driver's messages about devices (OpenErrorWatch,
// device_error_reader.h).
// Thread-safe: plugins are stateless after construction; all inputs come through arguments.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "hardware/device.h"
#include "hardware/device_error_reader.h"
#include "hardware/environment.h"
#include "hardware/pci.h"
#include "hardware/sysroot.h"
#include "hardware/telemetry_reader.h"
#include "labels/label.h"
#include "resources/quantity.h"
#include "resources/resource_set.h"

namespace tessera {

// A node with accelerators of type T carries one unit of the resource "accelerator_type:T", for
// requests that ask for that type.
inline constexpr std::string_view kAcceleratorTypeResourcePrefix = "accelerator_type:";

// Settings that change how detection probes (never what a family means).
struct DetectionOptions {
  // Path or soname of the NVML library; "" means the default search (see the NVIDIA plugin).
  std::string nvml_library;
};

// What a plugin may read while detecting. Everything on disk goes through `sysroot`, every
// variable through `env`.
struct DetectionContext {
  const Sysroot& sysroot;
  const Environment& env;
  const PciInventory& pci;
  const DetectionOptions& options;
};

// The outcome of one family's detection. Detection is total: a failure is an empty device list
// with a warning that says why, never an error.
struct Detection {
  std::vector<Device> devices;  // sorted by index
  std::vector<DeviceLink> links;
  LabelSet labels;                    // extra node labels (TPU slice labels, fabric domain)
  ResourceSet resources;              // extra node resources (TPU slice markers)
  std::vector<std::string> warnings;  // e.g. "0000:3b:00.0 (10de:22a3) is an NVSwitch, not counted"
  // Conditions under which a node agent must refuse to start (e.g. ROCR_VISIBLE_DEVICES set,
  // CUDA_VISIBLE_DEVICES and HIP_VISIBLE_DEVICES disagreeing). Shown by `tessera hardware`.
  std::vector<std::string> errors;
  std::vector<std::string> evidence;  // how the devices were found, for diagnosis without a shell
  std::string probe;                  // "nvml", "sysfs", "kfd", "accel", "vfio", "simulated", ...
};

// One environment change for a worker process: set `name` to `value`, or unset it (nullopt).
struct EnvChange {
  std::string name;
  std::optional<std::string> value;
  friend bool operator==(const EnvChange&, const EnvChange&) = default;
};
using EnvChanges = std::vector<EnvChange>;

// Whether a visible-devices mask value, trimmed, selects no device at all: "" or "NoDevFiles"
// (the placeholder a launcher writes when it gives a process none). Every family reads it so.
bool MaskSelectsNoDevice(std::string_view trimmed_value);

class AcceleratorPlugin {
 public:
  virtual ~AcceleratorPlugin() = default;

  // "nvidia", "amd", "intel-gpu", "tpu", "neuron", "gaudi".
  virtual std::string_view family() const = 0;
  // The node resource its devices count toward: "GPU", "TPU", "neuron_cores", "HPU".
  virtual std::string_view resource_name() const = 0;
  // The variable that limits which devices a process sees, e.g. "CUDA_VISIBLE_DEVICES".
  virtual std::string_view visible_devices_env() const = 0;
  // Whether the resource is tracked per device instance (true for every family here).
  virtual bool unit_instance() const { return true; }

  // Finds this family's devices. Must claim a device only after checking its PCI vendor id (and
  // class or driver), so that another family's hardware is never counted.
  virtual Detection Detect(const DetectionContext& context) const = 0;

  // Whether a task may request `quantity` of resource_name(): OK or InvalidArgument naming the
  // rule ("TPU requests must be 1, 2, 4 or 8 chips").
  virtual absl::Status ValidateQuantity(const Quantity& quantity) const = 0;

  // Reads a visible-devices mask value (the variable is set) into physical indices, in mask
  // order; an empty list means no device. `devices` lets a family resolve UUID entries.
  // Default: comma-separated integers ("" and "NoDevFiles" mean none).
  virtual absl::StatusOr<std::vector<int>> ParseMask(std::string_view value,
                                                     const std::vector<Device>& devices) const;
  // Writes a mask value for physical indices, in order. Default: "0,3".
  virtual std::string FormatMask(std::span<const int> physical_indices) const;

  // The environment a worker gets for `assigned` (non-empty, physical indices) out of this
  // host's `devices`. Default: the visible-devices variable set to FormatMask(assigned).
  // Families add their extra variables (CUDA_DEVICE_ORDER, TPU bounds, ...).
  virtual EnvChanges IsolationEnv(std::span<const int> assigned,
                                  const std::vector<Device>& devices) const;

  // Opens this family's source of live device figures on the host `context` describes
  // (telemetry_reader.h). Cheap and total: libraries and channels are opened by the reader's
  // first Read, which says why when they cannot be. A family that cannot measure a figure leaves
  // it absent. Default: a reader that reports no figures and says the family has no source.
  virtual std::unique_ptr<TelemetryReader> OpenTelemetry(const TelemetryContext& context) const;

  // Opens this family's source of driver and runtime messages about its devices on the host
  // `context` describes (device_error_reader.h), for the failure reasons of workers that held
  // them. Cheap and total: a source that cannot be read says so in the reports' warnings.
  // Default: a reader that reports nothing (the family has no source).
  virtual std::unique_ptr<DeviceErrorReader> OpenErrorWatch(
      const DeviceErrorContext& context) const;
};

}  // namespace tessera
