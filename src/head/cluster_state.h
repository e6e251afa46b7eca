// ClusterState: the scheduling state the node registry and the reservation manager share — the
// ClusterView (nodes, what each holds), the task scheduler's advice over it and the reservation
// engine (placement groups and slice groups, the decisions `tessera schedule` makes too) — and
// the one mutex that guards it and both managers' tables. The registry owns the view's nodes
// and the leases it mirrors from heartbeats; the reservation manager drives the engine.
//
// Lock order: this mutex first, then any table's own (jobs, actors, drivers, events); never the
// other way round. No RPC is made while it is held. Take it with ClusterLock, naming every
// manager whose methods the scope calls.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <initializer_list>

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

// Holds ClusterState::mu for a scope. The node registry and the reservation manager reach the
// one ClusterState through pointers of their own (their mutex() is the same mutex), which the
// thread-safety analysis cannot see; the lock names each alias the scope uses, so calls into
// those managers are checked under it (clang -Wthread-safety). Passing a mutex that is not `mu`
// is a bug and aborts.
class ABSL_SCOPED_LOCKABLE ClusterLock {
 public:
  explicit ClusterLock(absl::Mutex* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) { mu_->Lock(); }
  ClusterLock(absl::Mutex* mu, absl::Mutex* alias) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu, alias)
      : mu_(mu) {
    Check({alias});
    mu_->Lock();
  }
  ClusterLock(absl::Mutex* mu, absl::Mutex* alias, absl::Mutex* other_alias)
      ABSL_EXCLUSIVE_LOCK_FUNCTION(mu, alias, other_alias)
      : mu_(mu) {
    Check({alias, other_alias});
    mu_->Lock();
  }
  ~ClusterLock() ABSL_UNLOCK_FUNCTION() { mu_->Unlock(); }
  ClusterLock(const ClusterLock&) = delete;
  ClusterLock& operator=(const ClusterLock&) = delete;

 private:
  void Check(std::initializer_list<const absl::Mutex*> aliases) const {
    for (const absl::Mutex* alias : aliases) {
      if (alias != mu_) {
        std::fprintf(stderr, "tessera: ClusterLock given a mutex that is not the cluster's\n");
        std::abort();
      }
    }
  }

  absl::Mutex* const mu_;
};

}  // namespace tessera
