// A TPU host's place in its slice, read from the variables GKE (device plug-in and webhook) and
// TPU VMs set (reference/accelerators.md §7.1), and the node labels and slice-marker resources it
// yields (§7.8). The GCE metadata server is never queried here. Pure functions; copyable values.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hardware/environment.h"
#include "labels/label.h"
#include "resources/resource_set.h"

namespace tessera {

struct TpuIdentity {
  std::string accelerator_type;  // "v6e-16" (TPU_ACCELERATOR_TYPE, normalised when it parses)
  std::string topology;          // "4x4" (TPU_TOPOLOGY, lower-cased)
  std::optional<int> worker_id;  // TPU_WORKER_ID; nullopt when unset or not a number
  std::string slice_name;        // TPU_NAME
  std::vector<std::string> worker_hostnames;  // TPU_WORKER_HOSTNAMES, comma-separated
};

// Reads TPU_ACCELERATOR_TYPE, TPU_TOPOLOGY, TPU_WORKER_ID, TPU_NAME and TPU_WORKER_HOSTNAMES.
// Values are trimmed; an empty variable counts as unset.
TpuIdentity TpuIdentityFromEnv(const Environment& env);

// Adds the slice labels (tessera.io/tpu-slice-name, -worker-id, -topology, -pod-type, each only
// when known), fabric-domain=<slice name> and fabric-kind=ici on a multi-host slice, and the slice
// markers (resource <slice name>=1 on every host, TPU-<pod type>-head=1 on worker 0) only when
// slice name, worker id and pod type are all known and agree with each other.
// `accelerator_type_label` is the detected chips' type ("TPU-V6E"): it supplies the generation
// when TPU_ACCELERATOR_TYPE is missing. Problems become `warnings`, never failures:
//   "incomplete TPU identity: missing TPU_NAME, TPU_WORKER_ID; no slice markers"
//   "inconsistent TPU identity: TPU_WORKER_ID=4 but v6e-16 (4x4) has 4 hosts; no slice markers"
void AddTpuSliceLabels(const TpuIdentity& id, std::string_view accelerator_type_label,
                       LabelSet& labels, ResourceSet& resources,
                       std::vector<std::string>& warnings);

}  // namespace tessera
