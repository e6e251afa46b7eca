#include "hardware/plugins/nvidia/nvidia_pci.h"

#include "absl/strings/str_cat.h"
#include "base/string_util.h"

namespace tessera {

bool IsNvidiaDisplayFunction(const PciFunction& f) {
  return f.vendor_id == kPciVendorNvidia && f.base_class() == 0x03;
}

bool IsNvSwitchFunction(const PciFunction& f) {
  return f.vendor_id == kPciVendorNvidia && (f.class_code >> 8) == kPciClassOtherBridge;
}

std::string DescribePciFunction(const PciFunction& f) {
  return absl::StrCat(HexId(f.vendor_id), ":", HexId(f.device_id), " class 0x",
                      HexId(f.class_code, 6), " driver ", f.driver.empty() ? "none" : f.driver);
}

std::string RejectionWarning(const PciFunction& f, std::string_view why_display) {
  std::string why;
  if (IsNvSwitchFunction(f)) {
    why = "is an NVSwitch, not a GPU";
  } else if ((f.class_code >> 8) == kPciClassHdAudio) {
    why = "is an HD-audio function, not a GPU";
  } else if (f.base_class() == 0x03) {
    why = std::string(why_display);
  } else {
    why = "is not a display controller";
  }
  return absl::StrCat(f.bus_id, " (", DescribePciFunction(f), ") ", why, "; not counted");
}

}  // namespace tessera
