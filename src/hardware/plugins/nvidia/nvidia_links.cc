#include "hardware/plugins/nvidia/nvidia_links.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "hardware/plugins/nvidia/nvidia_pci.h"
#include "hardware/plugins/nvidia/nvml_api.h"

namespace tessera {
namespace {

DeviceLink MakeLink(int a, int b, LinkKind kind, int lanes, double lane_rate) {
  DeviceLink link;
  link.a = a;
  link.b = b;
  link.kind = kind;
  link.lanes = lanes;
  link.gigabytes_per_second = lanes * lane_rate;
  link.bandwidth_class = ClassifyBandwidth(link.gigabytes_per_second);
  return link;
}

// The lower of two rates, ignoring an unknown (0) side.
double PairRate(double a, double b) {
  if (a == 0) return b;
  if (b == 0) return a;
  return std::min(a, b);
}

}  // namespace

double NvLinkLaneGigabytesPerSecond(unsigned int nvml_version) {
  if (nvml_version == nvml::NVML_NVLINK_VERSION_1_0) return 20;
  if (nvml_version > nvml::NVML_NVLINK_VERSION_1_0 &&
      nvml_version <= nvml::NVML_NVLINK_VERSION_4_0) {
    return 25;  // 2.0, 2.2, 3.0, 3.1, 4.0
  }
  if (nvml_version == nvml::NVML_NVLINK_VERSION_5_0) return 50;
  return 0;  // unknown or newer than this table
}

std::vector<DeviceLink> SwitchFabricLinks(const std::vector<int>& indices, int lanes,
                                          double lane_rate) {
  std::vector<DeviceLink> links;
  for (size_t i = 0; i < indices.size(); ++i) {
    for (size_t j = i + 1; j < indices.size(); ++j) {
      links.push_back(MakeLink(indices[i], indices[j], LinkKind::kNvSwitch, lanes, lane_rate));
    }
  }
  return links;
}

std::vector<DeviceLink> BuildNvLinks(const std::vector<NvmlGpu>& gpus, const PciInventory& pci,
                                     std::vector<std::string>* evidence) {
  std::map<std::string, int, std::less<>> by_bus;
  for (const NvmlGpu& g : gpus) by_bus[g.bus_id] = g.index;

  std::map<std::pair<int, int>, int> direct;  // (from, to) -> links seen from `from`
  std::map<int, int> switch_lanes;
  std::map<int, double> rate;  // lowest known lane rate per GPU
  bool classified_by_bus = false;
  for (const NvmlGpu& g : gpus) {
    for (const NvmlLink& l : g.links) {
      NvLinkRemote remote = l.remote;
      if (remote == NvLinkRemote::kUnknown) {
        classified_by_bus = true;
        const PciFunction* f = pci.Find(l.remote_bus_id);
        remote = by_bus.count(l.remote_bus_id) > 0          ? NvLinkRemote::kGpu
                 : (f != nullptr && IsNvSwitchFunction(*f)) ? NvLinkRemote::kSwitch
                                                            : NvLinkRemote::kOther;
      }
      const double lane = NvLinkLaneGigabytesPerSecond(l.version);
      if (lane > 0) rate[g.index] = rate.count(g.index) ? std::min(rate[g.index], lane) : lane;
      if (remote == NvLinkRemote::kSwitch) {
        ++switch_lanes[g.index];
      } else if (remote == NvLinkRemote::kGpu) {
        auto it = by_bus.find(l.remote_bus_id);
        if (it == by_bus.end() || it->second == g.index) continue;  // an uncounted GPU
        ++direct[{g.index, it->second}];
      }
    }
  }
  if (classified_by_bus && evidence != nullptr) {
    evidence->push_back(
        "NVLink remote device types classified by remote PCI bus id (the driver lacks "
        "nvmlDeviceGetNvLinkRemoteDeviceType)");
  }

  std::vector<DeviceLink> links;
  for (const auto& [pair, count] : direct) {
    const auto [a, b] = pair;
    if (a > b && direct.count({b, a}) > 0) continue;  // counted from the lower index
    const int lanes = std::max(count, direct.count({b, a}) ? direct.at({b, a}) : 0);
    links.push_back(MakeLink(std::min(a, b), std::max(a, b), LinkKind::kNvLink, lanes,
                             PairRate(rate[a], rate[b])));
  }
  std::vector<int> on_switch;
  for (const auto& [index, lanes] : switch_lanes) on_switch.push_back(index);
  for (size_t i = 0; i < on_switch.size(); ++i) {
    for (size_t j = i + 1; j < on_switch.size(); ++j) {
      const int a = on_switch[i];
      const int b = on_switch[j];
      links.push_back(MakeLink(a, b, LinkKind::kNvSwitch,
                               std::min(switch_lanes[a], switch_lanes[b]),
                               PairRate(rate[a], rate[b])));
    }
  }
  std::sort(links.begin(), links.end(), [](const DeviceLink& x, const DeviceLink& y) {
    return std::tie(x.a, x.b, x.kind) < std::tie(y.a, y.b, y.kind);
  });
  return links;
}

}  // namespace tessera
