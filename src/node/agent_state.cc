#include "node/agent_state.h"

#include <algorithm>
#include <climits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/ignore_status.h"
#include "base/status_macros.h"
#include "base/string_util.h"
#include "hardware/node_label_keys.h"

namespace tessera {
namespace {

// The agent's view holds one node that never changes shape, so a parked infeasible request
// would never be re-examined: every decision uses one request id, which keeps the scheduler's
// parking lot at one entry.
const RequestId kLocalRequest(1);

// Exited workers kept for ListWorkers and late WatchWorker calls; older ones are forgotten.
constexpr size_t kExitedWorkersKept = 1000;

// Cancels remembered against late prepares. A late prepare is one in flight when its cancel
// came, so a few thousand cover every call a head can have in flight; what one still leaves
// behind is released by the head's reconciliation.
constexpr size_t kCancelsKept = 4096;

// The index a whole-group cancel is remembered under.
constexpr int kWholeGroup = -1;

}  // namespace

std::string BundleKeyName(const BundleKey& key) { return absl::StrCat(key.group, "/", key.index); }

LeaseNextStep NextStepAfterLocal(const LocalDecision& decision, int hops, int max_hops) {
  if (decision.status == ScheduleStatus::kPlaced) return LeaseNextStep::kGranted;
  if (hops >= max_hops) return LeaseNextStep::kAnswerHere;
  return LeaseNextStep::kAskHead;
}

absl::StatusOr<std::unique_ptr<AgentState>> AgentState::Create(NodeId id, NodeHardware hardware,
                                                               AgentStateOptions options) {
  if (id.value().empty()) return absl::InvalidArgumentError("node id is empty");
  if (absl::Status valid = ValidateLabelValue(id.value()); !valid.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("node id ", Quote(id.value()), ": ", valid.message()));
  }
  NodeSpec spec = NodeSpecFromHardware(id, hardware);
  spec.labels[std::string(labels::kNodeId)] = id.value();
  std::unique_ptr<AgentState> state(
      new AgentState(std::move(id), std::move(hardware), spec, std::move(options)));
  absl::MutexLock lock(&state->mu_);
  TESSERA_ASSIGN_OR_RETURN(state->node_, state->view_.AddNode(std::move(spec)));
  state->scheduler_ = std::make_unique<TaskScheduler>(&state->view_);
  state->ledger_ = std::make_unique<BundleLedger>(&state->view_);
  return state;
}

AgentState::AgentState(NodeId id, NodeHardware hardware, NodeSpec spec, AgentStateOptions options)
    : node_id_(std::move(id)),
      hardware_(std::move(hardware)),
      spec_(std::move(spec)),
      options_(std::move(options)) {}

LeaseRecord AgentState::RecordLease(const LeaseAsk& ask, Allocation allocation,
                                    std::optional<BundleKey> bundle) {
  const int64_t n = next_id_++;
  LeaseRecord lease;
  lease.id = LeaseId(absl::StrCat("l-", options_.id_prefix, "-", n));
  lease.worker = WorkerId(absl::StrCat("w-", options_.id_prefix, "-", n));
  lease.job_id = ask.job_id;
  lease.allocation = std::move(allocation);
  lease.bundle = std::move(bundle);
  WorkerRecord worker;
  worker.id = lease.worker;
  worker.lease = lease.id;
  worker.job_id = lease.job_id;
  worker.allocation = lease.allocation;
  worker.bundle = lease.bundle;
  workers_.emplace(worker.id, std::move(worker));
  leases_.emplace(lease.id, lease);
  return lease;
}

absl::StatusOr<LocalDecision> AgentState::TryLease(const LeaseAsk& ask) {
  SchedulingRequest request;
  request.id = kLocalRequest;
  request.resources = ask.resources;
  request.selectors = ask.selectors;
  request.strategy = ask.strategy;
  request.affinity = ask.affinity;
  request.local_node = node_id_;
  TESSERA_RETURN_IF_ERROR(ValidateSchedulingRequest(request));

  absl::MutexLock lock(&mu_);
  if (ask.bundle.has_value()) return TryBundleLease(ask);
  TESSERA_ASSIGN_OR_RETURN(ScheduleResult result, scheduler_->Schedule(request));
  LocalDecision decision;
  decision.status = result.status;
  if (result.status != ScheduleStatus::kPlaced) {
    decision.explanation = absl::StrCat("on node ", node_id_.value(), ": ", result.explanation);
    return decision;
  }
  decision.lease = RecordLease(ask, std::move(result.placement->allocation), std::nullopt);
  IgnoreStatus(view_.SetHolder(decision.lease->allocation.id,
                               Holder{HolderKind::kLease, decision.lease->id.value()}),
               "cannot fail: the allocation was just made");
  return decision;
}

absl::StatusOr<LocalDecision> AgentState::TryBundleLease(const LeaseAsk& ask) {
  const BundleTarget& target = *ask.bundle;
  LocalDecision decision;
  const bool held = target.bundle < 0
                        ? !ledger_->BundlesOf(target.group).empty()
                        : ledger_->ReservationOf(target.group, target.bundle).has_value();
  if (!held) {
    // Another agent holds it (or nobody does): the head knows which.
    decision.status = ScheduleStatus::kPending;
    decision.explanation = target.bundle < 0
                               ? absl::StrCat("node ", node_id_.value(),
                                              " holds no committed bundle of ", target.group)
                               : absl::StrCat("node ", node_id_.value(), " does not hold bundle ",
                                              target.bundle, " of ", target.group);
    return decision;
  }
  ScheduleResult result = ledger_->Allocate(target, ask.resources);
  decision.status = result.status;
  if (result.status != ScheduleStatus::kPlaced) {
    decision.explanation = absl::StrCat("on node ", node_id_.value(), ": ", result.explanation);
    return decision;
  }
  Allocation allocation = std::move(result.placement->allocation);
  const AllocationId ledger_id = allocation.id;
  const int bundle = result.placement->bundle >= 0 ? result.placement->bundle : target.bundle;
  LeaseRecord lease = RecordLease(ask, std::move(allocation), BundleKey{target.group, bundle});
  bundle_leases_.emplace(lease.id, ledger_id);
  IgnoreStatus(ledger_->SetHolder(ledger_id, Holder{HolderKind::kLease, lease.id.value()}),
               "cannot fail: the allocation was just made");
  decision.lease = std::move(lease);
  return decision;
}

absl::StatusOr<Allocation> AgentState::ReleaseLease(const LeaseId& lease) {
  absl::MutexLock lock(&mu_);
  return ReleaseLeaseLocked(lease);
}

absl::StatusOr<Allocation> AgentState::ReleaseLeaseLocked(const LeaseId& lease) {
  auto it = leases_.find(lease);
  if (it == leases_.end()) {
    return absl::NotFoundError(absl::StrCat("lease ", lease.value(), " is not held"));
  }
  Allocation allocation = it->second.allocation;
  if (auto b = bundle_leases_.find(lease); b != bundle_leases_.end()) {
    IgnoreStatus(ledger_->Release(b->second),
                 "the bundle may be gone already (cancelled): then nothing is left to give back");
    bundle_leases_.erase(b);
  } else {
    TESSERA_ASSIGN_OR_RETURN(allocation, view_.Release(allocation.id));
  }
  leases_.erase(it);
  return allocation;
}

absl::Status AgentState::WorkerStarted(const WorkerId& worker, int pid,
                                       std::vector<std::string> argv,
                                       std::map<std::string, std::string> isolation_env,
                                       std::string stdout_path, std::string stderr_path) {
  absl::MutexLock lock(&mu_);
  auto it = workers_.find(worker);
  if (it == workers_.end()) {
    return absl::NotFoundError(absl::StrCat("worker ", worker.value(), " is not known"));
  }
  WorkerRecord& w = it->second;
  w.pid = pid;
  w.argv = std::move(argv);
  w.isolation_env = std::move(isolation_env);
  w.stdout_path = std::move(stdout_path);
  w.stderr_path = std::move(stderr_path);
  // The exit may have been reported before the start was recorded (a very short command).
  if (w.state == WorkerState::kStarting) w.state = WorkerState::kRunning;
  return absl::OkStatus();
}

void AgentState::WorkerFailedToStart(const WorkerId& worker, std::string reason) {
  WorkerExitInfo exit;
  exit.exit_code = -1;
  exit.reason = std::move(reason);
  IgnoreStatus(WorkerExited(worker, std::move(exit)),
               "NotFound only for a worker never recorded: there is nothing to mark");
}

absl::Status AgentState::WorkerExited(const WorkerId& worker, WorkerExitInfo exit) {
  absl::MutexLock lock(&mu_);
  auto it = workers_.find(worker);
  if (it == workers_.end()) {
    return absl::NotFoundError(absl::StrCat("worker ", worker.value(), " is not known"));
  }
  WorkerRecord& w = it->second;
  if (w.state == WorkerState::kExited) return absl::OkStatus();
  w.state = WorkerState::kExited;
  w.exit = std::move(exit);
  if (!w.kill_cause.empty()) w.exit->reason = absl::StrCat(w.exit->reason, ", ", w.kill_cause);
  if (!w.exit->device_messages.empty()) {
    w.exit->reason = absl::StrCat(w.exit->reason, "; device messages: ", w.exit->device_messages);
  }
  w.exit->bundle_removed = w.killed_for_bundle;
  IgnoreStatus(ReleaseLeaseLocked(w.lease),
               "the lease may be gone already: its bundle was cancelled while the worker ran");

  // Forget the oldest exited workers beyond the cap.
  exited_order_.push_back(worker);
  while (exited_order_.size() > kExitedWorkersKept) {
    workers_.erase(exited_order_.front());
    exited_order_.pop_front();
  }
  return absl::OkStatus();
}

absl::Status AgentState::ReturnLease(const WorkerId& worker) {
  absl::MutexLock lock(&mu_);
  auto it = workers_.find(worker);
  if (it == workers_.end()) {
    return absl::NotFoundError(absl::StrCat("worker ", worker.value(), " is not known"));
  }
  WorkerRecord& w = it->second;
  if (w.state == WorkerState::kExited) {
    return absl::FailedPreconditionError(absl::StrCat("worker ", worker.value(), " has exited"));
  }
  if (w.lease_returned || !leases_.contains(w.lease)) {
    return absl::FailedPreconditionError(
        absl::StrCat("worker ", worker.value(), " holds no lease"));
  }
  if (!w.allocation.devices.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("worker ", worker.value(), " keeps its lease: its process holds devices"));
  }
  TESSERA_RETURN_IF_ERROR(ReleaseLeaseLocked(w.lease).status());
  w.lease_returned = true;
  w.allocation = Allocation{};
  return absl::OkStatus();
}

void AgentState::NoteKill(const WorkerId& worker, std::string cause, bool bundle_removed) {
  absl::MutexLock lock(&mu_);
  auto it = workers_.find(worker);
  if (it == workers_.end() || it->second.state == WorkerState::kExited) return;
  if (it->second.kill_cause.empty()) {
    it->second.kill_cause = std::move(cause);
    it->second.killed_for_bundle = bundle_removed;
  }
}

std::optional<WorkerRecord> AgentState::FindWorker(const WorkerId& worker) const {
  absl::MutexLock lock(&mu_);
  auto it = workers_.find(worker);
  if (it == workers_.end()) return std::nullopt;
  return it->second;
}

std::vector<WorkerRecord> AgentState::Workers() const {
  absl::MutexLock lock(&mu_);
  std::vector<WorkerRecord> out;
  out.reserve(workers_.size());
  for (const auto& [id, w] : workers_) out.push_back(w);
  return out;
}

int AgentState::running_workers() const {
  absl::MutexLock lock(&mu_);
  int n = 0;
  for (const auto& [id, w] : workers_) n += w.state != WorkerState::kExited;
  return n;
}

bool AgentState::AwaitWorkerExit(const WorkerId& worker, absl::Duration timeout) const {
  absl::MutexLock lock(&mu_);
  bool known = true;
  auto exited = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto it = workers_.find(worker);
    known = it != workers_.end();
    return !known || it->second.state == WorkerState::kExited;
  };
  mu_.AwaitWithTimeout(absl::Condition(&exited), timeout);
  if (!known) return false;
  auto it = workers_.find(worker);
  return it != workers_.end() && it->second.state == WorkerState::kExited;
}

uint64_t AgentState::BundleWatermark() const {
  absl::MutexLock lock(&mu_);
  return bundle_sequence_;
}

absl::Status AgentState::PrepareBundles(const std::string& group,
                                        const std::vector<BundleAsk>& bundles,
                                        const PrepareGuard& guard) {
  if (group.empty()) return absl::InvalidArgumentError("placement_group is empty");
  for (size_t i = 0; i < bundles.size(); ++i) {
    if (bundles[i].index < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("bundles[", i, "].bundle_index ", bundles[i].index, " is negative"));
    }
    for (size_t j = 0; j < i; ++j) {
      if (bundles[j].index == bundles[i].index) {
        return absl::InvalidArgumentError(
            absl::StrCat("bundle ", bundles[i].index, " of ", group, " is listed twice"));
      }
    }
  }
  absl::MutexLock lock(&mu_);
  if (guard.arrived_at.has_value()) {
    auto cancelled_since = [&](int index) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      auto it = cancelled_.find(BundleKey{group, index});
      return it != cancelled_.end() && it->second > *guard.arrived_at;
    };
    const bool group_cancelled = cancelled_since(kWholeGroup);
    for (const BundleAsk& ask : bundles) {
      if (group_cancelled || cancelled_since(ask.index)) {
        return absl::AbortedError(absl::StrCat(
            "bundle ", BundleKeyName(BundleKey{group, ask.index}), " was cancelled on node ",
            node_id_.value(), " after this prepare was sent; nothing is held"));
      }
    }
  }
  if (guard.abandoned && guard.abandoned()) {
    return absl::DeadlineExceededError(
        absl::StrCat("the prepare of ", group, " on node ", node_id_.value(),
                     " came after its deadline; the head gave up on it, so nothing is held"));
  }
  std::vector<BundleKey> taken;  // by this call, rolled back on error
  auto roll_back = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    for (const BundleKey& key : taken) {
      auto it = bundles_.find(key);
      IgnoreStatus(view_.Release(it->second.allocation.id), "cannot fail: this call took it");
      bundles_.erase(it);
    }
  };
  for (const BundleAsk& ask : bundles) {
    BundleKey key{group, ask.index};
    if (auto it = bundles_.find(key); it != bundles_.end()) {
      const Allocation& held = it->second.allocation;
      std::vector<DeviceGrant> wanted = ask.devices;
      std::sort(wanted.begin(), wanted.end(),
                [](const DeviceGrant& a, const DeviceGrant& b) { return a.resource < b.resource; });
      if (held.resources == ask.resources && held.devices == wanted) continue;  // a retry
      roll_back();
      return absl::AlreadyExistsError(
          absl::StrCat("bundle ", BundleKeyName(key), " is held on node ", node_id_.value(),
                       " with another reservation (", held.resources.ToString(), ")"));
    }
    auto allocation = view_.AllocateExact(node_, ask.resources, ask.devices);
    if (!allocation.ok()) {
      roll_back();
      return absl::Status(allocation.status().code(),
                          absl::StrCat("bundle ", BundleKeyName(key), " on node ", node_id_.value(),
                                       ": ", allocation.status().message()));
    }
    IgnoreStatus(view_.SetHolder(allocation->id, Holder{HolderKind::kPlacementGroup, group}),
                 "cannot fail: the allocation was just made");
    bundles_.emplace(key, BundleRecord{key, *std::move(allocation), false});
    taken.push_back(std::move(key));
  }
  // Taken, or confirmed by a retry: a new generation either way.
  const uint64_t generation = ++bundle_sequence_;
  for (const BundleAsk& ask : bundles) generations_[BundleKey{group, ask.index}] = generation;
  return absl::OkStatus();
}

void AgentState::CommitBundles(const std::string& group, const std::vector<int>& indices) {
  absl::MutexLock lock(&mu_);
  for (int index : indices) {
    auto it = bundles_.find(BundleKey{group, index});
    if (it == bundles_.end() || it->second.committed) continue;
    // Leases are served from a bundle only once the whole group is committed.
    if (ledger_->AddBundle(group, index, it->second.allocation).ok()) it->second.committed = true;
  }
}

void AgentState::ReleaseBundleLocked(const BundleKey& key, std::vector<WorkerId>& running) {
  auto it = bundles_.find(key);
  if (it == bundles_.end()) return;
  // What the ledger served from it comes back unused: those leases end below.
  if (it->second.committed) ledger_->RemoveBundles(key.group, key.index);
  IgnoreStatus(view_.Release(it->second.allocation.id),
               "cannot fail: the bundle's record held it until now");
  bundles_.erase(it);
  generations_.erase(key);
  // The leases inside it end now; their workers are killed by the caller and their exits find
  // the lease gone.
  for (auto lease = leases_.begin(); lease != leases_.end();) {
    if (lease->second.bundle != key) {
      ++lease;
      continue;
    }
    bundle_leases_.erase(lease->first);
    if (auto w = workers_.find(lease->second.worker);
        w != workers_.end() && w->second.state != WorkerState::kExited) {
      running.push_back(w->first);
    }
    lease = leases_.erase(lease);
  }
}

std::vector<WorkerId> AgentState::CancelBundles(const std::string& group,
                                                const std::vector<int>& indices) {
  absl::MutexLock lock(&mu_);
  std::vector<BundleKey> keys;
  if (indices.empty()) {
    for (auto it = bundles_.lower_bound(BundleKey{group, INT_MIN});
         it != bundles_.end() && it->first.group == group; ++it) {
      keys.push_back(it->first);
    }
  } else {
    for (int index : indices) keys.push_back(BundleKey{group, index});
  }
  // Remembered before anything else: a prepare that arrived before this cancel takes nothing.
  const uint64_t sequence = ++bundle_sequence_;
  auto remember = [&](BundleKey key) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    cancelled_[key] = sequence;
    cancelled_order_.emplace_back(std::move(key), sequence);
  };
  if (indices.empty()) {
    remember(BundleKey{group, kWholeGroup});
  } else {
    for (const BundleKey& key : keys) remember(key);
  }
  while (cancelled_order_.size() > kCancelsKept) {
    const auto& [key, seq] = cancelled_order_.front();
    // Forgotten unless cancelled again since.
    if (auto it = cancelled_.find(key); it != cancelled_.end() && it->second == seq) {
      cancelled_.erase(it);
    }
    cancelled_order_.pop_front();
  }
  std::vector<WorkerId> running;
  for (const BundleKey& key : keys) ReleaseBundleLocked(key, running);
  return running;
}

absl::StatusOr<std::vector<WorkerId>> AgentState::ReleaseBundleIfGeneration(const BundleKey& key,
                                                                            uint64_t generation) {
  absl::MutexLock lock(&mu_);
  auto it = generations_.find(key);
  if (it == generations_.end()) {
    return absl::NotFoundError(
        absl::StrCat("bundle ", BundleKeyName(key), " is not held on node ", node_id_.value()));
  }
  if (generation != kAnyGeneration && it->second != generation) {
    return absl::FailedPreconditionError(absl::StrCat(
        "bundle ", BundleKeyName(key), " on node ", node_id_.value(), " is at generation ",
        it->second, ", not ", generation, ": it was prepared again since"));
  }
  std::vector<WorkerId> running;
  ReleaseBundleLocked(key, running);
  return running;
}

bool AgentState::HoldsLease(const LeaseId& lease) const {
  absl::MutexLock lock(&mu_);
  return leases_.contains(lease);
}

std::vector<LeaseRecord> AgentState::Leases() const {
  absl::MutexLock lock(&mu_);
  std::vector<LeaseRecord> out;
  out.reserve(leases_.size());
  for (const auto& [id, lease] : leases_) out.push_back(lease);
  return out;
}

std::vector<BundleRecord> AgentState::Bundles() const {
  absl::MutexLock lock(&mu_);
  std::vector<BundleRecord> out;
  out.reserve(bundles_.size());
  for (const auto& [key, bundle] : bundles_) out.push_back(bundle);
  return out;
}

std::vector<HeldBundleState> AgentState::BundleStates() const {
  absl::MutexLock lock(&mu_);
  std::vector<HeldBundleState> out;
  out.reserve(bundles_.size());
  for (const auto& [key, bundle] : bundles_) {
    auto generation = generations_.find(key);
    out.push_back(
        HeldBundleState{bundle, generation == generations_.end() ? 0 : generation->second});
  }
  return out;
}

ResourceSet AgentState::Available() const {
  absl::MutexLock lock(&mu_);
  return view_.node(node_).available;
}

}  // namespace tessera
