// The nvidia family's device messages: the driver's Xid records (nvidia_xid.h) from the kernel
// log (KernelLog, opened when the reader is, at its end: DeviceErrorOptions::kernel_log, else
// /dev/kmsg on the live machine, none on a fake tree). Records are matched to devices by PCI
// address (Device::pci_bus_id), so a worker hears only of its own GPUs:
//
//   GPU 0 (0000:01:00.0): Xid 79, GPU has fallen off the bus
//
// A Snapshot is a position in the log; MessagesSince lists the Xid records of the snapshot's
// devices read after it. The reader keeps the newest 256 Xid records it has read (Poll reads the
// log between calls, so the kernel's ring buffer does not overwrite records first), and says in
// its warnings when records were lost or the log cannot be read (reading /dev/kmsg needs
// CAP_SYSLOG where kernel.dmesg_restrict is set). NVML's event API is not used yet.
// Not thread-safe (one reader, one caller). A call reads at most 1024 records, never blocking.
#pragma once

#include <memory>

#include "hardware/device_error_reader.h"

namespace tessera {

std::unique_ptr<DeviceErrorReader> MakeNvidiaErrorReader(const DeviceErrorContext& context);

}  // namespace tessera
