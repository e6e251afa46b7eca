#include "hardware/plugins/neuron/neuron_detection.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/string_util.h"
#include "hardware/plugins/common/index_list.h"
#include "hardware/plugins/common/pci_claim.h"
#include "hardware/plugins/neuron/neuron_device_ids.h"

namespace tessera {
namespace {

constexpr std::string_view kFamily = "neuron";
constexpr std::string_view kDriver = "neuron";
constexpr std::string_view kClassRoot = "/sys/class/neuron_device";

struct Chip {
  int number = 0;         // N of neuron<N>
  std::string class_dir;  // "" when found through PCI only
  const PciFunction* function = nullptr;
  const NeuronChipModel* model = nullptr;
  int core_count = 0;
  std::vector<int> connected;
  int first_core = 0;
};

bool IsNeuronFunction(const PciFunction& f) {
  return f.vendor_id == kPciVendorAmazon && FindNeuronChipModel(f.device_id) != nullptr;
}

std::string RejectReason(const PciFunction& f) {
  if (FindNeuronChipModel(f.device_id) == nullptr) {
    return absl::StrCat("device id ", HexId(f.device_id), " is not a Neuron chip");
  }
  if (f.driver != kDriver) {
    return absl::StrCat("bound to ", f.driver.empty() ? "no driver" : f.driver, ", not neuron");
  }
  return "";
}

std::optional<std::string> Attribute(const Sysroot& sysroot, const std::string& dir,
                                     std::string_view name) {
  if (dir.empty()) return std::nullopt;
  auto v = sysroot.ReadAttribute(absl::StrCat(dir, "/", ToAbsl(name)));
  if (!v.ok() || v->empty()) return std::nullopt;
  return *v;
}

void AddCorePairs(const Chip& a, const Chip& b, double gbps, std::vector<DeviceLink>* links) {
  for (int i = 0; i < a.core_count; ++i) {
    for (int j = 0; j < b.core_count; ++j) {
      const int x = a.first_core + i;
      const int y = b.first_core + j;
      if (&a == &b && x >= y) continue;  // inside one chip: each pair once
      links->push_back(DeviceLink{std::min(x, y), std::max(x, y), LinkKind::kNeuronLink, 1, gbps,
                                  ClassifyBandwidth(gbps)});
    }
  }
}

// Each visible chip's NeuronCores as devices, numbered across the chips in order (each chip's
// first_core set).
void AddChipCores(const Sysroot& sysroot, std::vector<Chip>& visible, Detection& d) {
  int next_core = 0;
  for (Chip& chip : visible) {
    chip.first_core = next_core;
    const PciFunction& f = *chip.function;
    const std::string arch = chip.class_dir.empty() ? "" : chip.class_dir + "/info/architecture";
    const std::string device_name =
        Attribute(sysroot, arch, "device_name").value_or(std::string(chip.model->name));
    for (int k = 0; k < chip.core_count; ++k) {
      Device dev;
      dev.family = std::string(kFamily);
      dev.index = next_core++;
      dev.type = "aws-neuron-core";
      dev.model = absl::StrCat("AWS ", device_name, " NeuronCore");
      dev.memory_bytes = chip.model->memory_bytes / chip.core_count;
      dev.pci_bus_id = f.bus_id;
      dev.numa_node = f.numa_node;
      dev.attributes["chip"] = absl::StrCat(chip.number);
      dev.attributes["core_in_chip"] = absl::StrCat(k);
      dev.attributes["device_node"] = absl::StrCat("/dev/neuron", chip.number);
      if (auto serial = Attribute(sysroot, chip.class_dir + "/info", "serial_number")) {
        dev.uuid = absl::StrCat(*serial, "-nc", k);
      }
      if (auto a = Attribute(sysroot, arch, "arch_type")) dev.attributes["arch_type"] = *a;
      if (auto i = Attribute(sysroot, arch, "instance_type")) dev.attributes["instance_type"] = *i;
      d.devices.push_back(std::move(dev));
    }
    d.evidence.push_back(absl::StrCat(
        chip.class_dir.empty() ? absl::StrCat("neuron", chip.number) : chip.class_dir, " -> ",
        DescribeFunction(f), ", ", chip.core_count, " cores (", chip.first_core, "-", next_core - 1,
        ")", chip.connected.empty() ? "" : ", connected to ", absl::StrJoin(chip.connected, ",")));
  }
}

// Every pair of cores of one chip, and of chips connected to each other, in core order.
void AddNeuronLinks(const std::vector<Chip>& visible, Detection& d) {
  std::map<int, const Chip*> by_number;
  for (const Chip& chip : visible) by_number[chip.number] = &chip;
  for (const Chip& chip : visible) {
    AddCorePairs(chip, chip, chip.model->on_chip_gigabytes_per_second, &d.links);
    for (int peer : chip.connected) {
      auto it = by_number.find(peer);
      if (it == by_number.end() || peer <= chip.number) continue;
      AddCorePairs(chip, *it->second, chip.model->neuronlink_gigabytes_per_second, &d.links);
    }
  }
  std::sort(d.links.begin(), d.links.end(), [](const DeviceLink& a, const DeviceLink& b) {
    return std::tie(a.a, a.b) < std::tie(b.a, b.b);
  });
}

}  // namespace

Detection DetectNeuronCores(const DetectionContext& context) {
  Detection d;
  d.probe = "neuron-sysfs";
  const Sysroot& sysroot = context.sysroot;

  // Neuron-bound Neuron functions in bus order: the driver's probe order.
  std::vector<const PciFunction*> bound;
  for (const PciFunction* f : context.pci.ByVendor(kPciVendorAmazon)) {
    if (IsNeuronFunction(*f) && f->driver == kDriver) bound.push_back(f);
  }

  std::vector<Chip> chips;
  auto names = sysroot.ListDirectory(kClassRoot);
  if (names.ok()) {
    for (const std::string& name : *names) {
      if (auto n = NumberedEntry(name, "neuron")) {
        chips.push_back(Chip{*n, absl::StrCat(ToAbsl(kClassRoot), "/", name)});
      }
    }
    std::sort(chips.begin(), chips.end(),
              [](const Chip& a, const Chip& b) { return a.number < b.number; });
  } else {
    d.probe = "pci";
    for (size_t i = 0; i < bound.size(); ++i) chips.push_back(Chip{static_cast<int>(i), ""});
  }
  const bool order_matches = chips.size() == bound.size();

  std::set<std::string, std::less<>> claimed;
  std::map<std::string, std::string> rejected;
  std::vector<Chip> visible;
  for (Chip& chip : chips) {
    const std::string chip_name = absl::StrCat("neuron", chip.number);
    std::optional<std::string> bus_id;
    if (!chip.class_dir.empty()) bus_id = PciBusIdOfClassDevice(sysroot, chip.class_dir);
    if (bus_id) {
      chip.function = context.pci.Find(*bus_id);
    } else if (order_matches && chip.number >= 0 && chip.number < static_cast<int>(bound.size())) {
      chip.function = bound[chip.number];
    }
    if (chip.function == nullptr) {
      d.warnings.push_back(absl::StrCat("neuron: ", chip_name, " has no matching PCI function (",
                                        chips.size(), " chips in sysfs, ", bound.size(),
                                        " neuron-bound functions); not counted"));
      continue;
    }
    const PciFunction& f = *chip.function;
    if (f.vendor_id != kPciVendorAmazon) {
      d.warnings.push_back(absl::StrCat("neuron: ", chip_name, " maps to ", DescribeFunction(f),
                                        ", not an Amazon function; not counted"));
      continue;
    }
    if (std::string why = RejectReason(f); !why.empty()) {
      rejected[f.bus_id] = why;
      continue;
    }
    const std::string dev_node = absl::StrCat("/dev/", chip_name);
    if (!sysroot.IsFileLike(dev_node)) {
      rejected[f.bus_id] = absl::StrCat(dev_node, " is missing (not passed into this container?)");
      continue;
    }
    chip.model = FindNeuronChipModel(f.device_id);
    chip.core_count = chip.model->default_core_count;
    if (!chip.class_dir.empty()) {
      if (auto n = sysroot.ReadInteger(chip.class_dir + "/core_count");
          n.ok() && *n > 0 && *n < 1024) {
        chip.core_count = static_cast<int>(*n);
      }
      if (auto c = Attribute(sysroot, chip.class_dir, "connected_devices")) {
        auto list = ParseIndexList(*c, {.extra_separators = " \t"});
        if (list.ok()) {
          chip.connected = *list;
        } else {
          d.warnings.push_back(
              absl::StrCat("neuron: ", chip_name, ": connected_devices ", list.status().message()));
        }
      }
    }
    claimed.insert(f.bus_id);
    visible.push_back(chip);
  }

  AddChipCores(sysroot, visible, d);
  if (!order_matches && !chips.empty()) {
    d.evidence.push_back(absl::StrCat(chips.size(), " neuron_device entries but ", bound.size(),
                                      " neuron-bound PCI functions; chips without a device link "
                                      "could not be matched"));
  }

  AddNeuronLinks(visible, d);

  WarnUnclaimedFunctions(context.pci, kPciVendorAmazon, claimed, {kDriver},
                         UnclaimedReason(rejected, RejectReason, "no neuron_device entry names it"),
                         &d, IsNeuronFunction);
  return d;
}

}  // namespace tessera
