// DeviceErrorReader: one accelerator family's source of low-level driver and runtime messages
// about its devices, so that a worker's failure can say whether its hardware faulted: NVIDIA Xid
// records in the kernel log, AMD RAS error counters, Neuron hardware error counters, the TPU
// runtime's logs. Opened once per host through AcceleratorPlugin::OpenErrorWatch, like
// telemetry; families without a source (Gaudi without HLML, Intel GPU without Level Zero) get a
// reader that reports nothing.
//
//   auto reader = plugin.OpenErrorWatch(DeviceErrorContext{Sysroot("/"), {}});
//   DeviceErrorSnapshot start = reader->Snapshot(devices, absl::Now());   // the worker starts
//   ...
//   DeviceErrorReport seen = reader->MessagesSince(start, devices, absl::Now());  // it failed
//
// A source that is a stream (the kernel log) is read from where it stood when the reader was
// opened; history is skipped. Every read is non-blocking and bounded (a few small files per
// device, a bounded number of log records), so a caller never waits on a driver.
// Not thread-safe: one caller at a time (NodeDeviceErrorWatch serializes its readers).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/time/time.h"
#include "hardware/device.h"
#include "hardware/sysroot.h"

namespace tessera {

struct DeviceErrorOptions {
  // The kernel log, in /dev/kmsg's record format ("prio,seq,ts_usec,flags;text"), where the
  // NVIDIA driver writes its Xid records. "": /dev/kmsg on the live machine, none on a fake tree.
  // Tests name a regular file or a FIFO they write records into.
  std::string kernel_log;
  // The TPU runtime's log folder (libtpu's). "": /tmp/tpu_logs on the live machine, none on a
  // fake tree.
  std::string tpu_log_dir;
};

// The host a reader reads: copied into the reader, which outlives the caller's values.
struct DeviceErrorContext {
  Sysroot sysroot;
  DeviceErrorOptions options;
};

// Where a family's sources stood for some devices at a moment: counter values, a log position,
// log file sizes, each under a key its reader chooses ("3/umc/ue", "kernel_log"). Plain values.
struct DeviceErrorSnapshot {
  absl::Time taken = absl::InfinitePast();
  std::map<std::string, uint64_t> marks;
};

struct DeviceErrorReport {
  // One line each, naming the device: "GPU 0 (0000:01:00.0): Xid 79, GPU has fallen off the
  // bus". Oldest first where the source orders them.
  std::vector<std::string> messages;
  // About the source, not a device ("cannot read the kernel log /dev/kmsg: Permission denied").
  std::vector<std::string> warnings;
};

class DeviceErrorReader {
 public:
  virtual ~DeviceErrorReader() = default;

  // Where the sources of `devices` (devices this family's Detect returned on this host) stand
  // at `now`, the wall clock (log files are judged by their modification times). Total: what
  // cannot be read is left out.
  virtual DeviceErrorSnapshot Snapshot(std::span<const Device> devices, absl::Time now) = 0;
  // What the sources said about `devices` after `snapshot` was taken (a Snapshot of the same
  // devices by this reader). Total.
  virtual DeviceErrorReport MessagesSince(const DeviceErrorSnapshot& snapshot,
                                          std::span<const Device> devices, absl::Time now) = 0;
  // Reads what a source keeps only for a while (the kernel's ring buffer), so that nothing said
  // between a Snapshot and MessagesSince is overwritten first. Cheap, never blocks. Default:
  // nothing to do.
  virtual void Poll() {}
};

// A reader that reports nothing: the family has no source of device messages.
std::unique_ptr<DeviceErrorReader> MakeNoDeviceErrorReader();

// "GPU 0 (0000:01:00.0)": `noun`, the device's physical index and its PCI address when it has
// one; the head of a message line.
std::string DeviceLabel(std::string_view noun, const Device& device);

// "<label>: <what> rose by <n>" when `after` > `before`, else "".
std::string CounterRise(std::string_view label, std::string_view what, uint64_t before,
                        uint64_t after);

}  // namespace tessera
