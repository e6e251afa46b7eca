// Memory amounts with units. Units are case-sensitive and written exactly as listed, so a
// typo cannot silently change the magnitude by 1000 vs 1024:
//   decimal: B, KB, MB, GB, TB, PB (powers of 1000)   binary: KiB, MiB, GiB, TiB, PiB (1024)
// Rejected, with a "did you mean" hint: kb, Gi, G, gib, k, M, ... and a bare number.
// A fraction is allowed ("1.5GiB"); a space between number and unit is allowed ("80 GiB").
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "resources/quantity.h"

namespace tessera {

// The amount in whole bytes. A result that is not a whole number of bytes ("0.1KiB" = 102.4 B),
// a missing or unknown unit, a negative number and a result above UINT64_MAX are errors.
absl::StatusOr<uint64_t> ParseByteSize(std::string_view text);

// The amount in bytes as a Quantity (how memory resources are stored): exact to 0.0001 byte,
// else an error. At most Quantity's range, 922337203685477.5807 bytes (about 838 TiB).
absl::StatusOr<Quantity> ParseByteQuantity(std::string_view text);

// Exact, parseable form of a byte Quantity: the shortest of the spellings with at most 4
// decimal places in any unit ("64GiB", "1.5GiB", "64GB", "1000B", "0.5B"); ties go to the
// larger unit. ParseByteQuantity(FormatByteQuantity(q)) == q for every q >= 0.
std::string FormatByteQuantity(Quantity bytes);

// For humans: the largest binary unit, at most 2 decimals, rounded ("80 GiB", "1.5 TiB",
// "1.18 MiB", "512 B"). Not meant to be parsed back exactly.
std::string FormatBytes(uint64_t bytes);

}  // namespace tessera
