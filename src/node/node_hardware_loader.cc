#include "node/node_hardware_loader.h"

#include <algorithm>
#include <fstream>
#include <sstream>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/file_read.h"
#include "base/status_macros.h"
#include "base/string_util.h"
#include "hardware/node_label_keys.h"
#include "hardware/tpu/tpu_identity.h"
#include "node/object_store_sizing.h"
#include "scheduling/cluster_file.h"
#include "yaml-cpp/yaml.h"

namespace tessera {
namespace {

// Sized before it is read (base/file_read.h): a huge file is refused at once.
absl::StatusOr<std::string> ReadWholeFile(const std::string& path, absl::string_view what) {
  return ReadFileUpTo(path, kMaxDescriptionFileBytes, what);
}

std::string LabelOr(const LabelSet& labels, std::string_view key) {
  auto it = labels.find(key);
  return it == labels.end() ? std::string() : it->second;
}

// accelerators[*].tpu.worker_hostnames of a simulated description that already parsed (so it is
// valid YAML); yaml-cpp throws, and a failure here only loses the host names.
std::vector<std::string> DescriptionWorkerHostnames(const std::string& text) {
  std::vector<std::string> names;
  try {
    const YAML::Node root = YAML::Load(text);
    const YAML::Node accelerators = root["accelerators"];
    if (!accelerators.IsSequence()) return names;
    for (const YAML::Node& entry : accelerators) {
      const YAML::Node hosts = entry["tpu"]["worker_hostnames"];
      if (!hosts.IsSequence()) continue;
      for (const YAML::Node& host : hosts) names.push_back(host.as<std::string>());
      break;
    }
  } catch (const YAML::Exception&) {
    names.clear();
  }
  return names;
}

// The cluster file's hosts of the same slice, in worker order: a generated slice host's
// TPU_WORKER_HOSTNAMES are its slice's node ids.
std::vector<std::string> SliceHostsInCluster(const std::vector<ClusterNode>& nodes,
                                             const LabelSet& mine) {
  const std::string slice = LabelOr(mine, labels::kTpuSliceName);
  if (slice.empty()) return {};
  std::vector<std::pair<int, std::string>> hosts;
  for (const ClusterNode& node : nodes) {
    if (LabelOr(node.hardware.labels, labels::kTpuSliceName) != slice) continue;
    int worker = 0;
    if (!absl::SimpleAtoi(LabelOr(node.hardware.labels, labels::kTpuWorkerId), &worker)) return {};
    hosts.emplace_back(worker, node.id);
  }
  std::sort(hosts.begin(), hosts.end());
  std::vector<std::string> names;
  for (auto& [worker, id] : hosts) names.push_back(std::move(id));
  return names;
}

// Operator overrides on a cluster file's node: labels are added; CPU, memory and custom
// resources are set; device resources come from the file only.
absl::Status ApplyOverrides(const AgentOptions& options, NodeHardware& hardware) {
  TESSERA_RETURN_IF_ERROR(ValidateLabels(options.labels, LabelOrigin::kUser));
  for (const auto& [key, value] : options.labels) hardware.labels[key] = value;
  for (const auto& [name, quantity] : options.resources) {
    for (const FamilyReport& family : hardware.families) {
      if (family.plugin != nullptr && family.plugin->resource_name() == name) {
        return absl::InvalidArgumentError(
            absl::StrCat("resource ", name, " of a cluster file's node comes from the file"));
      }
    }
    hardware.resources.Set(name, quantity);
  }
  return absl::OkStatus();
}

absl::StatusOr<LoadedNode> FromClusterFile(const AgentOptions& options) {
  const std::string& path = *options.cluster_file;
  TESSERA_ASSIGN_OR_RETURN(const std::string text, ReadWholeFile(path, "cluster file"));
  TESSERA_ASSIGN_OR_RETURN(std::vector<ClusterNode> nodes, ParseClusterFile(text, path));
  for (ClusterNode& node : nodes) {
    if (node.id != options.node_id) continue;
    LoadedNode loaded;
    loaded.id = NodeId(node.id);
    loaded.slice_env =
        TpuSliceEnv(node.hardware.labels, SliceHostsInCluster(nodes, node.hardware.labels));
    loaded.hardware = std::move(node.hardware);
    TESSERA_RETURN_IF_ERROR(ApplyOverrides(options, loaded.hardware));
    return loaded;
  }
  return absl::NotFoundError(
      absl::StrCat("cluster file ", path, " has no node ", Quote(options.node_id)));
}

}  // namespace

std::map<std::string, std::string> TpuSliceEnv(const LabelSet& labels,
                                               const std::vector<std::string>& worker_hostnames) {
  std::map<std::string, std::string> env;
  auto put = [&](const char* name, std::string_view key) {
    std::string value = LabelOr(labels, key);
    if (!value.empty()) env[name] = std::move(value);
  };
  put("TPU_NAME", labels::kTpuSliceName);
  put("TPU_WORKER_ID", labels::kTpuWorkerId);
  put("TPU_ACCELERATOR_TYPE", labels::kTpuPodType);
  put("TPU_TOPOLOGY", labels::kTpuTopology);
  if (env.empty()) return env;  // not a slice host: host names alone mean nothing
  if (!worker_hostnames.empty()) {
    env["TPU_WORKER_HOSTNAMES"] = absl::StrJoin(worker_hostnames, ",");
  }
  return env;
}

absl::StatusOr<LoadedNode> LoadNodeHardware(const AgentOptions& options) {
  LoadedNode loaded;
  if (options.cluster_file.has_value()) {
    TESSERA_ASSIGN_OR_RETURN(loaded, FromClusterFile(options));
  } else {
    DiscoveryOptions discovery;
    discovery.sysroot = options.sysroot;
    discovery.simulate_file = options.hardware_file;
    discovery.environment = options.environment;
    discovery.resource_overrides = options.resources;
    discovery.user_labels = options.labels;
    TESSERA_ASSIGN_OR_RETURN(loaded.hardware, DiscoverNode(discovery));
    loaded.id = NodeId(options.node_id);
    std::vector<std::string> hostnames;
    if (options.hardware_file.has_value()) {
      TESSERA_ASSIGN_OR_RETURN(const std::string text,
                               ReadWholeFile(*options.hardware_file, "hardware file"));
      hostnames = DescriptionWorkerHostnames(text);
    } else {
      hostnames = TpuIdentityFromEnv(options.environment.value_or(Environment::FromProcess()))
                      .worker_hostnames;
    }
    loaded.slice_env = TpuSliceEnv(loaded.hardware.labels, hostnames);
  }
  if (!loaded.hardware.errors.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("node agent cannot start: ", loaded.hardware.errors.front()));
  }
  // What store the agent hosts (decided by ResolveAgentOptions), for listings and selectors.
  loaded.hardware.labels[std::string(kObjectStoreLabel)] =
      ObjectStoreLabelValue(options.object_store_bytes.value_or(0));
  return loaded;
}

}  // namespace tessera
