// The amd family's device messages: amdgpu's RAS error counters of each GPU's PCI function,
// /sys/bus/pci/devices/<bus>/ras/<block>_err_count ("ue: N" uncorrectable, "ce: N" correctable,
// since the driver loaded; blocks such as umc (memory), gfx, sdma, mmhub, xgmi_wafl). A Snapshot
// reads them; MessagesSince reads them again and reports each rise:
//
//   GPU 3 (0000:63:00.0): uncorrectable ECC errors in umc rose by 2
//
// A counter the driver cannot answer ("Query currently inaccessible") or that is not there is
// left out. On some products (Aldebaran) reading a counter also clears the hardware's error
// status; the driver's counts are kept either way.
// Not thread-safe (one reader, one caller); each call reads a handful of small files per GPU.
#pragma once

#include <memory>

#include "hardware/device_error_reader.h"

namespace tessera {

std::unique_ptr<DeviceErrorReader> MakeAmdErrorReader(const DeviceErrorContext& context);

}  // namespace tessera
