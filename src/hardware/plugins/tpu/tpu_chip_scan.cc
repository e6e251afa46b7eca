#include "hardware/plugins/tpu/tpu_chip_scan.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "base/string_util.h"
#include "hardware/plugins/tpu/tpu_pci_ids.h"

namespace tessera {
namespace {

bool IsDigits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), absl::ascii_isdigit);
}

std::string LastComponent(std::string_view path) {
  const size_t slash = path.rfind('/');
  return std::string(slash == std::string_view::npos ? path : path.substr(slash + 1));
}

std::string Ids(uint16_t vendor, uint16_t device) {
  return absl::StrCat(HexId(vendor), ":", HexId(device));
}

// Reads the ids of the PCI function whose sysfs directory is `dir` (any path that resolves to
// it). Fails on any read error: a function that cannot be read is never counted.
struct FunctionIds {
  uint16_t vendor = 0;
  uint16_t device = 0;
  std::optional<uint32_t> class_code;
};
absl::StatusOr<FunctionIds> ReadIds(const Sysroot& sysroot, const std::string& dir) {
  FunctionIds ids;
  auto vendor = sysroot.ReadInteger(dir + "/vendor");
  if (!vendor.ok()) return vendor.status();
  auto device = sysroot.ReadInteger(dir + "/device");
  if (!device.ok()) return device.status();
  ids.vendor = static_cast<uint16_t>(*vendor);
  ids.device = static_cast<uint16_t>(*device);
  if (auto klass = sysroot.ReadInteger(dir + "/class"); klass.ok()) {
    ids.class_code = static_cast<uint32_t>(*klass);
  }
  return ids;
}

class Scanner {
 public:
  Scanner(const Sysroot& sysroot, const PciInventory& pci, std::optional<TpuGeneration> env_gen,
          TpuChipScan& out)
      : sysroot_(sysroot), pci_(pci), env_generation_(env_gen), out_(out) {}

  // Decides whether the function `bus_id` with `ids`, reached through `node`, is a TPU chip.
  void Consider(const std::string& node, const std::string& bus_id, const FunctionIds& ids,
                std::vector<TpuChip>& chips) {
    const std::string what =
        absl::StrCat(node, ": ", bus_id, " (", Ids(ids.vendor, ids.device), ")");
    if (ids.vendor != kPciVendorGoogle) {
      out_.evidence.push_back(absl::StrCat(what, " is not a Google device; not counted"));
      return;
    }
    if (ids.device == kGoogleGvnicDeviceId ||
        (ids.class_code.has_value() && (*ids.class_code >> 16) == 0x02)) {
      out_.evidence.push_back(absl::StrCat(what, " is a Google NIC (gVNIC); not counted"));
      return;
    }
    std::optional<TpuGeneration> generation = TpuGenerationOfDeviceId(ids.device);
    if (!generation.has_value()) {
      if (!env_generation_.has_value()) {
        out_.warnings.push_back(
            absl::StrCat(what, " is a Google device with an unknown TPU device id; not counted"));
        return;
      }
      generation = env_generation_;
      out_.warnings.push_back(absl::StrCat(what, " has an unknown TPU device id; counted as ",
                                           TpuTypeString(*generation),
                                           " because TPU_ACCELERATOR_TYPE says so"));
    }
    TpuChip chip;
    chip.bus_id = bus_id;
    chip.device_id = ids.device;
    chip.generation = *generation;
    chip.device_node = node;
    if (const PciFunction* f = pci_.Find(bus_id); f != nullptr) {
      chip.numa_node = f->numa_node;
      chip.driver = f->driver;
    }
    out_.evidence.push_back(absl::StrCat(what, " is a ", TpuTypeString(*generation),
                                         " chip, driver ", chip.driver.empty() ? "?" : chip.driver,
                                         ", NUMA node ", chip.numa_node));
    chips.push_back(std::move(chip));
  }

  // /dev/accel<N> character devices of the TPU driver, each mapped through
  // /sys/class/accel/accel<N>/device to its PCI function.
  std::vector<TpuChip> ScanAccel(const std::vector<std::string>& dev) {
    std::vector<TpuChip> chips;
    for (const std::string& name : dev) {
      if (name == "accel" && sysroot_.IsDirectory("/dev/accel")) {
        out_.evidence.push_back(
            "/dev/accel is a directory (NVIDIA 570+ drivers, or the kernel accel subsystem of "
            "Gaudi/Intel NPU); not a TPU");
        continue;
      }
      if (name.rfind("accel", 0) != 0 || !IsDigits(std::string_view(name).substr(5))) continue;
      const std::string node = "/dev/" + name;
      if (!sysroot_.IsFileLike(node)) {
        out_.evidence.push_back(absl::StrCat(node, " is a directory; not counted"));
        continue;
      }
      const std::string link = absl::StrCat("/sys/class/accel/", name, "/device");
      auto target = sysroot_.Resolve(link);
      if (!target.ok()) {
        out_.warnings.push_back(absl::StrCat(node, ": cannot map to a PCI function (", link, ": ",
                                             target.status().message(), "); not counted"));
        continue;
      }
      auto ids = ReadIds(sysroot_, *target);
      if (!ids.ok()) {
        out_.warnings.push_back(absl::StrCat(node, ": cannot read the ids of ", *target, " (",
                                             ids.status().message(), "); not counted"));
        continue;
      }
      Consider(node, LastComponent(*target), *ids, chips);
    }
    return chips;
  }

  // /dev/vfio/<group>: every function of /sys/kernel/iommu_groups/<group>/devices is checked.
  std::vector<TpuChip> ScanVfio() {
    std::vector<TpuChip> chips;
    auto groups = sysroot_.ListDirectory("/dev/vfio");
    if (!groups.ok()) return chips;
    for (const std::string& group : *groups) {
      if (!IsDigits(group)) continue;  // /dev/vfio/vfio is the container node, not a group
      const std::string node = "/dev/vfio/" + group;
      if (!sysroot_.IsFileLike(node)) continue;
      const std::string devices = absl::StrCat("/sys/kernel/iommu_groups/", group, "/devices");
      auto functions = sysroot_.ListDirectory(devices);
      if (!functions.ok()) {
        out_.warnings.push_back(absl::StrCat("VFIO group ", group, ": cannot list ", devices, " (",
                                             functions.status().message(), "); not counted"));
        continue;
      }
      // Read every function first: one unreadable function makes the whole group unknown.
      std::vector<std::pair<std::string, FunctionIds>> read;
      bool readable = true;
      for (const std::string& bus_id : *functions) {
        auto ids = ReadIds(sysroot_, absl::StrCat(devices, "/", bus_id));
        if (!ids.ok()) {
          out_.warnings.push_back(absl::StrCat("VFIO group ", group, ": cannot read ", bus_id, " (",
                                               ids.status().message(), "); not counted"));
          readable = false;
          break;
        }
        read.emplace_back(bus_id, *ids);
      }
      if (!readable) continue;
      if (read.empty()) {
        out_.evidence.push_back(absl::StrCat(node, ": IOMMU group has no devices; not counted"));
      }
      for (const auto& [bus_id, ids] : read) Consider(node, bus_id, ids, chips);
    }
    return chips;
  }

 private:
  const Sysroot& sysroot_;
  const PciInventory& pci_;
  std::optional<TpuGeneration> env_generation_;
  TpuChipScan& out_;
};

void SortAndDedupe(std::vector<TpuChip>& chips) {
  std::sort(chips.begin(), chips.end(),
            [](const TpuChip& a, const TpuChip& b) { return a.bus_id < b.bus_id; });
  chips.erase(std::unique(chips.begin(), chips.end(),
                          [](const TpuChip& a, const TpuChip& b) { return a.bus_id == b.bus_id; }),
              chips.end());
}

}  // namespace

TpuChipScan ScanTpuChips(const Sysroot& sysroot, const PciInventory& pci,
                         std::optional<TpuGeneration> env_generation) {
  TpuChipScan out;
  Scanner scanner(sysroot, pci, env_generation, out);
  auto dev = sysroot.ListDirectory("/dev");
  if (dev.ok()) {
    out.chips = scanner.ScanAccel(*dev);
    if (!out.chips.empty()) out.probe = "accel";
  }
  if (out.chips.empty()) {
    out.chips = scanner.ScanVfio();
    if (!out.chips.empty()) out.probe = "vfio";
  }
  SortAndDedupe(out.chips);
  if (out.chips.empty()) {
    out.evidence.push_back("no TPU chip behind /dev/accel<N> or /dev/vfio/<group>");
  }
  return out;
}

}  // namespace tessera
