#include "hardware/plugins/intel_gpu/intel_gpu_detection.h"

#include <algorithm>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "base/string_util.h"
#include "hardware/plugins/common/index_list.h"
#include "hardware/plugins/common/pci_claim.h"
#include "hardware/plugins/intel_gpu/intel_gpu_ids.h"

namespace tessera {
namespace {

constexpr std::string_view kFamily = "intel-gpu";

bool IsIntegratedSlot(const PciFunction& f) {
  return f.bus_id.size() == 12 && std::string_view(f.bus_id).substr(4) == ":00:02.0";
}

// Why an Intel function is not a countable discrete GPU, or "" when it is.
std::string RejectReason(const PciFunction& f) {
  if (f.base_class() != 0x03) {
    return absl::StrCat("it is a ", PciClassName(f.class_code), ", not a GPU");
  }
  if (f.driver != "i915" && f.driver != "xe") {
    return absl::StrCat("bound to ", f.driver.empty() ? "no driver" : f.driver, ", not i915 or xe");
  }
  if (FindIntelDiscreteGpu(f.device_id) == nullptr) {
    if (IsIntegratedSlot(f)) {
      return "integrated GPU (root-bus slot 00:02.0, not in the discrete allow-list); Tessera "
             "counts discrete GPUs only";
    }
    return absl::StrCat("device id ", HexId(f.device_id), " is not in the discrete-GPU allow-list");
  }
  return "";
}

struct Found {
  const PciFunction* function;
  std::string render_node;
};

}  // namespace

Detection DetectIntelGpus(const DetectionContext& context) {
  Detection d;
  d.probe = "drm";
  const Sysroot& sysroot = context.sysroot;
  std::set<std::string, std::less<>> claimed;
  std::map<std::string, std::string> rejected;
  std::vector<Found> found;

  auto names = sysroot.ListDirectory("/sys/class/drm");
  for (const std::string& name : names.ok() ? *names : std::vector<std::string>()) {
    if (!NumberedEntry(name, "renderD")) continue;
    const std::string class_dir = "/sys/class/drm/" + name;
    auto bus_id = PciBusIdOfClassDevice(sysroot, class_dir);
    const PciFunction* f = bus_id ? context.pci.Find(*bus_id) : nullptr;
    if (f == nullptr || f->vendor_id != kPciVendorIntel) continue;  // another family's GPU
    if (claimed.count(f->bus_id) > 0 || rejected.count(f->bus_id) > 0) continue;
    if (std::string why = RejectReason(*f); !why.empty()) {
      rejected[f->bus_id] = why;
      continue;
    }
    const std::string node = "/dev/dri/" + name;
    if (!sysroot.IsFileLike(node)) {
      rejected[f->bus_id] =
          absl::StrCat("render node ", node, " is missing (not passed into this container?)");
      continue;
    }
    claimed.insert(f->bus_id);
    found.push_back(Found{f, node});
  }
  std::sort(found.begin(), found.end(),
            [](const Found& a, const Found& b) { return a.function->bus_id < b.function->bus_id; });

  for (const Found& g : found) {
    const PciFunction& f = *g.function;
    const IntelDiscreteGpu* sku = FindIntelDiscreteGpu(f.device_id);
    Device dev;
    dev.family = std::string(kFamily);
    dev.index = static_cast<int>(d.devices.size());
    dev.model = std::string(sku->name);
    dev.type = IntelGpuType(sku->name);
    dev.memory_bytes = sku->memory_bytes;
    dev.pci_bus_id = f.bus_id;
    dev.numa_node = f.numa_node;
    dev.attributes["render_node"] = g.render_node;
    dev.attributes["driver"] = f.driver;
    d.evidence.push_back(
        absl::StrCat("GPU ", dev.index, ": ", DescribeFunction(f), ", ", g.render_node));
    d.devices.push_back(std::move(dev));
  }

  WarnUnclaimedFunctions(
      context.pci, kPciVendorIntel, claimed, {"i915", "xe"},
      UnclaimedReason(rejected, RejectReason, "no DRM render node (driver not ready?)"), &d);
  return d;
}

}  // namespace tessera
