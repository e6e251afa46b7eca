// Where a node agent's hardware comes from: this machine (DiscoverNode over the sysroot), a
// simulated hardware description, or one node of a cluster file (`tessera up` starts one agent
// per node with --cluster-file F --node-id N). Also the TPU slice identity the host's workers
// get (TPU_WORKER_ID, TPU_NAME, ...), which a real TPU VM has in its environment and a
// simulated host only in its description.
// Thread-safe: a pure function of its inputs and the files it reads.
#pragma once

#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "base/strong_id.h"
#include "hardware/node_discovery.h"
#include "node/agent_options.h"

namespace tessera {

struct LoadedNode {
  NodeId id;
  NodeHardware hardware;
  // Variables every worker of this host gets for its TPU slice identity (reference
  // accelerators.md §7.1): TPU_NAME, TPU_WORKER_ID, TPU_ACCELERATOR_TYPE, TPU_TOPOLOGY and
  // TPU_WORKER_HOSTNAMES where known. Empty on a host that is not part of a TPU slice.
  std::map<std::string, std::string> slice_env;
};

// Errors: the files' own one-line errors (NotFound, InvalidArgument); NotFound when the cluster
// file has no node `options.node_id`; InvalidArgument when an operator resource override names
// a device resource of a cluster file's node; FailedPrecondition naming the first condition
// under which discovery says an agent must not start.
absl::StatusOr<LoadedNode> LoadNodeHardware(const AgentOptions& options);

// The slice identity variables of a host with these labels (tessera.io/tpu-*), plus the given
// worker host names when non-empty.
std::map<std::string, std::string> TpuSliceEnv(const LabelSet& labels,
                                               const std::vector<std::string>& worker_hostnames);

}  // namespace tessera
