// How the NVIDIA plugin reads a PCI function: which NVIDIA functions can be GPUs, and a one-line
// reason for every NVIDIA function it does not count (NVSwitch bridges, HD-audio, ...), because
// the vendor id alone is necessary, not sufficient (reference §3.1).
#pragma once

#include <string>

#include "hardware/pci.h"

namespace tessera {

inline constexpr uint32_t kPciClassVga = 0x0300;  // class_code >> 8
inline constexpr uint32_t kPciClass3dController = 0x0302;
inline constexpr uint32_t kPciClassOtherBridge = 0x0680;  // NVSwitch
inline constexpr uint32_t kPciClassHdAudio = 0x0403;

// Vendor 0x10de and a display class (0x03xxxx): what an NVML device must map to.
bool IsNvidiaDisplayFunction(const PciFunction& f);
// Vendor 0x10de, bridge class 0x0680: an NVSwitch.
bool IsNvSwitchFunction(const PciFunction& f);

// "0000:05:00.0 (10de:22a3, class 0x068000, driver nvidia) is an NVSwitch, not a GPU; not
// counted" — `why_display` explains a display function that is still refused.
std::string RejectionWarning(const PciFunction& f, std::string_view why_display);

// "10de:2330 class 0x030200 driver nvidia": the ids shown in evidence and warnings.
std::string DescribePciFunction(const PciFunction& f);

}  // namespace tessera
