// Reservation: what placement groups and slice groups have in common — a set of bundles, each
// held with an exact allocation on one node agent, committed there with two-phase commit
// (prepare on every node, then commit on all, cancel what was prepared on any failure). The
// kinds differ only in how their bundles are chosen (PlacementGroupScheduler or
// DomainGroupScheduler) and how they are described in the protocol; the ClusterController
// supplies those.
//
// Threading: Reservation and NodeWorkPlan are plain values guarded by their owner (the
// ClusterController's mutex). TwoPhaseCommit and CancelBundles make RPCs: call
// them without holding any lock.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "head/node_agent_client.h"
#include "scheduling/reservation_engine.h"
#include "tessera/v1/head.pb.h"
#include "wire/proto_convert.h"

namespace tessera {

// The protocol-level state: the engine's placement (scheduling/reservation_engine.h: waiting,
// placed, re-placing, broken) refined by what the agents hold. kPending / kInfeasible: the
// engine keeps it waiting. kCommitting: placed by the engine, the agents are being asked.
// kHeld: every bundle committed. kDegraded: a bundle is not held (a node died or an agent lost
// it: a placement group is re-placed; a slice group is broken until its hosts are back).
enum class ReservationPhase { kPending, kInfeasible, kCommitting, kHeld, kDegraded };

// The protocol's state of each kind: PENDING (also while committing), INFEASIBLE, then CREATED /
// RESCHEDULING for placement groups and RESERVED / BROKEN for slice groups.
v1::PlacementGroupState PlacementGroupStateOf(ReservationPhase phase);
v1::SliceGroupState SliceGroupStateOf(ReservationPhase phase);

// Where a bundle is (to be) held: node and exact allocation.
struct BundleHold {
  std::string node;
  wire::ExactAllocation allocation;
  friend bool operator==(const BundleHold&, const BundleHold&) = default;
};

// The state both kinds keep; the kinds add their request and placement.
struct Reservation {
  explicit Reservation(ReservationKind k) : kind(k) {}

  ReservationKind kind;
  std::string id;    // "pg-7", "slices-2"
  std::string name;  // the key on the agents; the id for an anonymous group
  // The driver that owns it (released when that driver ends); "" when detached.
  std::string owner;
  ReservationPhase phase = ReservationPhase::kPending;
  std::vector<std::optional<BundleHold>> confirmed;  // committed on the agents, by bundle
  std::string explanation;
  bool busy = false;  // a two-phase round or a removal is in flight

  // Placement groups move bundles lost with a node; slice groups (whole slices) cannot.
  bool replaceable() const { return kind == ReservationKind::kPlacementGroup; }
  bool AnyConfirmed() const;
  // What status shows: while committing with nothing else to say, "reserving on the node agents".
  std::string ShownExplanation() const;
  // Waiting for room (pending, infeasible, or a placement group being re-placed): a demand.
  bool IsDemand() const;
};

// The agent work of one two-phase round on one node.
struct NodeWork {
  std::string node;
  std::shared_ptr<NodeAgentClient> client;                     // nullptr: the node is not alive
  std::vector<std::pair<int, wire::ExactAllocation>> prepare;  // bundle index, allocation
  std::vector<int> cancel;
};

// The live agent of a node, or nullptr.
using AgentLookup = std::function<std::shared_ptr<NodeAgentClient>(const std::string& node)>;

// Collects bundle prepares and cancels into one NodeWork per node (in node order).
class NodeWorkPlan {
 public:
  explicit NodeWorkPlan(AgentLookup agents) : agents_(std::move(agents)) {}

  void Prepare(const std::string& node, int index, wire::ExactAllocation allocation);
  void Cancel(const std::string& node, int index);
  bool empty() const { return by_node_.empty(); }
  std::vector<NodeWork> Take();

 private:
  NodeWork& For(const std::string& node);

  AgentLookup agents_;
  std::map<std::string, NodeWork> by_node_;
};

// Prepare on every node, then commit on all, each step on all nodes at once; any failure cancels
// the bundles on every participant. With one participant, prepare and commit are one call (the
// request's `commit` flag). A node not alive fails the round before any call. The error names the
// node and the step.
absl::Status TwoPhaseCommit(const std::string& group, const std::vector<NodeWork>& work);

// Best effort: cancels the work's prepared and cancelled bundles on the nodes that are alive, on
// all of them at once.
void CancelBundles(const std::string& group, const std::vector<NodeWork>& work);

}  // namespace tessera
