// Helpers every sysfs-based plugin uses to claim PCI functions: describing a function in
// evidence and warnings, finding the function behind a class device (/sys/class/drm/renderD128,
// /sys/class/accel/accel0), and warning about every function of the family's vendor that was
// seen but not counted. Part of tessera_plugin_support (shared by amd, intel-gpu, neuron, gaudi).
// Thread-safe: free functions without state.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "hardware/accelerator_plugin.h"
#include "hardware/pci.h"
#include "hardware/sysroot.h"

namespace tessera {

// "0000:18:00.0 (1002:74a1, class 0x120000, driver amdgpu)"; "no driver" when unbound.
std::string DescribeFunction(const PciFunction& f);

// A short name for the function's PCI class: "PCI bridge", "audio", "network", "NVMe", ...
std::string PciClassName(uint32_t class_code);

// "0000:c1:00.0" from its parts (KFD gives domain and location_id, not a bus id).
std::string FormatBusId(int domain, int bus, int device, int function);

// The PCI bus id that owns a class device directory such as "/sys/class/accel/accel0": the last
// component of its resolved `device` link, or else of the resolved entry's parent directory
// chain (…/0000:19:00.0/accel/accel0). nullopt when neither names a PCI function.
std::optional<std::string> PciBusIdOfClassDevice(const Sysroot& sysroot,
                                                 std::string_view class_device);

// Whether `name` looks like a PCI bus id "dddd:bb:dd.f".
bool LooksLikeBusId(std::string_view name);

// Why a function of the family's vendor was not counted; see WarnUnclaimedFunctions.
using UnclaimedReasonFn = std::function<std::string(const PciFunction&)>;

// The usual reason for WarnUnclaimedFunctions: what detection recorded in `rejected` (bus id ->
// reason) when it looked at the function, else `reject_reason(f)` when that is not "", else
// `fallback` (nothing named the function). Holds `rejected` by reference.
UnclaimedReasonFn UnclaimedReason(const std::map<std::string, std::string>& rejected,
                                  std::string (*reject_reason)(const PciFunction&),
                                  std::string fallback);

// Reports every function of `vendor_id` whose bus id is not in `claimed`. Functions that could
// be accelerators (display or processing-accelerator class, bound to one of `family_drivers`, or
// accepted by `also_candidate`, e.g. a Neuron device id whatever its class) get one warning each
// with `reason(f)`: a person should know a possible device was left out. The rest (bridges,
// audio, NICs, chipset) are one evidence line grouped by class: worth a look when diagnosing,
// but not a warning on every Intel or AMD host.
void WarnUnclaimedFunctions(const PciInventory& pci, uint16_t vendor_id,
                            const std::set<std::string, std::less<>>& claimed,
                            const std::vector<std::string_view>& family_drivers,
                            const UnclaimedReasonFn& reason, Detection* out,
                            const std::function<bool(const PciFunction&)>& also_candidate = {});

}  // namespace tessera
