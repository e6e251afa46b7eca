// AgentOptions: everything a node agent process is started with (`tessera start --address ...`,
// or one agent per node of a cluster file under `tessera up`), and the defaults the runtime
// contract gives (docs/cluster-runtime.md): the state folder, the token file, the bind address.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "base/clock.h"
#include "hardware/device_error_reader.h"
#include "hardware/environment.h"
#include "labels/label.h"
#include "resources/resource_set.h"

namespace tessera {

// Copyable value; not thread-safe.
struct AgentOptions {
  // The cluster's state folder. "": $TESSERA_STATE_DIR, else the per-user default
  // (process/private_paths.h DefaultStateDirectory).
  std::string state_dir;
  // host:port of the head, or several separated by commas (a head that may come back at
  // another of them). "": <state>/head.address when it exists, else the agent runs alone (no
  // registration, no spillback: every lease is decided locally). Resolved: the first address.
  std::string head_address;
  // Resolved: the other addresses given (tried in turn when the head cannot be reached).
  std::vector<std::string> head_fallbacks;
  // Resolved: where the head of this state folder publishes its address (<state>/head.address),
  // when the agent's head is that one; the agent looks there again when the head cannot be
  // reached, so a head restarted on another port is found. "" for a remote head.
  std::string head_address_file;
  // The cluster token. "": read from token_file, else $TESSERA_TOKEN, else <state>/token.
  std::string token;
  std::string token_file;  // --token-file (mode 0600, rpc/token.h)
  std::string bind = "127.0.0.1";
  int port = 0;  // 0: an ephemeral port (written to <state>/nodes/<id>/agent.address)
  // The agent's HTTP endpoint (Prometheus /metrics), on the `bind` host: 0 an ephemeral port,
  // -1 none (`--http-port`). Its host:port is written to <state>/nodes/<id>/agent.http and sent
  // to the head (NodeDescription.http_address). Bound beyond loopback it requires the cluster
  // token as a bearer token ("Authorization: Bearer <token>"); on loopback it does not.
  int http_port = 0;
  // How often the agent reads its devices' telemetry and its workers' CPU and memory (for
  // /metrics and the heartbeat's device samples).
  int64_t telemetry_interval_ms = 2000;
  // "": the cluster file's node needs it; otherwise the host name.
  std::string node_id;
  // A simulated hardware description (YAML) instead of probing this machine.
  std::optional<std::string> hardware_file;
  // With node_id: that node's hardware from a cluster file (scheduling/cluster_file.h).
  std::optional<std::string> cluster_file;
  // Root of the Linux tree discovery reads.
  std::string sysroot = "/";
  // Where the drivers' messages about devices come from (the kernel log for NVIDIA Xid records,
  // the TPU runtime's log folder), for failed workers' exit reasons; the defaults are the live
  // machine's (device_error_reader.h). Tests point them at files of their own.
  DeviceErrorOptions device_errors;
  // Where the agent reads the time from: the watchdog's hang and ownership timers, telemetry
  // timestamps, the device messages a failed worker hears of. Tests give a FakeClock. Not owned.
  Clock* clock = Clock::Real();
  // Operator labels and resources, on top of what discovery reports.
  LabelSet labels;
  ResourceSet resources;
  // The environment workers inherit (and discovery reads on a live host). nullopt: the
  // process's own.
  std::optional<Environment> environment;

  // A lease request that has been spilled back this many times is answered here (pending, with
  // the explanation) instead of being sent on again.
  int max_spillback_hops = 4;
  // KillWorker with signal 0 and shutdown: SIGTERM, then SIGKILL after this long.
  int64_t kill_grace_ms = 2000;
  // Deadline of one call to the head, and the overall budget of its retries.
  int64_t head_call_timeout_ms = 2000;
  int64_t head_retry_budget_ms = 5000;

  // Workers start from this many prestarted tessera-launcher processes kept ready, so a lease
  // does not wait for a fork of the agent (`--prestarted-workers N`); 0: every worker is
  // forked from the agent.
  int prestarted_workers = 2;
  // The tessera-launcher binary (`--launcher PATH`). "": tessera-launcher beside the agent's own
  // executable; when that is missing the agent says so and forks workers instead. A path given
  // here must be an executable file.
  std::string launcher;
  // The node's shared-memory object store (`--object-store-memory SIZE`), served at
  // <node dir>/objects.sock and to other agents (OfferObject, then the agent's TCP data port;
  // PullObject); its pages are allocated when the agent starts. 0: no store (so a program or
  // test that embeds an agent allocates nothing it did not ask for). nullopt: the default size,
  // a share of this host's memory (30% of MemAvailable, at most 2 GiB: DecideObjectStoreSize in
  // node/object_store_sizing.h). Resolution checks the size against this host's memory before
  // anything is allocated and leaves the decided size here.
  std::optional<uint64_t> object_store_bytes = 0;
  // Root of the tree whose /proc/meminfo the store is sized against. Not `sysroot`: a fake tree
  // for discovery describes another machine, but the store's pages are always this host's.
  // Tests point it at a fake tree.
  std::string memory_sysroot = "/";
};

// The options with every default filled in: state_dir, token (from token_file, the environment
// or <state>/token; that file's errors, e.g. PermissionDenied when others may read it; NotFound
// naming the file when there is no token and a head is named), head_address
// (from <state>/head.address when present) and node_id (host name unless a cluster file is
// given, which requires one), and object_store_bytes (the default share when nullopt).
// InvalidArgument for an empty bind address, a port outside [0, 65535], an HTTP port outside
// [-1, 65535], a telemetry interval that is not positive, prestarted_workers
// outside [0, kMaxPrestartedWorkers], a launcher given that is not an executable file (while
// prestarted_workers > 0), or an object store that does not fit this host's memory (one line
// naming the size, the host's memory, what is available and what shared memory holds); a store
// that is not 0 needs <memory_sysroot>/proc/meminfo, whose read or parse error is returned.
absl::StatusOr<AgentOptions> ResolveAgentOptions(AgentOptions options);

// The address the head of the agent's state folder publishes now (head_address_file), read again
// each call: "" when there is no such file, or the folder can no longer be trusted.
std::string PublishedHeadAddress(const std::string& head_address_file,
                                 const std::string& state_dir);

// "$TESSERA_STATE_DIR", else DefaultStateDirectory of env's XDG_STATE_HOME and HOME.
std::string DefaultStateDir(const Environment& env);

// The most launchers an agent keeps ready.
inline constexpr int kMaxPrestartedWorkers = 64;

// tessera-launcher in the folder of this process's executable (/proc/self/exe); "" when that
// cannot be read.
std::string DefaultLauncherPath();

}  // namespace tessera
