// ClusterState: the scheduling state the node registry and the reservation manager share — the
// ClusterView (nodes, what each holds) and the schedulers over it — and the one mutex that
// guards it and both managers' tables. The registry owns the view's nodes and the leases it
// mirrors from heartbeats; the reservation manager owns the bundles its schedulers place.
//
// Lock order: this mutex first, then any table's own (jobs, actors, drivers, events); never the
// other way round. No RPC is made while it is held.
#pragma once

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "scheduling/cluster_view.h"
#include "scheduling/domain_group_scheduler.h"
#include "scheduling/placement_group_scheduler.h"
#include "scheduling/task_scheduler.h"

namespace tessera {

struct ClusterState {
  explicit ClusterState(SchedulerOptions task_options = {})
      : tasks(&view, task_options), groups(&view), slices(&view) {}
  ClusterState(const ClusterState&) = delete;
  ClusterState& operator=(const ClusterState&) = delete;

  absl::Mutex mu;
  ClusterView view ABSL_GUARDED_BY(mu);
  TaskScheduler tasks ABSL_GUARDED_BY(mu);
  PlacementGroupScheduler groups ABSL_GUARDED_BY(mu);
  DomainGroupScheduler slices ABSL_GUARDED_BY(mu);
  // Something changed that could let a waiting reservation fit: retry at the next tick.
  bool changed ABSL_GUARDED_BY(mu) = false;
};

}  // namespace tessera
