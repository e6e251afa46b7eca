#include "hardware/plugins/amd/kfd_topology.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "hardware/plugins/common/index_list.h"

namespace tessera {
namespace {

// Numeric subdirectory names of `dir`, sorted numerically; missing dir is an empty list.
std::vector<int> NumberedSubdirs(const Sysroot& sysroot, const std::string& dir) {
  std::vector<int> ids;
  auto names = sysroot.ListDirectory(dir);
  if (!names.ok()) return ids;
  for (const std::string& name : *names) {
    if (auto id = NumberedEntry("n" + name, "n")) ids.push_back(*id);
  }
  std::sort(ids.begin(), ids.end());
  return ids;
}

int AsInt(const SysfsProperties& p, std::string_view name) {
  return static_cast<int>(p.GetUnsigned(name).value_or(0));
}

}  // namespace

absl::StatusOr<std::vector<KfdNode>> ReadKfdTopology(const Sysroot& sysroot,
                                                     std::vector<std::string>* warnings) {
  const std::string root(kKfdTopologyNodes);
  if (!sysroot.IsDirectory(root)) {
    return absl::NotFoundError(absl::StrCat(root, " is missing (amdgpu KFD not loaded)"));
  }
  std::vector<KfdNode> nodes;
  for (int id : NumberedSubdirs(sysroot, root)) {
    const std::string dir = absl::StrCat(root, "/", id);
    auto props = SysfsProperties::Read(sysroot, dir + "/properties");
    if (!props.ok()) {
      warnings->push_back(
          absl::StrCat("amd: KFD node ", id, " skipped: ", props.status().message()));
      continue;
    }
    KfdNode node;
    node.id = id;
    node.properties = *std::move(props);
    node.is_gpu = node.properties.GetUnsigned("simd_count").value_or(0) > 0;
    for (int bank : NumberedSubdirs(sysroot, dir + "/mem_banks")) {
      auto bank_props =
          SysfsProperties::Read(sysroot, absl::StrCat(dir, "/mem_banks/", bank, "/properties"));
      if (bank_props.ok())
        node.memory_bytes += bank_props->GetUnsigned("size_in_bytes").value_or(0);
    }
    for (int link : NumberedSubdirs(sysroot, dir + "/io_links")) {
      auto link_props =
          SysfsProperties::Read(sysroot, absl::StrCat(dir, "/io_links/", link, "/properties"));
      if (!link_props.ok()) continue;
      KfdIoLink l;
      l.type = AsInt(*link_props, "type");
      l.node_from = AsInt(*link_props, "node_from");
      l.node_to = AsInt(*link_props, "node_to");
      l.weight = link_props->GetUnsigned("weight").value_or(0);
      l.min_bandwidth_mbps = link_props->GetUnsigned("min_bandwidth").value_or(0);
      l.max_bandwidth_mbps = link_props->GetUnsigned("max_bandwidth").value_or(0);
      node.io_links.push_back(l);
    }
    nodes.push_back(std::move(node));
  }
  return nodes;
}

}  // namespace tessera
