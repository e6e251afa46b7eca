// Habana (0x1da3) PCI device ids -> Gaudi generation, memory and scale-up wiring.
// Thread-safe: constant data.
#pragma once

#include <cstdint>
#include <string_view>

namespace tessera {

struct GaudiModel {
  uint16_t device_id;
  std::string_view device_type;  // what the driver's device_type attribute says: "GAUDI2"
  uint64_t memory_bytes;         // HBM per card
  // All-to-all scale-up inside one HLS box: RoCE ports from each card to each peer, and the
  // port speed. Gaudi: 10x100GbE, 7 to peers (1 each). Gaudi2: 24x100GbE, 21 to peers (3 each).
  // Gaudi3: 24x200GbE, 21 to peers (3 each).
  int ports_per_peer;
  double port_gigabits;
};

// nullptr for an id not in the table (Goya, unknown future parts).
const GaudiModel* FindGaudiModel(uint16_t device_id);

}  // namespace tessera
