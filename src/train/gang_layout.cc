#include "train/gang_layout.h"

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <set>
#include <tuple>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tessera::train {
namespace {

// The order inside a node: slots with devices by their lowest device id, then slots without
// devices; ties by bundle index (and input order, the sort being stable).
struct SlotOrderKey {
  bool no_devices = false;
  int lowest_device_id = 0;
  int bundle_index = 0;

  friend bool operator<(const SlotOrderKey& a, const SlotOrderKey& b) {
    return std::tie(a.no_devices, a.lowest_device_id, a.bundle_index) <
           std::tie(b.no_devices, b.lowest_device_id, b.bundle_index);
  }
};

SlotOrderKey OrderKey(const GangSlot& slot) {
  SlotOrderKey key;
  key.no_devices = slot.device_ids.empty();
  if (!key.no_devices) {
    key.lowest_device_id = *std::min_element(slot.device_ids.begin(), slot.device_ids.end());
  }
  key.bundle_index = slot.bundle_index;
  return key;
}

// "host:port", with an IPv6 host in brackets so that the port stays separable.
std::string HostPort(const std::string& host, int port) {
  if (host.find(':') != std::string::npos && host.front() != '[') {
    return absl::StrCat("[", host, "]:", port);
  }
  return absl::StrCat(host, ":", port);
}

// The hosts of `slice` in worker-id order, one entry per (worker id, host): a host with several
// per-chip slots appears once. Slots without a worker id come last, in slot order.
std::string WorkerHostnames(const GangLayout& layout, const std::string& slice) {
  std::vector<std::pair<int, std::string>> workers;
  std::set<std::pair<int, std::string>> seen;
  for (const GangSlot& slot : layout.slots) {
    if (slot.slice != slice) continue;
    std::pair<int, std::string> worker(slot.tpu_worker_id < 0 ? INT_MAX : slot.tpu_worker_id,
                                       slot.host);
    if (seen.insert(worker).second) workers.push_back(std::move(worker));
  }
  std::stable_sort(workers.begin(), workers.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<std::string> hosts;
  hosts.reserve(workers.size());
  for (auto& worker : workers) hosts.push_back(std::move(worker.second));
  return absl::StrJoin(hosts, ",");
}

}  // namespace

absl::StatusOr<GangLayout> AssignRanks(std::vector<GangSlot> slots) {
  if (slots.empty()) return absl::InvalidArgumentError("a gang needs at least one slot");

  // Nodes and slices in first-seen order of the input.
  std::vector<std::string> node_ids;
  std::vector<std::vector<int>> slots_by_node;
  std::vector<std::string> slices;
  std::vector<int> slice_of_slot(slots.size(), 0);
  for (size_t i = 0; i < slots.size(); ++i) {
    const GangSlot& slot = slots[i];
    if (slot.node_id.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("gang slot ", i, " (bundle ", slot.bundle_index, ") has no node id"));
    }
    auto node = std::find(node_ids.begin(), node_ids.end(), slot.node_id);
    if (node == node_ids.end()) {
      node_ids.push_back(slot.node_id);
      slots_by_node.emplace_back();
      node = node_ids.end() - 1;
    }
    slots_by_node[node - node_ids.begin()].push_back(static_cast<int>(i));
    if (!slot.slice.empty()) {
      auto slice = std::find(slices.begin(), slices.end(), slot.slice);
      if (slice == slices.end()) {
        slices.push_back(slot.slice);
        slice = slices.end() - 1;
      }
      slice_of_slot[i] = static_cast<int>(slice - slices.begin());
    }
  }

  GangLayout layout;
  layout.world_size = static_cast<int>(slots.size());
  layout.num_nodes = static_cast<int>(node_ids.size());
  layout.num_slices = static_cast<int>(slices.size());
  layout.ranks.reserve(slots.size());
  for (size_t node_rank = 0; node_rank < slots_by_node.size(); ++node_rank) {
    std::vector<int>& members = slots_by_node[node_rank];
    std::stable_sort(members.begin(), members.end(),
                     [&](int a, int b) { return OrderKey(slots[a]) < OrderKey(slots[b]); });
    for (size_t local_rank = 0; local_rank < members.size(); ++local_rank) {
      RankPlace place;
      place.rank = static_cast<int>(layout.ranks.size());
      place.local_rank = static_cast<int>(local_rank);
      place.local_world_size = static_cast<int>(members.size());
      place.node_rank = static_cast<int>(node_rank);
      place.slot = members[local_rank];
      place.slice_index = slice_of_slot[place.slot];
      layout.ranks.push_back(place);
    }
  }
  layout.slots = std::move(slots);
  return layout;
}

std::string BackendHint(const GangSlot& slot) {
  const std::string& resource = slot.device_resource;
  if (resource == "GPU") return "nccl";  // ROCm builds of torch map nccl to RCCL
  if (resource == "neuron_cores") return "xla";
  if (resource == "TPU") return "tpu_dist";
  if (resource == "NPU") return "hccl";
  return "gloo";
}

std::map<std::string, std::string> RankEnvironment(const GangLayout& layout, int rank,
                                                   const GangEnvOptions& options) {
  // A rank outside the layout is the caller's bug, not input to handle.
  if (rank < 0 || rank >= static_cast<int>(layout.ranks.size())) std::abort();
  const RankPlace& place = layout.ranks[rank];
  const GangSlot& slot = layout.slots[place.slot];
  const std::string& master_host = layout.slots[layout.ranks[0].slot].host;
  const auto user_set = [&](const char* name) { return options.user_env.contains(name); };

  std::map<std::string, std::string> env;
  env["RANK"] = absl::StrCat(place.rank);
  env["LOCAL_RANK"] = absl::StrCat(place.local_rank);
  env["WORLD_SIZE"] = absl::StrCat(layout.world_size);
  env["LOCAL_WORLD_SIZE"] = absl::StrCat(place.local_world_size);
  env["GROUP_RANK"] = absl::StrCat(place.node_rank);
  env["GROUP_WORLD_SIZE"] = absl::StrCat(layout.num_nodes);
  env["NODE_RANK"] = absl::StrCat(place.node_rank);
  env["ROLE_NAME"] = "default";
  env["ROLE_RANK"] = absl::StrCat(place.rank);
  env["ROLE_WORLD_SIZE"] = absl::StrCat(layout.world_size);
  env["MASTER_ADDR"] = master_host;
  env["MASTER_PORT"] = absl::StrCat(options.master_port);
  env["TORCHELASTIC_RESTART_COUNT"] = absl::StrCat(options.restart_count);
  env["TORCHELASTIC_MAX_RESTARTS"] = absl::StrCat(options.max_restarts);
  env["TORCHELASTIC_RUN_ID"] = options.run_id;
  env["TORCHELASTIC_USE_AGENT_STORE"] = "False";
  env["PYTHONUNBUFFERED"] = "1";
  // Without it, one process per device oversubscribes the CPUs (torchrun's rule).
  if (place.local_world_size > 1 && !user_set("OMP_NUM_THREADS")) env["OMP_NUM_THREADS"] = "1";
  // Blocking wait and async error handling are alternatives; the user's choice wins.
  if (!user_set("TORCH_NCCL_ASYNC_ERROR_HANDLING") && !user_set("TORCH_NCCL_BLOCKING_WAIT") &&
      !user_set("NCCL_BLOCKING_WAIT")) {
    env["TORCH_NCCL_ASYNC_ERROR_HANDLING"] = "1";
  }
  if (options.jax_coordinator_port != 0) {
    env["JAX_COORDINATOR_ADDRESS"] = HostPort(master_host, options.jax_coordinator_port);
    env["JAX_NUM_PROCESSES"] = absl::StrCat(layout.world_size);
    env["JAX_PROCESS_ID"] = absl::StrCat(place.rank);
  }
  env["TESSERA_TORCH_BACKEND"] = BackendHint(slot);
  // Gloo and NCCL pick their own address from the host name, which often resolves to loopback
  // (Debian's 127.0.1.1): point them at the interface the rank's node is reached on instead.
  if (!slot.network_interface.empty()) {
    if (!user_set("GLOO_SOCKET_IFNAME")) env["GLOO_SOCKET_IFNAME"] = slot.network_interface;
    if (!user_set("NCCL_SOCKET_IFNAME")) env["NCCL_SOCKET_IFNAME"] = slot.network_interface;
  }
  if (!slot.slice.empty()) env["TPU_WORKER_HOSTNAMES"] = WorkerHostnames(layout, slot.slice);
  if (layout.num_slices > 1) {
    env["MEGASCALE_COORDINATOR_ADDRESS"] = master_host;
    env["MEGASCALE_PORT"] = absl::StrCat(options.megascale_port);
    env["MEGASCALE_NUM_SLICES"] = absl::StrCat(layout.num_slices);
    env["MEGASCALE_SLICE_ID"] = absl::StrCat(place.slice_index);
  }
  return env;
}

}  // namespace tessera::train
