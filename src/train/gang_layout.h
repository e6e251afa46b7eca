// The layout of a gang: which rank runs in which slot of its reservation, as torchrun and Ray
// Train number them (shared/reference/train-and-transport.md §2.1), and the environment each
// rank gets (§2.2-2.3, the TPU identity of accelerators.md §7). Pure: no I/O, deterministic.
//
//   std::vector<GangSlot> slots = ...;          // one per rank, from the reservation
//   GangLayout layout = AssignRanks(slots);     // grouped by node, ordered by device id
//   auto env = RankEnvironment(layout, /*rank=*/3, options);
//
// Thread-compatible (plain values).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace tessera::train {

// Where one rank will run, known from the reservation before anything starts.
struct GangSlot {
  int bundle_index = 0;  // in the placement group or slice group
  std::string node_id;
  std::string host;              // the host part of the node agent's address (MASTER_ADDR, ...)
  std::string device_resource;   // "GPU", "TPU", "neuron_cores", "HPU"; "" CPU only
  std::string accelerator_type;  // the node's tessera.io/accelerator-type label ("H100", "TPU-V6E")
  std::vector<int> device_ids;   // the slot's instances of device_resource, ascending
  // TPU slices: the slice (domain) name and this host's worker id in it; "" / -1 otherwise.
  std::string slice;
  int tpu_worker_id = -1;
  // The network interface its node is reached on ("eth0", "lo"); "" unknown. Gives
  // GLOO_SOCKET_IFNAME and NCCL_SOCKET_IFNAME unless the user set them.
  std::string network_interface;
};

// One rank's place in the gang.
struct RankPlace {
  int rank = 0;
  int local_rank = 0;
  int local_world_size = 0;
  int node_rank = 0;    // first-seen order of the node id (never the host: nodes may share one)
  int slot = 0;         // index into the slots given to AssignRanks
  int slice_index = 0;  // position of its slice among the gang's slices (first-seen), 0 without
};

struct GangLayout {
  std::vector<GangSlot> slots;
  std::vector<RankPlace> ranks;  // by rank
  int world_size = 0;
  int num_nodes = 0;
  int num_slices = 0;  // distinct slices (0 when no slot is on a slice)
};

// §2.1: slots grouped by node id (nodes in the order they first appear in `slots`), inside a
// node ordered by lowest device id (slots without devices after those with, in bundle order; ties
// by bundle index), concatenated; RANK is the position. Slices are numbered in the order they
// first appear in `slots`. Ranks are contiguous within a node and the same for the same slots.
// InvalidArgument on no slots or a slot without a node id.
absl::StatusOr<GangLayout> AssignRanks(std::vector<GangSlot> slots);

// The torch backend for the gang's devices (§2.3), from device_resource: "nccl" for NVIDIA and
// AMD GPUs, "xla" for AWS Neuron, "tpu_dist" for TPUs, "hccl" for Ascend ("NPU"), "gloo"
// otherwise (CPU only, and "HPU", which §2.3 does not list).
std::string BackendHint(const GangSlot& slot);

struct GangEnvOptions {
  std::string run_id;            // TORCHELASTIC_RUN_ID (the job id; stable across restarts)
  int restart_count = 0;         // TORCHELASTIC_RESTART_COUNT
  int max_restarts = 0;          // TORCHELASTIC_MAX_RESTARTS
  int master_port = 0;           // MASTER_PORT: free on rank 0's host
  int jax_coordinator_port = 0;  // JAX_COORDINATOR_ADDRESS's port, free on rank 0's host
  int megascale_port = 8081;     // MEGASCALE_PORT (multislice)
  // The user's variables (--env), which some defaults must not override: OMP_NUM_THREADS,
  // TORCH_NCCL_ASYNC_ERROR_HANDLING (also left unset when TORCH_NCCL_BLOCKING_WAIT or
  // NCCL_BLOCKING_WAIT is set).
  std::map<std::string, std::string> user_env;
};

// The variables Tessera sets for `rank` (the user's own are not included; the caller adds them
// first and these on top, except the defaults above):
// - torchrun's: RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK, GROUP_WORLD_SIZE,
//   ROLE_NAME=default, ROLE_RANK, ROLE_WORLD_SIZE, MASTER_ADDR (rank 0's host), MASTER_PORT,
//   TORCHELASTIC_RESTART_COUNT, TORCHELASTIC_MAX_RESTARTS, TORCHELASTIC_RUN_ID,
//   TORCHELASTIC_USE_AGENT_STORE=False, OMP_NUM_THREADS=1 (when LOCAL_WORLD_SIZE > 1),
//   TORCH_NCCL_ASYNC_ERROR_HANDLING=1, PYTHONUNBUFFERED=1;
// - Ray Train's: NODE_RANK;
// - JAX: JAX_COORDINATOR_ADDRESS (rank 0's host:port), JAX_NUM_PROCESSES, JAX_PROCESS_ID;
// - the backend hint: TESSERA_TORCH_BACKEND (BackendHint of the rank's slot);
// - GLOO_SOCKET_IFNAME and NCCL_SOCKET_IFNAME: the slot's network_interface, when known and the
//   user did not set them;
// - on TPU slices: TPU_WORKER_HOSTNAMES = the hosts of the rank's slice in worker-id order
//   (addresses, never node ids; a host once per worker id, slots without a worker id last), and
//   with more than one slice MEGASCALE_COORDINATOR_ADDRESS (rank 0's host), MEGASCALE_PORT,
//   MEGASCALE_NUM_SLICES, MEGASCALE_SLICE_ID (the slice's index). TPU_WORKER_ID stays the host's
//   own (set by its agent), never derived from the rank.
// JAX_* are left out when jax_coordinator_port is 0. `rank` must be a rank of `layout` (aborts
// otherwise: a caller's bug).
std::map<std::string, std::string> RankEnvironment(const GangLayout& layout, int rank,
                                                   const GangEnvOptions& options);

}  // namespace tessera::train
