// One round of asking the cluster for a lease, as `tessera run` and the C++ API's worker leases
// both do it: the given agent (this host's), or the node the head picks when there is none, then
// every spillback the agents answer, up to kMaxLeaseHops. An agent the head sent it to that
// cannot be reached (UNAVAILABLE: its machine is gone and the head has not noticed yet) is not
// the end when the caller gives `pick_node_excluding`: the head picks again without that node
// (and every other unreachable one of the round), within the same hop limit. The callers decide
// what a refusal means (wait and retry, or give up) and how to call the agents (their own channels,
// retries and error wording). Thread-compatible: no state of its own.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tessera/v1/head.pb.h"
#include "tessera/v1/node_agent.pb.h"

namespace tessera::client {

// A lease is sent on this many times at most before its round ends.
inline constexpr int kMaxLeaseHops = 8;

struct LeaseRoundOutcome {
  std::optional<tessera::v1::LeaseGrant> grant;
  std::string address;  // the agent that granted it
  // Otherwise the last word on why not, PENDING or INFEASIBLE: the agent's lease reply status,
  // or the head's PickStatus (UNSPECIFIED when neither said).
  tessera::v1::PickStatus status = tessera::v1::PICK_STATUS_UNSPECIFIED;
  std::string explanation;  // and its explanation
  bool hop_limit = false;   // the last agent spilled it back once more than allowed
  // Nodes the head sent it to whose agents could not be reached (left out of later picks).
  std::vector<std::string> unreachable;
};

struct LeaseRoundCalls {
  // PickNode on the head; its status and explanation stand when it names no node.
  std::function<absl::Status(const tessera::v1::ResourceRequest&, tessera::v1::PickNodeResponse*)>
      pick_node;
  // RequestLease on the agent at `address` (a fresh request id is set before each call).
  std::function<absl::Status(const std::string& address, const tessera::v1::LeaseRequest&,
                             tessera::v1::LeaseReply*)>
      request_lease;
  // Optional: PickNode without the nodes in `exclude` (node ids). Set, an unreachable agent the
  // lease was sent on to is left out and the head asked again (see the top).
  std::function<absl::Status(const tessera::v1::ResourceRequest&,
                             const std::vector<std::string>& exclude,
                             tessera::v1::PickNodeResponse*)>
      pick_node_excluding;
  // A new request id for each RequestLease.
  std::function<std::string()> request_id;
};

// `first_address` empty: the head picks. An error of a call ends the round with that error.
absl::StatusOr<LeaseRoundOutcome> RunLeaseRound(tessera::v1::LeaseRequest lease,
                                                std::string first_address,
                                                const LeaseRoundCalls& calls);

}  // namespace tessera::client
