// ClusterState: the scheduling state of the head — the ClusterView (nodes, what each holds), the
// task scheduler's advice over it and the reservation engine (placement groups and slice
// groups, the decisions `tessera schedule` makes too) — and whether something changed that could
// let a waiting reservation fit.
//
// Thread-safety: none of its own. Its one owner, the ClusterController, holds it guarded by the
// controller's mutex (cluster_controller.h); the node registry, a part of the same controller,
// reaches it through a pointer only while that mutex is held.
#pragma once

#include "scheduling/cluster_view.h"
#include "scheduling/reservation_engine.h"
#include "scheduling/task_scheduler.h"

namespace tessera {

struct ClusterState {
  explicit ClusterState(SchedulerOptions task_options = {})
      : tasks(&view, task_options), reservations(&view) {}
  ClusterState(const ClusterState&) = delete;
  ClusterState& operator=(const ClusterState&) = delete;

  ClusterView view;
  TaskScheduler tasks;
  ReservationEngine reservations;
  // Something changed that could let a waiting reservation fit: retry at the next tick.
  bool changed = false;
};

}  // namespace tessera
