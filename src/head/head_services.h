// The head's six services, one class per concern of head.proto, each a thin front over the parts
// it serves (HeadParts, head_parts.h): it validates requests (head/request_limits.h, before any
// lock), converts between the protocol and the parts' types and maps errors to gRPC codes.
//   HeadNodesService         registration, heartbeats, PickNode, ListNodes (head_service_nodes.cc)
//   HeadReservationsService  placement groups, slice groups, the drivers that own them; answers
//                            retried mutating calls from its request-id caches
//                            (head_service_reservations.cc)
//   HeadActorsService        named actors: the ActorDirectory (head_actors.cc)
//   HeadJobsService          jobs, task events, the event stream (head_jobs_service.cc)
//   HeadKvService            the internal key-value table (head_kv_service.cc)
//   HeadAdminService         cluster status, dashboard logins, shutdown (head_admin_service.cc)
// HeadService (head_service.h) owns the parts and the six, and hands the six to the server.
//
// Threading: each is thread-safe. A service that reads or changes the cluster's state holds the
// controller as `controller_` and takes its mutex as controller_.mutex(), the one name the lock
// annotations use within that class; no method of one service is called with another's lock held.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "base/clock.h"
#include "head/head_parts.h"
#include "head/head_service_internal.h"
#include "metrics/http_sessions.h"
#include "rpc/request_cache.h"
#include "tessera/v1/head.grpc.pb.h"

namespace tessera {

namespace head_internal {

// One node as ListNodes and the cluster status show it.
void FillNodeInfo(const ClusterController& controller, const DeviceHistory& device_history,
                  const Clock& clock, const NodeRegistry::Node& node, v1::NodeInfo* info)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(controller.mutex());

}  // namespace head_internal

// Registration and heartbeats (what the agent reports, converted for the NodeRegistry), the node
// listing, and where a lease should go (PickNode).
class HeadNodesService final : public v1::HeadNodes::Service {
 public:
  explicit HeadNodesService(HeadParts& parts)
      : options_(parts.options),
        clock_(parts.clock),
        controller_(parts.controller),
        device_history_(parts.device_history),
        drivers_(parts.drivers) {}

  grpc::Status RegisterNode(grpc::ServerContext*, const v1::RegisterNodeRequest* request,
                            v1::RegisterNodeResponse* response) override;
  grpc::Status Heartbeat(grpc::ServerContext*, const v1::HeartbeatRequest* request,
                         v1::HeartbeatResponse* response) override;
  grpc::Status PickNode(grpc::ServerContext*, const v1::PickNodeRequest* request,
                        v1::PickNodeResponse* response) override;
  grpc::Status ListNodes(grpc::ServerContext*, const v1::ListRequest* request,
                         v1::ListNodesResponse* response) override;

  // One node as ListNodes shows it; nullopt when the head lists no node `node_id`.
  std::optional<v1::NodeInfo> NodeInfoOf(const std::string& node_id)
      ABSL_LOCKS_EXCLUDED(controller_.mutex());

 private:
  const HeadServiceOptions& options_;
  Clock* const clock_;
  ClusterController& controller_;
  DeviceHistory& device_history_;
  DriverTable& drivers_;  // the drivers gone lately, for the agents to free their objects
};

// Placement groups and slice groups (checked, converted, answered once per request id, then the
// ClusterController's), their listings, and the drivers that own them.
class HeadReservationsService final : public v1::HeadReservations::Service {
 public:
  explicit HeadReservationsService(HeadParts& parts);

  grpc::Status CreatePlacementGroup(grpc::ServerContext*,
                                    const v1::CreatePlacementGroupRequest* request,
                                    v1::PlacementGroupInfo* response) override;
  grpc::Status RemovePlacementGroup(grpc::ServerContext*,
                                    const v1::RemovePlacementGroupRequest* request,
                                    v1::RemovePlacementGroupResponse* response) override;
  grpc::Status WaitPlacementGroup(grpc::ServerContext*,
                                  const v1::WaitPlacementGroupRequest* request,
                                  v1::PlacementGroupInfo* response) override;
  grpc::Status ListPlacementGroups(grpc::ServerContext*, const v1::ListRequest* request,
                                   v1::ListPlacementGroupsResponse* response) override;
  grpc::Status ReserveSlices(grpc::ServerContext*, const v1::ReserveSlicesRequest* request,
                             v1::SliceGroupInfo* response) override;
  grpc::Status ReleaseSlices(grpc::ServerContext*, const v1::ReleaseSlicesRequest* request,
                             v1::ReleaseSlicesResponse* response) override;
  grpc::Status WaitSliceGroup(grpc::ServerContext*, const v1::WaitSliceGroupRequest* request,
                              v1::SliceGroupInfo* response) override;
  grpc::Status ListSlices(grpc::ServerContext*, const v1::ListRequest* request,
                          v1::ListSlicesResponse* response) override;
  grpc::Status KeepDriverAlive(grpc::ServerContext*, const v1::KeepDriverAliveRequest* request,
                               v1::KeepDriverAliveResponse* response) override;
  grpc::Status DriverExited(grpc::ServerContext*, const v1::DriverExitedRequest* request,
                            v1::DriverExitedResponse* response) override;

  // After HeadParts::RestoreCluster, before serving: a create the previous head answered,
  // retried to this one (its client did not hear the answer), is answered with the group it made
  // instead of making a second one.
  void RememberRestoredCreates() ABSL_LOCKS_EXCLUDED(controller_.mutex());

 private:
  using CreateResult = std::pair<grpc::Status, v1::PlacementGroupInfo>;
  using RemoveResult = std::pair<grpc::Status, v1::RemovePlacementGroupResponse>;
  using ReserveResult = std::pair<grpc::Status, v1::SliceGroupInfo>;
  using ReleaseResult = std::pair<grpc::Status, v1::ReleaseSlicesResponse>;

  HeadParts& parts_;  // ReleaseDriver: a driver's end crosses tables
  const HeadServiceOptions& options_;
  Clock* const clock_;
  const StoreWriter& writer_;  // whether the state store takes writes (RunDurably)
  DriverTable& drivers_;
  ClusterController& controller_;
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

// Named actors: the five actor RPCs as a thin front on the ActorDirectory (actor_directory.h),
// which owns the records, their names and their persistence.
class HeadActorsService final : public v1::HeadActors::Service {
 public:
  explicit HeadActorsService(HeadParts& parts)
      : parts_(parts),
        options_(parts.options),
        clock_(parts.clock),
        controller_(parts.controller),
        actors_(parts.actors),
        drivers_(parts.drivers),
        events_(parts.events) {}

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

 private:
  // A named actor's new state, as a change in the event stream.
  void RecordActorChange(const v1::ActorInfo& actor);

  HeadParts& parts_;  // ReportActorStoreFailures: shared with what a node's or driver's end does
  const HeadServiceOptions& options_;
  Clock* const clock_;
  ClusterController& controller_;  // a registration is checked against the nodes alive
  ActorDirectory& actors_;
  DriverTable& drivers_;  // a registration is a sign of life from its owner
  EventLog& events_;
};

// Jobs (the protocol's JobInfo converted to and from the JobTable's records, listed in pages in
// the order jobs were first recorded), the task runs drivers report (timelines: the
// TaskEventStore), and the head's event stream.
class HeadJobsService final : public v1::HeadJobs::Service {
 public:
  explicit HeadJobsService(HeadParts& parts)
      : options_(parts.options),
        jobs_(parts.jobs),
        task_events_(parts.task_events),
        events_(parts.events) {}

  grpc::Status RecordJob(grpc::ServerContext*, const v1::RecordJobRequest* request,
                         v1::JobInfo* response) override;
  grpc::Status ListJobs(grpc::ServerContext*, const v1::ListRequest* request,
                        v1::ListJobsResponse* response) override;
  grpc::Status ReportTaskEvents(grpc::ServerContext*, const v1::ReportTaskEventsRequest* request,
                                v1::ReportTaskEventsResponse* response) override;
  grpc::Status GetTaskEvents(grpc::ServerContext*, const v1::GetTaskEventsRequest* request,
                             v1::GetTaskEventsResponse* response) override;
  grpc::Status ListEvents(grpc::ServerContext*, const v1::ListEventsRequest* request,
                          v1::ListEventsResponse* response) override;

 private:
  const HeadServiceOptions& options_;
  JobTable& jobs_;
  TaskEventStore& task_events_;
  const EventLog& events_;
};

// The internal key-value table: the KvStore behind a proto front.
class HeadKvService final : public v1::HeadKv::Service {
 public:
  explicit HeadKvService(HeadParts& parts) : kv_(parts.kv) {}

  grpc::Status KvPut(grpc::ServerContext*, const v1::KvPutRequest* request,
                     v1::KvPutResponse* response) override;
  grpc::Status KvGet(grpc::ServerContext*, const v1::KvGetRequest* request,
                     v1::KvGetResponse* response) override;
  grpc::Status KvDelete(grpc::ServerContext*, const v1::KvDeleteRequest* request,
                        v1::KvDeleteResponse* response) override;
  grpc::Status KvList(grpc::ServerContext*, const v1::KvListRequest* request,
                      v1::KvListResponse* response) override;

 private:
  KvStore& kv_;
};

// The cluster's status (nodes, use, slices, demand, events, the state store's health), the
// dashboard's logins, and the head's shutdown.
class HeadAdminService final : public v1::HeadAdmin::Service {
 public:
  explicit HeadAdminService(HeadParts& parts)
      : options_(parts.options),
        clock_(parts.clock),
        controller_(parts.controller),
        device_history_(parts.device_history),
        events_(parts.events),
        writer_(parts.writer) {}

  grpc::Status GetClusterStatus(grpc::ServerContext*, const v1::ListRequest*,
                                v1::ClusterStatus* response) override;
  grpc::Status CreateDashboardLogin(grpc::ServerContext*, const v1::CreateDashboardLoginRequest*,
                                    v1::CreateDashboardLoginResponse* response) override;
  grpc::Status Shutdown(grpc::ServerContext*, const v1::ShutdownRequest*,
                        v1::ShutdownResponse*) override;

  // Where the head serves HTTP (ClusterStatus.http_address) and the sessions its dashboard
  // logs in to (CreateDashboardLogin issues their tickets); set once, before serving.
  void set_http(std::string address, std::shared_ptr<metrics::HttpSessions> sessions) {
    http_address_ = std::move(address);
    http_sessions_ = std::move(sessions);
  }

 private:
  // Every slice, then every slice group (ListSlices pages through the same).
  void FillSlices(v1::ListSlicesResponse* response) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(controller_.mutex());
  // Measured use by resource over the alive nodes of `status` (its nodes filled in): CPU cores
  // and memory bytes from the agents' usage, a device resource's busy fractions summed.
  struct MeasuredUse {
    double amount = 0;
    int devices = 0;
  };
  std::map<std::string, MeasuredUse> MeasureUse(const v1::ClusterStatus& status) const;

  const HeadServiceOptions& options_;
  Clock* const clock_;
  ClusterController& controller_;
  const DeviceHistory& device_history_;
  const EventLog& events_;
  const StoreWriter& writer_;
  std::string http_address_;
  std::shared_ptr<metrics::HttpSessions> http_sessions_;
};

}  // namespace tessera
