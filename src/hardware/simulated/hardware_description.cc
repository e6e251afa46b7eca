#include "hardware/simulated/hardware_description.h"

#include <algorithm>
#include <exception>
#include <map>
#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/status_macros.h"
#include "base/string_util.h"
#include "hardware/accelerator_plugin.h"
#include "hardware/node_label_keys.h"
#include "hardware/simulated/description_reader.h"
#include "hardware/simulated/interconnect.h"
#include "hardware/simulated/link_units.h"
#include "hardware/simulated/simulated_host.h"
#include "hardware/tpu/tpu_identity.h"
#include "resources/resource_set.h"
#include "vocabulary/chip_grid.h"
#include "vocabulary/tpu_accelerator_type.h"
#include "vocabulary/tpu_generation.h"

namespace tessera {
namespace simulated {
namespace {

// Bounds that keep a description (and a fuzzer's input) from asking for absurd amounts of memory.
constexpr int64_t kMaxSockets = 64;
constexpr int64_t kMaxCoresPerSocket = 1024;
constexpr int64_t kMaxThreadsPerCore = 8;
constexpr int64_t kMaxHardwareThreads = 65536;
constexpr int64_t kMaxNumaNodes = 64;
constexpr int64_t kMaxNics = 256;
constexpr int64_t kMaxDevicesPerEntry = 256;
constexpr int64_t kMaxDevices = 1024;
constexpr int64_t kMaxLanes = 64;
constexpr std::string_view kTpuFamily = "tpu";

// Interface names as Linux allows them in practice: 1-15 characters (IFNAMSIZ - 1).
bool IsInterfaceName(std::string_view name) {
  if (name.empty() || name.size() > 15) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
  });
}

class Parser {
 public:
  Parser(std::string source, const std::vector<std::string>& families)
      : r_(std::move(source)), families_(families) {}

  absl::StatusOr<SimulatedHardware> Parse(const YAML::Node& root) {
    const Field top{"", root, root};
    if (root.IsNull() || !root.IsDefined()) {
      return r_.Error(top, "the description is empty; it needs at least a host: section");
    }
    TESSERA_RETURN_IF_ERROR(r_.CheckMap(top, {"host", "nics", "accelerators", "labels"}));
    TESSERA_ASSIGN_OR_RETURN(const Field host_field, r_.Required(top, "host"));
    TESSERA_ASSIGN_OR_RETURN(HostShape shape, ParseHost(host_field));
    std::vector<Nic> nics;
    if (auto f = r_.Child(top, "nics")) {
      TESSERA_ASSIGN_OR_RETURN(nics, ParseNics(*f, shape.numa_nodes));
    }
    SimulatedHardware hw;
    hw.host = MakeSimulatedHost(shape, std::move(nics));
    if (auto f = r_.Child(top, "accelerators")) {
      TESSERA_RETURN_IF_ERROR(ParseAccelerators(*f, hw));
    }
    if (auto f = r_.Child(top, "labels")) {
      TESSERA_ASSIGN_OR_RETURN(hw.labels, ParseLabels(*f));
    }
    return hw;
  }

 private:
  absl::StatusOr<int> NumaNodeIndex(const Field& f, int numa_nodes) {
    TESSERA_ASSIGN_OR_RETURN(const int64_t n, r_.Integer(f, INT64_MIN, INT64_MAX));
    if (n < 0 || n >= numa_nodes) {
      const std::string has =
          numa_nodes == 1 ? std::string("1 NUMA node (0)")
                          : absl::StrCat(numa_nodes, " NUMA nodes (0-", numa_nodes - 1, ")");
      return r_.Error(f, absl::StrCat("NUMA node ", n, " is out of range: the host has ", has));
    }
    return static_cast<int>(n);
  }

  absl::StatusOr<HostShape> ParseHost(const Field& f) {
    TESSERA_RETURN_IF_ERROR(r_.CheckMap(f, {"sockets", "cores_per_socket", "threads_per_core",
                                            "numa_nodes", "memory", "cpu_model"}));
    HostShape shape;
    TESSERA_ASSIGN_OR_RETURN(const Field sockets, r_.Required(f, "sockets"));
    TESSERA_ASSIGN_OR_RETURN(shape.sockets, r_.Integer(sockets, 1, kMaxSockets));
    TESSERA_ASSIGN_OR_RETURN(const Field cores, r_.Required(f, "cores_per_socket"));
    TESSERA_ASSIGN_OR_RETURN(shape.cores_per_socket, r_.Integer(cores, 1, kMaxCoresPerSocket));
    if (auto t = r_.Child(f, "threads_per_core")) {
      TESSERA_ASSIGN_OR_RETURN(shape.threads_per_core, r_.Integer(*t, 1, kMaxThreadsPerCore));
    }
    const int64_t threads =
        int64_t{shape.sockets} * shape.cores_per_socket * shape.threads_per_core;
    if (threads > kMaxHardwareThreads) {
      return r_.Error(f, absl::StrCat(threads, " hardware threads is more than the ",
                                      kMaxHardwareThreads, " a simulated host may have"));
    }
    shape.numa_nodes = shape.sockets;
    if (auto n = r_.Child(f, "numa_nodes")) {
      TESSERA_ASSIGN_OR_RETURN(shape.numa_nodes, r_.Integer(*n, 1, kMaxNumaNodes));
      if (shape.numa_nodes % shape.sockets != 0 ||
          shape.cores_per_socket % (shape.numa_nodes / shape.sockets) != 0) {
        return r_.Error(*n,
                        absl::StrCat(shape.numa_nodes, " NUMA nodes do not split ", shape.sockets,
                                     " socket(s) of ", shape.cores_per_socket, " cores evenly"));
      }
    }
    TESSERA_ASSIGN_OR_RETURN(const Field memory, r_.Required(f, "memory"));
    TESSERA_ASSIGN_OR_RETURN(shape.memory_bytes, r_.Bytes(memory));
    if (shape.memory_bytes == 0) return r_.Error(memory, "must be more than 0 bytes");
    shape.cpu_model = "Simulated CPU";
    if (auto m = r_.Child(f, "cpu_model")) {
      TESSERA_ASSIGN_OR_RETURN(shape.cpu_model, r_.String(*m));
    }
    return shape;
  }

  absl::StatusOr<std::vector<Nic>> ParseNics(const Field& f, int numa_nodes) {
    TESSERA_ASSIGN_OR_RETURN(const std::vector<Field> items, r_.List(f));
    if (static_cast<int64_t>(items.size()) > kMaxNics) {
      return r_.Error(f, absl::StrCat(items.size(), " NICs is more than the ", kMaxNics,
                                      " a simulated host may have"));
    }
    std::vector<Nic> nics;
    std::map<std::string, std::string> seen;  // name -> path of its entry
    for (const Field& item : items) {
      TESSERA_RETURN_IF_ERROR(r_.CheckMap(item, {"name", "numa_node", "speed"}));
      Nic nic;
      TESSERA_ASSIGN_OR_RETURN(const Field name, r_.Required(item, "name"));
      TESSERA_ASSIGN_OR_RETURN(nic.name, r_.String(name));
      if (!IsInterfaceName(nic.name)) {
        return r_.Error(name, absl::StrCat(Quote(nic.name),
                                           " is not an interface name (1-15 "
                                           "letters, digits, '-', '_' or '.')"));
      }
      if (auto [it, inserted] = seen.emplace(nic.name, item.path); !inserted) {
        return r_.Error(
            name, absl::StrCat("duplicate NIC name ", Quote(nic.name), " (also ", it->second, ")"));
      }
      nic.numa_node = 0;
      if (auto n = r_.Child(item, "numa_node")) {
        TESSERA_ASSIGN_OR_RETURN(nic.numa_node, NumaNodeIndex(*n, numa_nodes));
      }
      if (auto s = r_.Child(item, "speed")) {
        TESSERA_ASSIGN_OR_RETURN(const std::string text, r_.String(*s));
        auto mbps = ParseLinkSpeedMbps(text);
        if (!mbps.ok()) return r_.Error(*s, ToStd(mbps.status().message()));
        nic.speed_mbps = *mbps;
      }
      nics.push_back(std::move(nic));
    }
    return nics;
  }

  absl::StatusOr<std::string> ParseFamily(const Field& item) {
    TESSERA_ASSIGN_OR_RETURN(const Field f, r_.Required(item, "family"));
    TESSERA_ASSIGN_OR_RETURN(std::string family, r_.String(f));
    if (std::find(families_.begin(), families_.end(), family) == families_.end()) {
      return r_.Error(f,
                      absl::StrCat("unknown family ", Quote(family), DidYouMean(family, families_),
                                   "; known families: ", absl::StrJoin(families_, ", ")));
    }
    return family;
  }

  // The type string round-trips through the resource accelerator_type:<T> and the label
  // tessera.io/accelerator-type, so it must be valid as both. TPU types have one spelling.
  absl::StatusOr<std::string> ParseType(const Field& item, std::string_view family,
                                        std::optional<TpuGeneration>& generation) {
    TESSERA_ASSIGN_OR_RETURN(const Field f, r_.Required(item, "type"));
    TESSERA_ASSIGN_OR_RETURN(std::string type, r_.String(f));
    if (absl::Status ok = ValidateLabelValue(type); !ok.ok() || type.empty()) {
      return r_.Error(f, absl::StrCat(Quote(type), " is not a valid accelerator type: ",
                                      type.empty() ? "it is empty" : ok.message()));
    }
    const std::string marker = absl::StrCat(ToAbsl(kAcceleratorTypeResourcePrefix), type);
    if (absl::Status ok = ValidateResourceName(marker); !ok.ok()) {
      return r_.Error(
          f, absl::StrCat(Quote(type), " is not a valid accelerator type: ", ok.message()));
    }
    if (family == kTpuFamily) {
      auto g = ParseTpuGeneration(type);
      if (!g.ok()) return r_.Error(f, ToStd(g.status().message()));
      if (TpuTypeString(*g) != type) {
        return r_.Error(
            f, absl::StrCat("TPU types are written ", TpuTypeString(*g), ", not ", Quote(type)));
      }
      generation = *g;
    }
    return type;
  }

  absl::StatusOr<std::vector<int>> ParseDeviceNumaNodes(const Field& item, int count,
                                                        int numa_nodes) {
    std::vector<int> out(count, 0);
    auto f = r_.Child(item, "numa_nodes");
    if (!f.has_value()) return out;
    if (f->value.IsSequence()) {
      TESSERA_ASSIGN_OR_RETURN(const std::vector<Field> items, r_.List(*f));
      if (static_cast<int>(items.size()) != count) {
        return r_.Error(*f, absl::StrCat("has ", items.size(), " entries for ", count,
                                         " devices; give one per device or a single number"));
      }
      for (int i = 0; i < count; ++i) {
        TESSERA_ASSIGN_OR_RETURN(out[i], NumaNodeIndex(items[i], numa_nodes));
      }
      return out;
    }
    TESSERA_ASSIGN_OR_RETURN(const int node, NumaNodeIndex(*f, numa_nodes));
    std::fill(out.begin(), out.end(), node);
    return out;
  }

  // The NIC of each device: as listed (one name per device, or one for all), else the NIC on the
  // device's NUMA node (NearestNicOnNumaNode), since a description has no PCI tree to compare.
  absl::StatusOr<std::vector<std::string>> ParseNearestNics(const Field& item, int count,
                                                            const std::vector<int>& numa,
                                                            const HostTopology& host) {
    std::vector<std::string> out(count);
    auto f = r_.Child(item, "nearest_nics");
    if (!f.has_value()) {
      for (int i = 0; i < count; ++i) out[i] = NearestNicOnNumaNode(host, numa[i]);
      return out;
    }
    std::vector<Field> names;
    if (f->value.IsSequence()) {
      TESSERA_ASSIGN_OR_RETURN(std::vector<Field> listed, r_.List(*f));
      if (static_cast<int>(listed.size()) != count) {
        return r_.Error(*f, absl::StrCat("has ", listed.size(), " entries for ", count,
                                         " devices; give one per device or a single name"));
      }
      names.swap(listed);
    } else {
      for (int i = 0; i < count; ++i) names.push_back(*f);
    }
    for (int i = 0; i < count; ++i) {
      TESSERA_ASSIGN_OR_RETURN(out[i], r_.String(names[i]));
      const bool known = std::any_of(host.nics.begin(), host.nics.end(),
                                     [&](const Nic& n) { return n.name == out[i]; });
      if (!known) {
        return r_.Error(names[i], absl::StrCat("unknown NIC ", Quote(out[i]),
                                               "; it must be listed under nics"));
      }
    }
    return out;
  }

  struct LinkSpec {
    Interconnect kind = Interconnect::kNone;
    int lanes = 0;
    double gbps = 0;
  };

  absl::StatusOr<LinkSpec> ParseInterconnectField(const Field& item, int count,
                                                  std::optional<TpuGeneration> generation) {
    LinkSpec spec;
    auto f = r_.Child(item, "interconnect");
    if (!f.has_value()) return spec;
    // Either "interconnect: nvswitch" or "interconnect: {kind: nvswitch, lanes: .., ...}".
    const bool is_map = f->value.IsMap();
    if (is_map) TESSERA_RETURN_IF_ERROR(r_.CheckMap(*f, {"kind", "lanes", "bandwidth"}));
    std::optional<Field> kind_holder;
    if (is_map) {
      TESSERA_ASSIGN_OR_RETURN(const Field kind, r_.Required(*f, "kind"));
      kind_holder.emplace(kind);
    } else {
      kind_holder.emplace(*f);
    }
    const Field& kind_field = *kind_holder;
    const std::optional<Field> lanes_field = is_map ? r_.Child(*f, "lanes") : std::nullopt;
    const std::optional<Field> bandwidth_field = is_map ? r_.Child(*f, "bandwidth") : std::nullopt;
    TESSERA_ASSIGN_OR_RETURN(const std::string name, r_.String(kind_field));
    const std::optional<Interconnect> kind = ParseInterconnect(name);
    if (!kind.has_value()) {
      std::vector<std::string> names = absl::StrSplit(InterconnectNames(), ", ");
      return r_.Error(kind_field,
                      absl::StrCat("unknown interconnect ", Quote(name), DidYouMean(name, names),
                                   "; expected one of: ", InterconnectNames()));
    }
    spec.kind = *kind;
    if (spec.kind == Interconnect::kIciGrid && !IciGridSupports(count)) {
      return r_.Error(kind_field, absl::StrCat("ici-grid needs 1, 4 or 8 chips on the host "
                                               "(a 1x1, 2x2 or 2x4 block), got ",
                                               count));
    }
    const LinkDefaults defaults = DefaultsFor(spec.kind);
    spec.lanes = defaults.lanes;
    spec.gbps = defaults.gigabytes_per_second;
    if (spec.kind == Interconnect::kIciGrid && generation.has_value()) {
      spec.gbps = GenerationInfo(*generation).ici_gigabytes_per_second;
    }
    if (spec.kind == Interconnect::kNone && (lanes_field || bandwidth_field)) {
      return r_.Error(*f, "interconnect none takes no lanes or bandwidth");
    }
    if (lanes_field) {
      TESSERA_ASSIGN_OR_RETURN(spec.lanes, r_.Integer(*lanes_field, 1, kMaxLanes));
    }
    if (bandwidth_field) {
      TESSERA_ASSIGN_OR_RETURN(const std::string text, r_.String(*bandwidth_field));
      auto gbps = ParseBandwidthGBps(text);
      if (!gbps.ok()) return r_.Error(*bandwidth_field, ToStd(gbps.status().message()));
      spec.gbps = *gbps;
    }
    return spec;
  }

  absl::StatusOr<TpuIdentity> ParseTpuIdentity(const Field& f) {
    TESSERA_RETURN_IF_ERROR(r_.CheckMap(
        f, {"slice_name", "worker_id", "topology", "accelerator_type", "worker_hostnames"}));
    TpuIdentity id;
    if (auto s = r_.Child(f, "slice_name")) {
      TESSERA_ASSIGN_OR_RETURN(id.slice_name, r_.String(*s));
    }
    if (auto w = r_.Child(f, "worker_id")) {
      TESSERA_ASSIGN_OR_RETURN(const int64_t worker, r_.Integer(*w, 0, 1 << 20));
      id.worker_id = static_cast<int>(worker);
    }
    if (auto t = r_.Child(f, "topology")) {
      TESSERA_ASSIGN_OR_RETURN(const std::string topology, r_.String(*t));
      id.topology = absl::AsciiStrToLower(topology);
    }
    if (auto a = r_.Child(f, "accelerator_type")) {
      TESSERA_ASSIGN_OR_RETURN(id.accelerator_type, r_.String(*a));
      // The same normalisation as TPU_ACCELERATOR_TYPE ("tpu7x-16" -> "v7x-16").
      if (auto parsed = ParseTpuAcceleratorType(id.accelerator_type); parsed.ok()) {
        id.accelerator_type = parsed->ToString();
      }
    }
    if (auto h = r_.Child(f, "worker_hostnames")) {
      TESSERA_ASSIGN_OR_RETURN(const std::vector<Field> hosts, r_.List(*h));
      for (const Field& host : hosts) {
        TESSERA_ASSIGN_OR_RETURN(std::string name, r_.String(host));
        id.worker_hostnames.push_back(std::move(name));
      }
    }
    return id;
  }

  // An entry's fabric_domain: the NVLink domain its devices share, as the fabric labels.
  absl::Status ParseFabricDomain(const Field& item, Interconnect kind, Detection& detection) {
    if (auto fd = r_.Child(item, "fabric_domain")) {
      TESSERA_ASSIGN_OR_RETURN(const std::string domain, r_.String(*fd));
      if (!IsNvLink(kind)) {
        return r_.Error(*fd,
                        "fabric_domain needs interconnect nvswitch or nvlink-pairs (a TPU "
                        "slice's domain comes from tpu.slice_name)");
      }
      if (absl::Status ok = ValidateLabelValue(domain); !ok.ok() || domain.empty()) {
        return r_.Error(*fd, absl::StrCat(Quote(domain), " is not a valid label value: ",
                                          domain.empty() ? "it is empty" : ok.message()));
      }
      detection.labels[std::string(labels::kFabricDomain)] = domain;
      detection.labels[std::string(labels::kFabricKind)] = "nvlink";
    }
    return absl::OkStatus();
  }

  // A tpu entry's identity (its tpu block, else none): the slice labels and resources, as
  // AddTpuSliceLabels gives them. A host has one tpu entry (`seen_tpu`).
  absl::Status ParseTpuBlock(const Field& item, const std::string& family, const std::string& type,
                             bool& seen_tpu, Detection& detection) {
    auto tpu_field = r_.Child(item, "tpu");
    if (tpu_field.has_value() && family != kTpuFamily) {
      return r_.Error(*tpu_field, "only accelerators of family tpu take a tpu block");
    }
    if (family == kTpuFamily) {
      if (seen_tpu) {
        return r_.Error(item, "a host has one tpu entry: libtpu drives one kind of chip");
      }
      seen_tpu = true;
      TpuIdentity id;
      if (tpu_field.has_value()) {
        TESSERA_ASSIGN_OR_RETURN(id, ParseTpuIdentity(*tpu_field));
      }
      std::vector<std::string> warnings;
      AddTpuSliceLabels(id, type, detection.labels, detection.resources, warnings);
      for (std::string& w : warnings) {
        // A described identity that contradicts itself is a mistake in the file; one that
        // is merely incomplete is a single-host TPU VM, reported like detection does.
        if (tpu_field.has_value() && !absl::StartsWith(w, "incomplete TPU identity")) {
          return r_.Error(*tpu_field, w);
        }
        detection.warnings.push_back(std::move(w));
      }
    }
    return absl::OkStatus();
  }

  absl::Status ParseAccelerators(const Field& f, SimulatedHardware& hw) {
    TESSERA_ASSIGN_OR_RETURN(const std::vector<Field> items, r_.List(f));
    std::map<std::string, int> next_index;
    int64_t total = 0;
    bool seen_tpu = false;
    const int numa_nodes = static_cast<int>(hw.host.numa_nodes.size());
    for (const Field& item : items) {
      TESSERA_RETURN_IF_ERROR(
          r_.CheckMap(item, {"family", "type", "model", "count", "memory", "numa_nodes",
                             "nearest_nics", "interconnect", "fabric_domain", "tpu"}));
      TESSERA_ASSIGN_OR_RETURN(const std::string family, ParseFamily(item));
      std::optional<TpuGeneration> generation;
      TESSERA_ASSIGN_OR_RETURN(const std::string type, ParseType(item, family, generation));
      TESSERA_ASSIGN_OR_RETURN(const Field count_field, r_.Required(item, "count"));
      TESSERA_ASSIGN_OR_RETURN(const int count, r_.Integer(count_field, 1, kMaxDevicesPerEntry));
      total += count;
      if (total > kMaxDevices) {
        return r_.Error(count_field, absl::StrCat("more than ", kMaxDevices,
                                                  " accelerators on one simulated host"));
      }
      std::string model =
          generation.has_value()
              ? absl::StrCat("Google TPU ", ToAbsl(GenerationInfo(*generation).name))
              : type;
      if (auto m = r_.Child(item, "model")) {
        TESSERA_ASSIGN_OR_RETURN(model, r_.String(*m));
      }
      uint64_t memory = 0;
      if (generation.has_value()) {
        memory = static_cast<uint64_t>(GenerationInfo(*generation).hbm_gib_per_chip *
                                       static_cast<double>(uint64_t{1} << 30));
      }
      if (auto m = r_.Child(item, "memory")) {
        TESSERA_ASSIGN_OR_RETURN(memory, r_.Bytes(*m));
      }
      TESSERA_ASSIGN_OR_RETURN(const std::vector<int> numa,
                               ParseDeviceNumaNodes(item, count, numa_nodes));
      TESSERA_ASSIGN_OR_RETURN(const std::vector<std::string> nearest,
                               ParseNearestNics(item, count, numa, hw.host));
      TESSERA_ASSIGN_OR_RETURN(const LinkSpec links,
                               ParseInterconnectField(item, count, generation));

      Detection& detection = hw.families[family];
      detection.probe = "simulated";
      const int first = next_index[family];
      next_index[family] = first + count;
      const std::optional<ChipCoord> block =
          family == kTpuFamily ? HostChipBlock(count) : std::nullopt;
      for (int i = 0; i < count; ++i) {
        Device d;
        d.family = family;
        d.index = first + i;
        d.type = type;
        d.model = model;
        d.memory_bytes = memory;
        d.numa_node = numa[i];
        d.nearest_nic = nearest[i];
        d.attributes["simulated"] = "true";
        if (family == kTpuFamily) {
          d.attributes["chip"] = std::to_string(i);
          d.attributes["resources_per_chip"] = "1";
          if (block.has_value()) d.attributes["host_coords"] = CoordString(CoordOfIndex(i, *block));
        }
        detection.devices.push_back(std::move(d));
      }
      std::vector<DeviceLink> built = BuildLinks(links.kind, first, count, links.lanes, links.gbps);
      detection.links.insert(detection.links.end(), built.begin(), built.end());
      detection.evidence.push_back(absl::StrCat(
          count, " x ", type, " (", family, ") from ", r_.source(), ":", item.value.Mark().line + 1,
          ", interconnect ", ToAbsl(InterconnectName(links.kind))));

      TESSERA_RETURN_IF_ERROR(ParseFabricDomain(item, links.kind, detection));
      TESSERA_RETURN_IF_ERROR(ParseTpuBlock(item, family, type, seen_tpu, detection));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<LabelSet> ParseLabels(const Field& f) {
    if (!f.value.IsMap()) {
      return r_.Error(
          f, absl::StrCat("expected a map of label keys to values, got ", KindName(f.value)));
    }
    LabelSet labels;
    for (auto it = f.value.begin(); it != f.value.end(); ++it) {
      const Field key{f.path, it->first, it->first};
      if (!it->first.IsScalar()) {
        return r_.Error(key,
                        absl::StrCat("a label key must be a string, got ", KindName(it->first)));
      }
      const Field value{absl::StrCat(f.path, ".", it->first.Scalar()), it->second, it->first};
      if (!it->second.IsScalar()) {
        return r_.Error(value,
                        absl::StrCat("a label value must be a string, got ", KindName(it->second),
                                     it->second.IsNull() ? "; write \"\" for empty" : ""));
      }
      if (absl::Status ok =
              ValidateLabel(it->first.Scalar(), it->second.Scalar(), LabelOrigin::kUser);
          !ok.ok()) {
        return r_.Error(key, ToStd(ok.message()));
      }
      if (!labels.emplace(it->first.Scalar(), it->second.Scalar()).second) {
        return r_.Error(key, absl::StrCat("label ", Quote(it->first.Scalar()), " is given twice"));
      }
    }
    return labels;
  }

  DescriptionReader r_;
  const std::vector<std::string>& families_;
};

}  // namespace
}  // namespace simulated

absl::StatusOr<SimulatedHardware> ParseHardwareDescriptionFromNode(
    const YAML::Node& node, std::string_view source_name,
    const std::vector<std::string>& known_families) {
  // yaml-cpp throws on misuse; the parser checks types first, but nothing may escape.
  try {
    simulated::Parser parser{std::string(source_name), known_families};
    return parser.Parse(node);
  } catch (const YAML::Exception& e) {
    return simulated::DescriptionReader(std::string(source_name)).ErrorAt(e.mark, e.msg);
  } catch (const std::exception& e) {
    return simulated::DescriptionReader(std::string(source_name))
        .ErrorAt(YAML::Mark::null_mark(), e.what());
  }
}

absl::StatusOr<SimulatedHardware> ParseHardwareDescription(
    std::string_view yaml, std::string_view source_name,
    const std::vector<std::string>& known_families) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml));
  } catch (const YAML::Exception& e) {
    return simulated::DescriptionReader(std::string(source_name))
        .ErrorAt(e.mark, absl::StrCat("invalid YAML: ", e.msg));
  } catch (const std::exception& e) {
    return simulated::DescriptionReader(std::string(source_name))
        .ErrorAt(YAML::Mark::null_mark(), absl::StrCat("invalid YAML: ", e.what()));
  }
  return ParseHardwareDescriptionFromNode(root, source_name, known_families);
}

}  // namespace tessera
