#include "node/worker_env.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "hardware/isolation.h"

namespace tessera {

absl::StatusOr<EnvChanges> LeaseIsolationEnv(const NodeHardware& hardware,
                                             const Allocation& allocation) {
  const std::vector<VisibleFamily> families = hardware.VisibleFamilies();
  DeviceAssignment assignment;
  for (const DeviceGrant& grant : allocation.devices) {
    const VisibleFamily* owner = nullptr;
    for (const VisibleFamily& family : families) {
      if (family.plugin->resource_name() == grant.resource) {
        owner = &family;
        break;
      }
    }
    if (owner == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the lease holds ", grant.resource, " devices, which no family of this node advertises"));
    }
    std::vector<int>& ids = assignment[std::string(owner->plugin->family())];
    ids.insert(ids.end(), grant.instances.begin(), grant.instances.end());
  }
  return WorkerIsolationEnv(families, assignment, hardware.isolation);
}

Environment BuildWorkerEnvironment(const WorkerEnvParts& parts) {
  Environment env = parts.agent;
  for (const auto& [name, value] : parts.slice_env) env.Set(name, value);
  for (const auto& [name, value] : parts.spec_env) env.Set(name, value);
  ApplyEnvChanges(parts.isolation, env);
  env.Set("TESSERA_NODE_ID", parts.node.value());
  env.Set("TESSERA_WORKER_ID", parts.worker.value());
  env.Set("TESSERA_LEASE_ID", parts.lease.value());
  // Always set (empty without a store), so a value inherited from the agent's own environment
  // never points a worker at another node's store.
  env.Set(kObjectStoreSocketEnv, parts.object_store_socket);
  // The agent's address decides where its workers are reachable, whatever the lease asked.
  if (!parts.worker_bind.empty()) env.Set(kWorkerBindEnv, parts.worker_bind);
  env.Unset(kTokenEnv);
  if (parts.token_file.empty()) {
    env.Unset(kTokenFileEnv);
  } else {
    env.Set(kTokenFileEnv, parts.token_file);
  }
  return env;
}

std::map<std::string, std::string> IsolationEnvMap(const EnvChanges& changes) {
  std::map<std::string, std::string> out;
  for (const EnvChange& change : changes) {
    if (change.value.has_value()) {
      out[change.name] = *change.value;
    } else {
      out.erase(change.name);
    }
  }
  return out;
}

}  // namespace tessera
