// WorkerDeviceErrors: the driver and runtime messages about a worker's devices, attached to its
// exit reason when it fails, so its owner can tell a hardware fault from a bug in its code
// (docs/observability.md, "Device messages in failure reasons"). When a worker starts, the
// agent snapshots the devices it sees (its allocation's device instances); when it exits, the
// messages about them since (NodeDeviceErrorWatch) become one bounded line:
//
//   GPU 0 (0000:01:00.0): Xid 79, GPU has fallen off the bus (2 times); GPU 1 (...): Xid 48, ...
//
// Identical messages are counted once, and at most kMaxDeviceMessages messages and
// kMaxDeviceMessageBytes bytes are kept ("and 3 more"). A source's warnings (a kernel log that
// cannot be read) go to the agent's log once each, never into a reason.
//
//   WorkerDeviceErrors errors(hardware, Sysroot("/"), {}, "node agent n1");
//   errors.Started(worker, allocation);
//   std::string line = errors.Exited(worker, /*failed=*/true);  // "" when nothing was said
//
// Thread-safe: a mutex guards the snapshots; the watch serializes its readers. Started and
// Exited cost the families' reads for the worker's devices (bounded, never blocking).
#pragma once

#include <cstddef>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "base/clock.h"
#include "hardware/node_device_errors.h"
#include "node/agent_types.h"

namespace tessera {

inline constexpr size_t kMaxDeviceMessages = 5;
inline constexpr size_t kMaxDeviceMessageBytes = 1024;

class WorkerDeviceErrors {
 public:
  // `hardware` names the node's devices (read once, not kept); `log_name` heads the log lines
  // ("node agent n1"); `clock` (not owned) dates a worker's start and end.
  WorkerDeviceErrors(const NodeHardware& hardware, const Sysroot& sysroot,
                     const DeviceErrorOptions& options, std::string log_name,
                     Clock* clock = Clock::Real());

  // The worker starts seeing `allocation`'s devices. A worker without devices is not tracked.
  void Started(const WorkerId& worker, const Allocation& allocation) ABSL_LOCKS_EXCLUDED(mu_);
  // The worker ended: when `failed`, the messages about its devices since it started, joined as
  // above ("" when there were none); "" when it succeeded. Forgets the worker.
  std::string Exited(const WorkerId& worker, bool failed) ABSL_LOCKS_EXCLUDED(mu_);
  // Reads the sources that must be read continuously (NodeDeviceErrorWatch::Poll).
  void Poll();

 private:
  struct Family {
    std::string name;
    std::vector<Device> visible;  // by instance index
  };

  HeldDevices HeldBy(const Allocation& allocation) const;
  void LogWarnings(const std::vector<std::string>& warnings) ABSL_LOCKS_EXCLUDED(mu_);

  const std::string log_name_;
  Clock* const clock_;
  std::map<std::string, Family, std::less<>> by_resource_;  // "GPU" -> its family; fixed
  NodeDeviceErrorWatch watch_;
  absl::Mutex mu_;
  std::map<WorkerId, NodeErrorSnapshot> started_ ABSL_GUARDED_BY(mu_);
  std::set<std::string> warned_ ABSL_GUARDED_BY(mu_);
};

// `messages` as one line: identical ones counted ("(2 times)"), in first-seen order, joined by
// "; ", at most kMaxDeviceMessages of them and kMaxDeviceMessageBytes in all ("; and N more"
// for the rest). "" for none.
std::string JoinDeviceMessages(const std::vector<std::string>& messages);

}  // namespace tessera
