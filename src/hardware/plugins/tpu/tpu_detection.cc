#include "hardware/plugins/tpu/tpu_detection.h"

#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/string_util.h"
#include "hardware/plugins/tpu/tpu_chip_scan.h"
#include "hardware/tpu/tpu_identity.h"
#include "vocabulary/chip_grid.h"
#include "vocabulary/slice_shape.h"
#include "vocabulary/tpu_accelerator_type.h"
#include "vocabulary/tpu_topology.h"

namespace tessera {
namespace {

int ResourcesPerChip(const Environment& env, TpuGeneration generation,
                     std::vector<std::string>& warnings) {
  const int fallback = GenerationInfo(generation).default_resources_per_chip;
  const std::optional<std::string> text = env.Get(kTpuResourcePerChipEnv);
  if (!text.has_value()) return fallback;
  int value = 0;
  if (!absl::SimpleAtoi(ToAbsl(Trim(*text)), &value) || value < 1 ||
      value > kMaxTpuResourcesPerChip) {
    warnings.push_back(absl::StrCat(ToAbsl(kTpuResourcePerChipEnv), "=", Quote(*text),
                                    " is not an integer in 1..", kMaxTpuResourcesPerChip,
                                    "; using ", fallback));
    return fallback;
  }
  return value;
}

// The slice shape this host belongs to, when the environment names a valid one whose hosts have
// exactly `local_chips` chips (that also settles the ambiguous v5e/v6e 2x4).
std::optional<SliceShape> HostSliceShape(const TpuIdentity& id, TpuGeneration generation,
                                         int local_chips, std::vector<std::string>& warnings) {
  if (id.topology.empty()) return std::nullopt;
  auto topology = ParseTpuTopologyFor(generation, id.topology);
  if (!topology.ok()) return std::nullopt;  // AddTpuSliceLabels reports it
  auto shape = MakeSliceShape(generation, *topology, local_chips);
  if (!shape.ok()) {
    warnings.push_back(absl::StrCat("TPU_TOPOLOGY=", id.topology, ": this host has ", local_chips,
                                    " chips, which does not fit: ", shape.status().message()));
    return std::nullopt;
  }
  return *shape;
}

// Each chip's `r` devices (units), with where the chip lies in the host's grid and the slice.
void AddChipDevices(const std::vector<TpuChip>& chips, int r, bool known_layout,
                    const ChipCoord& block,
                    const std::optional<std::vector<ChipCoord>>& slice_coords, Detection& d) {
  const int local_chips = static_cast<int>(chips.size());
  for (int c = 0; c < local_chips; ++c) {
    const TpuChip& chip = chips[c];
    const TpuGenerationInfo& chip_info = GenerationInfo(chip.generation);
    for (int k = 0; k < r; ++k) {
      Device dev;
      dev.family = "tpu";
      dev.index = c * r + k;
      dev.type = TpuTypeString(chip.generation);
      dev.model = absl::StrCat("Google TPU ", ToAbsl(chip_info.name));
      dev.memory_bytes =
          static_cast<uint64_t>(chip_info.hbm_gib_per_chip * (uint64_t{1} << 30)) / r;
      dev.pci_bus_id = chip.bus_id;
      dev.numa_node = chip.numa_node;
      dev.attributes["chip"] = std::to_string(c);
      dev.attributes["resources_per_chip"] = std::to_string(r);
      if (r > 1) dev.attributes["core"] = std::to_string(k);
      if (known_layout) dev.attributes["host_coords"] = CoordString(CoordOfIndex(c, block));
      if (slice_coords.has_value())
        dev.attributes["slice_coords"] = CoordString((*slice_coords)[c]);
      dev.attributes["pci_id"] = absl::StrCat(HexId(kPciVendorGoogle), ":", HexId(chip.device_id));
      dev.attributes["device_node"] = chip.device_node;
      if (!chip.driver.empty()) dev.attributes["driver"] = chip.driver;
      d.devices.push_back(std::move(dev));
    }
  }
}

// ICI between chips that are neighbours in the host grid; with r units per chip every unit of
// one chip is linked to every unit of the other.
void AddIciLinks(int local_chips, int r, const ChipCoord& block, const TpuGenerationInfo& info,
                 Detection& d) {
  for (int a = 0; a < local_chips; ++a) {
    for (int b = a + 1; b < local_chips; ++b) {
      if (!AreAdjacent(CoordOfIndex(a, block), CoordOfIndex(b, block))) continue;
      for (int ka = 0; ka < r; ++ka) {
        for (int kb = 0; kb < r; ++kb) {
          DeviceLink link;
          link.a = a * r + ka;
          link.b = b * r + kb;
          link.kind = LinkKind::kIci;
          link.gigabytes_per_second = info.ici_gigabytes_per_second;
          link.bandwidth_class = ClassifyBandwidth(link.gigabytes_per_second);
          d.links.push_back(link);
        }
      }
    }
  }
}

}  // namespace

Detection DetectTpus(const DetectionContext& context) {
  Detection d;
  const TpuIdentity id = TpuIdentityFromEnv(context.env);
  std::optional<TpuAcceleratorType> env_type;
  if (auto t = ParseTpuAcceleratorType(id.accelerator_type); t.ok()) env_type = *t;

  TpuChipScan scan =
      ScanTpuChips(context.sysroot, context.pci,
                   env_type.has_value() ? std::optional(env_type->generation) : std::nullopt);
  d.probe = scan.probe;
  d.warnings = std::move(scan.warnings);
  d.evidence = std::move(scan.evidence);
  if (scan.chips.empty()) {
    if (!id.accelerator_type.empty()) {
      d.warnings.push_back(absl::StrCat("TPU_ACCELERATOR_TYPE=", id.accelerator_type,
                                        " is set, but no TPU chip was found on this host"));
    }
    return d;
  }

  const TpuGeneration generation = scan.chips.front().generation;
  std::set<std::string> types;
  for (const TpuChip& chip : scan.chips) types.insert(TpuTypeString(chip.generation));
  if (types.size() > 1) {
    d.errors.push_back(absl::StrCat("mixed TPU generations on one host (",
                                    absl::StrJoin(types, ", "), "); libtpu drives one kind"));
  }
  if (env_type.has_value() && env_type->generation != generation) {
    d.warnings.push_back(absl::StrCat("TPU_ACCELERATOR_TYPE=", id.accelerator_type, " names ",
                                      TpuTypeString(env_type->generation), ", but the chips are ",
                                      TpuTypeString(generation), " (PCI device id ",
                                      HexId(scan.chips.front().device_id), ")"));
  }

  const int local_chips = static_cast<int>(scan.chips.size());
  const int r = ResourcesPerChip(context.env, generation, d.warnings);
  const std::optional<SliceShape> shape = HostSliceShape(id, generation, local_chips, d.warnings);
  ChipCoord block{local_chips, 1, 1};
  if (shape.has_value()) {
    block = shape->host_block;
  } else if (auto b = HostChipBlock(local_chips)) {
    block = *b;
  } else {
    d.warnings.push_back(absl::StrCat(local_chips,
                                      " TPU chips is not a known host layout (1, 4 "
                                      "or 8); assuming a line, so no ICI links are inferred"));
  }
  std::optional<std::vector<ChipCoord>> slice_coords;
  if (shape.has_value() && id.worker_id.has_value()) {
    if (auto c = HostChipCoordinates(*shape, *id.worker_id); c.ok()) slice_coords = *c;
  }

  const TpuGenerationInfo& info = GenerationInfo(generation);
  const bool known_layout = shape.has_value() || HostChipBlock(local_chips).has_value();
  AddChipDevices(scan.chips, r, known_layout, block, slice_coords, d);
  if (known_layout) AddIciLinks(local_chips, r, block, info, d);

  AddTpuSliceLabels(id, TpuTypeString(generation), d.labels, d.resources, d.warnings);
  d.evidence.push_back(absl::StrCat(
      "TPU identity from the environment: TPU_ACCELERATOR_TYPE=", Quote(id.accelerator_type),
      " TPU_TOPOLOGY=", Quote(id.topology), " TPU_WORKER_ID=",
      id.worker_id.has_value() ? std::to_string(*id.worker_id) : std::string("unset"),
      " TPU_NAME=", Quote(id.slice_name),
      "; the GCE metadata server is not queried, so a missing value stays missing"));
  d.evidence.push_back(absl::StrCat(local_chips, " chips x ", r,
                                    " TPU per chip = ", d.devices.size(),
                                    " devices; host chip grid ", BoundsString(block)));
  return d;
}

}  // namespace tessera
