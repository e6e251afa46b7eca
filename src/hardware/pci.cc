#include "hardware/pci.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "base/string_util.h"

namespace tessera {
namespace {

constexpr std::string_view kPciDevices = "/sys/bus/pci/devices";

std::string LastComponent(std::string_view path) {
  const size_t slash = path.rfind('/');
  return std::string(slash == std::string_view::npos ? path : path.substr(slash + 1));
}

}  // namespace

PciInventory::PciInventory(std::vector<PciFunction> functions) : functions_(std::move(functions)) {
  std::sort(functions_.begin(), functions_.end(),
            [](const PciFunction& a, const PciFunction& b) { return a.bus_id < b.bus_id; });
}

PciInventory PciInventory::Scan(const Sysroot& sysroot, std::vector<std::string>* warnings) {
  std::vector<PciFunction> functions;
  auto names = sysroot.ListDirectory(kPciDevices);
  if (!names.ok()) return PciInventory();
  for (const std::string& bus_id : *names) {
    const std::string dir = absl::StrCat(ToAbsl(kPciDevices), "/", bus_id);
    PciFunction f;
    f.bus_id = bus_id;
    auto vendor = sysroot.ReadInteger(dir + "/vendor");
    auto device = sysroot.ReadInteger(dir + "/device");
    auto klass = sysroot.ReadInteger(dir + "/class");
    if (!vendor.ok() || !device.ok() || !klass.ok()) {
      if (warnings != nullptr) {
        const absl::Status& bad =
            !vendor.ok() ? vendor.status() : (!device.ok() ? device.status() : klass.status());
        warnings->push_back(absl::StrCat("PCI function ", bus_id, " skipped: ", bad.message()));
      }
      continue;
    }
    f.vendor_id = static_cast<uint16_t>(*vendor);
    f.device_id = static_cast<uint16_t>(*device);
    f.class_code = static_cast<uint32_t>(*klass);
    if (auto numa = sysroot.ReadInteger(dir + "/numa_node"); numa.ok()) {
      f.numa_node = static_cast<int>(*numa);
    }
    if (auto driver = sysroot.ReadLink(dir + "/driver"); driver.ok()) {
      f.driver = LastComponent(*driver);
    }
    if (auto group = sysroot.ReadLink(dir + "/iommu_group"); group.ok()) {
      int id = 0;
      if (absl::SimpleAtoi(LastComponent(*group), &id)) f.iommu_group = id;
    }
    auto resolved = sysroot.Resolve(dir);
    f.sysfs_path = resolved.ok() ? *resolved : dir;
    functions.push_back(std::move(f));
  }
  return PciInventory(std::move(functions));
}

const PciFunction* PciInventory::Find(std::string_view bus_id) const {
  auto it =
      std::lower_bound(functions_.begin(), functions_.end(), bus_id,
                       [](const PciFunction& f, std::string_view id) { return f.bus_id < id; });
  if (it == functions_.end() || it->bus_id != bus_id) return nullptr;
  return &*it;
}

std::vector<const PciFunction*> PciInventory::ByVendor(uint16_t vendor_id) const {
  std::vector<const PciFunction*> out;
  for (const PciFunction& f : functions_) {
    if (f.vendor_id == vendor_id) out.push_back(&f);
  }
  return out;
}

int PciPathAffinity(std::string_view a, std::string_view b) {
  std::vector<absl::string_view> pa = absl::StrSplit(ToAbsl(a), '/', absl::SkipEmpty());
  std::vector<absl::string_view> pb = absl::StrSplit(ToAbsl(b), '/', absl::SkipEmpty());
  int shared = 0;
  while (shared < static_cast<int>(std::min(pa.size(), pb.size())) && pa[shared] == pb[shared]) {
    ++shared;
  }
  return shared;
}

std::string HexId(uint32_t id, int width) { return absl::StrFormat("%0*x", width, id); }

}  // namespace tessera
