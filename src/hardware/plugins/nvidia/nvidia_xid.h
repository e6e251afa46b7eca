// The NVIDIA driver's Xid records, as its kernel log lines write them:
//
//   NVRM: Xid (PCI:0000:01:00): 79, pid=1234, name=python3, GPU has fallen off the bus.
//
// The PCI address is domain:bus:device (no function); the Xid code is the number after "): ",
// not the digits of the address. What follows the code is the driver's detail, after optional
// pid= and name= fields (common codes: 13 graphics engine exception, 31 MMU fault, 48 DBE ECC
// error, 63/64 row remapping, 74 NVLink error, 79 fallen off the bus, 94/95 contained and
// uncontained ECC errors; docs.nvidia.com/deploy/xid-errors).
// Thread-safe: pure functions.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace tessera {

// A PCI function's place up to its device number: what an Xid record names.
struct PciSlot {
  unsigned domain = 0;
  unsigned bus = 0;
  unsigned device = 0;
  friend bool operator==(const PciSlot&, const PciSlot&) = default;
};

// "0000:18:00.0", "00000000:18:00.0" (NVML's) or "0000:18:00"; nullopt when malformed.
std::optional<PciSlot> ParsePciSlot(std::string_view bus_id);

struct XidRecord {
  PciSlot slot;
  int code = 0;
  std::string detail;  // "GPU has fallen off the bus"; "" when the driver gave none
};

// The Xid record in a kernel log line's text, or nullopt when the line is not one.
std::optional<XidRecord> ParseXidRecord(std::string_view text);

}  // namespace tessera
