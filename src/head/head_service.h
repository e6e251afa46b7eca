// HeadService: the head's control service (tessera.v1.Head) and the one owner of cluster-wide
// state — the node registry and its health, the ClusterView the schedulers read (with the agents'
// leases mirrored from heartbeats), placement groups and slice groups reserved on the node agents
// with two-phase commit, jobs, KV and the events `tessera status` shows.
//
// Placement groups and slice groups are both Reservations (head/reservation.h): one two-phase
// commit, busy flag and removal for both; each kind adds only its scheduler and its protocol
// description. The implementation is split by idea: head_service.cc (construction, status, Tick),
// head_nodes.cc, head_pick_node.cc, head_reservations.cc, head_placement_groups.cc,
// head_slice_groups.cc, head_jobs_kv.cc.
//
// Threading: every piece of state is guarded by one absl::Mutex. RPCs to node agents (prepare,
// commit, cancel) run outside it; a group with such a round in flight is marked busy, and removal
// waits for it. Tick() runs health checks and reconciliation; HeadServer calls it from one thread
// on a timer, tests call it by hand with a FakeClock.
//
// Cost: node registration and heartbeats are O(that node's leases and bundles); group
// create/remove is the scheduler's cost plus one state-store write; no call scans the cluster except the listing and
// status calls and the periodic health check. Requests are bounded (head/request_limits.h) and
// checked before any lock is taken; the job table keeps only the newest ended jobs; listings
// come in pages of bounded size.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/clock.h"
#include "head/node_agent_client.h"
#include "head/reservation.h"
#include "head/state_store.h"
#include "rpc/proto_convert.h"
#include "rpc/request_cache.h"
#include "scheduling/cluster_view.h"
#include "scheduling/domain_group_scheduler.h"
#include "scheduling/placement_group_scheduler.h"
#include "scheduling/task_scheduler.h"
#include "tessera/v1/head.grpc.pb.h"
#include "tessera/v1/head_state.pb.h"

namespace tessera {

struct HeadServiceOptions {
  absl::Duration heartbeat_interval = absl::Milliseconds(500);
  absl::Duration node_timeout = absl::Seconds(5);
  // Groups waiting for room (pending, or a failed two-phase commit) are retried at the next tick
  // after a cluster change, and at least this often.
  absl::Duration retry_interval = absl::Seconds(1);
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
  Clock* clock = nullptr;       // nullptr: the real clock
  StateStore* store = nullptr;  // required; must outlive the service
  NodeAgentClientFactory agent_clients;  // required
  std::function<void()> on_shutdown;     // called by the Shutdown RPC
};

// Thread-safe (see the file comment).
class HeadService final : public v1::Head::Service {
 public:
  explicit HeadService(HeadServiceOptions options);
  ~HeadService() override;

  // Declares dead the nodes whose heartbeats stopped for node_timeout, and brings the agents in
  // line with the view: re-placed bundles prepared and committed, waiting groups retried.
  // Silence is counted only while the head could hear: a health check that runs more than one
  // heartbeat interval after the previous one (the head was blocked or paused) moves the deadline
  // of every node it would declare dead by the length of that gap, once per silence (see
  // CheckHealth).
  void Tick();

  // --- tessera.v1.Head ---
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
  grpc::Status ListSlices(grpc::ServerContext*, const v1::ListRequest*,
                          v1::ListSlicesResponse* response) override;
  grpc::Status KeepDriverAlive(grpc::ServerContext*, const v1::KeepDriverAliveRequest* request,
                               v1::KeepDriverAliveResponse* response) override;
  grpc::Status DriverExited(grpc::ServerContext*, const v1::DriverExitedRequest* request,
                            v1::DriverExitedResponse* response) override;
  grpc::Status ListNodes(grpc::ServerContext*, const v1::ListRequest*,
                         v1::ListNodesResponse* response) override;
  grpc::Status GetClusterStatus(grpc::ServerContext*, const v1::ListRequest*,
                                v1::ClusterStatus* response) override;
  grpc::Status RecordJob(grpc::ServerContext*, const v1::RecordJobRequest* request,
                         v1::JobInfo* response) override;
  grpc::Status ListJobs(grpc::ServerContext*, const v1::ListRequest*,
                        v1::ListJobsResponse* response) override;
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

  // Reads back what a previous head left in the StateStore (head_persistence.cc): nodes, jobs,
  // placement groups and slice groups. Call once, before serving. DataLoss naming the table and
  // key when a record cannot be read; the store's error when it cannot be listed.
  absl::Status Restore() ABSL_LOCKS_EXCLUDED(mu_);

  // For tests and status: the events recorded so far (oldest first).
  std::vector<std::string> events() const;

 private:
  enum class NodeHealth { kAlive, kDead };
  struct NodeEntry {
    std::string id;
    v1::NodeDescription description;
    std::string incarnation;
    NodeHealth health = NodeHealth::kAlive;
    absl::Time last_heartbeat;
    int workers = 0;
    std::shared_ptr<NodeAgentClient> client;
    // Leases outside bundles, mirrored into the view: lease id -> allocation id.
    absl::flat_hash_map<std::string, AllocationId> leases;
    // Where the silence the health check counts starts when a late check moved it (the node's
    // grace); a grace is given again only after a heartbeat newer than this.
    absl::Time watched_from = absl::InfinitePast();
    // The bundles the head committed on this node: (reservation name, bundle index) -> the
    // bundles epoch of that commit. A heartbeat that saw this epoch and lacks the bundle lost it.
    std::map<std::pair<std::string, int>, int64_t> committed_epochs;
  };

  struct GroupEntry : Reservation {
    GroupEntry() : Reservation(ReservationKind::kPlacementGroup) {}
    v1::CreatePlacementGroupRequest request;
    PlacementGroupSpec spec;
    std::optional<PlacementGroupId> scheduled;  // while the view holds it
    int option = 0;
  };
  struct SliceEntry : Reservation {
    SliceEntry() : Reservation(ReservationKind::kSliceGroup) {}
    v1::ReserveSlicesRequest request;
    DomainGroupRequest parsed;
    std::optional<DomainGroupId> scheduled;
    int alternative = 0;
    std::vector<std::string> domains;
    std::vector<DomainBundle> bundles;  // bundle index = position
  };

  // --- under mu_ ---
  // Node registry and health (head_nodes.cc).
  // Declares dead the nodes whose heartbeats stopped for node_timeout.
  void CheckHealth(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void DeclareDead(NodeEntry& node, const std::string& reason) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void MirrorLeases(NodeEntry& node, const google::protobuf::RepeatedPtrField<v1::LeaseInfo>& leases)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void DropNodeFromView(NodeEntry& node, const std::string& reason)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void FillNodeInfo(const NodeEntry& node, v1::NodeInfo* info) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // When the head last heard this incarnation: its last heartbeat processed, or a later one
  // that arrived and waits for mu_.
  absl::Time LastHeard(const NodeEntry& node) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Compares a heartbeat's bundles with the reservations: bundles the head does not hold there
  // go into response->release (with an event); bundles it committed there that the agent lacks
  // are lost (ReservationLostBundle). Reservations with a round in flight are not judged.
  void ReconcileBundles(NodeEntry& node, const v1::HeartbeatRequest& request,
                        v1::HeartbeatResponse* response) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A bundle of `reservation` was committed on `node`: remembers the epoch of that commit.
  void NoteCommitted(const std::string& node, const std::string& reservation, int index)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::shared_ptr<NodeAgentClient> ClientFor(const std::string& node) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  AgentLookup Agents() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void PersistNode(const NodeEntry& node) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Reservations of either kind (head_reservations.cc).
  Reservation* FindReservation(const std::string& name) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  const Reservation* FindReservation(const std::string& name) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Reservation* FindReservation(ReservationKind kind, const std::string& name)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool NameTaken(const std::string& name) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A fresh id "<prefix>-N" and the group's name (the id when none was asked for); ALREADY_EXISTS
  // when the asked-for name is taken by a group of either kind.
  grpc::Status ClaimName(const std::string& requested, absl::string_view prefix, int64_t* counter,
                         std::string* id, std::string* name) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether the kind's scheduler holds a placement for it in the view.
  bool IsPlaced(const Reservation& reservation) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Where the kind's scheduler wants each bundle held.
  std::vector<std::optional<BundleHold>> DesiredHolds(const Reservation& reservation) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Gives the placement back to the kind's scheduler; the reservation waits for room again.
  void ForgetPlacement(Reservation& reservation) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void TryPlace(Reservation& reservation) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Persist(const Reservation& reservation) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool KnowsBundle(const std::string& node, const v1::HeldBundle& bundle) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The reservations holding bundles on a dead node: placement groups drop those holds and are
  // re-placed (`moved`), slice groups are broken (`broken`).
  void ReservationsLostNode(const std::string& node, const std::string& reason,
                            const std::vector<Allocation>& lost, std::vector<std::string>* moved,
                            std::vector<std::string>* broken) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The agent of a live node no longer holds committed bundle `index`: a placement group
  // prepares it again where the view holds it (RESCHEDULING meanwhile), a slice group is broken
  // (and reserved anew once its hosts are all alive, as after a host's death).
  void ReservationLostBundle(Reservation& reservation, int index, const std::string& node)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Blocks until the named reservation of `kind` is not busy; nullptr when there is none.
  Reservation* WaitUntilIdle(ReservationKind kind, const std::string& name)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The cancels that release every confirmed bundle, for a removal.
  std::vector<NodeWork> CancelAllWork(const Reservation& reservation) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Ends a removal: the placement back to the scheduler, the group out of the store and the map.
  void Erase(Reservation& reservation) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Placement groups (head_placement_groups.cc).
  std::vector<std::optional<BundleHold>> DesiredBundles(const GroupEntry& group) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void FillGroupInfo(const GroupEntry& group, v1::PlacementGroupInfo* info) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Places a waiting group in the view (phase kCommitting when placed).
  void TryPlaceGroup(GroupEntry& group) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Slice groups (head_slice_groups.cc).
  void FillSliceInfo(const SliceEntry& slice, v1::SliceGroupInfo* info) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The slices the nodes' labels describe, by name, with whether they are intact and who holds
  // them.
  std::map<std::string, v1::ListSlicesResponse::Slice> SliceCatalog() const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Every slice, then every slice group (cluster status; ListSlices pages through the same).
  void FillSlices(v1::ListSlicesResponse* response) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void TryPlaceSlice(SliceEntry& slice) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ApplySliceResult(SliceEntry& slice, const DomainGroupResult& result)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Jobs (head_jobs_kv.cc): running jobs on a dead node fail; returns how many.
  int FailJobsOn(const std::string& node, const std::string& reason)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Records that a job ended, then forgets the oldest ended jobs beyond max_ended_jobs.
  // --- persistence (head_persistence.cc) ---
  // Writes and deletes that report a failure (event and stderr) instead of dropping it.
  void StorePut(std::string_view table, const std::string& key, const std::string& value)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void StoreDelete(std::string_view table, const std::string& key)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void StoreFailed(std::string_view what, std::string_view table, const std::string& key,
                   const absl::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status RestoreNodes() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status RestoreJobs() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status RestoreReservations() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status RestoreGroup(const std::string& key, const std::string& value)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status RestoreSlice(const std::string& key, const std::string& value)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // --- drivers (head_drivers.cc) ---
  // A driver that owns a reservation is alive from now (KeepDriverAlive, a create with owner).
  void NoteDriverAlive(const std::string& driver) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Drivers whose last sign of life is older than driver_timeout; forgotten as they are listed.
  std::vector<std::string> TakeExpiredDrivers(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Removes every placement group and releases every slice group `driver` owns (the agents give
  // their bundles back); the names released.
  std::vector<std::string> ReleaseOwnedBy(const std::string& driver, const std::string& why)
      ABSL_LOCKS_EXCLUDED(mu_);

  void JobEnded(const std::string& job_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ForgetOldEndedJobs() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  void RecordEvent(std::string event) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void MarkChanged() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { changed_ = true; }

  // --- without mu_ ---
  // Brings the agents in line with the scheduler's placement of the reservation: cancels bundles
  // that moved, prepares then commits the new ones; on failure a fresh reservation gives its
  // placement back and waits, a placement group already holding bundles is re-placed later.
  void SyncReservation(const std::string& name) ABSL_LOCKS_EXCLUDED(mu_);
  // After creating a reservation that was placed: syncs it, waits until no round is in flight,
  // then calls `describe` under mu_ with it (nullptr: removed meanwhile).
  void SyncAndDescribe(ReservationKind kind, const std::string& name,
                       absl::FunctionRef<void(const Reservation*)> describe)
      ABSL_LOCKS_EXCLUDED(mu_);

  grpc::Status DoCreatePlacementGroup(const v1::CreatePlacementGroupRequest& request,
                                      v1::PlacementGroupInfo* response) ABSL_LOCKS_EXCLUDED(mu_);
  grpc::Status DoRemovePlacementGroup(const v1::RemovePlacementGroupRequest& request,
                                      v1::RemovePlacementGroupResponse* response)
      ABSL_LOCKS_EXCLUDED(mu_);
  grpc::Status DoReserveSlices(const v1::ReserveSlicesRequest& request,
                               v1::SliceGroupInfo* response) ABSL_LOCKS_EXCLUDED(mu_);
  grpc::Status DoReleaseSlices(const v1::ReleaseSlicesRequest& request,
                               v1::ReleaseSlicesResponse* response) ABSL_LOCKS_EXCLUDED(mu_);

  HeadServiceOptions options_;
  Clock* clock_;

  mutable absl::Mutex mu_;
  ClusterView view_ ABSL_GUARDED_BY(mu_);
  TaskScheduler tasks_ ABSL_GUARDED_BY(mu_);
  PlacementGroupScheduler groups_scheduler_ ABSL_GUARDED_BY(mu_);
  DomainGroupScheduler slices_scheduler_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, NodeEntry, std::less<>> nodes_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, GroupEntry, std::less<>> groups_ ABSL_GUARDED_BY(mu_);  // by name
  std::map<std::string, SliceEntry, std::less<>> slices_ ABSL_GUARDED_BY(mu_);  // by name
  struct JobEntry {
    v1::JobInfo info;
    int64_t order = 0;  // when the head first recorded it: ListJobs' order and page key
  };
  std::map<std::string, JobEntry, std::less<>> jobs_ ABSL_GUARDED_BY(mu_);  // by job id
  std::map<int64_t, std::string> jobs_in_order_ ABSL_GUARDED_BY(mu_);      // order -> job id
  std::deque<std::string> ended_jobs_ ABSL_GUARDED_BY(mu_);  // ended job ids, earliest end first
  int64_t next_job_order_ ABSL_GUARDED_BY(mu_) = 1;
  std::deque<std::string> events_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, absl::Time, std::less<>> drivers_ ABSL_GUARDED_BY(mu_);  // last heard
  int64_t next_group_ ABSL_GUARDED_BY(mu_) = 1;
  int64_t next_slice_ ABSL_GUARDED_BY(mu_) = 1;
  bool changed_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time last_retry_ ABSL_GUARDED_BY(mu_);
  // Both start from the clock (clock_ is declared, so initialized, before them).
  absl::Time last_health_check_ ABSL_GUARDED_BY(mu_) = clock_->Now();
  // Bumped by every bundle commit; starts from the clock so it also grows across head restarts.
  int64_t bundles_epoch_ ABSL_GUARDED_BY(mu_) = absl::ToUnixMicros(clock_->Now());
  // When each node's latest heartbeat arrived, stamped before the handler waits for mu_, so a
  // heartbeat queued behind a slow request still counts from its arrival. Taken after mu_ (or
  // alone); never held across anything else.
  struct HeardFrom {
    std::string incarnation;
    absl::Time at;
  };
  mutable absl::Mutex heard_mu_ ABSL_ACQUIRED_AFTER(mu_);
  absl::flat_hash_map<std::string, HeardFrom> heard_ ABSL_GUARDED_BY(heard_mu_);
  absl::CondVar idle_;  // signalled when a group stops being busy

  using CreateResult = std::pair<grpc::Status, v1::PlacementGroupInfo>;
  using RemoveResult = std::pair<grpc::Status, v1::RemovePlacementGroupResponse>;
  using ReserveResult = std::pair<grpc::Status, v1::SliceGroupInfo>;
  using ReleaseResult = std::pair<grpc::Status, v1::ReleaseSlicesResponse>;
  rpc::RequestCache<CreateResult> create_cache_;
  rpc::RequestCache<RemoveResult> remove_cache_;
  rpc::RequestCache<ReserveResult> reserve_cache_;
  rpc::RequestCache<ReleaseResult> release_cache_;
};

}  // namespace tessera
