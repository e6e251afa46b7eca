#include "hardware/plugins/common/pci_claim.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/string_util.h"

namespace tessera {
namespace {

std::string LastComponent(std::string_view path) {
  while (!path.empty() && path.back() == '/') path.remove_suffix(1);
  const size_t slash = path.rfind('/');
  return std::string(slash == std::string_view::npos ? path : path.substr(slash + 1));
}

bool IsHex(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

}  // namespace

std::string DescribeFunction(const PciFunction& f) {
  return absl::StrFormat(
      "%s (%s:%s, class 0x%06x, %s)", f.bus_id, HexId(f.vendor_id), HexId(f.device_id),
      f.class_code,
      f.driver.empty() ? std::string("no driver") : absl::StrCat("driver ", f.driver));
}

std::string PciClassName(uint32_t class_code) {
  const uint32_t sub = class_code >> 8;
  switch (sub) {
    case 0x0108: return "NVMe";
    case 0x0106: return "SATA";
    case 0x0200: return "ethernet";
    case 0x0207: return "InfiniBand";
    case 0x0300: return "VGA";
    case 0x0302: return "3D controller";
    case 0x0380: return "display controller";
    case 0x0403: return "audio";
    case 0x0600: return "host bridge";
    case 0x0601: return "ISA bridge";
    case 0x0604: return "PCI bridge";
    case 0x0680: return "bridge";
    case 0x0880: return "system peripheral";
    case 0x0c03: return "USB";
    case 0x0c05: return "SMBus";
    case 0x1200: return "processing accelerator";
    default: break;
  }
  switch (class_code >> 16) {
    case 0x01: return "storage";
    case 0x02: return "network";
    case 0x03: return "display";
    case 0x04: return "multimedia";
    case 0x05: return "memory controller";
    case 0x06: return "bridge";
    case 0x07: return "communication";
    case 0x08: return "system peripheral";
    case 0x0c: return "serial bus";
    case 0x11: return "signal processing";
    case 0x12: return "processing accelerator";
    default: return absl::StrFormat("class 0x%06x", class_code);
  }
}

std::string FormatBusId(int domain, int bus, int device, int function) {
  return absl::StrFormat("%04x:%02x:%02x.%x", domain, bus, device, function);
}

bool LooksLikeBusId(std::string_view name) {
  // dddd:bb:dd.f
  if (name.size() != 12 || name[4] != ':' || name[7] != ':' || name[10] != '.') return false;
  for (size_t i : {0, 1, 2, 3, 5, 6, 8, 9, 11}) {
    if (!IsHex(name[i])) return false;
  }
  return true;
}

std::optional<std::string> PciBusIdOfClassDevice(const Sysroot& sysroot,
                                                 std::string_view class_device) {
  const std::string dir(class_device);
  if (auto device = sysroot.Resolve(dir + "/device"); device.ok()) {
    std::string id = LastComponent(*device);
    if (LooksLikeBusId(id)) return id;
  }
  // Without a `device` link, walk up the entry's own resolved path: the nearest ancestor named
  // like a bus id is the owning function (…/0000:19:00.0/accel/accel0).
  auto resolved = sysroot.Resolve(dir);
  if (!resolved.ok()) return std::nullopt;
  std::string_view path = *resolved;
  while (!path.empty()) {
    const size_t slash = path.rfind('/');
    if (slash == std::string_view::npos) break;
    const std::string_view name = path.substr(slash + 1);
    if (LooksLikeBusId(name)) return std::string(name);
    path = path.substr(0, slash);
  }
  return std::nullopt;
}

UnclaimedReasonFn UnclaimedReason(const std::map<std::string, std::string>& rejected,
                                  std::string (*reject_reason)(const PciFunction&),
                                  std::string fallback) {
  return [&rejected, reject_reason, fallback = std::move(fallback)](const PciFunction& f) {
    if (auto it = rejected.find(f.bus_id); it != rejected.end()) return it->second;
    std::string why = reject_reason(f);
    return why.empty() ? fallback : why;
  };
}

void WarnUnclaimedFunctions(const PciInventory& pci, uint16_t vendor_id,
                            const std::set<std::string, std::less<>>& claimed,
                            const std::vector<std::string_view>& family_drivers,
                            const UnclaimedReasonFn& reason, Detection* out,
                            const std::function<bool(const PciFunction&)>& also_candidate) {
  std::map<std::string, std::vector<std::string>> others;  // class name -> bus ids
  int other_count = 0;
  for (const PciFunction* f : pci.ByVendor(vendor_id)) {
    if (claimed.count(f->bus_id) > 0) continue;
    const bool family_driver =
        std::find(family_drivers.begin(), family_drivers.end(), f->driver) != family_drivers.end();
    if (f->IsDisplayOrAccelerator() || family_driver || (also_candidate && also_candidate(*f))) {
      out->warnings.push_back(absl::StrCat(DescribeFunction(*f), " not counted: ", reason(*f)));
    } else {
      others[PciClassName(f->class_code)].push_back(f->bus_id);
      ++other_count;
    }
  }
  if (other_count == 0) return;
  std::vector<std::string> groups;
  for (const auto& [name, ids] : others) {
    groups.push_back(absl::StrCat(name, " ", absl::StrJoin(ids, " ")));
  }
  out->evidence.push_back(absl::StrCat(
      other_count, " other ", HexId(vendor_id), " PCI function", other_count == 1 ? "" : "s",
      " not counted (not accelerators): ", absl::StrJoin(groups, "; ")));
}

}  // namespace tessera
