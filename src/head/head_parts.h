// HeadParts: what the head's six services share (head_services.h), and what belongs to none of
// them alone. It owns the head's tables, each with its records in the StateStore:
//   ClusterController   the cluster's state under one mutex: nodes (its NodeRegistry part:
//                       heartbeats, health), the view, the schedulers, placement groups and
//                       slice groups                          (cluster_controller.h)
//   JobTable            the jobs `tessera run` records          (job_table.h)
//   KvStore             the internal key-value table            (kv_store.h)
//   ActorDirectory      named actors                            (actor_directory.h)
//   DriverTable         drivers that own reservations/actors    (driver_table.h)
//   EventLog            the stream of notices and changes        (event_log.h)
//   DeviceHistory       the nodes' device readings              (device_history.h)
//   TaskEventStore      the task runs drivers report            (task_event_store.h)
//   StoreWriter         the tables' writes to the StateStore and its health (store_writer.h)
// and the operations that cross tables: what a node's death means for the others (it is the
// registry's NodeListener), what a driver's end means (ReleaseDriver), the periodic checks
// (CheckHealth, Reconcile) and reading the tables back (RestoreCluster, RestoreJobsAndActors).
// The services hold references to the parts they serve; HeadService owns this and them.
//
// Threading: the cluster's state is the controller's, under its one mutex (controller.mutex());
// the other tables have their own locks, taken after it. The health check takes only that mutex
// and makes no RPC; the controller's two-phase commits run on threads of their own (Reconcile).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "base/clock.h"
#include "head/actor_directory.h"
#include "head/cluster_controller.h"
#include "head/device_history.h"
#include "head/driver_table.h"
#include "head/event_log.h"
#include "head/head_latency_metrics.h"
#include "head/job_table.h"
#include "head/kv_store.h"
#include "head/node_agent_client.h"
#include "head/node_registry.h"
#include "head/state_store.h"
#include "head/store_writer.h"
#include "head/task_event_store.h"
#include "scheduling/task_scheduler.h"

namespace tessera {

struct HeadServiceOptions {
  absl::Duration heartbeat_interval = absl::Milliseconds(500);
  absl::Duration node_timeout = absl::Seconds(5);
  // Groups waiting for room (pending, or a failed two-phase commit) are retried at the next tick
  // after a cluster change, and at least this often.
  absl::Duration retry_interval = absl::Seconds(1);
  // Reservations whose two-phase rounds run at once (each on a thread of its own).
  size_t max_concurrent_syncs = 8;
  size_t max_events = 1000;
  size_t request_cache_capacity = 4096;
  // Job retention: every running job is kept, and the newest max_ended_jobs of those that ended
  // (by when they ended); older ended jobs are forgotten, in the StateStore too.
  size_t max_ended_jobs = 1000;
  // Paged listings (ListJobs, ListPlacementGroups, ListSlices): a page holds at most
  // max_page_size items (also the size of a page when the call asks for none), and stops before
  // it grows past max_page_bytes (one item alone always fits), well under gRPC's 4 MB.
  size_t max_page_size = 500;
  size_t max_page_bytes = 2 * 1024 * 1024;
  // A driver that owns reservations and has not called KeepDriverAlive for this long is gone:
  // what it owns (and did not create detached) is released.
  absl::Duration driver_timeout = absl::Seconds(10);
  size_t max_dead_actors = 1000;  // dead named actors kept for ListActors
  // How tasks and actors are placed (pack threshold, whether CPU-only work avoids accelerator
  // nodes).
  SchedulerOptions scheduling;
  Clock* clock = nullptr;                // nullptr: the real clock
  StateStore* store = nullptr;           // required; must outlive the service
  NodeAgentClientFactory agent_clients;  // required
  std::function<void()> on_shutdown;     // called by the Shutdown RPC
  // Where its scheduling decisions and two-phase commits are timed; null histograms: nowhere.
  HeadLatencyMetrics latency;
  // The state store's health on /metrics; null: nowhere.
  StateStoreMetrics store_metrics;
  // How often Reconcile pings the state store (StoreWriter::CheckHealth): a degraded store is
  // found back, and its pending writes made, within about this.
  absl::Duration store_check_interval = absl::Seconds(1);
};

// Thread-safe (see the file comment). Neither copied nor moved: the controller holds it as its
// NodeListener, and the services hold references to its members.
struct HeadParts final : private NodeListener {
  explicit HeadParts(HeadServiceOptions head_options);
  ~HeadParts() override;
  HeadParts(const HeadParts&) = delete;
  HeadParts& operator=(const HeadParts&) = delete;

  // Declares dead the nodes whose heartbeats stopped for node_timeout (HeadService::CheckHealth
  // says when silence counts). Takes the cluster lock only; makes no RPC.
  void CheckHealth() ABSL_LOCKS_EXCLUDED(controller.mutex());
  // Releases what drivers silent past the driver timeout owned, retries waiting reservations and
  // starts the two-phase rounds on threads of their own (with `wait`, returns once they are
  // over), and pings the state store every store_check_interval.
  void Reconcile(bool wait) ABSL_LOCKS_EXCLUDED(controller.mutex());
  // The driver exited or fell silent (`why`): the reservations and actors it owns that are not
  // detached are released; returns the reservations' names.
  std::vector<std::string> ReleaseDriver(const std::string& driver, const std::string& why)
      ABSL_LOCKS_EXCLUDED(controller.mutex());
  // Writes the actor directory failed to make, as events.
  void ReportActorStoreFailures();
  // Reads back the cluster a previous head left in the StateStore: its nodes, then its placement
  // groups and slice groups (whose bundles are on them). DataLoss naming the table and key when
  // a record cannot be read.
  absl::Status RestoreCluster() ABSL_LOCKS_EXCLUDED(controller.mutex());
  // Reads back its jobs and named actors; the actors' owners get a whole driver timeout to call
  // this head, as the owners of reservations do.
  absl::Status RestoreJobsAndActors();

  const HeadServiceOptions options;
  Clock* const clock;
  EventLog events;
  DeviceHistory device_history;
  TaskEventStore task_events;
  StoreWriter writer;
  WriterBackedStore actor_store;  // the actor directory's writes, through writer
  DriverTable drivers;
  JobTable jobs;
  KvStore kv;
  ActorDirectory actors;
  ClusterController controller;  // last: its rounds' threads use the tables above

 private:
  // --- NodeListener (under the cluster lock) ---
  // Reservations drop or break, running jobs there fail as presumed, actors there restart under
  // their owners (detached ones die).
  void OnNodeDead(const std::string& node, const std::string& reason,
                  const std::vector<Allocation>& lost, std::string* event) override
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(controller.mutex());
  std::vector<size_t> OnBundlesReported(const std::string& node,
                                        const std::vector<ReportedBundle>& bundles,
                                        std::optional<int64_t> epoch_seen) override
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(controller.mutex());
};

}  // namespace tessera
