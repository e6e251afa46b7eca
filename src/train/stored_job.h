// The gang's in-memory pieces (gang_backend.h, gang_layout.h) as the records the job manager
// keeps in the head's state store (proto/tessera/v1/train_state.proto), and back. Pure: plain
// values, no I/O.
#pragma once

#include <vector>

#include "tessera/v1/train_state.pb.h"
#include "train/gang_backend.h"
#include "train/gang_layout.h"

namespace tessera::train {

v1::StoredGangSlot ToStored(const GangSlot& slot);
GangSlot FromStored(const v1::StoredGangSlot& stored);

// The attempt whose `ranks` run on `reservation` (ranks[r] is rank r, on slots[r]).
v1::StoredAttempt ToStored(const GangReservation& reservation,
                           const std::vector<StartedRank>& ranks,
                           const std::vector<GangSlot>& slots);
// The reservation of a stored attempt (enough to release it and to look for room to grow: its
// name, kind, members and slots).
GangReservation ReservationOf(const v1::StoredAttempt& stored);
StartedRank StartedRankOf(const v1::StoredRank& stored);

}  // namespace tessera::train
