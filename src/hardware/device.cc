#include "hardware/device.h"

namespace tessera {

std::string_view LinkKindName(LinkKind kind) {
  switch (kind) {
    case LinkKind::kNvLink: return "nvlink";
    case LinkKind::kNvSwitch: return "nvswitch";
    case LinkKind::kXgmi: return "xgmi";
    case LinkKind::kIci: return "ici";
    case LinkKind::kNeuronLink: return "neuronlink";
    case LinkKind::kGaudiRoce: return "gaudi-roce";
  }
  return "unknown";
}

std::string_view BandwidthClassName(BandwidthClass c) {
  switch (c) {
    case BandwidthClass::kLow: return "low";
    case BandwidthClass::kMedium: return "medium";
    case BandwidthClass::kHigh: return "high";
  }
  return "unknown";
}

BandwidthClass ClassifyBandwidth(double gigabytes_per_second) {
  if (gigabytes_per_second >= 300) return BandwidthClass::kHigh;
  if (gigabytes_per_second >= 50) return BandwidthClass::kMedium;
  return BandwidthClass::kLow;
}

}  // namespace tessera
