// The environment a worker process starts with: the agent's own environment, then the host's
// TPU slice identity, then the lease's WorkerSpec.env, then the isolation variables of the
// lease's device instances (so a worker cannot widen what it sees), then the ids the runtime
// gives every worker (TESSERA_NODE_ID, TESSERA_WORKER_ID, TESSERA_LEASE_ID, and
// TESSERA_OBJECT_STORE_SOCKET when the node hosts an object store). TESSERA_TOKEN never passes:
// workers get TESSERA_TOKEN_FILE.
// Thread-safe: pure functions of their inputs.
#pragma once

#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "hardware/environment.h"
#include "hardware/node_discovery.h"
#include "node/agent_types.h"
#include "scheduling/cluster_view.h"

namespace tessera {

// The isolation variables for the device instances of `allocation` on a node with `hardware`:
// each DeviceGrant's resource is mapped to the advertised family that owns it (claim order),
// and its instances go through WorkerIsolationEnv with the node's isolation policy. A fraction
// of a device makes the device visible. InvalidArgument when a grant names a resource no family
// of the node advertises, or an instance out of range.
absl::StatusOr<EnvChanges> LeaseIsolationEnv(const NodeHardware& hardware,
                                             const Allocation& allocation);

struct WorkerEnvParts {
  Environment agent;
  std::map<std::string, std::string> slice_env;
  std::map<std::string, std::string> spec_env;
  EnvChanges isolation;
  NodeId node;
  WorkerId worker;
  LeaseId lease;
  // The node's object store socket (<node dir>/objects.sock); "" when the agent hosts none.
  std::string object_store_socket;
  // The host a worker serves its calls on: the one others reach this agent at ("" leaves the
  // worker's default, loopback).
  std::string worker_bind;
  // The private file the worker reads the cluster token from ("": none).
  std::string token_file;
};

// Where a worker finds its node's object store (worker/worker_runtime.h reads it).
inline constexpr char kObjectStoreSocketEnv[] = "TESSERA_OBJECT_STORE_SOCKET";
// Where a worker serves (worker/worker_runtime.h reads it).
inline constexpr char kWorkerBindEnv[] = "TESSERA_WORKER_BIND";
// The cluster token is never passed in a worker's environment (it would end up in logs and in
// every child process): a value from the agent's environment or the lease is removed, and the
// worker is told where to read it instead (worker/worker_runtime.h reads both names).
inline constexpr char kTokenEnv[] = "TESSERA_TOKEN";
inline constexpr char kTokenFileEnv[] = "TESSERA_TOKEN_FILE";

Environment BuildWorkerEnvironment(const WorkerEnvParts& parts);

// The isolation changes as the protocol reports them (an unset variable is left out).
std::map<std::string, std::string> IsolationEnvMap(const EnvChanges& changes);

}  // namespace tessera
