#include "hardware/tpu/tpu_identity.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/string_util.h"
#include "hardware/node_label_keys.h"
#include "vocabulary/slice_shape.h"
#include "vocabulary/tpu_accelerator_type.h"
#include "vocabulary/tpu_topology.h"

namespace tessera {
namespace {

std::string Read(const Environment& env, std::string_view name) {
  const std::optional<std::string> value = env.Get(name);
  return value.has_value() ? std::string(Trim(*value)) : std::string();
}

// The host counts a slice of `chips` chips may have: one per valid chips-per-host choice (two for
// the ambiguous v5e/v6e 2x4, one otherwise). Without a topology, the chip count decides.
std::vector<int> PossibleHostCounts(TpuGeneration generation, const std::optional<TpuTopology>& t,
                                    int chips) {
  std::vector<int> counts;
  if (t.has_value()) {
    const TpuGenerationInfo& info = GenerationInfo(generation);
    std::vector<int> per_host(info.single_host_chip_options.begin(),
                              info.single_host_chip_options.end());
    per_host.push_back(info.chips_per_multi_host);
    for (int c : per_host) {
      auto shape = MakeSliceShape(generation, *t, c);
      if (shape.ok() && std::find(counts.begin(), counts.end(), shape->hosts) == counts.end()) {
        counts.push_back(shape->hosts);
      }
    }
    // The default shape's count first: it is the answer when nothing else decides.
    auto default_shape = MakeSliceShape(generation, *t);
    if (default_shape.ok()) {
      counts.erase(std::remove(counts.begin(), counts.end(), default_shape->hosts), counts.end());
      counts.insert(counts.begin(), default_shape->hosts);
    }
    return counts;
  }
  const TpuGenerationInfo& info = GenerationInfo(generation);
  const auto& single = info.single_host_chip_options;
  if (std::find(single.begin(), single.end(), chips) != single.end()) counts.push_back(1);
  if (chips % info.chips_per_multi_host == 0 && chips > info.chips_per_multi_host) {
    counts.push_back(chips / info.chips_per_multi_host);
  }
  if (counts.empty()) counts.push_back(std::max(1, chips / info.chips_per_multi_host));
  return counts;
}

// The hosts in the slice, when its shape is known (conflicting with TPU_WORKER_ID past them;
// TPU_WORKER_HOSTNAMES decides between the possible counts).
std::optional<int> SliceHosts(const TpuIdentity& id, const std::optional<TpuGeneration>& generation,
                              const std::optional<TpuAcceleratorType>& type,
                              const std::optional<TpuTopology>& topology,
                              const std::optional<std::string>& pod_type,
                              std::vector<std::string>& conflicts,
                              std::vector<std::string>& warnings) {
  std::optional<int> hosts;
  if (generation.has_value() && (type.has_value() || topology.has_value())) {
    const int chips = topology.has_value() ? topology->chips() : type->chips();
    const std::vector<int> counts = PossibleHostCounts(*generation, topology, chips);
    if (!counts.empty()) {
      hosts = counts.front();
      const int n = static_cast<int>(id.worker_hostnames.size());
      if (n > 1 && std::find(counts.begin(), counts.end(), n) != counts.end()) hosts = n;
      const int most = *std::max_element(counts.begin(), counts.end());
      if (id.worker_id.has_value() && *id.worker_id >= most) {
        conflicts.push_back(absl::StrCat("TPU_WORKER_ID=", *id.worker_id, " but ",
                                         pod_type.value_or("the slice"), " has ", most,
                                         most == 1 ? " host" : " hosts"));
      }
      if (n > 1 && std::find(counts.begin(), counts.end(), n) == counts.end()) {
        warnings.push_back(absl::StrCat("TPU_WORKER_HOSTNAMES lists ", n, " hosts, but ",
                                        pod_type.value_or("the slice"), " has ", counts.front()));
      }
    }
  }
  return hosts;
}

// The slice markers (fabric labels, the slice's resource and, on worker 0, its head resource),
// when the identity is consistent and complete; else a warning says why there are none.
void AddSliceMarkers(const TpuIdentity& id, bool slice_name_ok, std::optional<int> hosts,
                     const std::optional<std::string>& pod_type,
                     const std::vector<std::string>& conflicts, LabelSet& labels,
                     ResourceSet& resources, std::vector<std::string>& warnings) {
  if (!conflicts.empty()) {
    warnings.push_back(absl::StrCat("inconsistent TPU identity: ", absl::StrJoin(conflicts, "; "),
                                    "; no slice markers"));
    return;
  }
  if (slice_name_ok && hosts.has_value() && *hosts > 1) {
    labels[std::string(labels::kFabricDomain)] = id.slice_name;
    labels[std::string(labels::kFabricKind)] = "ici";
  }

  std::vector<std::string> missing;
  if (id.slice_name.empty()) missing.push_back("TPU_NAME");
  if (!id.worker_id.has_value()) missing.push_back("TPU_WORKER_ID");
  if (!pod_type.has_value()) missing.push_back("TPU_ACCELERATOR_TYPE");
  if (!missing.empty()) {
    warnings.push_back(absl::StrCat("incomplete TPU identity: missing ",
                                    absl::StrJoin(missing, ", "), "; no slice markers"));
    return;
  }
  if (absl::Status valid = ValidateResourceName(id.slice_name); !valid.ok()) {
    warnings.push_back(absl::StrCat("TPU_NAME ", Quote(id.slice_name),
                                    " is not usable as a resource name: ", valid.message(),
                                    "; no slice markers"));
    return;
  }
  resources.Set(id.slice_name, Quantity::FromInt(1));
  if (*id.worker_id == 0) {
    resources.Set(absl::StrCat("TPU-", *pod_type, "-head"), Quantity::FromInt(1));
  }
}

}  // namespace

TpuIdentity TpuIdentityFromEnv(const Environment& env) {
  TpuIdentity id;
  id.accelerator_type = Read(env, "TPU_ACCELERATOR_TYPE");
  if (auto parsed = ParseTpuAcceleratorType(id.accelerator_type); parsed.ok()) {
    id.accelerator_type = parsed->ToString();  // "tpu7x-16" -> "v7x-16"
  }
  id.topology = absl::AsciiStrToLower(Read(env, "TPU_TOPOLOGY"));
  int worker = 0;
  const std::string worker_text = Read(env, "TPU_WORKER_ID");
  if (!worker_text.empty() && absl::SimpleAtoi(worker_text, &worker) && worker >= 0) {
    id.worker_id = worker;
  }
  id.slice_name = Read(env, "TPU_NAME");
  const std::string hostnames = Read(env, "TPU_WORKER_HOSTNAMES");
  for (absl::string_view host : absl::StrSplit(hostnames, ',')) {
    const std::string_view trimmed = Trim(ToStd(host));
    if (!trimmed.empty()) id.worker_hostnames.emplace_back(trimmed);
  }
  return id;
}

void AddTpuSliceLabels(const TpuIdentity& id, std::string_view accelerator_type_label,
                       LabelSet& labels, ResourceSet& resources,
                       std::vector<std::string>& warnings) {
  std::vector<std::string> conflicts;

  std::optional<TpuAcceleratorType> type;
  if (!id.accelerator_type.empty()) {
    auto parsed = ParseTpuAcceleratorType(id.accelerator_type);
    if (parsed.ok()) {
      type = *parsed;
    } else {
      conflicts.push_back(absl::StrCat("TPU_ACCELERATOR_TYPE: ", parsed.status().message()));
    }
  }
  std::optional<TpuGeneration> chip_generation;
  if (!accelerator_type_label.empty()) {
    if (auto g = ParseTpuGeneration(accelerator_type_label); g.ok()) chip_generation = *g;
  }
  if (type.has_value() && chip_generation.has_value() && type->generation != *chip_generation) {
    conflicts.push_back(absl::StrCat("TPU_ACCELERATOR_TYPE=", type->ToString(), " is a ",
                                     TpuTypeString(type->generation), " slice, but the chips are ",
                                     TpuTypeString(*chip_generation)));
  }
  const std::optional<TpuGeneration> generation =
      type.has_value() ? std::optional<TpuGeneration>(type->generation) : chip_generation;

  std::optional<TpuTopology> topology;
  if (!id.topology.empty()) {
    auto parsed = generation.has_value() ? ParseTpuTopologyFor(*generation, id.topology)
                                         : ParseTpuTopology(id.topology);
    if (parsed.ok()) {
      topology = *parsed;
    } else {
      conflicts.push_back(absl::StrCat("TPU_TOPOLOGY: ", parsed.status().message()));
    }
  }
  if (type.has_value() && topology.has_value() && type->chips() != topology->chips()) {
    conflicts.push_back(absl::StrCat(
        "TPU_ACCELERATOR_TYPE=", type->ToString(), " has ", type->chips(),
        " chips, but TPU_TOPOLOGY=", topology->ToString(), " has ", topology->chips()));
  }

  std::optional<std::string> pod_type;
  if (type.has_value()) {
    pod_type = type->ToString();
  } else if (generation.has_value() && topology.has_value()) {
    pod_type = TpuPodType(*generation, topology->chips());
  }

  // Hosts in the slice, when the shape is known: bounds the worker id and decides multi-host.
  const std::optional<int> hosts =
      SliceHosts(id, generation, type, topology, pod_type, conflicts, warnings);

  bool slice_name_ok = false;
  if (!id.slice_name.empty()) {
    if (absl::Status valid = ValidateLabelValue(id.slice_name); valid.ok()) {
      slice_name_ok = true;
      labels[std::string(labels::kTpuSliceName)] = id.slice_name;
    } else {
      warnings.push_back(absl::StrCat("TPU_NAME ", Quote(id.slice_name),
                                      " is not usable as a label value: ", valid.message()));
    }
  }
  if (id.worker_id.has_value()) {
    labels[std::string(labels::kTpuWorkerId)] = std::to_string(*id.worker_id);
  }
  if (topology.has_value()) labels[std::string(labels::kTpuTopology)] = topology->ToString();
  if (pod_type.has_value()) labels[std::string(labels::kTpuPodType)] = *pod_type;

  AddSliceMarkers(id, slice_name_ok, hosts, pod_type, conflicts, labels, resources, warnings);
}

}  // namespace tessera
