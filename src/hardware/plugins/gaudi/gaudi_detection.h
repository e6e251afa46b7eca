// Intel Gaudi detection from sysfs (reference §3, §8). Thread-safe: stateless function.
#pragma once

#include "hardware/accelerator_plugin.h"

namespace tessera {

// Candidates are the accel class devices /sys/class/accel/accel<N> (current habanalabs, device
// node /dev/accel/accel<N>) and the older driver's /sys/class/habanalabs/hl<N> (/dev/hl<N>). Only
// entries named exactly accel<N>/hl<N> are candidates, so accel_controlD<N> and directories are
// not. Each maps to its PCI function, which must be Habana (0x1da3), processing-accelerator class
// and bound to habanalabs; accel entries of other vendors (Intel NPU, AMD XDNA) are skipped with
// evidence. The device node must exist as a file (containers get only their cards).
// Attributes are read from <class dir>/device/<name>, then <class dir>/<name>: device_type
// ("GAUDI2" -> type "Intel-GAUDI2"), module_id (the value HABANA_VISIBLE_MODULES names, used as
// the device index), serial_number (uuid), status. When any counted card lacks a module_id, or
// two share one, indices fall back to device-node order with a warning.
// Cards of one generation are linked all-to-all (kGaudiRoce) as in an HLS box.
Detection DetectGaudiDevices(const DetectionContext& context);

}  // namespace tessera
