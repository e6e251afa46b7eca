#include "train/stored_job.h"

namespace tessera::train {

v1::StoredGangSlot ToStored(const GangSlot& slot) {
  v1::StoredGangSlot stored;
  stored.set_bundle_index(slot.bundle_index);
  stored.set_node_id(slot.node_id);
  stored.set_host(slot.host);
  stored.set_device_resource(slot.device_resource);
  stored.set_accelerator_type(slot.accelerator_type);
  for (int id : slot.device_ids) stored.add_device_ids(id);
  stored.set_slice(slot.slice);
  stored.set_tpu_worker_id(slot.tpu_worker_id);
  stored.set_network_interface(slot.network_interface);
  return stored;
}

GangSlot FromStored(const v1::StoredGangSlot& stored) {
  GangSlot slot;
  slot.bundle_index = stored.bundle_index();
  slot.node_id = stored.node_id();
  slot.host = stored.host();
  slot.device_resource = stored.device_resource();
  slot.accelerator_type = stored.accelerator_type();
  slot.device_ids.assign(stored.device_ids().begin(), stored.device_ids().end());
  slot.slice = stored.slice();
  slot.tpu_worker_id = stored.tpu_worker_id();
  slot.network_interface = stored.network_interface();
  return slot;
}

v1::StoredAttempt ToStored(const GangReservation& reservation,
                           const std::vector<StartedRank>& ranks,
                           const std::vector<GangSlot>& slots) {
  v1::StoredAttempt stored;
  stored.set_reservation(reservation.name);
  stored.set_slice_group(reservation.slice_group);
  stored.set_members(reservation.members);
  for (const GangSlot& slot : reservation.slots) *stored.add_reservation_slots() = ToStored(slot);
  for (size_t r = 0; r < ranks.size(); ++r) {
    const StartedRank& rank = ranks[r];
    v1::StoredRank* out = stored.add_ranks();
    out->set_rank(rank.rank);
    if (r < slots.size()) *out->mutable_slot() = ToStored(slots[r]);
    out->set_node_id(rank.node_id);
    out->set_agent_address(rank.agent_address);
    out->set_worker_id(rank.worker_id);
    out->set_pid(rank.pid);
    out->mutable_isolation_env()->insert(rank.isolation_env.begin(), rank.isolation_env.end());
  }
  return stored;
}

GangReservation ReservationOf(const v1::StoredAttempt& stored) {
  GangReservation reservation;
  reservation.name = stored.reservation();
  reservation.slice_group = stored.slice_group();
  reservation.members = stored.members();
  for (const v1::StoredGangSlot& slot : stored.reservation_slots()) {
    reservation.slots.push_back(FromStored(slot));
  }
  return reservation;
}

StartedRank StartedRankOf(const v1::StoredRank& stored) {
  StartedRank rank;
  rank.rank = stored.rank();
  rank.node_id = stored.node_id();
  rank.agent_address = stored.agent_address();
  rank.worker_id = stored.worker_id();
  rank.pid = stored.pid();
  rank.isolation_env = {stored.isolation_env().begin(), stored.isolation_env().end()};
  return rank;
}

}  // namespace tessera::train
