#include "hardware/plugins/gaudi/gaudi_detection.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "base/string_util.h"
#include "hardware/plugins/common/index_list.h"
#include "hardware/plugins/common/pci_claim.h"
#include "hardware/plugins/gaudi/gaudi_device_ids.h"

namespace tessera {
namespace {

constexpr std::string_view kFamily = "gaudi";
constexpr std::string_view kDriver = "habanalabs";

struct Candidate {
  std::string class_dir;    // /sys/class/accel/accel0
  std::string device_node;  // /dev/accel/accel0
  int minor = 0;
};

std::vector<Candidate> ListCandidates(const Sysroot& sysroot, std::string_view class_root,
                                      std::string_view prefix, std::string_view dev_dir) {
  std::vector<Candidate> out;
  auto names = sysroot.ListDirectory(class_root);
  if (!names.ok()) return out;
  for (const std::string& name : *names) {
    auto minor = NumberedEntry(name, prefix);
    if (!minor) continue;
    out.push_back(Candidate{absl::StrCat(ToAbsl(class_root), "/", name),
                            absl::StrCat(ToAbsl(dev_dir), "/", name), *minor});
  }
  std::sort(out.begin(), out.end(),
            [](const Candidate& a, const Candidate& b) { return a.minor < b.minor; });
  return out;
}

std::optional<std::string> ReadDeviceAttribute(const Sysroot& sysroot, const std::string& class_dir,
                                               std::string_view name) {
  for (const std::string& path : {absl::StrCat(class_dir, "/device/", ToAbsl(name)),
                                  absl::StrCat(class_dir, "/", ToAbsl(name))}) {
    if (auto v = sysroot.ReadAttribute(path); v.ok() && !v->empty()) return *v;
  }
  return std::nullopt;
}

std::string RejectReason(const PciFunction& f) {
  if (!f.IsDisplayOrAccelerator()) {
    return absl::StrCat("class ", PciClassName(f.class_code), " is not a processing accelerator");
  }
  if (f.driver != kDriver) {
    return absl::StrCat("bound to ", f.driver.empty() ? "no driver" : f.driver, ", not habanalabs");
  }
  return "";
}

// Index = module id when every card has a distinct one; else device-node order.
void NumberByModuleId(const std::vector<std::optional<int>>& module_ids, Detection& d) {
  std::set<int> distinct;
  bool all_known = true;
  for (const auto& m : module_ids) {
    if (!m)
      all_known = false;
    else
      distinct.insert(*m);
  }
  const bool use_modules = all_known && distinct.size() == module_ids.size();
  if (!use_modules && !d.devices.empty()) {
    d.warnings.push_back(
        "gaudi: module_id missing or repeated; HPU indices follow device-node order instead");
  }
  for (size_t i = 0; i < d.devices.size(); ++i) {
    d.devices[i].index = use_modules ? *module_ids[i] : static_cast<int>(i);
  }
  std::sort(d.devices.begin(), d.devices.end(),
            [](const Device& a, const Device& b) { return a.index < b.index; });
}

// All-to-all RoCE scale-up between cards of one generation (HLS wiring).
void AddRoceLinks(const DetectionContext& context, Detection& d) {
  for (size_t i = 0; i < d.devices.size(); ++i) {
    for (size_t j = i + 1; j < d.devices.size(); ++j) {
      const Device& a = d.devices[i];
      const Device& b = d.devices[j];
      if (a.type != b.type) continue;
      const PciFunction* f = context.pci.Find(a.pci_bus_id);
      const GaudiModel* model = f ? FindGaudiModel(f->device_id) : nullptr;
      if (model == nullptr) continue;
      DeviceLink link{a.index,
                      b.index,
                      LinkKind::kGaudiRoce,
                      model->ports_per_peer,
                      model->ports_per_peer * model->port_gigabits / 8.0,
                      BandwidthClass::kLow};
      link.bandwidth_class = ClassifyBandwidth(link.gigabytes_per_second);
      d.links.push_back(link);
    }
  }
}

}  // namespace

Detection DetectGaudiDevices(const DetectionContext& context) {
  Detection d;
  d.probe = "accel";
  const Sysroot& sysroot = context.sysroot;
  std::vector<Candidate> candidates =
      ListCandidates(sysroot, "/sys/class/accel", "accel", "/dev/accel");
  if (candidates.empty()) {
    candidates = ListCandidates(sysroot, "/sys/class/habanalabs", "hl", "/dev");
    if (!candidates.empty()) d.probe = "habanalabs";
  }

  std::set<std::string, std::less<>> claimed;
  std::map<std::string, std::string> rejected;
  std::vector<std::optional<int>> module_ids;
  for (const Candidate& c : candidates) {
    auto bus_id = PciBusIdOfClassDevice(sysroot, c.class_dir);
    const PciFunction* f = bus_id ? context.pci.Find(*bus_id) : nullptr;
    if (f == nullptr) {
      d.evidence.push_back(absl::StrCat(c.class_dir, ": no PCI function, skipped"));
      continue;
    }
    if (f->vendor_id != kPciVendorHabana) {
      d.evidence.push_back(absl::StrCat(c.class_dir, " is ", DescribeFunction(*f),
                                        ", not a Habana device; skipped"));
      continue;
    }
    if (claimed.count(f->bus_id) > 0) continue;
    if (std::string why = RejectReason(*f); !why.empty()) {
      rejected[f->bus_id] = why;
      continue;
    }
    if (!sysroot.IsFileLike(c.device_node)) {
      rejected[f->bus_id] = absl::StrCat("device node ", c.device_node,
                                         " is missing (not passed into this container?)");
      continue;
    }
    const GaudiModel* model = FindGaudiModel(f->device_id);
    std::string device_type =
        absl::AsciiStrToUpper(ReadDeviceAttribute(sysroot, c.class_dir, "device_type")
                                  .value_or(model ? std::string(model->device_type) : ""));
    if (device_type.empty()) {
      d.warnings.push_back(absl::StrCat("gaudi: ", f->bus_id, " has unknown device id ",
                                        HexId(f->device_id), " and no device_type attribute"));
      device_type = absl::StrCat("HABANA-", HexId(f->device_id));
    }
    Device dev;
    dev.family = std::string(kFamily);
    dev.type = absl::StrCat("Intel-", device_type);
    dev.model = absl::StrCat("Intel Gaudi ", device_type);
    dev.uuid = ReadDeviceAttribute(sysroot, c.class_dir, "serial_number").value_or("");
    dev.memory_bytes = model ? model->memory_bytes : 0;
    dev.pci_bus_id = f->bus_id;
    dev.numa_node = f->numa_node;
    dev.attributes["device_node"] = c.device_node;
    dev.attributes["driver"] = f->driver;
    std::optional<int> module_id;
    if (auto text = ReadDeviceAttribute(sysroot, c.class_dir, "module_id")) {
      if (auto parsed = ParseIndexList(*text, {}); parsed.ok() && parsed->size() == 1) {
        module_id = parsed->front();
        dev.attributes["module_id"] = *text;
      }
    }
    if (auto status = ReadDeviceAttribute(sysroot, c.class_dir, "status")) {
      dev.attributes["status"] = *status;
      if (absl::AsciiStrToLower(*status) != "operational") {
        d.warnings.push_back(absl::StrCat("gaudi: ", f->bus_id, " status is ", *status));
      }
    }
    d.evidence.push_back(absl::StrCat(c.class_dir, " -> ", DescribeFunction(*f), ", module ",
                                      module_id ? absl::StrCat(*module_id) : "unknown", ", ",
                                      c.device_node));
    module_ids.push_back(module_id);
    claimed.insert(f->bus_id);
    d.devices.push_back(std::move(dev));
  }

  NumberByModuleId(module_ids, d);
  AddRoceLinks(context, d);

  WarnUnclaimedFunctions(context.pci, kPciVendorHabana, claimed, {kDriver},
                         UnclaimedReason(rejected, RejectReason, "no accel or hl device names it"),
                         &d);
  return d;
}

}  // namespace tessera
