// HeadService: the head's control front, split by concern as head.proto is. It owns
//   HeadParts                the tables the services share and what crosses them (head_parts.h):
//                            the ClusterController (nodes, view, schedulers, placement groups,
//                            slice groups, under one mutex), JobTable, KvStore, ActorDirectory,
//                            DriverTable, EventLog, DeviceHistory, TaskEventStore, StoreWriter;
//                            a node's death (it is the registry's NodeListener), a driver's end,
//                            the periodic checks, restore
//   six services             one per head.proto service, each a thin front over the parts it
//                            serves (head_services.h): HeadNodesService, HeadReservationsService
//                            (with the request-id caches), HeadActorsService, HeadJobsService,
//                            HeadKvService, HeadAdminService
// and hands the six to the server (services(): one server, one port). The head's own readers
// (the HTTP API, the Prometheus targets file) call a service's handlers in process through
// nodes(), reservations(), ... The gang controllers of the head's training jobs skip the front:
// InProcessHead() hands them the controller in process (in_process_cluster_head.h).
// Files: head_service.cc (this), head_parts.cc, head_service_nodes.cc,
// head_service_reservations.cc, head_actors.cc, head_jobs_service.cc, head_kv_service.cc,
// head_admin_service.cc.
//
// Threading: the cluster's state is the controller's, under its one mutex; the other tables have
// their own locks, taken after it. Each service takes the controller's mutex under its own name
// for it (controller_.mutex()) and calls no other service with it held. The health check
// (CheckHealth) takes only that mutex and makes no RPC; the controller's two-phase commits run on
// threads of their own (Reconcile), so a slow agent never delays a health check. HeadServer runs
// both on timers; tests call Tick() by hand with a FakeClock.
//
// Cost: registration and heartbeats are O(that node's leases and bundles); group create/remove
// is the scheduler's cost plus one store write; only listings, status and the periodic checks
// scan a table. The job table keeps only the newest ended jobs; listings come in pages.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "base/clock.h"
#include "head/device_history.h"
#include "head/event_log.h"
#include "head/head_parts.h"
#include "head/head_services.h"
#include "head/store_writer.h"
#include "head/task_event_store.h"
#include "metrics/http_sessions.h"
#include "tessera/v1/head.grpc.pb.h"
#include "train/cluster_head.h"

namespace tessera {

// Thread-safe (see the file comment).
class HeadService {
 public:
  explicit HeadService(HeadServiceOptions options);
  ~HeadService();
  HeadService(const HeadService&) = delete;
  HeadService& operator=(const HeadService&) = delete;

  // The six services, for the server to register.
  std::vector<grpc::Service*> services() {
    return {&nodes_, &reservations_, &actors_, &jobs_, &kv_, &admin_};
  }
  // Each, for the head's own callers of its handlers (head.proto says which RPC is whose).
  HeadNodesService& nodes() { return nodes_; }
  HeadReservationsService& reservations() { return reservations_; }
  HeadActorsService& actors() { return actors_; }
  HeadJobsService& jobs() { return jobs_; }
  HeadKvService& kv() { return kv_; }
  HeadAdminService& admin() { return admin_; }

  // Declares dead the nodes whose heartbeats stopped for node_timeout. Silence is counted only
  // while the head could hear: a health check that runs more than one heartbeat interval after
  // the previous one (the head was blocked or paused) moves the deadline of every node it would
  // declare dead by the length of that gap, once per silence (NodeRegistry::CheckHealth). Takes
  // the cluster lock only; makes no RPC.
  void CheckHealth() { parts_.CheckHealth(); }
  // Releases what drivers silent past the driver timeout owned, retries waiting reservations and
  // starts the two-phase rounds that bring the agents in line with the view (re-placed bundles
  // prepared and committed) on threads of their own; with `wait`, returns once they are over.
  void Reconcile(bool wait) { parts_.Reconcile(wait); }
  // Both, waiting for the rounds (tests drive the head with this).
  void Tick();
  // Before the gRPC server shuts down (it waits for the calls in flight): WaitPlacementGroup and
  // WaitSliceGroup answer now, and later calls at once.
  void EndWaits() { parts_.controller.EndWaits(); }
  // Pings the state store now: degraded when it does not answer; when it answers again, the
  // writes kept meanwhile are made and writes are accepted again (StoreWriter::CheckHealth).
  // Reconcile does this every store_check_interval.
  void CheckStateStore() { parts_.writer.CheckHealth(); }
  // The tables' writes to the state store and its health (the head's job manager writes
  // through it too).
  StoreWriter& store_writer() { return parts_.writer; }

  // Reads back what a previous head left in the StateStore: nodes, placement groups and slice
  // groups (a create the previous head answered is answered alike when retried here), jobs and
  // named actors (KV lives in the store itself). Call once, before serving. DataLoss naming the
  // table and key when a record cannot be read; the store's error when it cannot be listed.
  absl::Status Restore();

  // For tests and status: the events recorded so far (oldest first).
  std::vector<std::string> events() const { return parts_.events.List(); }
  // The event stream (tessera events, the dashboard).
  const EventLog& event_log() const { return parts_.events; }
  // The clock the head reads time from (HeadServiceOptions::clock, or the real one).
  Clock* clock() const { return parts_.clock; }
  // For the head's other parts (its job manager) to add their changes to the stream.
  EventLog& mutable_event_log() { return parts_.events; }
  // The head's nodes and reservations as the gang controllers of its training jobs reach them:
  // called in process, never over gRPC (head/in_process_cluster_head.h). Must not outlive this
  // service.
  std::unique_ptr<train::ClusterHead> InProcessHead();
  // The devices' readings the agents sent in their heartbeats.
  const DeviceHistory& device_history() const { return parts_.device_history; }
  // One node as ListNodes shows it; nullopt when the head lists no node `node_id`.
  std::optional<v1::NodeInfo> NodeInfoOf(const std::string& node_id) {
    return nodes_.NodeInfoOf(node_id);
  }
  // The task runs drivers reported (timelines; /metrics counts them).
  const TaskEventStore& task_events() const { return parts_.task_events; }
  // Where the head serves HTTP (ClusterStatus.http_address) and the sessions its dashboard
  // logs in to (CreateDashboardLogin issues their tickets); set once, before serving.
  void set_http(std::string address, std::shared_ptr<metrics::HttpSessions> sessions) {
    admin_.set_http(std::move(address), std::move(sessions));
  }

 private:
  // First: the services hold references to its members.
  HeadParts parts_;
  HeadNodesService nodes_;
  HeadReservationsService reservations_;
  HeadActorsService actors_;
  HeadJobsService jobs_;
  HeadKvService kv_;
  HeadAdminService admin_;
};

}  // namespace tessera
