// HeadService: the head's control services, one per concern on one server (head.proto:
// HeadNodes, HeadReservations, HeadActors, HeadJobs, HeadKv, HeadAdmin; services() lists them),
// a thin front over the parts that each own one table
// and its records in the StateStore:
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
// The front validates requests (head/request_limits.h, before any lock), converts between the
// protocol and the parts' types, maps errors to gRPC codes, answers retried mutating calls from
// the request-id caches, and tells the parts what a node's death or a driver's end means for the
// others (it is the registry's NodeListener). The gang controllers of the head's training jobs
// skip the front: InProcessHead() hands them the controller in process
// (in_process_cluster_head.h). Files: head_service.cc (construction, ticks, status, restore),
// head_service_nodes.cc, head_service_reservations.cc, head_service_jobs_kv.cc, head_actors.cc.
//
// Threading: the cluster's state is the controller's, under its one mutex (taken as
// controller_.mutex(), the one name); the other tables have their own locks, taken after it.
// The health check (CheckHealth) takes only that mutex and makes no RPC; the controller's
// two-phase commits run on threads of their own (Reconcile), so a slow agent never delays a
// health check. HeadServer runs both on timers; tests call Tick() by hand with a FakeClock.
//
// Cost: registration and heartbeats are O(that node's leases and bundles); group create/remove
// is the scheduler's cost plus one store write; only listings, status and the periodic checks
// scan a table. The job table keeps only the newest ended jobs; listings come in pages.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/clock.h"
#include "head/actor_directory.h"
#include "head/cluster_controller.h"
#include "head/device_history.h"
#include "head/driver_table.h"
#include "head/event_log.h"
#include "head/head_latency_metrics.h"
#include "head/head_service_internal.h"
#include "head/job_table.h"
#include "head/kv_store.h"
#include "head/node_agent_client.h"
#include "head/state_store.h"
#include "head/store_writer.h"
#include "head/task_event_store.h"
#include "metrics/http_sessions.h"
#include "rpc/request_cache.h"
#include "scheduling/task_scheduler.h"
#include "tessera/v1/head.grpc.pb.h"
#include "tessera/v1/head_state.pb.h"
#include "train/cluster_head.h"
#include "wire/proto_convert.h"

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

// Thread-safe (see the file comment).
class HeadService final : public v1::HeadNodes::Service,
                          public v1::HeadReservations::Service,
                          public v1::HeadActors::Service,
                          public v1::HeadJobs::Service,
                          public v1::HeadKv::Service,
                          public v1::HeadAdmin::Service,
                          private NodeListener {
 public:
  explicit HeadService(HeadServiceOptions options);
  ~HeadService() override;

  // Declares dead the nodes whose heartbeats stopped for node_timeout. Silence is counted only
  // while the head could hear: a health check that runs more than one heartbeat interval after
  // the previous one (the head was blocked or paused) moves the deadline of every node it would
  // declare dead by the length of that gap, once per silence (NodeRegistry::CheckHealth). Takes
  // the cluster lock only; makes no RPC.
  void CheckHealth();
  // Releases what drivers silent past the driver timeout owned, retries waiting reservations and
  // starts the two-phase rounds that bring the agents in line with the view (re-placed bundles
  // prepared and committed) on threads of their own; with `wait`, returns once they are over.
  void Reconcile(bool wait);
  // Both, waiting for the rounds (tests drive the head with this).
  void Tick();
  // Before the gRPC server shuts down (it waits for the calls in flight): WaitPlacementGroup and
  // WaitSliceGroup answer now, and later calls at once.
  void EndWaits() { controller_.EndWaits(); }
  // Pings the state store now: degraded when it does not answer; when it answers again, the
  // writes kept meanwhile are made and writes are accepted again (StoreWriter::CheckHealth).
  // Reconcile does this every store_check_interval.
  void CheckStateStore() { writer_.CheckHealth(); }
  // The tables' writes to the state store and its health (the head's job manager writes
  // through it too).
  StoreWriter& store_writer() { return writer_; }

  // The six services, for the server to register.
  std::vector<grpc::Service*> services() {
    return {static_cast<v1::HeadNodes::Service*>(this),
            static_cast<v1::HeadReservations::Service*>(this),
            static_cast<v1::HeadActors::Service*>(this),
            static_cast<v1::HeadJobs::Service*>(this),
            static_cast<v1::HeadKv::Service*>(this),
            static_cast<v1::HeadAdmin::Service*>(this)};
  }

  // --- the services' RPCs (head.proto says which service has which) ---
  grpc::Status RegisterNode(grpc::ServerContext*, const v1::RegisterNodeRequest* request,
                            v1::RegisterNodeResponse* response) override;
  grpc::Status Heartbeat(grpc::ServerContext*, const v1::HeartbeatRequest* request,
                         v1::HeartbeatResponse* response) override;
  grpc::Status PickNode(grpc::ServerContext*, const v1::PickNodeRequest* request,
                        v1::PickNodeResponse* response) override;
  grpc::Status CreatePlacementGroup(grpc::ServerContext*,
                                    const v1::CreatePlacementGroupRequest* request,
                                    v1::PlacementGroupInfo* response) override;
  grpc::Status RemovePlacementGroup(grpc::ServerContext*,
                                    const v1::RemovePlacementGroupRequest* request,
                                    v1::RemovePlacementGroupResponse* response) override;
  grpc::Status WaitPlacementGroup(grpc::ServerContext*,
                                  const v1::WaitPlacementGroupRequest* request,
                                  v1::PlacementGroupInfo* response) override;
  grpc::Status ListPlacementGroups(grpc::ServerContext*, const v1::ListRequest*,
                                   v1::ListPlacementGroupsResponse* response) override;
  grpc::Status ReserveSlices(grpc::ServerContext*, const v1::ReserveSlicesRequest* request,
                             v1::SliceGroupInfo* response) override;
  grpc::Status ReleaseSlices(grpc::ServerContext*, const v1::ReleaseSlicesRequest* request,
                             v1::ReleaseSlicesResponse* response) override;
  grpc::Status WaitSliceGroup(grpc::ServerContext*, const v1::WaitSliceGroupRequest* request,
                              v1::SliceGroupInfo* response) override;
  grpc::Status ListSlices(grpc::ServerContext*, const v1::ListRequest*,
                          v1::ListSlicesResponse* response) override;
  grpc::Status KeepDriverAlive(grpc::ServerContext*, const v1::KeepDriverAliveRequest* request,
                               v1::KeepDriverAliveResponse* response) override;
  grpc::Status DriverExited(grpc::ServerContext*, const v1::DriverExitedRequest* request,
                            v1::DriverExitedResponse* response) override;
  // Named actors (head_actors.cc): the ActorDirectory behind a proto front.
  grpc::Status RegisterActor(grpc::ServerContext*, const v1::RegisterActorRequest* request,
                             v1::ActorInfo* response) override;
  grpc::Status ActorDied(grpc::ServerContext*, const v1::ActorDiedRequest* request,
                         v1::ActorInfo* response) override;
  grpc::Status ActorWorkerExited(grpc::ServerContext*, const v1::ActorWorkerExitedRequest* request,
                                 v1::ActorInfo* response) override;
  grpc::Status GetActor(grpc::ServerContext*, const v1::GetActorRequest* request,
                        v1::ActorInfo* response) override;
  grpc::Status ListActors(grpc::ServerContext*, const v1::ListRequest* request,
                          v1::ListActorsResponse* response) override;
  grpc::Status ListNodes(grpc::ServerContext*, const v1::ListRequest*,
                         v1::ListNodesResponse* response) override;
  grpc::Status GetClusterStatus(grpc::ServerContext*, const v1::ListRequest*,
                                v1::ClusterStatus* response) override;
  grpc::Status CreateDashboardLogin(grpc::ServerContext*, const v1::CreateDashboardLoginRequest*,
                                    v1::CreateDashboardLoginResponse* response) override;
  grpc::Status RecordJob(grpc::ServerContext*, const v1::RecordJobRequest* request,
                         v1::JobInfo* response) override;
  grpc::Status ListEvents(grpc::ServerContext*, const v1::ListEventsRequest* request,
                          v1::ListEventsResponse* response) override;
  grpc::Status ListJobs(grpc::ServerContext*, const v1::ListRequest*,
                        v1::ListJobsResponse* response) override;
  // Timelines (head_service_jobs_kv.cc): the TaskEventStore behind a proto front.
  grpc::Status ReportTaskEvents(grpc::ServerContext*, const v1::ReportTaskEventsRequest* request,
                                v1::ReportTaskEventsResponse* response) override;
  grpc::Status GetTaskEvents(grpc::ServerContext*, const v1::GetTaskEventsRequest* request,
                             v1::GetTaskEventsResponse* response) override;
  grpc::Status KvPut(grpc::ServerContext*, const v1::KvPutRequest* request,
                     v1::KvPutResponse* response) override;
  grpc::Status KvGet(grpc::ServerContext*, const v1::KvGetRequest* request,
                     v1::KvGetResponse* response) override;
  grpc::Status KvDelete(grpc::ServerContext*, const v1::KvDeleteRequest* request,
                        v1::KvDeleteResponse* response) override;
  grpc::Status KvList(grpc::ServerContext*, const v1::KvListRequest* request,
                      v1::KvListResponse* response) override;
  grpc::Status Shutdown(grpc::ServerContext*, const v1::ShutdownRequest*,
                        v1::ShutdownResponse*) override;

  // Reads back what a previous head left in the StateStore: nodes, jobs, placement groups, slice
  // groups and named actors (KV lives in the store itself). Call once, before serving. DataLoss
  // naming the table and key when a record cannot be read; the store's error when it cannot be
  // listed.
  absl::Status Restore();

  // For tests and status: the events recorded so far (oldest first).
  std::vector<std::string> events() const { return events_.List(); }
  // The event stream (tessera events, the dashboard).
  const EventLog& event_log() const { return events_; }
  // The clock the head reads time from (HeadServiceOptions::clock, or the real one).
  Clock* clock() const { return clock_; }
  // For the head's other parts (its job manager) to add their changes to the stream.
  EventLog& mutable_event_log() { return events_; }
  // The head's nodes and reservations as the gang controllers of its training jobs reach them:
  // called in process, never over gRPC (head/in_process_cluster_head.h). Must not outlive this
  // service.
  std::unique_ptr<train::ClusterHead> InProcessHead();
  // The devices' readings the agents sent in their heartbeats.
  const DeviceHistory& device_history() const { return device_history_; }
  // One node as ListNodes shows it; nullopt when the head lists no node `node_id`.
  std::optional<v1::NodeInfo> NodeInfoOf(const std::string& node_id)
      ABSL_LOCKS_EXCLUDED(controller_.mutex());
  // The task runs drivers reported (timelines; /metrics counts them).
  const TaskEventStore& task_events() const { return task_events_; }
  // Where the head serves HTTP (ClusterStatus.http_address) and the sessions its dashboard
  // logs in to (CreateDashboardLogin issues their tickets); set once, before serving.
  void set_http(std::string address, std::shared_ptr<metrics::HttpSessions> sessions) {
    http_address_ = std::move(address);
    http_sessions_ = std::move(sessions);
  }

 private:
  // --- NodeListener (under the cluster lock) ---
  // Reservations drop or break, running jobs there fail as presumed, actors there restart under
  // their owners (detached ones die).
  void OnNodeDead(const std::string& node, const std::string& reason,
                  const std::vector<Allocation>& lost, std::string* event) override
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(controller_.mutex());
  std::vector<size_t> OnBundlesReported(const std::string& node,
                                        const std::vector<ReportedBundle>& bundles,
                                        std::optional<int64_t> epoch_seen) override
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(controller_.mutex());

  // The driver exited or fell silent (`why`): the reservations and actors it owns that are not
  // detached are released; returns the reservations' names.
  std::vector<std::string> ReleaseDriver(const std::string& driver, const std::string& why)
      ABSL_LOCKS_EXCLUDED(controller_.mutex());
  // A named actor's new state, as a change in the event stream.
  void RecordActorChange(const v1::ActorInfo& actor);
  // Writes the actor directory failed to make, as events.
  void ReportActorStoreFailures();
  // Every slice, then every slice group (cluster status; ListSlices pages through the same).
  void FillSlices(v1::ListSlicesResponse* response) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(controller_.mutex());
  void FillNodeInfo(const NodeRegistry::Node& node, v1::NodeInfo* info) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(controller_.mutex());
  // Measured use by resource over the alive nodes of `status` (its nodes filled in): CPU cores
  // and memory bytes from the agents' usage, a device resource's busy fractions summed.
  struct MeasuredUse {
    double amount = 0;
    int devices = 0;
  };
  std::map<std::string, MeasuredUse> MeasureUse(const v1::ClusterStatus& status) const;

  HeadServiceOptions options_;
  Clock* clock_;
  EventLog events_;
  DeviceHistory device_history_;
  TaskEventStore task_events_;
  std::string http_address_;
  std::shared_ptr<metrics::HttpSessions> http_sessions_;
  StoreWriter writer_;
  WriterBackedStore actor_store_;  // the actor directory's writes, through writer_
  DriverTable drivers_;
  JobTable jobs_;
  KvStore kv_;
  ActorDirectory actors_;
  ClusterController controller_;

  using CreateResult = std::pair<grpc::Status, v1::PlacementGroupInfo>;
  using RemoveResult = std::pair<grpc::Status, v1::RemovePlacementGroupResponse>;
  using ReserveResult = std::pair<grpc::Status, v1::SliceGroupInfo>;
  using ReleaseResult = std::pair<grpc::Status, v1::ReleaseSlicesResponse>;
  rpc::RequestCache<CreateResult> create_cache_;
  rpc::RequestCache<RemoveResult> remove_cache_;
  rpc::RequestCache<ReserveResult> reserve_cache_;
  rpc::RequestCache<ReleaseResult> release_cache_;
  // The request ids of each that a state-store refusal answered (head_internal::RunDurably).
  head_internal::StoreRefusals create_refusals_;
  head_internal::StoreRefusals remove_refusals_;
  head_internal::StoreRefusals reserve_refusals_;
  head_internal::StoreRefusals release_refusals_;
};

}  // namespace tessera
