#include "hardware/host/nic_discovery.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/string_util.h"

namespace tessera {
namespace {

constexpr std::string_view kClassNet = "/sys/class/net";

// Names of software interfaces, skipped even when a tree places them oddly.
bool IsVirtualName(std::string_view name) {
  static constexpr std::string_view kPrefixes[] = {"lo",   "docker", "veth",  "virbr", "br-",
                                                   "ifb",  "tun",    "tap",   "cni",   "flannel",
                                                   "cali", "vxlan",  "kube-", "dummy"};
  for (std::string_view p : kPrefixes) {
    if (p == "lo" ? name == "lo" : absl::StartsWith(ToAbsl(name), ToAbsl(p))) return true;
  }
  return false;
}

// The deepest component of `path` that names a PCI function of the inventory. A virtio NIC
// resolves to .../0000:00:03.0/virtio2/net/eth0, so the function is an ancestor, not the parent.
const PciFunction* PciAncestor(std::string_view path, const PciInventory& pci) {
  std::vector<absl::string_view> parts = absl::StrSplit(ToAbsl(path), '/', absl::SkipEmpty());
  for (auto it = parts.rbegin(); it != parts.rend(); ++it) {
    if (const PciFunction* f = pci.Find(ToStd(*it))) return f;
  }
  return nullptr;
}

}  // namespace

std::vector<Nic> DiscoverNics(const Sysroot& sysroot, const PciInventory& pci,
                              std::vector<std::string>& warnings) {
  std::vector<Nic> nics;
  auto names = sysroot.ListDirectory(kClassNet);
  if (!names.ok()) return nics;  // no network class at all (minimal containers, bare trees)
  for (const std::string& name : *names) {
    if (IsVirtualName(name)) continue;
    const std::string dir = absl::StrCat(ToAbsl(kClassNet), "/", name);
    // Real sysfs has <if>/device -> the bus device; fixture trees may place the interface
    // directly under the PCI function. Either way the function is on the resolved path.
    auto resolved = sysroot.Resolve(sysroot.Exists(dir + "/device") ? dir + "/device" : dir);
    if (!resolved.ok()) {
      warnings.push_back(absl::StrCat("NIC ", name, " skipped: ", resolved.status().message()));
      continue;
    }
    if (absl::StartsWith(*resolved, "/sys/devices/virtual/")) continue;
    const PciFunction* function = PciAncestor(*resolved, pci);
    if (function == nullptr) continue;  // not on PCI (platform or USB-less virtual device)
    Nic nic;
    nic.name = name;
    nic.pci_bus_id = function->bus_id;
    nic.numa_node = function->numa_node;
    nic.sysfs_path = function->sysfs_path;
    // speed is -1 (or unreadable, EINVAL) while the link is down and on virtio: unknown.
    if (auto speed = sysroot.ReadInteger(dir + "/speed"); speed.ok() && *speed > 0) {
      nic.speed_mbps = *speed;
    }
    nics.push_back(std::move(nic));
  }
  std::sort(nics.begin(), nics.end(), [](const Nic& a, const Nic& b) { return a.name < b.name; });
  return nics;
}

}  // namespace tessera
