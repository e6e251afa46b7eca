// Simulation: what `tessera schedule` does with a requests file's events, event by event, on a
// cluster file's nodes — every decision made by the code the cluster runs. Placement groups and
// slice groups go through the ReservationEngine, as the head's do (created, waiting and retried,
// re-placed, broken and healed); tasks and actors through the TaskScheduler; requests inside a
// placement group through the engine's bundle check and a BundleLedger, as a node agent serves
// them. After every event that is not itself a placement, what waits is tried again in the
// head's order: broken slice groups healed, then tasks (submission order), then reservations
// (ReservationEngine::RetryWaiting), then requests waiting for bundles. Work lost with a node or
// with the bundle that served it is submitted again within its retry budget.
//
// Each event's outcome is returned as data (EventOutcome); the command prints it as text or
// JSON (cli/schedule_command.cc), so this file decides and that one only reads and writes.
// Pure and deterministic (ordered containers): the same files give the same outcomes. Not
// thread-safe: one owner calls it.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "resources/resource_set.h"
#include "scheduling/bundle_ledger.h"
#include "scheduling/cluster_file.h"
#include "scheduling/cluster_view.h"
#include "scheduling/requests_file.h"
#include "scheduling/reservation_engine.h"
#include "scheduling/task_scheduler.h"

namespace tessera {

// One try to place a task or actor (submitted, retried or resubmitted).
struct WorkAttempt {
  std::string name;
  ScheduleStatus status = ScheduleStatus::kPending;
  std::optional<Placement> placement;  // kPlaced
  std::string explanation;             // otherwise
  bool resubmitted = false;            // it was lost and submitted again by this event
};

// Lost work submitted again.
struct Resubmission {
  std::string name;
  int retry = 0;        // 1 for the first resubmission
  int max_retries = 0;  // its budget; -1 without end
};

// A reservation decision: a create_placement_group or reserve_slices, or one placed later.
struct ReservationPlacement {
  ReservationKind kind = ReservationKind::kPlacementGroup;
  std::string name;
  ScheduleStatus status = ScheduleStatus::kPlaced;
  std::string explanation;  // when not placed
  size_t choice = 0;        // the option or alternative taken (when placed)
  std::vector<std::pair<int, BundlePlacement>> bundles;  // a placement group's, by index
  std::vector<std::string> domains;                      // a slice group's, in order
  std::vector<DomainBundle> hosts;                       // a slice group's bundles
};

// What re-placing a placement group's lost bundles did.
struct Replacement {
  std::string name;
  std::vector<int> bundles;  // the bundles re-placed, or still waiting for a node
  bool placed = false;
  std::vector<std::pair<int, BundlePlacement>> placements;  // when placed
  std::string explanation;                                  // when not
};

enum class FinishResult { kFinished, kWithdrawn, kAlreadyLost, kAlreadyFinished };
enum class RemovalResult { kRemoved, kWithdrawn, kAlreadyGone };

struct EventOutcome {
  // --- what the event itself did ---
  std::optional<WorkAttempt> submitted;             // submit_task / submit_actor
  std::optional<ReservationPlacement> reservation;  // create_placement_group / reserve_slices
  // finish
  FinishResult finish = FinishResult::kFinished;
  std::optional<Placement> finished;  // kFinished: where it ran; its allocation as released
  std::string finish_problem;         // kFinished with a release the view refused: the message
  std::string finished_group;         // kFinished from a bundle: the group
  // fail_node / drain_node refused by the view (an unknown or dead node): the message
  std::string refused;
  // fail_node
  std::vector<std::string> lost;     // work lost with the node or its bundles, sorted
  std::vector<std::string> touched;  // "placement group g", "slice group s": reservations there
  // Slice groups broken by it, with why ("host h died (fail_node)").
  std::vector<std::pair<std::string, std::string>> broken;
  std::vector<Resubmission> resubmitted;
  std::vector<Replacement> replaced;  // what re-placing each touched placement group did
  // drain_node
  std::vector<std::string> keeps_running;
  // remove_placement_group / release_slices
  RemovalResult removal = RemovalResult::kRemoved;
  std::vector<Allocation> released;
  std::vector<std::string> stopped;  // work that ran in its bundles

  // --- what waited and was tried again after the event ---
  std::vector<WorkAttempt> retried_work;           // placed now, or resubmitted (submission order)
  std::vector<Replacement> replaced_later;         // groups whose lost bundles found nodes
  std::vector<ReservationPlacement> placed_later;  // waiting groups, then slice groups
  std::vector<WorkAttempt> retried_in_bundles;     // placed now, or resubmitted
};

class Simulation {
 public:
  explicit Simulation(SchedulerOptions task_options)
      : scheduler_(&view_, task_options), reservations_(&view_), ledger_(&view_) {}

  absl::Status AddNodes(const std::vector<ClusterNode>& nodes);
  // Applies one event. An error (a request the scheduler refuses, a node the view refuses to
  // add) is one line; the caller prefixes the event's file position.
  absl::StatusOr<EventOutcome> Apply(const SimulatedEvent& event);

  // used/total per resource over the nodes that are not dead, by resource name.
  std::map<std::string, std::pair<Quantity, Quantity>> Utilization() const;

 private:
  enum class Phase { kRunning, kWaiting, kParked, kFinished, kLost, kWithdrawn };
  struct Tracked {
    SimulatedRequest spec;
    SchedulingRequest request;
    Phase phase = Phase::kWaiting;
    std::optional<Placement> placement;
    int retries = 0;  // resubmissions after its work was lost, against spec.max_retries
  };

  absl::Status Submit(const SimulatedRequest& request, EventOutcome& out);
  void Finish(const std::string& name, EventOutcome& out);
  void FailNode(const std::string& node, EventOutcome& out);
  void DrainNode(const std::string& node, EventOutcome& out);
  absl::Status CreateGroup(const PlacementGroupSpec& spec, EventOutcome& out);
  absl::Status ReserveSlices(const DomainGroupRequest& request, EventOutcome& out);
  void Remove(const std::string& name, EventOutcome& out);
  // After a change: heals, then retries what waits (see the header comment).
  absl::Status RetryWaiting(EventOutcome& out);

  // Places (or explains) a tracked request: by the scheduler, or from its bundle.
  absl::Status Schedule(Tracked& t, WorkAttempt& attempt);
  absl::StatusOr<ScheduleResult> ScheduleInBundle(const SchedulingRequest& request);
  // Lost work goes back to waiting while its budget lasts.
  void Resubmit(const std::vector<std::string>& lost, EventOutcome& out);
  // Brings the ledger in line with the engine's bundles: bundles that moved or went away take
  // the work they served with them (returned by name, sorted); new ones are registered.
  std::vector<std::string> SyncBundles();
  ReservationPlacement DescribePlacement(const ReservationOutcome& outcome) const;
  Replacement DescribeReplacement(const ReservationOutcome& outcome) const;

  ClusterView view_;
  TaskScheduler scheduler_;
  ReservationEngine reservations_;
  BundleLedger ledger_;                           // requests served from reservations' bundles
  std::set<std::string> ledger_groups_;           // reservations whose bundles the ledger may hold
  std::map<int64_t, std::string> bundle_owners_;  // ledger allocation id -> request name
  std::map<std::string, Tracked> tracked_;        // by request name
  std::set<std::string> resubmitted_;             // lost work submitted again by the current event
  std::vector<std::string> order_;                // request names in submission order
  std::map<int64_t, std::string> owners_;         // running allocation id -> request name
};

}  // namespace tessera
