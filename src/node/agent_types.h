// The node agent's records: ids, leases, bundles held for the head's placement groups, and the
// worker processes that run leases. Plain values; the agent state owns them.
#pragma once

#include <compare>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/strong_id.h"
#include "scheduling/cluster_view.h"

namespace tessera {

using LeaseId = StrongId<struct LeaseIdTag, std::string>;
using WorkerId = StrongId<struct WorkerIdTag, std::string>;

// One bundle of one placement group, as the head names them.
struct BundleKey {
  std::string group;
  int index = 0;
  friend auto operator<=>(const BundleKey&, const BundleKey&) = default;
  friend bool operator==(const BundleKey&, const BundleKey&) = default;
};
// "pg-3/1": for messages.
std::string BundleKeyName(const BundleKey& key);

// A lease the agent holds. Its allocation names the device instances it took (node-level
// instance indices), whether it came from the node or from a bundle's reservation.
struct LeaseRecord {
  LeaseId id;
  WorkerId worker;
  std::string job_id;
  Allocation allocation;
  std::optional<BundleKey> bundle;  // set when served from a bundle's reservation
};

// A bundle reservation taken for the head (prepared, then committed).
struct BundleRecord {
  BundleKey key;
  Allocation allocation;
  bool committed = false;
};

// How a worker ended (the protocol's WorkerExit).
struct WorkerExitInfo {
  int exit_code = -1;  // -1 when killed by a signal
  int signal = 0;      // 0 when it exited
  bool out_of_memory = false;
  std::string reason;  // "exited with code 3", "killed by signal 9 (SIGKILL)", "out of memory"
  bool bundle_removed = false;  // killed because its bundle was removed (WorkerExit proto)
  // What the drivers said about its devices while it ran ("GPU 0 (0000:01:00.0): Xid 79, ...",
  // WorkerDeviceErrors): AgentState appends it to `reason`, last. "" when nothing was said.
  std::string device_messages;
  friend bool operator==(const WorkerExitInfo&, const WorkerExitInfo&) = default;
};

// Shown as the protocol's WorkerState (node/agent_proto.h), in words by rpc/state_names.h.
enum class WorkerState { kStarting, kRunning, kExited };

struct WorkerRecord {
  WorkerId id;
  LeaseId lease;
  std::string job_id;
  int pid = 0;
  std::vector<std::string> argv;
  WorkerState state = WorkerState::kStarting;
  std::optional<WorkerExitInfo> exit;
  Allocation allocation;
  std::map<std::string, std::string> isolation_env;  // variables set (value) for isolation
  std::string stdout_path;
  std::string stderr_path;
  std::optional<BundleKey> bundle;
  // Why the agent killed it ("after a KillWorker request"), added to its exit reason; and
  // whether that was the removal of its bundle.
  std::string kill_cause;
  bool killed_for_bundle = false;
  // Its lease ended while it runs on (NodeAgent.ReturnLease): it holds nothing.
  bool lease_returned = false;
};

}  // namespace tessera
