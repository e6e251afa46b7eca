#include "hardware/simulated/interconnect.h"

#include "vocabulary/chip_grid.h"

namespace tessera::simulated {
namespace {

struct Entry {
  Interconnect kind;
  std::string_view name;
  LinkDefaults defaults;
};

// Defaults are per device pair and direction. Gaudi: 3 of the 24 100GbE ports per pair
// (HLS-Gaudi2), 37.5 GB/s. NeuronLink: Trn1 NeuronLink-v2, about 96 GB/s per neighbour.
// ICI: used only outside the TPU family; TPUs take their generation's figure.
constexpr Entry kEntries[] = {
    {Interconnect::kNone, "none", {0, 0}},
    {Interconnect::kNvSwitch, "nvswitch", {18, 450}},
    {Interconnect::kNvLinkPairs, "nvlink-pairs", {12, 300}},
    {Interconnect::kXgmiMesh, "xgmi-mesh", {1, 64}},
    {Interconnect::kIciGrid, "ici-grid", {1, 100}},
    {Interconnect::kNeuronRing, "neuron-ring", {1, 96}},
    {Interconnect::kGaudiAllToAll, "gaudi-all-to-all", {3, 37.5}},
};

DeviceLink Link(int a, int b, LinkKind kind, int lanes, double gbps) {
  DeviceLink link;
  link.a = a;
  link.b = b;
  link.kind = kind;
  link.lanes = lanes;
  link.gigabytes_per_second = gbps;
  link.bandwidth_class = ClassifyBandwidth(gbps);
  return link;
}

}  // namespace

std::optional<Interconnect> ParseInterconnect(std::string_view name) {
  for (const Entry& e : kEntries) {
    if (e.name == name) return e.kind;
  }
  return std::nullopt;
}

std::string_view InterconnectName(Interconnect kind) {
  for (const Entry& e : kEntries) {
    if (e.kind == kind) return e.name;
  }
  return "none";
}

std::string InterconnectNames() {
  std::string out;
  for (const Entry& e : kEntries) {
    if (!out.empty()) out += ", ";
    out += e.name;
  }
  return out;
}

LinkDefaults DefaultsFor(Interconnect kind) {
  for (const Entry& e : kEntries) {
    if (e.kind == kind) return e.defaults;
  }
  return {};
}

bool IsNvLink(Interconnect kind) {
  return kind == Interconnect::kNvSwitch || kind == Interconnect::kNvLinkPairs;
}

bool IciGridSupports(int count) { return HostChipBlock(count).has_value(); }

std::vector<DeviceLink> BuildLinks(Interconnect kind, int first_index, int count, int lanes,
                                   double gbps) {
  std::vector<DeviceLink> links;
  auto all_pairs = [&](LinkKind link_kind) {
    for (int a = 0; a < count; ++a) {
      for (int b = a + 1; b < count; ++b) {
        links.push_back(Link(first_index + a, first_index + b, link_kind, lanes, gbps));
      }
    }
  };
  switch (kind) {
    case Interconnect::kNone: break;
    case Interconnect::kNvSwitch: all_pairs(LinkKind::kNvSwitch); break;
    case Interconnect::kXgmiMesh: all_pairs(LinkKind::kXgmi); break;
    case Interconnect::kGaudiAllToAll: all_pairs(LinkKind::kGaudiRoce); break;
    case Interconnect::kNvLinkPairs:
      for (int a = 0; a + 1 < count; a += 2) {
        links.push_back(Link(first_index + a, first_index + a + 1, LinkKind::kNvLink, lanes, gbps));
      }
      break;
    case Interconnect::kNeuronRing:
      for (int a = 0; a + 1 < count; ++a) {
        links.push_back(
            Link(first_index + a, first_index + a + 1, LinkKind::kNeuronLink, lanes, gbps));
      }
      if (count > 2) {
        links.push_back(
            Link(first_index, first_index + count - 1, LinkKind::kNeuronLink, lanes, gbps));
      }
      break;
    case Interconnect::kIciGrid: {
      const std::optional<ChipCoord> block = HostChipBlock(count);
      if (!block.has_value()) break;
      for (int a = 0; a < count; ++a) {
        for (int b = a + 1; b < count; ++b) {
          if (AreAdjacent(CoordOfIndex(a, *block), CoordOfIndex(b, *block))) {
            links.push_back(Link(first_index + a, first_index + b, LinkKind::kIci, lanes, gbps));
          }
        }
      }
      break;
    }
  }
  return links;
}

}  // namespace tessera::simulated
