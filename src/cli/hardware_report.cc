#include "cli/hardware_report.h"

#include <map>
#include <set>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/string_util.h"
#include "cli/text_table.h"
#include "resources/byte_size.h"
#include "resources/resource_set.h"

namespace tessera::cli {
namespace {

using nlohmann::json;

std::string NumaText(int numa) { return numa < 0 ? "-" : std::to_string(numa); }
std::string OrDash(const std::string& s) { return s.empty() ? "-" : s; }

json DeviceJson(const Device& d) {
  json j = {{"index", d.index},
            {"type", d.type},
            {"model", d.model},
            {"uuid", d.uuid},
            {"memory_bytes", d.memory_bytes},
            {"pci_bus_id", d.pci_bus_id},
            {"numa_node", d.numa_node},
            {"nearest_nic", d.nearest_nic}};
  if (!d.attributes.empty()) j["attributes"] = d.attributes;
  return j;
}

json LinkJson(const DeviceLink& l) {
  return {{"a", l.a},
          {"b", l.b},
          {"kind", std::string(LinkKindName(l.kind))},
          {"lanes", l.lanes},
          {"gigabytes_per_second", l.gigabytes_per_second},
          {"bandwidth_class", std::string(BandwidthClassName(l.bandwidth_class))}};
}

json FamilyJson(const FamilyReport& f) {
  json devices = json::array();
  for (const Device& d : f.detection.devices) devices.push_back(DeviceJson(d));
  json links = json::array();
  for (const DeviceLink& l : f.detection.links) links.push_back(LinkJson(l));
  json visible = json::array();
  for (const Device& d : f.visible) visible.push_back(d.index);
  json j = {{"family", std::string(f.plugin->family())},
            {"resource", std::string(f.plugin->resource_name())},
            {"visible_devices_env", std::string(f.plugin->visible_devices_env())},
            {"probe", f.detection.probe},
            {"advertised", f.advertised},
            {"visible", visible},
            {"devices", devices},
            {"links", links},
            {"evidence", f.detection.evidence}};
  if (f.inherited_mask.has_value()) j["inherited_mask"] = *f.inherited_mask;
  if (!f.note.empty()) j["note"] = f.note;
  return j;
}

json HostJson(const HostTopology& h) {
  json numa = json::array();
  for (const NumaNode& n : h.numa_nodes) {
    numa.push_back(
        {{"os_index", n.os_index}, {"memory_bytes", n.memory_bytes}, {"cpus", n.cpulist}});
  }
  json nics = json::array();
  for (const Nic& n : h.nics) {
    nics.push_back({{"name", n.name},
                    {"pci_bus_id", n.pci_bus_id},
                    {"numa_node", n.numa_node},
                    {"speed_mbps", n.speed_mbps}});
  }
  return {{"cpu_model", h.cpu_model},
          {"sockets", h.sockets},
          {"cores", h.cores},
          {"threads", h.pus},
          {"memory_bytes", h.memory_bytes},
          {"numa_nodes", numa},
          {"nics", nics},
          {"source", h.source}};
}

// Links grouped by (kind, lanes, bandwidth): a group that joins every pair of its devices is
// printed as "all pairs of devices 0-7", so an 8-GPU NVSwitch box takes one line, not 28.
std::string LinkSummary(const std::vector<DeviceLink>& links) {
  struct Group {
    std::vector<std::pair<int, int>> pairs;
    std::set<int> devices;
  };
  std::map<std::tuple<std::string, int, double, std::string>, Group> groups;
  for (const DeviceLink& l : links) {
    Group& g = groups[{std::string(LinkKindName(l.kind)), l.lanes, l.gigabytes_per_second,
                       std::string(BandwidthClassName(l.bandwidth_class))}];
    g.pairs.emplace_back(std::min(l.a, l.b), std::max(l.a, l.b));
    g.devices.insert(l.a);
    g.devices.insert(l.b);
  }
  std::string out = absl::StrCat("  links (", links.size(), "):\n");
  for (const auto& [key, g] : groups) {
    const auto& [kind, lanes, gbps, klass] = key;
    const size_t n = g.devices.size();
    std::string which;
    if (n > 2 && g.pairs.size() == n * (n - 1) / 2) {
      which = absl::StrCat("all pairs of devices ", absl::StrJoin(g.devices, ","));
    } else {
      std::vector<std::string> pairs;
      for (const auto& [a, b] : g.pairs) pairs.push_back(absl::StrCat(a, "-", b));
      which = absl::StrJoin(pairs, " ");
    }
    absl::StrAppend(&out, "    ", kind, " x", lanes, " ", gbps, " GB/s (", klass, "): ", which,
                    "\n");
  }
  return out;
}

}  // namespace

json HardwareReportJson(const NodeHardware& node) {
  json families = json::array();
  for (const FamilyReport& f : node.families) families.push_back(FamilyJson(f));
  json resources = json::object();
  for (const auto& [name, quantity] : node.resources) resources[name] = quantity.ToString();
  json isolation = json::object();
  for (const FamilyReport& f : node.families) {
    const FamilyIsolationPolicy p = node.isolation.For(f.plugin->family());
    isolation[std::string(f.plugin->family())] = {
        {"opt_out", p.opt_out},
        {"zero_assigned", std::string(ZeroAssignedPolicyName(p.zero_assigned))}};
  }
  return {{"source", node.source},
          {"host", HostJson(node.host)},
          {"accelerators", node.AcceleratorCount()},
          {"families", families},
          {"resources", resources},
          {"labels", node.labels},
          {"isolation", isolation},
          {"warnings", node.warnings},
          {"errors", node.errors}};
}

std::string HardwareReportText(const NodeHardware& node) {
  const HostTopology& h = node.host;
  std::string out = absl::StrCat("Source: ", node.source, "\n");
  absl::StrAppend(&out, "Host: ", h.cpu_model.empty() ? "unknown CPU" : h.cpu_model, ", ",
                  h.sockets, " socket(s), ", h.cores, " cores, ", h.pus, " threads, ",
                  FormatBytes(h.memory_bytes), " memory\n");
  if (!h.numa_nodes.empty()) {
    TextTable numa({"NUMA", "CPUS", "MEMORY"});
    for (const NumaNode& n : h.numa_nodes) {
      numa.AddRow({std::to_string(n.os_index), n.cpulist, FormatBytes(n.memory_bytes)});
    }
    absl::StrAppend(&out, "\n", numa.Render());
  }
  if (!h.nics.empty()) {
    TextTable nics({"NIC", "PCI", "NUMA", "SPEED"});
    for (const Nic& n : h.nics) {
      nics.AddRow({n.name, OrDash(n.pci_bus_id), NumaText(n.numa_node),
                   n.speed_mbps > 0 ? absl::StrCat(n.speed_mbps / 1000, " Gb/s") : "-"});
    }
    absl::StrAppend(&out, "\n", nics.Render());
  }

  if (node.families.empty()) {
    absl::StrAppend(&out, "\nNo accelerators found: this is a CPU-only machine.\n");
  }
  for (const FamilyReport& f : node.families) {
    absl::StrAppend(&out, "\n", ToAbsl(f.plugin->family()), ": ", f.detection.devices.size(), " ",
                    ToAbsl(f.plugin->resource_name()), " via ", OrDash(f.detection.probe),
                    ", mask ", ToAbsl(f.plugin->visible_devices_env()),
                    f.advertised ? "" : " (not advertised)", "\n");
    if (!f.note.empty()) absl::StrAppend(&out, "  ", f.note, "\n");
    TextTable devices({"ID", "TYPE", "MODEL", "MEMORY", "PCI", "NUMA", "NIC", "UUID"});
    for (const Device& d : f.detection.devices) {
      devices.AddRow({std::to_string(d.index), OrDash(d.type), OrDash(d.model),
                      d.memory_bytes ? FormatBytes(d.memory_bytes) : "-", OrDash(d.pci_bus_id),
                      NumaText(d.numa_node), OrDash(d.nearest_nic), OrDash(d.uuid)});
    }
    absl::StrAppend(&out, devices.Render());
    if (!f.detection.links.empty()) absl::StrAppend(&out, LinkSummary(f.detection.links));
  }

  std::vector<std::string> resources;
  for (const auto& [name, quantity] : node.resources) {
    // Byte resources read better as "23.5 GiB" than as the exact "24683620KiB".
    resources.push_back(absl::StrCat(name, "=",
                                     IsByteResource(name) && quantity.IsInteger()
                                         ? FormatBytes(quantity.WholePart())
                                         : quantity.ToString()));
  }
  absl::StrAppend(&out, "\nResources: ", absl::StrJoin(resources, ", "), "\n");
  absl::StrAppend(&out, "Labels:\n");
  if (node.labels.empty()) absl::StrAppend(&out, "  (none)\n");
  for (const auto& [key, value] : node.labels) absl::StrAppend(&out, "  ", key, "=", value, "\n");
  for (const std::string& w : node.warnings) absl::StrAppend(&out, "warning: ", w, "\n");
  for (const std::string& e : node.errors) absl::StrAppend(&out, "error: ", e, "\n");
  return out;
}

}  // namespace tessera::cli
