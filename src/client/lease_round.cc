#include "client/lease_round.h"

#include <utility>

namespace tessera::client {

absl::StatusOr<LeaseRoundOutcome> RunLeaseRound(tessera::v1::LeaseRequest lease,
                                                std::string first_address,
                                                const LeaseRoundCalls& calls) {
  LeaseRoundOutcome out;
  std::string address = std::move(first_address);
  std::string node_id;  // of `address`, when the head or a spillback named it
  auto take = [&](const tessera::v1::PickNodeResponse& picked) {
    address = picked.address();
    node_id = picked.node_id();
    out.status = picked.status();
    out.explanation = picked.explanation();
  };
  if (address.empty()) {
    tessera::v1::PickNodeResponse picked;
    absl::Status status = calls.pick_node(lease.request(), &picked);
    if (!status.ok()) return status;
    take(picked);
  }
  lease.set_hops(0);
  while (!address.empty()) {
    lease.set_request_id(calls.request_id());
    tessera::v1::LeaseReply reply;
    absl::Status status = calls.request_lease(address, lease, &reply);
    if (status.code() == absl::StatusCode::kUnavailable && !node_id.empty() &&
        calls.pick_node_excluding && lease.hops() < kMaxLeaseHops) {
      // A node the head still thinks alive: ask it again without that node.
      out.unreachable.push_back(node_id);
      tessera::v1::PickNodeResponse picked;
      absl::Status pick = calls.pick_node_excluding(lease.request(), out.unreachable, &picked);
      if (!pick.ok()) return pick;
      take(picked);
      lease.set_hops(lease.hops() + 1);
      continue;
    }
    if (!status.ok()) return status;
    if (reply.has_granted()) {
      out.grant = std::move(*reply.mutable_granted());
      out.address = address;
      return out;
    }
    out.status = reply.status();
    out.explanation = reply.explanation();
    if (!reply.has_spillback()) break;
    if (lease.hops() >= kMaxLeaseHops) {
      out.hop_limit = true;
      break;
    }
    address = reply.spillback().address();
    node_id = reply.spillback().node_id();
    lease.set_hops(lease.hops() + 1);
  }
  return out;
}

}  // namespace tessera::client
