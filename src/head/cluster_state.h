// ClusterState: the scheduling state the node registry and the reservation manager share — the
// ClusterView (nodes, what each holds), the task scheduler's advice over it and the reservation
// engine (placement groups and slice groups, the decisions `tessera schedule` makes too) — and
// the one mutex that guards it and both managers' tables. The registry owns the view's nodes
// and the leases it mirrors from heartbeats; the reservation manager drives the engine.
//
// Lock order: this mutex first, then any table's own (jobs, actors, drivers, events); never the
// other way round. No RPC is made while it is held.
#pragma once

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "scheduling/cluster_view.h"
#include "scheduling/reservation_engine.h"
#include "scheduling/task_scheduler.h"

namespace tessera {

struct ClusterState {
  explicit ClusterState(SchedulerOptions task_options = {})
      : tasks(&view, task_options), reservations(&view) {}
  ClusterState(const ClusterState&) = delete;
  ClusterState& operator=(const ClusterState&) = delete;

  absl::Mutex mu;
  ClusterView view ABSL_GUARDED_BY(mu);
  TaskScheduler tasks ABSL_GUARDED_BY(mu);
  ReservationEngine reservations ABSL_GUARDED_BY(mu);
  // Something changed that could let a waiting reservation fit: retry at the next tick.
  bool changed ABSL_GUARDED_BY(mu) = false;
};

}  // namespace tessera
