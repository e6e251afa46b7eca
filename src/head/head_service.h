// HeadService: the head's control service (tessera.v1.Head) and the one owner of cluster-wide
// state — the node registry and its health, the ClusterView the schedulers read (with the agents'
// leases mirrored from heartbeats), placement groups and slice groups reserved on the node agents
// with two-phase commit, jobs, KV and the events `tessera status` shows.
//
// Threading: every piece of state is guarded by one absl::Mutex. RPCs to node agents (prepare,
// commit, cancel) run outside it; a group with such a round in flight is marked busy, and removal
// waits for it. Tick() runs health checks and reconciliation; HeadServer calls it from one thread
// on a timer, tests call it by hand with a FakeClock.
//
// Cost: node registration and heartbeats are O(that node's leases); group create/remove is the
// scheduler's cost plus one state-store write; no call scans the cluster except the listing and
// status calls and the periodic health check.
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
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/clock.h"
#include "head/node_agent_client.h"
#include "head/state_store.h"
#include "rpc/proto_convert.h"
#include "rpc/request_cache.h"
#include "scheduling/cluster_view.h"
#include "scheduling/domain_group_scheduler.h"
#include "scheduling/placement_group_scheduler.h"
#include "scheduling/task_scheduler.h"
#include "tessera/v1/head.grpc.pb.h"

namespace tessera {

struct HeadServiceOptions {
  absl::Duration heartbeat_interval = absl::Milliseconds(500);
  absl::Duration node_timeout = absl::Seconds(5);
  // Groups waiting for room (pending, or a failed two-phase commit) are retried at the next tick
  // after a cluster change, and at least this often.
  absl::Duration retry_interval = absl::Seconds(1);
  size_t max_events = 1000;
  size_t request_cache_capacity = 4096;
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
  };

  // Where a bundle is (to be) held: node and exact allocation.
  struct BundleHold {
    std::string node;
    rpc::ExactAllocation allocation;
    friend bool operator==(const BundleHold&, const BundleHold&) = default;
  };

  enum class GroupPhase { kPending, kInfeasible, kCommitting, kCreated, kRescheduling };
  struct GroupEntry {
    std::string id;    // "pg-7"
    std::string name;  // the key on the agents; the id for an anonymous group
    v1::CreatePlacementGroupRequest request;
    PlacementGroupSpec spec;
    GroupPhase phase = GroupPhase::kPending;
    std::optional<PlacementGroupId> scheduled;  // while the view holds it
    int option = 0;
    std::vector<std::optional<BundleHold>> confirmed;  // committed on the agents, by bundle
    std::string explanation;
    bool busy = false;  // a two-phase round or a removal is in flight
  };

  enum class SlicePhase { kPending, kInfeasible, kCommitting, kReserved, kBroken };
  struct SliceEntry {
    std::string id;
    std::string name;
    v1::ReserveSlicesRequest request;
    DomainGroupRequest parsed;
    SlicePhase phase = SlicePhase::kPending;
    std::optional<DomainGroupId> scheduled;
    int alternative = 0;
    std::vector<std::string> domains;
    std::vector<DomainBundle> bundles;  // bundle index = position
    std::string explanation;
    bool busy = false;
  };

  // The agent work of one two-phase round on one node.
  struct NodeWork {
    std::string node;
    std::shared_ptr<NodeAgentClient> client;
    std::vector<std::pair<int, rpc::ExactAllocation>> prepare;  // bundle index, allocation
    std::vector<int> cancel;
  };

  // --- under mu_ ---
  void RecordEvent(std::string event) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void DeclareDead(NodeEntry& node, const std::string& reason) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void MirrorLeases(NodeEntry& node, const google::protobuf::RepeatedPtrField<v1::LeaseInfo>& leases)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void DropNodeFromView(NodeEntry& node, const std::string& reason)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool KnowsBundle(const std::string& node, const v1::HeldBundle& bundle) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::vector<std::optional<BundleHold>> DesiredBundles(const GroupEntry& group) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void FillGroupInfo(const GroupEntry& group, v1::PlacementGroupInfo* info) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void FillSliceInfo(const SliceEntry& slice, v1::SliceGroupInfo* info) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void FillNodeInfo(const NodeEntry& node, v1::NodeInfo* info) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void FillSlices(v1::ListSlicesResponse* response) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::shared_ptr<NodeAgentClient> ClientFor(const std::string& node) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void PersistGroup(const GroupEntry& group) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void PersistSlice(const SliceEntry& slice) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void PersistNode(const NodeEntry& node) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Places a waiting group in the view (phase kCommitting when placed).
  void TryPlaceGroup(GroupEntry& group) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void TryPlaceSlice(SliceEntry& slice) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void MarkChanged() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { changed_ = true; }

  // --- without mu_ ---
  // Brings the agents in line with the view's placement of the group: cancels bundles that
  // moved, prepares then commits the new ones; rolls back what it prepared on any failure.
  void SyncGroup(const std::string& name) ABSL_LOCKS_EXCLUDED(mu_);
  void SyncSlice(const std::string& name) ABSL_LOCKS_EXCLUDED(mu_);
  // Prepare on every node, then commit on all; on failure cancels every prepared bundle. The
  // error names the node and the step.
  absl::Status TwoPhase(const std::string& group, const std::vector<NodeWork>& work)
      ABSL_LOCKS_EXCLUDED(mu_);
  void CancelOn(const std::string& group, const std::vector<NodeWork>& work)
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
  std::map<std::string, v1::JobInfo, std::less<>> jobs_ ABSL_GUARDED_BY(mu_);
  std::deque<std::string> events_ ABSL_GUARDED_BY(mu_);
  int64_t next_group_ ABSL_GUARDED_BY(mu_) = 1;
  int64_t next_slice_ ABSL_GUARDED_BY(mu_) = 1;
  bool changed_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time last_retry_ ABSL_GUARDED_BY(mu_);
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
