#include "hardware/plugins/amd/amd_detection.h"

#include <map>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "hardware/plugins/amd/amd_device_ids.h"
#include "hardware/plugins/amd/kfd_topology.h"
#include "hardware/plugins/common/pci_claim.h"

namespace tessera {
namespace {

constexpr std::string_view kFamily = "amd";
constexpr std::string_view kDriver = "amdgpu";

// Why a PCI function named by a KFD GPU node cannot be counted, or "" when it can.
std::string RejectReason(const PciFunction& f) {
  if (f.vendor_id != kPciVendorAmd) return "not an AMD (1002) function";
  if (!f.IsDisplayOrAccelerator()) {
    return absl::StrFormat("class 0x%06x is not a display or processing accelerator", f.class_code);
  }
  if (f.driver != kDriver) {
    return absl::StrCat("bound to ", f.driver.empty() ? "no driver" : f.driver, ", not amdgpu");
  }
  return "";
}

// The §5.1 rules block node start only where AMD GPUs exist; elsewhere (an NVIDIA host with
// both variables set) they are only worth a warning.
void ApplyEnvironmentRules(const Environment& env, Detection* d);

}  // namespace

std::vector<std::string> AmdEnvironmentErrors(const Environment& env) {
  std::vector<std::string> errors;
  if (auto rocr = env.Get("ROCR_VISIBLE_DEVICES")) {
    errors.push_back(
        absl::StrCat("ROCR_VISIBLE_DEVICES is set (", *rocr,
                     "); unset it and use HIP_VISIBLE_DEVICES, which Tessera manages per worker"));
  }
  auto cuda = env.Get("CUDA_VISIBLE_DEVICES");
  auto hip = env.Get("HIP_VISIBLE_DEVICES");
  if (cuda && hip && *cuda != *hip) {
    errors.push_back(absl::StrCat("CUDA_VISIBLE_DEVICES (", *cuda, ") and HIP_VISIBLE_DEVICES (",
                                  *hip, ") differ; HIP honours both, so they must be identical"));
  }
  return errors;
}

namespace {

void ApplyEnvironmentRules(const Environment& env, Detection* d) {
  for (std::string& e : AmdEnvironmentErrors(env)) {
    if (d->devices.empty()) {
      d->warnings.push_back(absl::StrCat("amd: ", e, " (ignored: no AMD GPU on this host)"));
    } else {
      d->errors.push_back(std::move(e));
    }
  }
}

// The GPU of KFD node `node`, whose PCI function `f` is at `bus_id` and whose render node is
// `render`, as device `index`; an unknown device id is warned about in `d`.
Device AmdGpu(const KfdNode& node, const PciFunction& f, const std::string& bus_id,
              const std::string& render, int index, Detection& d) {
  const SysfsProperties& p = node.properties;
  const uint64_t device_id = p.GetUnsigned("device_id").value_or(0);
  Device dev;
  dev.family = std::string(kFamily);
  dev.index = index;
  const uint16_t pci_device = f.device_id;
  const AmdGpuModel* model = FindAmdGpuModel(pci_device);
  dev.type = AmdGpuType(pci_device);
  dev.model =
      model != nullptr ? std::string(model->model) : absl::StrCat("AMD GPU ", HexId(pci_device));
  if (model == nullptr) {
    d.warnings.push_back(absl::StrCat("amd: ", bus_id, " has unknown device id ", HexId(pci_device),
                                      "; type reported as ", dev.type));
  }
  if (auto unique = p.GetUnsigned("unique_id"); unique && *unique != 0) {
    dev.uuid = absl::StrFormat("GPU-%016x", *unique);
  }
  dev.memory_bytes = node.memory_bytes;
  dev.pci_bus_id = bus_id;
  dev.numa_node = f.numa_node;
  dev.attributes["kfd_node"] = absl::StrCat(node.id);
  dev.attributes["render_node"] = render;
  dev.attributes["driver"] = f.driver;
  if (device_id != 0) dev.attributes["kfd_device_id"] = HexId(static_cast<uint32_t>(device_id));
  if (auto gfx = p.Get("gfx_target_version")) dev.attributes["gfx_target_version"] = *gfx;
  return dev;
}

// XGMI links. KFD lists each link on both ends; count it once, from the lower index.
void AddXgmiLinks(const std::vector<KfdNode>& nodes, const std::map<int, int>& index_of_node,
                  Detection& d) {
  std::map<std::pair<int, int>, DeviceLink> links;
  for (const KfdNode& node : nodes) {
    auto from = index_of_node.find(node.id);
    if (from == index_of_node.end()) continue;
    for (const KfdIoLink& l : node.io_links) {
      if (l.type != kKfdIoLinkXgmi) continue;
      auto to = index_of_node.find(l.node_to);
      if (to == index_of_node.end() || from->second >= to->second) continue;
      DeviceLink& link = links
                             .try_emplace({from->second, to->second},
                                          DeviceLink{from->second, to->second, LinkKind::kXgmi, 0,
                                                     0.0, BandwidthClass::kLow})
                             .first->second;
      link.lanes += 1;
      link.gigabytes_per_second +=
          static_cast<double>(l.max_bandwidth_mbps != 0 ? l.max_bandwidth_mbps
                                                        : l.min_bandwidth_mbps) /
          1000.0;
    }
  }
  for (auto& [pair, link] : links) {
    link.bandwidth_class = ClassifyBandwidth(link.gigabytes_per_second);
    d.links.push_back(link);
  }
  if (!links.empty()) d.evidence.push_back(absl::StrCat(links.size(), " XGMI GPU pairs"));
}

}  // namespace

Detection DetectAmdGpus(const DetectionContext& context) {
  Detection d;
  d.probe = "kfd";
  std::set<std::string, std::less<>> claimed;
  std::map<std::string, std::string> rejected;  // bus id -> reason

  auto nodes = ReadKfdTopology(context.sysroot, &d.warnings);
  if (!nodes.ok()) {
    d.evidence.push_back(absl::StrCat("no AMD GPUs: ", nodes.status().message()));
    WarnUnclaimedFunctions(
        context.pci, kPciVendorAmd, claimed, {kDriver},
        [](const PciFunction&) { return std::string("no KFD topology (amdgpu KFD not loaded)"); },
        &d);
    ApplyEnvironmentRules(context.env, &d);
    return d;
  }
  const bool have_kfd = context.sysroot.IsFileLike("/dev/kfd");
  d.evidence.push_back(absl::StrCat("KFD topology: ", nodes->size(), " nodes; /dev/kfd ",
                                    have_kfd ? "present" : "missing"));

  std::map<int, int> index_of_node;  // KFD node id -> device index
  for (const KfdNode& node : *nodes) {
    if (!node.is_gpu) continue;
    const SysfsProperties& p = node.properties;
    const uint64_t vendor = p.GetUnsigned("vendor_id").value_or(0);
    if (vendor != kPciVendorAmd) {
      d.warnings.push_back(absl::StrCat("amd: KFD node ", node.id, " has vendor_id ",
                                        HexId(static_cast<uint32_t>(vendor)),
                                        ", not AMD; skipped"));
      continue;
    }
    auto location = p.GetUnsigned("location_id");
    if (!location) {
      d.warnings.push_back(absl::StrCat("amd: KFD node ", node.id, " has no location_id; skipped"));
      continue;
    }
    const std::string bus_id = FormatBusId(
        static_cast<int>(p.GetUnsigned("domain").value_or(0)), static_cast<int>(*location >> 8),
        static_cast<int>((*location >> 3) & 0x1f), static_cast<int>(*location & 0x7));
    const PciFunction* f = context.pci.Find(bus_id);
    if (f == nullptr) {
      d.warnings.push_back(absl::StrCat("amd: KFD node ", node.id, " names PCI function ", bus_id,
                                        ", which sysfs does not list; skipped"));
      continue;
    }
    if (std::string why = RejectReason(*f); !why.empty()) {
      rejected[bus_id] = absl::StrCat("KFD node ", node.id, ": ", why);
      continue;
    }
    if (!have_kfd) {
      rejected[bus_id] = "/dev/kfd is missing, so ROCm cannot open any GPU here";
      continue;
    }
    const auto minor = p.GetUnsigned("drm_render_minor");
    const std::string render = absl::StrCat("/dev/dri/renderD", minor.value_or(0));
    if (!minor || !context.sysroot.IsFileLike(render)) {
      rejected[bus_id] =
          absl::StrCat("render node ", render, " is missing (not passed into this container?)");
      continue;
    }

    Device dev = AmdGpu(node, *f, bus_id, render, static_cast<int>(d.devices.size()), d);
    d.evidence.push_back(absl::StrCat("KFD node ", node.id, " -> GPU ", dev.index, ": ",
                                      DescribeFunction(*f), ", ", render));
    index_of_node[node.id] = dev.index;
    claimed.insert(bus_id);
    d.devices.push_back(std::move(dev));
  }

  AddXgmiLinks(*nodes, index_of_node, d);

  WarnUnclaimedFunctions(context.pci, kPciVendorAmd, claimed, {kDriver},
                         UnclaimedReason(rejected, RejectReason, "no KFD GPU node names it"), &d);

  ApplyEnvironmentRules(context.env, &d);
  return d;
}

}  // namespace tessera
