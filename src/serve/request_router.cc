#include "serve/request_router.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/log_line.h"

namespace tessera::serve {

// Probe callbacks hold this (shared) rather than the router, so that one arriving after the
// router is gone finds nullptr instead of freed memory. Lock order: mu, then the router's mu_.
struct PowerOfTwoChoicesRouter::ReplyInbox {
  absl::Mutex mu;
  PowerOfTwoChoicesRouter* router ABSL_GUARDED_BY(mu) = nullptr;
};

namespace {

// A request still unrouted after every this many failed attempts is logged (as Ray warns).
constexpr int kWarnEveryAttempts = 50;

absl::Status CheckPositive(const char* name, absl::Duration value) {
  if (value > absl::ZeroDuration()) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(name, " must be positive, got ", absl::FormatDuration(value)));
}

absl::Status CheckOptions(const RouterOptions& options) {
  if (options.clock == nullptr) return absl::InvalidArgumentError("the router needs a clock");
  if (options.prober == nullptr) {
    return absl::InvalidArgumentError("the router needs a replica prober");
  }
  if (options.max_queued_requests != -1 && options.max_queued_requests < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "max_queued_requests must be -1 or at least 1, got ", options.max_queued_requests));
  }
  for (const auto& [name, value] :
       {std::pair{"queue_len_cache_timeout", options.queue_len_cache_timeout},
        std::pair{"probe_deadline", options.probe_deadline},
        std::pair{"max_probe_deadline", options.max_probe_deadline},
        std::pair{"initial_backoff", options.initial_backoff},
        std::pair{"max_backoff", options.max_backoff}}) {
    if (absl::Status status = CheckPositive(name, value); !status.ok()) return status;
  }
  if (!(options.backoff_multiplier >= 1.0) || !std::isfinite(options.backoff_multiplier)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "backoff_multiplier must be a number of at least 1, got ", options.backoff_multiplier));
  }
  if (options.multiplexed_matching_timeout < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("multiplexed_matching_timeout must not be negative, got ",
                     absl::FormatDuration(options.multiplexed_matching_timeout)));
  }
  if (options.max_routing_tasks_cap < 1) {
    return absl::InvalidArgumentError(absl::StrCat("max_routing_tasks_cap must be at least 1, got ",
                                                   options.max_routing_tasks_cap));
  }
  return absl::OkStatus();
}

absl::Status CheckReplicas(const std::vector<RouterReplica>& replicas) {
  absl::flat_hash_set<std::string> seen;
  for (const RouterReplica& replica : replicas) {
    if (replica.replica_id.empty()) {
      return absl::InvalidArgumentError("a replica has an empty replica_id");
    }
    if (!seen.insert(replica.replica_id).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("replica ", replica.replica_id, " is listed twice"));
    }
    if (replica.max_ongoing_requests < 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "replica ", replica.replica_id, ": max_ongoing_requests must be at least 1, got ",
          replica.max_ongoing_requests));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ReplicaDiedError(const std::string& replica_id) {
  return absl::NotFoundError(absl::StrCat("the actor of replica ", replica_id, " died"));
}

absl::Status ReplicaUnavailableError(const std::string& replica_id) {
  return absl::UnavailableError(absl::StrCat("replica ", replica_id, " is unavailable"));
}

absl::StatusOr<std::unique_ptr<PowerOfTwoChoicesRouter>> PowerOfTwoChoicesRouter::Create(
    RouterOptions options) {
  if (absl::Status status = CheckOptions(options); !status.ok()) return status;
  std::unique_ptr<PowerOfTwoChoicesRouter> router(new PowerOfTwoChoicesRouter(std::move(options)));
  ReplyInbox* inbox = router->inbox_.get();
  {
    absl::MutexLock lock(&inbox->mu);
    inbox->router = router.get();
  }
  router->thread_ = std::thread([self = router.get()] { self->Run(); });
  return router;
}

PowerOfTwoChoicesRouter::PowerOfTwoChoicesRouter(RouterOptions options)
    : options_(std::move(options)), inbox_(std::make_shared<ReplyInbox>()), rng_(options_.seed) {}

PowerOfTwoChoicesRouter::~PowerOfTwoChoicesRouter() {
  ReplyInbox* inbox = inbox_.get();
  {
    // Waits for a probe callback in progress; later ones find no router.
    absl::MutexLock lock(&inbox->mu);
    inbox->router = nullptr;
  }
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

absl::Status PowerOfTwoChoicesRouter::UpdateReplicas(std::vector<RouterReplica> replicas) {
  if (absl::Status status = CheckReplicas(replicas); !status.ok()) return status;
  absl::MutexLock lock(&mu_);
  replicas_ = std::move(replicas);
  RebuildIndicesLocked();
  for (auto it = cache_.begin(); it != cache_.end();) {
    if (replica_index_.contains(it->first)) {
      ++it;
    } else {
      cache_.erase(it++);
    }
  }
  wake_ = true;
  return absl::OkStatus();
}

PowerOfTwoChoicesRouter::Ticket PowerOfTwoChoicesRouter::Route(RouteRequest request,
                                                               RouteCallback callback) {
  if (!callback) return 0;
  absl::MutexLock lock(&mu_);
  const int64_t queued = static_cast<int64_t>(pending_.size());
  if (options_.max_queued_requests != -1 && queued >= options_.max_queued_requests) {
    // Ray's BackPressureError, word for word.
    deliveries_.push_back({std::move(callback),
                           absl::ResourceExhaustedError(absl::StrCat(
                               "Request dropped due to backpressure (num_queued_requests=", queued,
                               ", max_queued_requests=", options_.max_queued_requests, ")."))});
    wake_ = true;
    return next_ticket_++;
  }
  return EnqueueLocked(std::move(request), std::move(callback), /*at_front=*/false);
}

bool PowerOfTwoChoicesRouter::Cancel(Ticket ticket) {
  absl::MutexLock lock(&mu_);
  auto found = pending_by_ticket_.find(ticket);
  if (found == pending_by_ticket_.end()) return false;
  const PendingList::iterator pending = found->second;
  deliveries_.push_back(
      {std::move(pending->callback),
       absl::CancelledError(absl::StrCat("request ", pending->request.request_id,
                                         " was cancelled before a replica was assigned to it"))});
  RemovePendingLocked(pending);
  wake_ = true;
  return true;
}

void PowerOfTwoChoicesRouter::OnRequestFinished(const std::string& replica_id) {
  absl::MutexLock lock(&mu_);
  const absl::Time now = options_.clock->Now();
  // As Ray's decrement: only a valid entry goes down (an expired one is probed anew anyway).
  const std::optional<int64_t> cached = CachedQueueLenLocked(replica_id, now);
  if (!cached.has_value()) return;
  cache_[replica_id] = CacheEntry{std::max<int64_t>(0, *cached - 1), now};
}

PowerOfTwoChoicesRouter::Ticket PowerOfTwoChoicesRouter::OnReplicaRejected(
    const std::string& replica_id, int64_t queue_len, RouteRequest request,
    RouteCallback callback) {
  if (!callback) return 0;
  absl::MutexLock lock(&mu_);
  // The replica's own count replaces ours (not a decrement: the request never ran there).
  if (queue_len >= 0 && replica_index_.contains(replica_id)) {
    cache_[replica_id] = CacheEntry{queue_len, options_.clock->Now()};
  }
  return EnqueueLocked(std::move(request), std::move(callback), /*at_front=*/true);
}

void PowerOfTwoChoicesRouter::OnReplicaDied(const std::string& replica_id) {
  absl::MutexLock lock(&mu_);
  DropReplicaLocked(replica_id);
}

int64_t PowerOfTwoChoicesRouter::NumQueued() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(pending_.size());
}

bool PowerOfTwoChoicesRouter::HasQueuedWorkWithoutReplicas() const {
  absl::MutexLock lock(&mu_);
  return !pending_.empty() && replicas_.empty();
}

RouterStats PowerOfTwoChoicesRouter::Stats() const {
  absl::MutexLock lock(&mu_);
  const absl::Time now = options_.clock->Now();
  RouterStats stats;
  stats.num_router_requests_total = routed_total_;
  stats.deployment_queued_queries = static_cast<int64_t>(pending_.size());
  stats.num_scheduling_tasks = static_cast<int64_t>(tasks_.size());
  for (const auto& [id, task] : tasks_) {
    if (task.in_backoff) ++stats.num_scheduling_tasks_in_backoff;
    if (task.phase == Phase::kBackoff) {
      stats.next_retry_at = std::min(stats.next_retry_at, task.wake_at);
    }
  }
  for (const auto& [replica_id, entry] : cache_) {
    const std::optional<int64_t> cached = CachedQueueLenLocked(replica_id, now);
    if (cached.has_value()) stats.request_router_queue_len[replica_id] = *cached;
  }
  stats.probes_sent = probes_sent_;
  stats.backoff_rounds = backoff_rounds_;
  stats.num_replicas = static_cast<int64_t>(replicas_.size());
  return stats;
}

// ---------------------------------------------------------------------------------------------
// The router's thread.

void PowerOfTwoChoicesRouter::Run() {
  bool stopped = false;
  while (!stopped) {
    std::vector<OutgoingProbe> probes;
    std::vector<Delivery> deliveries;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return wake_ || stopping_; };
      options_.clock->AwaitWithDeadline(mu_, absl::Condition(&ready), NextDeadlineLocked());
      wake_ = false;
      if (stopping_) {
        CancelAllLocked();
        stopped = true;
      } else {
        PassLocked();
      }
      probes.swap(outgoing_);
      deliveries.swap(deliveries_);
    }
    if (!stopped) SendProbes(std::move(probes));
    for (Delivery& delivery : deliveries) delivery.callback(std::move(delivery.result));
  }
}

absl::Time PowerOfTwoChoicesRouter::NextDeadlineLocked() const {
  absl::Time next = absl::InfiniteFuture();
  for (const auto& [id, task] : tasks_) {
    if (task.phase == Phase::kBackoff) next = std::min(next, task.wake_at);
    if (task.phase == Phase::kProbing) next = std::min(next, task.round_deadline);
  }
  // Background probes expire too (so that their replica may be probed again).
  for (const auto& [id, probe] : outstanding_) next = std::min(next, probe.deadline);
  return next;
}

void PowerOfTwoChoicesRouter::PassLocked() {
  const absl::Time now = options_.clock->Now();
  SweepExpiredProbesLocked(now);
  while (tasks_.size() < TargetTasksLocked()) {
    const uint64_t id = next_task_id_++;
    tasks_[id].id = id;
  }
  for (auto it = tasks_.begin(); it != tasks_.end();) {
    if (RunTaskLocked(it->second, now)) {
      ++it;
    } else {
      it = tasks_.erase(it);
    }
  }
}

void PowerOfTwoChoicesRouter::CancelAllLocked() {
  for (Pending& pending : pending_) {
    deliveries_.push_back({std::move(pending.callback),
                           absl::CancelledError(absl::StrCat("the router shut down before request ",
                                                             pending.request.request_id,
                                                             " was assigned a replica"))});
  }
  pending_.clear();
  pending_by_ticket_.clear();
  pending_by_model_.clear();
  untaken_.clear();
  tasks_.clear();
  outstanding_.clear();
  background_probed_.clear();
}

void PowerOfTwoChoicesRouter::SendProbes(std::vector<OutgoingProbe> probes) {
  for (OutgoingProbe& probe : probes) {
    std::shared_ptr<ReplyInbox> inbox = inbox_;
    options_.prober->Probe(probe.replica_id, probe.deadline,
                           [inbox, probe_id = probe.probe_id](absl::StatusOr<ProbeReply> reply) {
                             ReplyInbox* box = inbox.get();
                             absl::MutexLock lock(&box->mu);
                             if (box->router != nullptr) {
                               box->router->OnProbeReply(probe_id, std::move(reply));
                             }
                           });
  }
}

void PowerOfTwoChoicesRouter::OnProbeReply(uint64_t probe_id, absl::StatusOr<ProbeReply> reply) {
  absl::MutexLock lock(&mu_);
  auto found = outstanding_.find(probe_id);
  if (found == outstanding_.end()) return;  // past its deadline already, or answered twice
  const OutstandingProbe probe = found->second;
  outstanding_.erase(found);
  if (probe.task_id == 0) background_probed_.erase(probe.replica_id);
  // An answer at or after the deadline counts as none, whether or not the thread has swept
  // the probe yet: what the clock says decides, not which thread ran first.
  if (options_.clock->Now() >= probe.deadline) return;
  const std::optional<int64_t> queue_len = ApplyProbeResultLocked(probe.replica_id, reply);
  wake_ = true;
  if (probe.task_id == 0) return;
  auto task = tasks_.find(probe.task_id);
  if (task == tasks_.end() || task->second.phase != Phase::kProbing ||
      task->second.round != probe.round) {
    return;
  }
  for (ProbeSlot& slot : task->second.slots) {
    if (slot.replica_id == probe.replica_id && !slot.answered) {
      slot.answered = true;
      slot.queue_len = queue_len;
      break;
    }
  }
}

std::optional<int64_t> PowerOfTwoChoicesRouter::ApplyProbeResultLocked(
    const std::string& replica_id, const absl::StatusOr<ProbeReply>& reply) {
  if (reply.ok()) {
    if (reply->queue_len < 0 || !replica_index_.contains(replica_id)) return std::nullopt;
    cache_[replica_id] = CacheEntry{reply->queue_len, options_.clock->Now()};
    return reply->queue_len;
  }
  if (absl::IsNotFound(reply.status())) {
    // The actor is gone for good (Ray's ActorDiedError); the controller replaces it.
    DropReplicaLocked(replica_id);
  } else if (absl::IsUnavailable(reply.status())) {
    // Maybe back soon (Ray's ActorUnavailableError): probe before trusting it again.
    cache_.erase(replica_id);
  }
  return std::nullopt;
}

// ---------------------------------------------------------------------------------------------
// Routing tasks.

size_t PowerOfTwoChoicesRouter::MaxTasksLocked() const {
  return std::min(static_cast<size_t>(options_.max_routing_tasks_cap), 2 * replicas_.size());
}

size_t PowerOfTwoChoicesRouter::TargetTasksLocked() const {
  return std::min(pending_.size(), MaxTasksLocked());
}

bool PowerOfTwoChoicesRouter::RunTaskLocked(RoutingTask& task, absl::Time now) {
  while (true) {
    switch (task.phase) {
      case Phase::kProbing:
        if (!RoundOverLocked(task, now)) return true;
        if (ConcludeRoundLocked(task, now)) {
          ServedLocked(task);
        } else {
          FailAttemptLocked(task, now);
        }
        break;
      case Phase::kBackoff:
        if (tasks_.size() > TargetTasksLocked()) return false;
        if (now < task.wake_at) return true;
        task.phase = Phase::kAttempt;
        break;
      case Phase::kNextRequest:
        if (tasks_.size() > TargetTasksLocked()) return false;
        TakeNextRequestLocked(task, now);
        break;
      case Phase::kAttempt:
        if (tasks_.size() > TargetTasksLocked()) return false;
        AttemptLocked(task, now);
        break;
    }
  }
}

void PowerOfTwoChoicesRouter::TakeNextRequestLocked(RoutingTask& task, absl::Time now) {
  task.context = RoutingContext{};
  task.context.started = now;
  while (!untaken_.empty()) {
    const Ticket ticket = untaken_.front();
    untaken_.pop_front();
    auto found = pending_by_ticket_.find(ticket);
    if (found == pending_by_ticket_.end()) continue;  // served or cancelled meanwhile
    const RouteRequest& request = found->second->request;
    task.context.has_request = true;
    task.context.request_id = request.request_id;
    task.context.model_id = request.multiplexed_model_id;
    break;
  }
  task.phase = Phase::kAttempt;
}

void PowerOfTwoChoicesRouter::AttemptLocked(RoutingTask& task, absl::Time now) {
  task.should_backoff = true;
  const Sample sample = DrawTwoLocked(CandidatesLocked(task, now));
  if (sample.count == 0) {
    FailAttemptLocked(task, now);
    return;
  }
  // A cached length at or over the cap is probed again rather than trusted: otherwise a full
  // replica would look full until its entry expired, even after it drained.
  std::optional<size_t> best;
  int64_t lowest = 0;
  std::vector<std::string> to_probe;
  for (int k = 0; k < sample.count; ++k) {
    const RouterReplica& replica = replicas_[sample.index[k]];
    const std::optional<int64_t> cached = CachedQueueLenLocked(replica.replica_id, now);
    if (!cached.has_value() || *cached >= replica.max_ongoing_requests) {
      to_probe.push_back(replica.replica_id);
    } else if (!best.has_value() || *cached < lowest) {
      best = sample.index[k];
      lowest = *cached;
    }
  }
  const absl::Time deadline = now + ProbeDeadlineFor(task.failed_attempts);
  if (best.has_value()) {
    // The others are probed in the background, so that the next choice weighs them too.
    for (const std::string& replica_id : to_probe) {
      if (background_probed_.insert(replica_id).second) {
        SendProbeLocked(replica_id, deadline, /*task_id=*/0, /*round=*/0);
      }
    }
    const std::string chosen = replicas_[*best].replica_id;
    AssignLocked(chosen, task.context.model_id, now);
    ServedLocked(task);
    return;
  }
  ++task.round;
  task.round_deadline = deadline;
  task.slots.clear();
  for (const std::string& replica_id : to_probe) {
    task.slots.push_back(ProbeSlot{replica_id});
    SendProbeLocked(replica_id, deadline, task.id, task.round);
  }
  task.phase = Phase::kProbing;
}

bool PowerOfTwoChoicesRouter::RoundOverLocked(const RoutingTask& task, absl::Time now) const {
  if (now >= task.round_deadline) return true;
  return std::all_of(task.slots.begin(), task.slots.end(),
                     [](const ProbeSlot& slot) { return slot.answered; });
}

bool PowerOfTwoChoicesRouter::ConcludeRoundLocked(RoutingTask& task, absl::Time now) {
  std::optional<std::string> best;
  int64_t lowest = 0;
  for (const ProbeSlot& slot : task.slots) {
    if (!slot.queue_len.has_value()) continue;  // no answer in time, or an error
    auto found = replica_index_.find(slot.replica_id);
    if (found == replica_index_.end()) continue;  // left the replica set since
    if (*slot.queue_len >= replicas_[found->second].max_ongoing_requests) continue;
    if (!best.has_value() || *slot.queue_len < lowest) {
      best = slot.replica_id;
      lowest = *slot.queue_len;
    }
  }
  task.slots.clear();
  if (!best.has_value()) return false;
  AssignLocked(*best, task.context.model_id, now);
  return true;
}

void PowerOfTwoChoicesRouter::FailAttemptLocked(RoutingTask& task, absl::Time now) {
  ++task.failed_attempts;
  if (task.failed_attempts % kWarnEveryAttempts == 0) {
    std::string line =
        absl::StrCat("Failed to route request after ", task.failed_attempts, " attempts over ",
                     absl::ToDoubleSeconds(now - task.context.started), "s. Retrying.");
    if (task.context.has_request)
      absl::StrAppend(&line, " Request ID: ", task.context.request_id, ".");
    if (!task.context.model_id.empty()) {
      absl::StrAppend(&line, " Multiplexed model ID: ", task.context.model_id, ".");
    }
    LogLine(line);
  }
  // A same-node or same-zone try that failed moves on to the wider set at once.
  if (!task.should_backoff) {
    task.phase = Phase::kAttempt;
    return;
  }
  absl::Duration wait = absl::ZeroDuration();
  if (task.in_backoff) {
    wait = BackoffFor(task.backoff_sleeps++);
  } else {
    task.in_backoff = true;  // the first retry goes at once
  }
  task.wake_at = now + wait;
  task.phase = Phase::kBackoff;
  ++backoff_rounds_;
}

void PowerOfTwoChoicesRouter::ServedLocked(RoutingTask& task) {
  task.failed_attempts = 0;
  task.backoff_sleeps = 0;
  task.in_backoff = false;
  task.slots.clear();
  task.phase = Phase::kNextRequest;
}

// ---------------------------------------------------------------------------------------------
// Candidates.

const std::vector<size_t>& PowerOfTwoChoicesRouter::CandidatesLocked(RoutingTask& task,
                                                                     absl::Time now) {
  RoutingContext& context = task.context;
  if (!context.model_id.empty()) return MultiplexCandidatesLocked(context, now);
  if (context.has_request && options_.prefer_local_node && !context.tried_same_node &&
      !same_node_.empty()) {
    context.tried_same_node = true;
    task.should_backoff = false;
    return same_node_;
  }
  if (context.has_request && options_.prefer_local_az && !context.tried_same_az &&
      !same_az_.empty()) {
    context.tried_same_az = true;
    task.should_backoff = false;
    return same_az_;
  }
  return all_;
}

const std::vector<size_t>& PowerOfTwoChoicesRouter::MultiplexCandidatesLocked(
    RoutingContext& context, absl::Time now) {
  if (!context.multiplex_started.has_value()) {
    // Each request waits its own random time, so that requests queued together do not all
    // give up on the model's replicas at once.
    std::uniform_real_distribution<double> extra(0.0, 1.0);
    context.multiplex_started = now;
    context.multiplex_wait = options_.multiplexed_matching_timeout * (1.0 + extra(rng_));
  }
  if (now - *context.multiplex_started < context.multiplex_wait) {
    auto holders = model_holders_.find(context.model_id);
    if (holders != model_holders_.end()) return holders->second;
    // Loaded nowhere: waiting cannot help; a replica with the fewest models loads it.
    return fewest_models_;
  }
  if (!context.tried_fewest_models) {
    context.tried_fewest_models = true;
    return fewest_models_;
  }
  return all_;
}

PowerOfTwoChoicesRouter::Sample PowerOfTwoChoicesRouter::DrawTwoLocked(
    const std::vector<size_t>& candidates) {
  Sample sample;
  const size_t n = candidates.size();
  if (n == 0) return sample;
  if (n == 1) {
    sample.index[0] = candidates[0];
    sample.count = 1;
    return sample;
  }
  // Two distinct positions, each ordered pair equally likely: the second is drawn from the
  // n - 1 positions left, shifted past the first.
  std::uniform_int_distribution<size_t> first(0, n - 1);
  std::uniform_int_distribution<size_t> second(0, n - 2);
  const size_t i = first(rng_);
  size_t j = second(rng_);
  if (j >= i) ++j;
  sample.index = {candidates[i], candidates[j]};
  sample.count = 2;
  return sample;
}

absl::Duration PowerOfTwoChoicesRouter::ProbeDeadlineFor(int failed_attempts) const {
  const absl::Duration cap = std::max(options_.probe_deadline, options_.max_probe_deadline);
  absl::Duration deadline = options_.probe_deadline;
  for (int k = 0; k < failed_attempts && deadline < cap; ++k) deadline *= 2;
  return std::min(deadline, cap);
}

absl::Duration PowerOfTwoChoicesRouter::BackoffFor(int sleeps) const {
  absl::Duration backoff = options_.initial_backoff;
  for (int k = 0; k < sleeps && backoff < options_.max_backoff; ++k) {
    backoff = backoff * options_.backoff_multiplier;
  }
  return std::min(backoff, options_.max_backoff);
}

// ---------------------------------------------------------------------------------------------
// Probes, the cache, the replica set.

void PowerOfTwoChoicesRouter::SendProbeLocked(const std::string& replica_id, absl::Time deadline,
                                              uint64_t task_id, uint64_t round) {
  const uint64_t probe_id = next_probe_id_++;
  outstanding_[probe_id] = OutstandingProbe{replica_id, deadline, task_id, round};
  outgoing_.push_back(OutgoingProbe{probe_id, replica_id, deadline});
  ++probes_sent_;
}

void PowerOfTwoChoicesRouter::SweepExpiredProbesLocked(absl::Time now) {
  for (auto it = outstanding_.begin(); it != outstanding_.end();) {
    if (it->second.deadline > now) {
      ++it;
      continue;
    }
    if (it->second.task_id == 0) background_probed_.erase(it->second.replica_id);
    outstanding_.erase(it++);
  }
}

std::optional<int64_t> PowerOfTwoChoicesRouter::CachedQueueLenLocked(const std::string& replica_id,
                                                                     absl::Time now) const {
  auto found = cache_.find(replica_id);
  if (found == cache_.end()) return std::nullopt;
  if (now - found->second.updated > options_.queue_len_cache_timeout) return std::nullopt;
  return found->second.queue_len;
}

void PowerOfTwoChoicesRouter::RebuildIndicesLocked() {
  replica_index_.clear();
  all_.clear();
  same_node_.clear();
  same_az_.clear();
  fewest_models_.clear();
  model_holders_.clear();
  size_t fewest = 0;
  for (size_t i = 0; i < replicas_.size(); ++i) {
    const RouterReplica& replica = replicas_[i];
    replica_index_[replica.replica_id] = i;
    all_.push_back(i);
    if (!options_.self_node_id.empty() && replica.node_id == options_.self_node_id) {
      same_node_.push_back(i);
    }
    if (!options_.self_availability_zone.empty() &&
        replica.availability_zone == options_.self_availability_zone) {
      same_az_.push_back(i);
    }
    for (const std::string& model_id : replica.multiplexed_model_ids) {
      std::vector<size_t>& holders = model_holders_[model_id];
      // A model named twice by one replica must not make it a candidate twice.
      if (holders.empty() || holders.back() != i) holders.push_back(i);
    }
    const size_t models = replica.multiplexed_model_ids.size();
    if (i == 0 || models < fewest) fewest = models;
  }
  for (size_t i = 0; i < replicas_.size(); ++i) {
    if (replicas_[i].multiplexed_model_ids.size() == fewest) fewest_models_.push_back(i);
  }
}

void PowerOfTwoChoicesRouter::DropReplicaLocked(const std::string& replica_id) {
  auto found = replica_index_.find(replica_id);
  if (found == replica_index_.end()) return;
  replicas_.erase(replicas_.begin() + static_cast<std::ptrdiff_t>(found->second));
  cache_.erase(replica_id);
  RebuildIndicesLocked();
}

// ---------------------------------------------------------------------------------------------
// Waiting requests.

PowerOfTwoChoicesRouter::Ticket PowerOfTwoChoicesRouter::EnqueueLocked(RouteRequest request,
                                                                       RouteCallback callback,
                                                                       bool at_front) {
  const Ticket ticket = next_ticket_++;
  const PendingList::iterator it =
      pending_.insert(at_front ? pending_.begin() : pending_.end(), Pending{});
  it->ticket = ticket;
  it->request = std::move(request);
  it->callback = std::move(callback);
  if (!it->request.multiplexed_model_id.empty()) {
    std::list<Ticket>& of_model = pending_by_model_[it->request.multiplexed_model_id];
    it->model_position = of_model.insert(at_front ? of_model.begin() : of_model.end(), ticket);
  }
  pending_by_ticket_[ticket] = it;
  if (at_front) {
    untaken_.push_front(ticket);
  } else {
    untaken_.push_back(ticket);
  }
  wake_ = true;
  return ticket;
}

void PowerOfTwoChoicesRouter::RemovePendingLocked(PendingList::iterator it) {
  if (!it->request.multiplexed_model_id.empty()) {
    auto of_model = pending_by_model_.find(it->request.multiplexed_model_id);
    if (of_model != pending_by_model_.end()) {
      of_model->second.erase(it->model_position);
      if (of_model->second.empty()) pending_by_model_.erase(of_model);
    }
  }
  pending_by_ticket_.erase(it->ticket);
  pending_.erase(it);
  // Tickets left untaken now name no request: drop them rather than skip them one by one.
  if (pending_.empty()) untaken_.clear();
}

void PowerOfTwoChoicesRouter::AssignLocked(const std::string& replica_id,
                                           const std::string& model_id, absl::Time now) {
  PendingList::iterator chosen = pending_.end();
  if (!model_id.empty()) {
    auto of_model = pending_by_model_.find(model_id);
    if (of_model != pending_by_model_.end() && !of_model->second.empty()) {
      auto found = pending_by_ticket_.find(of_model->second.front());
      if (found != pending_by_ticket_.end()) chosen = found->second;
    }
  }
  if (chosen == pending_.end()) {
    if (pending_.empty()) return;  // every request was cancelled meanwhile
    chosen = pending_.begin();
  }
  deliveries_.push_back({std::move(chosen->callback), replica_id});
  RemovePendingLocked(chosen);
  ++routed_total_;
  // Counted up on send (an expired entry counts from 0, as Ray's does).
  const std::optional<int64_t> cached = CachedQueueLenLocked(replica_id, now);
  cache_[replica_id] = CacheEntry{cached.value_or(0) + 1, now};
}

}  // namespace tessera::serve
