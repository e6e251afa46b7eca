#include "scheduling/cluster_file.h"

#include <optional>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "base/string_util.h"
#include "hardware/environment.h"
#include "hardware/simulated/description_reader.h"
#include "hardware/simulated/hardware_description.h"
#include "labels/label.h"
#include "vocabulary/slice_shape.h"

namespace tessera {
namespace {

using simulated::DescriptionReader;
using simulated::Field;
using simulated::KindName;

constexpr size_t kMaxGroupNameLength = 40;  // leaves room for "-<slice>-w<worker>" in 63

// Group names become node ids, slice names (a resource name and label value) and the
// tessera.io/node-group label: a letter first, then letters, digits and '-', no '-' at the end.
absl::Status CheckGroupName(const DescriptionReader& r, const Field& f, const std::string& name) {
  bool ok = !name.empty() && name.size() <= kMaxGroupNameLength &&
            absl::ascii_isalpha(static_cast<unsigned char>(name.front())) && name.back() != '-';
  for (char c : name) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '-') ok = false;
  }
  if (!ok) {
    return r.Error(f,
                   absl::StrCat("invalid group name ", Quote(name), ": use 1-", kMaxGroupNameLength,
                                " letters, digits and '-', starting with a letter and not "
                                "ending with '-'"));
  }
  return absl::OkStatus();
}

absl::StatusOr<LabelSet> ReadUserLabels(const DescriptionReader& r, const Field& f) {
  if (!f.value.IsMap()) {
    return r.Error(f,
                   absl::StrCat("expected a map of label keys to values, got ", KindName(f.value)));
  }
  LabelSet labels;
  for (auto it = f.value.begin(); it != f.value.end(); ++it) {
    const Field key{f.path, it->first, it->first};
    if (!it->first.IsScalar()) {
      return r.Error(key, absl::StrCat("a label key must be a string, got ", KindName(it->first)));
    }
    const Field value{absl::StrCat(f.path, ".", it->first.Scalar()), it->second, it->first};
    if (!it->second.IsScalar()) {
      return r.Error(value,
                     absl::StrCat("a label value must be a string, got ", KindName(it->second)));
    }
    if (absl::Status ok =
            ValidateLabel(it->first.Scalar(), it->second.Scalar(), LabelOrigin::kUser);
        !ok.ok()) {
      return r.Error(key, ToStd(ok.message()));
    }
    if (!labels.emplace(it->first.Scalar(), it->second.Scalar()).second) {
      return r.Error(key, absl::StrCat("label ", Quote(it->first.Scalar()), " is given twice"));
    }
  }
  return labels;
}

// What every node of a group shares besides its hardware: user labels and the deployment
// variables a node agent would see (group, zone, region, market type).
struct GroupSettings {
  std::string name;
  DiscoveryOptions options;
};

absl::StatusOr<GroupSettings> ReadGroupSettings(const DescriptionReader& r, const Field& group) {
  GroupSettings settings;
  TESSERA_ASSIGN_OR_RETURN(const Field name_field, r.Required(group, "name"));
  TESSERA_ASSIGN_OR_RETURN(settings.name, r.String(name_field));
  TESSERA_RETURN_IF_ERROR(CheckGroupName(r, name_field, settings.name));
  Environment env;
  env.Set("TESSERA_NODE_GROUP", settings.name);
  static constexpr std::pair<std::string_view, std::string_view> kDeployment[] = {
      {"zone", "TESSERA_NODE_ZONE"},
      {"region", "TESSERA_NODE_REGION"},
      {"market_type", "TESSERA_NODE_MARKET_TYPE"},
  };
  for (const auto& [key, variable] : kDeployment) {
    if (auto f = r.Child(group, key)) {
      TESSERA_ASSIGN_OR_RETURN(std::string value, r.String(*f));
      if (absl::Status ok = ValidateLabelValue(value); !ok.ok() || value.empty()) {
        return r.Error(*f, ok.ok() ? "must not be empty" : ToStd(ok.message()));
      }
      env.Set(std::string(variable), std::move(value));
    }
  }
  settings.options.environment = std::move(env);
  if (auto labels = r.Child(group, "labels")) {
    TESSERA_ASSIGN_OR_RETURN(settings.options.user_labels, ReadUserLabels(r, *labels));
  }
  return settings;
}

absl::Status ClaimId(const DescriptionReader& r, const Field& where, const std::string& id,
                     std::set<std::string>& taken_ids) {
  if (!taken_ids.insert(id).second) {
    return r.Error(where, absl::StrCat("node id ", Quote(id), " is already in the cluster"));
  }
  return absl::OkStatus();
}

absl::StatusOr<NodeHardware> MakeNode(const DescriptionReader& r, const Field& hardware_field,
                                      SimulatedHardware simulated, const std::string& id,
                                      const GroupSettings& settings) {
  auto node = NodeFromSimulatedHardware(
      std::move(simulated), absl::StrCat("simulated ", r.source(), " ", id), settings.options);
  if (!node.ok()) return r.Error(hardware_field, ToStd(node.status().message()));
  if (!node->errors.empty()) return r.Error(hardware_field, node->errors.front());
  return node;
}

// `count` copies of one description: parsed and assembled once, then copied.
absl::StatusOr<std::vector<ClusterNode>> ExpandCountGroup(const DescriptionReader& r,
                                                          const Field& group,
                                                          const GroupSettings& settings,
                                                          std::set<std::string>& taken_ids) {
  TESSERA_ASSIGN_OR_RETURN(const Field count_field, r.Required(group, "count"));
  TESSERA_ASSIGN_OR_RETURN(const int64_t count, r.Integer(count_field, 1, kMaxClusterNodes));
  TESSERA_ASSIGN_OR_RETURN(const Field hardware_field, r.Required(group, "hardware"));
  TESSERA_ASSIGN_OR_RETURN(
      SimulatedHardware simulated,
      ParseHardwareDescriptionFromNode(hardware_field.value, r.source(), AcceleratorFamilyNames()));
  const std::string first_id = absl::StrCat(settings.name, "-0");
  TESSERA_ASSIGN_OR_RETURN(NodeHardware hardware,
                           MakeNode(r, hardware_field, std::move(simulated), first_id, settings));
  std::vector<ClusterNode> nodes;
  nodes.reserve(static_cast<size_t>(count));
  for (int64_t k = 0; k < count; ++k) {
    ClusterNode node{absl::StrCat(settings.name, "-", k), settings.name, hardware};
    TESSERA_RETURN_IF_ERROR(ClaimId(r, group, node.id, taken_ids));
    node.hardware.source = absl::StrCat("simulated ", r.source(), " ", node.id);
    nodes.push_back(std::move(node));
  }
  return nodes;
}

// Whole TPU slices: every host of every slice, each with the group's host description plus the
// slice's TPU chips and identity, so the hosts carry the real slice labels and markers.
absl::StatusOr<std::vector<ClusterNode>> ExpandSliceGroup(const DescriptionReader& r,
                                                          const Field& group, const Field& slices,
                                                          const GroupSettings& settings,
                                                          std::set<std::string>& taken_ids) {
  if (auto count = r.Child(group, "count")) {
    return r.Error(*count, "a group has either count or slices, not both");
  }
  TESSERA_RETURN_IF_ERROR(
      r.CheckMap(slices, {"count", "accelerator", "topology", "chips_per_host"}));
  TESSERA_ASSIGN_OR_RETURN(const Field count_field, r.Required(slices, "count"));
  TESSERA_ASSIGN_OR_RETURN(const int64_t slice_count, r.Integer(count_field, 1, 10000));
  TESSERA_ASSIGN_OR_RETURN(const Field accelerator_field, r.Required(slices, "accelerator"));
  TESSERA_ASSIGN_OR_RETURN(const std::string accelerator, r.String(accelerator_field));
  TESSERA_ASSIGN_OR_RETURN(const Field topology_field, r.Required(slices, "topology"));
  TESSERA_ASSIGN_OR_RETURN(const std::string topology, r.String(topology_field));
  std::optional<int> chips_per_host;
  if (auto f = r.Child(slices, "chips_per_host")) {
    TESSERA_ASSIGN_OR_RETURN(const int64_t chips, r.Integer(*f, 1, 64));
    chips_per_host = static_cast<int>(chips);
  }
  auto shape = ParseSliceShape(accelerator, topology, chips_per_host);
  if (!shape.ok()) return r.Error(slices, ToStd(shape.status().message()));
  if (slice_count * shape->hosts > kMaxClusterNodes) {
    return r.Error(count_field, absl::StrCat(slice_count, " slices of ", shape->hosts,
                                             " hosts exceed ", kMaxClusterNodes, " nodes"));
  }

  // The group's own description (host, NICs, labels; no TPU chips) is checked where it stands,
  // so its errors point into the file; the generated hosts are copies with a TPU entry added.
  TESSERA_ASSIGN_OR_RETURN(const Field hardware_field, r.Required(group, "hardware"));
  TESSERA_ASSIGN_OR_RETURN(
      SimulatedHardware base,
      ParseHardwareDescriptionFromNode(hardware_field.value, r.source(), AcceleratorFamilyNames()));
  if (base.families.count("tpu") != 0) {
    return r.Error(hardware_field,
                   "a slice group's hardware lists no tpu accelerators: the slices generate "
                   "each host's chips and identity");
  }

  std::vector<ClusterNode> nodes;
  for (int64_t s = 0; s < slice_count; ++s) {
    const std::string slice_name = absl::StrCat(settings.name, "-", s);
    std::vector<std::string> host_ids;
    for (int w = 0; w < shape->hosts; ++w) {
      host_ids.push_back(absl::StrCat(slice_name, "-w", w));
    }
    for (int w = 0; w < shape->hosts; ++w) {
      YAML::Node tpu(YAML::NodeType::Map);
      tpu["slice_name"] = slice_name;
      tpu["worker_id"] = w;
      tpu["topology"] = shape->topology.ToString();
      tpu["accelerator_type"] = shape->pod_type;
      YAML::Node hostnames(YAML::NodeType::Sequence);
      for (const std::string& id : host_ids) hostnames.push_back(id);
      tpu["worker_hostnames"] = hostnames;
      YAML::Node chips(YAML::NodeType::Map);
      chips["family"] = "tpu";
      chips["type"] = shape->accelerator_type;
      chips["count"] = shape->chips_per_host;
      chips["interconnect"] = "ici-grid";
      chips["tpu"] = tpu;
      // A clone: adding to the group's own node would rewrite the loaded document.
      YAML::Node host = YAML::Clone(hardware_field.value);
      host["accelerators"].push_back(chips);
      auto simulated = ParseHardwareDescriptionFromNode(host, r.source(), AcceleratorFamilyNames());
      if (!simulated.ok()) {
        return r.Error(slices,
                       absl::StrCat("host ", host_ids[w], ": ", simulated.status().message()));
      }
      TESSERA_RETURN_IF_ERROR(ClaimId(r, group, host_ids[w], taken_ids));
      TESSERA_ASSIGN_OR_RETURN(NodeHardware hardware,
                               MakeNode(r, slices, *std::move(simulated), host_ids[w], settings));
      nodes.push_back(ClusterNode{host_ids[w], settings.name, std::move(hardware)});
    }
  }
  return nodes;
}

}  // namespace

absl::StatusOr<std::vector<ClusterNode>> ExpandNodeGroup(const DescriptionReader& r,
                                                         const Field& group,
                                                         std::set<std::string>& taken_ids) {
  TESSERA_RETURN_IF_ERROR(r.CheckMap(
      group, {"name", "count", "slices", "hardware", "labels", "zone", "region", "market_type"}));
  TESSERA_ASSIGN_OR_RETURN(const GroupSettings settings, ReadGroupSettings(r, group));
  if (auto slices = r.Child(group, "slices")) {
    return ExpandSliceGroup(r, group, *slices, settings, taken_ids);
  }
  return ExpandCountGroup(r, group, settings, taken_ids);
}

namespace {

// The nodes of a cluster file's document.
absl::StatusOr<std::vector<ClusterNode>> ClusterFileNodes(const DescriptionReader& r,
                                                          const YAML::Node& root) {
  const Field top{"", root, root};
  if (root.IsNull() || !root.IsDefined()) {
    return r.Error(top, "empty cluster file: expected a map with key node_groups");
  }
  TESSERA_RETURN_IF_ERROR(r.CheckMap(top, {"node_groups"}));
  TESSERA_ASSIGN_OR_RETURN(const Field groups_field, r.Required(top, "node_groups"));
  TESSERA_ASSIGN_OR_RETURN(const std::vector<Field> groups, r.List(groups_field));
  if (groups.empty()) return r.Error(groups_field, "a cluster needs at least one node group");
  std::set<std::string> names;
  std::set<std::string> taken_ids;
  std::vector<ClusterNode> nodes;
  for (const Field& group : groups) {
    // Checked before expanding, so a repeated group is named as such, not as a clash of ids.
    if (group.value.IsMap()) {
      if (auto name = r.Child(group, "name"); name.has_value() && name->value.IsScalar() &&
                                              !names.insert(name->value.Scalar()).second) {
        return r.Error(*name,
                       absl::StrCat("group name ", Quote(name->value.Scalar()), " is given twice"));
      }
    }
    TESSERA_ASSIGN_OR_RETURN(std::vector<ClusterNode> expanded,
                             ExpandNodeGroup(r, group, taken_ids));
    if (nodes.size() + expanded.size() > static_cast<size_t>(kMaxClusterNodes)) {
      return r.Error(group, absl::StrCat("the cluster exceeds ", kMaxClusterNodes, " nodes"));
    }
    for (ClusterNode& node : expanded) nodes.push_back(std::move(node));
  }
  return nodes;
}

}  // namespace

absl::StatusOr<std::vector<ClusterNode>> ParseClusterFile(std::string_view yaml,
                                                          std::string_view source_name) {
  const DescriptionReader r{std::string(source_name)};
  return r.ParseDocument(yaml, [&](const YAML::Node& root) { return ClusterFileNodes(r, root); });
}

}  // namespace tessera
