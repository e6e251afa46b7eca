// Units of the network and link fields of a hardware description. Units are case-sensitive and
// written exactly as listed, like byte sizes (resources/byte_size.h):
//   NIC speed:       Mbps, Gbps, Tbps (bits per second, powers of 1000): "400Gbps", "25Gbps"
//   link bandwidth:  GB/s (bytes per second, per direction): "450GB/s", "37.5GB/s"
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <string_view>

#include "absl/status/statusor.h"

namespace tessera::simulated {

// Whole megabits per second, > 0. "1.5Gbps" = 1500; "0.5Mbps" is an error (not whole).
absl::StatusOr<int64_t> ParseLinkSpeedMbps(std::string_view text);

// Gigabytes per second, > 0, at most 4 decimal places.
absl::StatusOr<double> ParseBandwidthGBps(std::string_view text);

}  // namespace tessera::simulated
