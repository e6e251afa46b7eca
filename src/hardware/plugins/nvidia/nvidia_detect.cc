#include "hardware/plugins/nvidia/nvidia_detect.h"

#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/string_util.h"
#include "hardware/node_label_keys.h"
#include "hardware/plugins/nvidia/nvidia_links.h"
#include "hardware/plugins/nvidia/nvidia_pci.h"
#include "hardware/plugins/nvidia/nvidia_sysfs.h"
#include "hardware/plugins/nvidia/nvidia_type.h"
#include "hardware/plugins/nvidia/nvml_probe.h"

namespace tessera {
namespace {

constexpr std::string_view kFamily = "nvidia";
constexpr std::string_view kNvmlSoname = "libnvidia-ml.so.1";
constexpr std::string_view kFakeTreeNvml = "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1";

// GPUs recognised by PCI device id alone, for when neither NVML nor /proc names them: the type
// string, and for SXM boards the NVLink lanes into the NVSwitches and their per-lane rate (the
// sysfs fallback cannot ask NVML). 0 lanes: not an NVSwitch board.
struct KnownGpu {
  uint16_t device_id;
  std::string_view type;
  int switch_lanes;
  double lane_rate;
};
constexpr KnownGpu kKnownGpus[] = {
    {0x20b0, "A100", 12, 25},  // A100-SXM4-40GB (HGX A100): 12 NVLink 3 links
    {0x20b2, "A100", 12, 25},  // A100-SXM4-80GB
    {0x2330, "H100", 18, 25},  // H100 SXM5 80GB (HGX H100): 18 NVLink 4 links
    {0x2335, "H200", 18, 25},  // H200 SXM 141GB (HGX H200)
    {0x2684, "RTX-4090", 0, 0},
};

const KnownGpu* FindKnownGpu(uint16_t device_id) {
  for (const KnownGpu& k : kKnownGpus) {
    if (k.device_id == device_id) return &k;
  }
  return nullptr;
}

// The type string from the name, else from the device id ("NVIDIA-2330" when unknown), so a
// counted device never has an empty type.
std::string TypeFor(std::string_view name, uint16_t device_id) {
  std::string type = NvidiaTypeString(name);
  if (!type.empty()) return type;
  if (const KnownGpu* k = FindKnownGpu(device_id)) return std::string(k->type);
  return absl::StrCat("NVIDIA-", HexId(device_id));
}

Device MakeDevice(int index) {
  Device d;
  d.family = std::string(kFamily);
  d.index = index;
  return d;
}

// One warning per NVIDIA PCI function that was not counted.
void WarnUncounted(const PciInventory& pci, const std::set<std::string>& counted,
                   std::string_view why_display, Detection& d) {
  for (const PciFunction* f : pci.ByVendor(kPciVendorNvidia)) {
    if (counted.count(f->bus_id) == 0) d.warnings.push_back(RejectionWarning(*f, why_display));
  }
}

// tessera.io/fabric-domain for GPUs in a multi-host NVLink domain: "<cluster uuid>.<clique>"
// (36 + 1 + at most 10 characters, all in [0-9a-f.-], so always a valid label value).
void AddFabricLabels(const std::vector<NvmlGpu>& counted, Detection& d) {
  std::set<std::string> domains;
  size_t without = 0;
  for (const NvmlGpu& g : counted) {
    if (g.fabric.has_value()) {
      domains.insert(absl::StrCat(g.fabric->cluster_uuid, ".", g.fabric->clique_id));
    } else {
      ++without;
    }
  }
  if (domains.empty()) return;
  if (domains.size() > 1 || without > 0) {
    d.warnings.push_back(
        absl::StrCat("GPUs disagree on their NVLink fabric domain (", absl::StrJoin(domains, ", "),
                     without > 0 ? absl::StrCat(", ", without, " GPU(s) in none") : "",
                     "); no fabric-domain label set"));
    return;
  }
  const std::string& domain = *domains.begin();
  d.labels[std::string(labels::kFabricDomain)] = domain;
  d.labels[std::string(labels::kFabricKind)] = "nvlink";
  d.evidence.push_back(absl::StrCat("NVLink fabric domain ", domain,
                                    " (cluster UUID . clique id) from nvmlDeviceGetGpuFabricInfo"));
}

void FromNvml(const DetectionContext& context, const NvmlSnapshot& snap, Detection& d) {
  d.probe = "nvml";
  d.evidence.push_back(absl::StrCat("NVML ", snap.library, ": driver ",
                                    snap.driver_version.empty() ? "unknown" : snap.driver_version,
                                    ", ", snap.gpus.size(), " device(s)"));
  d.evidence.insert(d.evidence.end(), snap.evidence.begin(), snap.evidence.end());
  d.warnings.insert(d.warnings.end(), snap.warnings.begin(), snap.warnings.end());

  const bool no_pci = context.pci.functions().empty();
  if (no_pci) {
    d.evidence.push_back(
        "no PCI bus in sysfs (container?): NVML devices accepted without the PCI claim check");
  }
  std::vector<NvmlGpu> counted;
  std::set<std::string> counted_bus;
  for (const NvmlGpu& g : snap.gpus) {
    const PciFunction* f = no_pci ? nullptr : context.pci.Find(g.bus_id);
    if (!no_pci && (f == nullptr || !IsNvidiaDisplayFunction(*f))) {
      d.warnings.push_back(absl::StrCat(
          "NVML device ", g.index, " (", g.name, ") at ", g.bus_id.empty() ? "?" : g.bus_id,
          " dropped: ",
          f == nullptr ? std::string("no PCI function at that bus id")
                       : absl::StrCat("the PCI function there is ", DescribePciFunction(*f),
                                      ", not an NVIDIA display controller")));
      continue;
    }
    Device dev = MakeDevice(g.index);
    dev.uuid = g.uuid;
    dev.model = g.name;
    dev.type = TypeFor(g.name, static_cast<uint16_t>(g.pci_device_id >> 16));
    dev.memory_bytes = g.memory_bytes;
    dev.pci_bus_id = g.bus_id;
    dev.numa_node = f != nullptr ? f->numa_node : -1;
    if (!snap.driver_version.empty()) dev.attributes["driver_version"] = snap.driver_version;
    if (f != nullptr)
      dev.attributes["pci_id"] = absl::StrCat(HexId(f->vendor_id), ":", HexId(f->device_id));
    if (!g.links.empty()) dev.attributes["nvlinks"] = absl::StrCat(g.links.size());
    d.evidence.push_back(absl::StrCat(
        "GPU ", g.index, ": ", g.bus_id, " ", f != nullptr ? DescribePciFunction(*f) : "(no sysfs)",
        ", NVML name ", Quote(g.name), ", ", g.links.size(), " active NVLink(s)"));
    d.devices.push_back(std::move(dev));
    counted_bus.insert(g.bus_id);
    counted.push_back(g);
  }
  WarnUncounted(context.pci, counted_bus, "is a display function NVML does not report", d);
  d.links = BuildNvLinks(counted, context.pci, &d.evidence);
  AddFabricLabels(counted, d);
}

void FromSysfs(const DetectionContext& context, std::string_view why_no_nvml, Detection& d) {
  d.probe = "sysfs";
  const bool any_nvidia = !context.pci.ByVendor(kPciVendorNvidia).empty() ||
                          context.sysroot.Exists("/proc/driver/nvidia");
  if (!any_nvidia) {
    // Not an NVIDIA host: say so quietly rather than warn on every TPU or CPU machine.
    d.evidence.push_back(absl::StrCat(
        "no NVIDIA PCI function and no /proc/driver/nvidia (NVML: ", ToAbsl(why_no_nvml), ")"));
    return;
  }
  d.warnings.push_back(
      absl::StrCat("NVML not available (", ToAbsl(why_no_nvml),
                   "): devices from sysfs and /proc/driver/nvidia; link topology inferred"));
  SysfsGpuScan scan = ScanNvidiaSysfs(context.sysroot, context.pci);
  d.evidence.insert(d.evidence.end(), scan.evidence.begin(), scan.evidence.end());
  std::set<std::string> counted_bus;
  std::vector<int> indices;
  for (size_t i = 0; i < scan.gpus.size(); ++i) {
    const SysfsGpu& g = scan.gpus[i];
    // PCI bus order is NVML's order and CUDA's under CUDA_DEVICE_ORDER=PCI_BUS_ID.
    Device dev = MakeDevice(static_cast<int>(i));
    dev.uuid = g.uuid;
    dev.model = g.model;
    dev.type = TypeFor(g.model, g.device_id);
    dev.pci_bus_id = g.bus_id;
    dev.numa_node = g.numa_node;
    if (!scan.driver_version.empty()) dev.attributes["driver_version"] = scan.driver_version;
    if (g.device_id != 0) dev.attributes["pci_id"] = absl::StrCat("10de:", HexId(g.device_id));
    d.evidence.push_back(absl::StrCat("GPU ", i, ": ", g.bus_id, " ",
                                      g.pci_description.empty() ? "(no sysfs)" : g.pci_description,
                                      g.model.empty()
                                          ? ", no /proc/driver/nvidia information"
                                          : absl::StrCat(", /proc model ", Quote(g.model))));
    d.devices.push_back(std::move(dev));
    counted_bus.insert(g.bus_id);
    indices.push_back(static_cast<int>(i));
  }
  WarnUncounted(context.pci, counted_bus, "is not bound to the nvidia driver", d);

  std::vector<std::string> switches;
  for (const PciFunction* f : context.pci.ByVendor(kPciVendorNvidia)) {
    if (IsNvSwitchFunction(*f)) switches.push_back(f->bus_id);
  }
  if (switches.empty() || indices.size() < 2) return;
  // Lanes and rate from the GPU model when every GPU is the same known SXM board; otherwise the
  // fabric is certain but its width is not: one lane of unknown (0) bandwidth.
  int lanes = 0;
  double rate = 0;
  const KnownGpu* known = FindKnownGpu(scan.gpus.front().device_id);
  bool same = known != nullptr && known->switch_lanes > 0;
  for (const SysfsGpu& g : scan.gpus) same = same && g.device_id == known->device_id;
  if (same) {
    lanes = known->switch_lanes;
    rate = known->lane_rate;
  }
  d.links = SwitchFabricLinks(indices, lanes > 0 ? lanes : 1, rate);
  d.evidence.push_back(
      absl::StrCat("NVSwitch fabric inferred (not measured) from ", switches.size(),
                   " NVSwitch PCI function(s) ", absl::StrJoin(switches, ","), ": all ",
                   indices.size(), " GPUs connected",
                   lanes > 0 ? absl::StrCat(", ", lanes, " lanes each from the GPU model")
                             : std::string(", bandwidth unknown for this GPU model")));
}

}  // namespace

std::optional<std::string> NvmlLibraryFor(const DetectionContext& context, std::string* why_none) {
  return NvmlLibraryFor(context.sysroot, context.env, context.options.nvml_library, why_none);
}

std::optional<std::string> NvmlLibraryFor(const Sysroot& sysroot, const Environment& env,
                                          const std::string& configured, std::string* why_none) {
  if (!configured.empty()) return configured;
  if (auto from_env = env.Get("TESSERA_NVML_LIBRARY"); from_env && !from_env->empty()) {
    return *from_env;
  }
  if (sysroot.is_live()) return std::string(kNvmlSoname);
  if (sysroot.Exists(kFakeTreeNvml)) return sysroot.HostPath(kFakeTreeNvml);
  if (why_none != nullptr) {
    *why_none = absl::StrCat("the tree at ", sysroot.root(), " has no ", ToAbsl(kFakeTreeNvml));
  }
  return std::nullopt;
}

Detection DetectNvidia(const DetectionContext& context) {
  Detection d;
  std::string why_not;
  if (std::optional<std::string> library = NvmlLibraryFor(context, &why_not)) {
    absl::StatusOr<NvmlSnapshot> snap = ReadNvml(*library);
    if (snap.ok()) {
      FromNvml(context, *snap, d);
      return d;
    }
    why_not = std::string(snap.status().message());
  }
  FromSysfs(context, why_not, d);
  return d;
}

}  // namespace tessera
