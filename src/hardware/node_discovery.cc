#include "hardware/node_discovery.h"

#include <fstream>
#include <set>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/file_read.h"
#include "base/status_macros.h"
#include "base/string_util.h"
#include "hardware/environment.h"
#include "hardware/node_label_keys.h"
#include "hardware/node_labels.h"
#include "hardware/pci.h"
#include "hardware/plugin_registry.h"
#include "hardware/simulated/hardware_description.h"
#include "hardware/sysroot.h"

namespace tessera {
namespace {

// What one source of devices (probing or a description) produced, before the node-level rules.
struct RawNode {
  std::string source;
  HostTopology host;
  std::vector<std::pair<const AcceleratorPlugin*, Detection>> detections;  // registry order
  Environment env;
  LabelSet user_labels;
  std::vector<std::string> warnings;
};

absl::StatusOr<RawNode> ProbeNode(const DiscoveryOptions& options) {
  Sysroot sysroot(options.sysroot);
  if (!sysroot.IsDirectory("/")) {
    return absl::InvalidArgumentError(
        absl::StrCat("sysroot ", Quote(options.sysroot), " is not a directory"));
  }
  RawNode raw;
  raw.source = absl::StrCat("probe ", sysroot.root());
  // Only read the tree's (or the process's) environment when no override was given.
  raw.env =
      options.environment.has_value() ? *options.environment : Environment::ForSysroot(sysroot);
  const PciInventory pci = PciInventory::Scan(sysroot, &raw.warnings);
  auto host = DiscoverHostTopology(sysroot);
  if (host.ok()) {
    raw.host = *std::move(host);
    for (const std::string& w : raw.host.warnings) raw.warnings.push_back("host: " + w);
  } else {
    raw.warnings.push_back(absl::StrCat("host topology unavailable: ", host.status().message()));
  }
  const DetectionContext context{sysroot, raw.env, pci, options.detection};
  for (const AcceleratorPlugin* plugin : AcceleratorPlugins()) {
    Detection detection = plugin->Detect(context);
    for (Device& device : detection.devices) {
      if (device.pci_bus_id.empty()) continue;
      if (device.numa_node < 0) {
        device.numa_node = NearestNumaNode(raw.host, pci, device.pci_bus_id);
      }
      if (device.nearest_nic.empty()) {
        device.nearest_nic = NearestNic(raw.host, pci, device.pci_bus_id);
      }
    }
    raw.detections.emplace_back(plugin, std::move(detection));
  }
  return raw;
}

RawNode RawFromSimulated(SimulatedHardware simulated, std::string source,
                         const std::optional<Environment>& environment) {
  RawNode raw;
  raw.source = std::move(source);
  raw.host = std::move(simulated.host);
  raw.user_labels = std::move(simulated.labels);
  // A simulated host inherits no masks from the shell that started it: those name real devices.
  raw.env = environment.value_or(Environment());
  for (const AcceleratorPlugin* plugin : AcceleratorPlugins()) {
    for (auto& [family, detection] : simulated.families) {
      if (family == plugin->family()) raw.detections.emplace_back(plugin, std::move(detection));
    }
  }
  return raw;
}

absl::StatusOr<RawNode> SimulateNode(const std::string& file,
                                     const std::optional<Environment>& environment) {
  // Sized before it is read (base/file_read.h): a huge file is refused at once.
  absl::StatusOr<std::string> text =
      ReadFileUpTo(file, kMaxDescriptionFileBytes, "hardware description");
  if (absl::IsNotFound(text.status())) {
    return absl::NotFoundError(absl::StrCat("cannot read hardware description ", Quote(file)));
  }
  if (!text.ok()) return text.status();
  TESSERA_ASSIGN_OR_RETURN(SimulatedHardware simulated,
                           ParseHardwareDescription(*text, file, AcceleratorFamilyNames()));
  return RawFromSimulated(std::move(simulated), absl::StrCat("simulated ", file), environment);
}

// Applies the agent's inherited visible-devices mask: instances are the masked devices, in mask
// order. Returns the error text when the mask cannot be honoured.
std::optional<std::string> ApplyInheritedMask(const AcceleratorPlugin& plugin,
                                              const Environment& env, FamilyReport& report) {
  const std::vector<Device>& devices = report.detection.devices;
  report.inherited_mask = env.Get(plugin.visible_devices_env());
  if (!report.inherited_mask.has_value()) {
    report.visible = devices;
    return std::nullopt;
  }
  const std::string prefix =
      absl::StrCat(ToAbsl(plugin.visible_devices_env()), "=", Quote(*report.inherited_mask));
  auto physical = plugin.ParseMask(*report.inherited_mask, devices);
  if (!physical.ok()) return std::string(physical.status().message());
  std::set<int> seen;
  for (int index : *physical) {
    auto it = std::find_if(devices.begin(), devices.end(),
                           [&](const Device& d) { return d.index == index; });
    if (it == devices.end()) {
      return absl::StrCat(prefix, " names device ", index, ", which ", ToAbsl(plugin.family()),
                          " detection did not find");
    }
    if (!seen.insert(index).second) {
      return absl::StrCat(prefix, " names device ", index, " twice");
    }
    report.visible.push_back(*it);
  }
  if (report.visible.size() < devices.size()) {
    report.note = absl::StrCat("limited by ", prefix, " to ", report.visible.size(), " of ",
                               devices.size(), " devices");
  }
  return std::nullopt;
}

void AddSystemLabels(const LabelSet& from, std::string_view family, NodeHardware& node) {
  for (const auto& [key, value] : from) {
    if (absl::Status ok = ValidateLabelKey(key); !ok.ok()) {
      node.warnings.push_back(
          absl::StrCat(ToAbsl(family), ": label ", Quote(key), " dropped: ", ok.message()));
      continue;
    }
    if (absl::Status ok = ValidateLabelValue(value); !ok.ok()) {
      node.warnings.push_back(absl::StrCat(ToAbsl(family), ": label ", key, "=", Quote(value),
                                           " dropped: ", ok.message()));
      continue;
    }
    node.labels[key] = value;
  }
}

// Applies `--resources`: accelerator counts limit the advertised devices; everything else is set.
absl::Status ApplyResourceOverrides(const ResourceSet& overrides, NodeHardware& node) {
  for (const auto& [name, quantity] : overrides) {
    FamilyReport* family = nullptr;
    for (FamilyReport& f : node.families) {
      if (f.advertised && f.plugin->resource_name() == name) family = &f;
    }
    const bool device_resource = std::any_of(
        AcceleratorPlugins().begin(), AcceleratorPlugins().end(),
        [&wanted = name](const AcceleratorPlugin* p) { return p->resource_name() == wanted; });
    if (family == nullptr && device_resource) {
      // A device count without devices could never be isolated: refuse it, do not invent GPUs.
      return absl::InvalidArgumentError(
          absl::StrCat("resource ", name, "=", quantity.ToString(), ": this node has no ", name,
                       " devices to advertise (use --simulate for a host with simulated devices)"));
    }
    if (family == nullptr) {
      if (node.resources.Get(name) != Quantity() && node.resources.Get(name) != quantity) {
        node.warnings.push_back(absl::StrCat("resource ", name, ": detected ",
                                             node.resources.Get(name).ToString(), ", advertising ",
                                             quantity.ToString(), " as configured"));
      }
      node.resources.Set(name, quantity);
      continue;
    }
    const int64_t visible = static_cast<int64_t>(family->visible.size());
    if (!quantity.IsInteger() || quantity.WholePart() > visible) {
      std::string mask;
      if (family->inherited_mask.has_value()) {
        mask = absl::StrCat(" (", ToAbsl(family->plugin->visible_devices_env()), "=",
                            Quote(*family->inherited_mask), ")");
      }
      return absl::InvalidArgumentError(
          absl::StrCat("resource ", name, "=", quantity.ToString(), " is more than the ", visible,
                       " ", ToAbsl(family->plugin->family()), " devices this node can see", mask,
                       quantity.IsInteger() ? "" : ", or not a whole number"));
    }
    if (quantity.WholePart() < visible) {
      family->note =
          absl::StrCat("limited by --resources ", name, "=", quantity.ToString(), " to the first ",
                       quantity.WholePart(), " of ", visible, " visible devices");
      family->visible.resize(quantity.WholePart());
    }
    node.resources.Set(name, quantity);
  }
  return absl::OkStatus();
}

absl::StatusOr<NodeHardware> Assemble(RawNode raw, const DiscoveryOptions& options) {
  NodeHardware node;
  node.source = std::move(raw.source);
  node.host = std::move(raw.host);
  node.warnings = std::move(raw.warnings);
  TESSERA_ASSIGN_OR_RETURN(node.isolation, IsolationPolicy::FromEnvironment(raw.env));

  if (node.host.pus > 0) node.resources.Set("CPU", Quantity::FromInt(node.host.pus));
  if (node.host.memory_bytes > 0) {
    auto memory = node.host.memory_bytes > static_cast<uint64_t>(INT64_MAX)
                      ? absl::OutOfRangeError("more than 2^63 bytes")
                      : Quantity::FromIntChecked(static_cast<int64_t>(node.host.memory_bytes));
    if (memory.ok()) {
      node.resources.Set("memory", *memory);
    } else {
      node.warnings.push_back(
          absl::StrCat("memory of ", node.host.memory_bytes,
                       " bytes is too large to advertise: ", memory.status().message()));
    }
  }

  std::map<std::string, std::string> resource_owner;  // resource name -> family
  std::map<std::string, int> type_counts;
  for (auto& [plugin, detection] : raw.detections) {
    for (const std::string& w : detection.warnings) {
      node.warnings.push_back(absl::StrCat(ToAbsl(plugin->family()), ": ", w));
    }
    for (const std::string& e : detection.errors) {
      node.errors.push_back(absl::StrCat(ToAbsl(plugin->family()), ": ", e));
    }
    if (detection.devices.empty()) continue;

    FamilyReport report;
    report.plugin = plugin;
    report.detection = std::move(detection);
    if (auto mask_error = ApplyInheritedMask(*plugin, raw.env, report)) {
      node.errors.push_back(absl::StrCat(ToAbsl(plugin->family()), ": ", *mask_error));
      report.visible.clear();
    }
    const std::string resource(plugin->resource_name());
    if (auto owner = resource_owner.find(resource); owner != resource_owner.end()) {
      report.note = absl::StrCat(
          "not advertised: resource ", resource, " is already claimed by ", owner->second,
          " (claim order: ", absl::StrJoin(AcceleratorFamilyNames(), ", "), ")");
      node.warnings.push_back(absl::StrCat(ToAbsl(plugin->family()), ": ",
                                           report.detection.devices.size(), " devices ",
                                           report.note));
      report.visible.clear();
    } else if (!report.visible.empty()) {
      resource_owner[resource] = std::string(plugin->family());
      report.advertised = true;
      node.resources.Set(resource, Quantity::FromInt(static_cast<int64_t>(report.visible.size())));
      for (const Device& d : report.visible) {
        if (!d.type.empty()) ++type_counts[d.type];
      }
      for (const auto& [name, quantity] : report.detection.resources) {
        if (absl::Status ok = ValidateResourceName(name); !ok.ok()) {
          node.warnings.push_back(absl::StrCat(ToAbsl(plugin->family()), ": resource ", Quote(name),
                                               " dropped: ", ok.message()));
          continue;
        }
        node.resources.Set(name, quantity);
      }
      AddSystemLabels(report.detection.labels, plugin->family(), node);
    }
    node.families.push_back(std::move(report));
  }

  for (const auto& [type, count] : type_counts) {
    const std::string marker = absl::StrCat(ToAbsl(kAcceleratorTypeResourcePrefix), type);
    if (ValidateResourceName(marker).ok()) node.resources.Set(marker, Quantity::FromInt(1));
  }
  if (type_counts.size() == 1) {
    AddSystemLabels({{std::string(labels::kAcceleratorType), type_counts.begin()->first}}, "node",
                    node);
  } else if (type_counts.size() > 1) {
    std::vector<std::string> parts;
    for (const auto& [type, count] : type_counts) parts.push_back(absl::StrCat(type, " x", count));
    node.warnings.push_back(
        absl::StrCat("mixed accelerator types (", absl::StrJoin(parts, ", "),
                     "): ", ToAbsl(labels::kAcceleratorType),
                     " is not set; select by the accelerator_type:<TYPE> resources instead"));
  }

  TESSERA_RETURN_IF_ERROR(ApplyResourceOverrides(options.resource_overrides, node));

  // Precedence: defaults < a description's labels < the operator's --labels.
  AddDeploymentLabels(raw.env, node.labels, node.warnings);
  for (const LabelSet* user :
       std::initializer_list<const LabelSet*>{&raw.user_labels, &options.user_labels}) {
    TESSERA_RETURN_IF_ERROR(ValidateLabels(*user, LabelOrigin::kUser));
    for (const auto& [key, value] : *user) node.labels[key] = value;
  }
  return node;
}

}  // namespace

std::vector<std::string> AcceleratorFamilyNames() {
  std::vector<std::string> names;
  for (const AcceleratorPlugin* p : AcceleratorPlugins()) names.emplace_back(p->family());
  return names;
}

absl::StatusOr<NodeHardware> NodeFromSimulatedHardware(SimulatedHardware simulated,
                                                       std::string source,
                                                       const DiscoveryOptions& options) {
  return Assemble(RawFromSimulated(std::move(simulated), std::move(source), options.environment),
                  options);
}

int NodeHardware::AcceleratorCount() const {
  int count = 0;
  for (const FamilyReport& f : families) count += static_cast<int>(f.detection.devices.size());
  return count;
}

std::vector<VisibleFamily> NodeHardware::VisibleFamilies() const {
  std::vector<VisibleFamily> out;
  for (const FamilyReport& f : families) {
    if (f.advertised) out.push_back({f.plugin, f.visible});
  }
  return out;
}

absl::StatusOr<NodeHardware> DiscoverNode(const DiscoveryOptions& options) {
  TESSERA_ASSIGN_OR_RETURN(RawNode raw,
                           options.simulate_file.has_value()
                               ? SimulateNode(*options.simulate_file, options.environment)
                               : ProbeNode(options));
  return Assemble(std::move(raw), options);
}

}  // namespace tessera
