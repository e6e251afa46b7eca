// AgentState: what one node agent knows and holds — its hardware, a one-node ClusterView that is
// authoritative for its devices, a TaskScheduler for local lease decisions, the bundles it
// reserved for the head's placement groups (and the leases served from them through a
// BundleLedger), and the lease and worker tables.
//
// It makes decisions and keeps records; it starts no process and makes no call. The server
// glues it to worker processes (src/process) and to the head (src/rpc).
//
// Thread-safe: every method takes the one mutex; no method blocks except the Await* ones.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "hardware/node_discovery.h"
#include "node/agent_types.h"
#include "scheduling/bundle_ledger.h"
#include "scheduling/cluster_view.h"
#include "scheduling/scheduling_request.h"
#include "scheduling/task_scheduler.h"

namespace tessera {

// What a lease asks for, in core types (the protocol's LeaseRequest without the worker).
struct LeaseAsk {
  std::string job_id;
  ResourceSet resources;
  FallbackList selectors;
  NodeRanking strategy = NodeRanking::kDefault;
  std::optional<NodeAffinity> affinity;
  std::optional<BundleTarget> bundle;  // a placement-group bundle (or any bundle: -1)
};

// The local outcome of a lease ask. kPlaced: `lease` is recorded (its worker not started yet).
struct LocalDecision {
  ScheduleStatus status = ScheduleStatus::kPending;
  std::optional<LeaseRecord> lease;
  std::string explanation;  // one line when not placed
};

// What to do after a local decision that did not place the lease.
enum class LeaseNextStep {
  kGranted,     // placed here
  kAskHead,     // another node may take it: ask the head which (spillback)
  kAnswerHere,  // answer with the local status and explanation (hop limit reached)
};
LeaseNextStep NextStepAfterLocal(const LocalDecision& decision, int hops, int max_hops);

// One bundle the head asks this node to hold: the exact instances it chose.
struct BundleAsk {
  int index = 0;
  ResourceSet resources;
  std::vector<DeviceGrant> devices;
};

// A bundle as the head is told about it: its record and its generation, which every prepare of
// it changes, so a release judged on an older report misses a bundle prepared again since.
struct HeldBundleState {
  BundleRecord record;
  uint64_t generation = 0;
};

// What a prepare knows of its own call, so that a cancel always wins over a late prepare.
struct PrepareGuard {
  // BundleWatermark() when the call arrived: a cancel of one of its bundles processed since
  // makes it take nothing (Aborted). nullopt: not checked.
  std::optional<uint64_t> arrived_at;
  // True once the head has given up on the call (its deadline passed): then it takes nothing
  // (DeadlineExceeded). Checked under the state's lock, as the bundles would be taken. Null:
  // never.
  std::function<bool()> abandoned;
};

struct AgentStateOptions {
  // Prefix of lease and worker ids; unique per agent process start (the incarnation), so the
  // log files of an earlier start are never overwritten.
  std::string id_prefix = "0";
};

class AgentState {
 public:
  // InvalidArgument when the hardware cannot make a node (bad resources or labels).
  static absl::StatusOr<std::unique_ptr<AgentState>> Create(NodeId id, NodeHardware hardware,
                                                            AgentStateOptions options = {});

  const NodeId& node_id() const { return node_id_; }
  const NodeHardware& hardware() const { return hardware_; }
  // The node as registered (resources, labels incl. tessera.io/node-id, device topologies).
  const NodeSpec& spec() const { return spec_; }

  // Decides a lease on this node; when placed, records the lease and a worker in kStarting.
  // InvalidArgument for a request the scheduler refuses (bad resource names or quantities).
  absl::StatusOr<LocalDecision> TryLease(const LeaseAsk& ask);
  // Ends a lease and gives back what it took. NotFound when it is not held.
  absl::StatusOr<Allocation> ReleaseLease(const LeaseId& lease);

  // Worker lifecycle. WorkerStarted: the process runs (pid, argv, env, log paths).
  absl::Status WorkerStarted(const WorkerId& worker, int pid, std::vector<std::string> argv,
                             std::map<std::string, std::string> isolation_env,
                             std::string stdout_path, std::string stderr_path);
  // The worker could not be started: its lease is released, and it is recorded as exited with
  // `reason`.
  void WorkerFailedToStart(const WorkerId& worker, std::string reason);
  // The worker exited: its lease (if still held) is released at once and the exit kept, its
  // reason followed by the kill cause (NoteKill) and then "; device messages: <the exit's
  // device_messages>" when there are any. NotFound for an unknown worker; a second exit of the
  // same worker is ignored.
  absl::Status WorkerExited(const WorkerId& worker, WorkerExitInfo exit);

  // Ends a running worker's lease while its process goes on (NodeAgent.ReturnLease): what the
  // lease held is free, the worker keeps no allocation. FailedPrecondition for a worker that is
  // not running, whose lease is gone already, or whose lease holds devices; NotFound for an
  // unknown worker.
  absl::Status ReturnLease(const WorkerId& worker);

  // Records why the agent is about to kill a running worker ("after a KillWorker request"); its
  // exit reason gets it appended, and `bundle_removed` says the cause was its bundle's removal.
  // Ignored for unknown or exited workers.
  void NoteKill(const WorkerId& worker, std::string cause, bool bundle_removed = false);

  std::optional<WorkerRecord> FindWorker(const WorkerId& worker) const;
  std::vector<WorkerRecord> Workers() const;
  int running_workers() const;
  // Waits until the worker has exited (true) or `timeout` passes (false). False at once for an
  // unknown worker.
  bool AwaitWorkerExit(const WorkerId& worker, absl::Duration timeout) const;

  // Two-phase commit, participant side. Prepare takes every bundle of the call with the exact
  // instances the head chose, all or nothing: a bundle already held with the same allocation is
  // OK (a retry); one held with another allocation is AlreadyExists; instances that are not free
  // are ResourceExhausted; grants that do not match the demand are InvalidArgument. Nothing
  // changes on error.
  // With a guard, a prepare that arrived before a cancel of one of its bundles, or whose caller
  // gave up, takes nothing (see PrepareGuard).
  absl::Status PrepareBundles(const std::string& group, const std::vector<BundleAsk>& bundles,
                              const PrepareGuard& guard = {});
  // The bundle sequence now, for PrepareGuard::arrived_at.
  uint64_t BundleWatermark() const;
  // Marks held bundles committed; bundles not held here are ignored (the head may retry a commit
  // after a cancel).
  void CommitBundles(const std::string& group, const std::vector<int>& indices);
  // Releases the bundles (every bundle of the group when `indices` is empty) and the leases
  // inside them; returns the workers of those leases still running, which the caller kills.
  // Cancels are remembered (the newest few thousand) so that a prepare that arrived before them
  // takes nothing.
  std::vector<WorkerId> CancelBundles(const std::string& group, const std::vector<int>& indices);
  // Releases a bundle the head does not hold (its reconciliation), when it still has
  // `generation` (kAnyGeneration: whatever it has, for a head that does not name one); returns
  // the workers to kill. NotFound when not held; FailedPrecondition when prepared again since
  // (kept: the head asked for it after the report it judged).
  static constexpr uint64_t kAnyGeneration = 0;  // generations start at 1
  absl::StatusOr<std::vector<WorkerId>> ReleaseBundleIfGeneration(const BundleKey& key,
                                                                  uint64_t generation);

  bool HoldsLease(const LeaseId& lease) const;
  std::vector<LeaseRecord> Leases() const;
  std::vector<BundleRecord> Bundles() const;
  // The same with their generations (what heartbeats and registrations report).
  std::vector<HeldBundleState> BundleStates() const;
  // What is free on the node now (for status and tests).
  ResourceSet Available() const;

 private:
  AgentState(NodeId id, NodeHardware hardware, NodeSpec spec, AgentStateOptions options);

  absl::StatusOr<LocalDecision> TryBundleLease(const LeaseAsk& ask)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  LeaseRecord RecordLease(const LeaseAsk& ask, Allocation allocation,
                          std::optional<BundleKey> bundle) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<Allocation> ReleaseLeaseLocked(const LeaseId& lease)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ReleaseBundleLocked(const BundleKey& key, std::vector<WorkerId>& running)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const NodeId node_id_;
  const NodeHardware hardware_;
  const NodeSpec spec_;
  const AgentStateOptions options_;

  mutable absl::Mutex mu_;
  ClusterView view_ ABSL_GUARDED_BY(mu_);
  NodeIndex node_ ABSL_GUARDED_BY(mu_) = 0;
  std::unique_ptr<TaskScheduler> scheduler_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<BundleLedger> ledger_ ABSL_GUARDED_BY(mu_);
  int64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  std::map<LeaseId, LeaseRecord> leases_ ABSL_GUARDED_BY(mu_);
  // Ledger allocation id of each lease served from a bundle.
  std::map<LeaseId, AllocationId> bundle_leases_ ABSL_GUARDED_BY(mu_);
  std::map<BundleKey, BundleRecord> bundles_ ABSL_GUARDED_BY(mu_);
  // Bumped by every prepare (each bundle it takes or confirms gets the new value as its
  // generation) and every cancel.
  uint64_t bundle_sequence_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<BundleKey, uint64_t> generations_ ABSL_GUARDED_BY(mu_);  // of the held bundles
  // Recent cancels: bundle (index -1: the whole group) -> the sequence of its latest cancel,
  // and the order they came in (oldest first) to forget the oldest.
  std::map<BundleKey, uint64_t> cancelled_ ABSL_GUARDED_BY(mu_);
  std::deque<std::pair<BundleKey, uint64_t>> cancelled_order_ ABSL_GUARDED_BY(mu_);
  std::map<WorkerId, WorkerRecord> workers_ ABSL_GUARDED_BY(mu_);
  std::deque<WorkerId> exited_order_ ABSL_GUARDED_BY(mu_);  // oldest exit first
};

}  // namespace tessera
