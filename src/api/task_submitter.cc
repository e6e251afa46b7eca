#include "api/task_submitter.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "api/error_payloads.h"
#include "base/ignore_status.h"
#include "objects/object_location.h"

namespace tessera::api {
namespace {

// A task's run time as the cap counts it: never below the per-task cost of the path around it.
constexpr double kMinRunNanos = 2000;

}  // namespace

absl::Status TaskErrorStatus(const std::string& function, const v1::TaskError& error) {
  if (error.kind() == "application") {
    return WithException(WithErrorKind(absl::UnknownError(absl::StrCat(
                                           "task ", function, " failed: ", error.type(),
                                           error.message().empty() ? "" : ": ", error.message())),
                                       ErrorKind::kTaskError),
                         error.exception(), error.traceback());
  }
  if (error.kind() == kTaskErrorStoreFull) {
    return WithErrorKind(absl::ResourceExhaustedError(absl::StrCat(
                             "task ", function, ": its result was not stored: ", error.message())),
                         ErrorKind::kObjectStoreFull);
  }
  if (error.kind() == kTaskErrorStore) {
    return absl::InternalError(
        absl::StrCat("task ", function, ": its result was not stored: ", error.message()));
  }
  return absl::InvalidArgumentError(absl::StrCat("task ", function, ": ", error.message()));
}

namespace {

absl::Status CancelledStatus(const std::string& function) {
  return WithErrorKind(absl::CancelledError(absl::StrCat("task ", function, " was cancelled")),
                       ErrorKind::kTaskCancelled);
}

// What a call to a dead actor, or one running when its process died, gets: Ray's
// ActorDiedError text (its first line, then the actor's tab-indented class_name, actor_id, pid,
// name and namespace), then "<display> is dead: <cause>" (or `cause` whole when it names the
// actor itself).
absl::Status ActorDeadStatus(const ActorSpec& actor, const std::string& cause, int pid = 0,
                             ErrorKind kind = ErrorKind::kActorDied, bool cause_whole = false) {
  std::string text = "The actor died unexpectedly before finishing this task.";
  auto line = [&text](const char* label, const std::string& value) {
    if (!value.empty()) absl::StrAppend(&text, "\n\t", label, ": ", value);
  };
  line("class_name", actor.class_name);
  line("actor_id", actor.actor_id);
  line("pid", pid > 0 ? absl::StrCat(pid) : "");
  line("name", actor.name);
  line("namespace", actor.name_space);
  absl::StrAppend(&text, "\n",
                  cause_whole ? cause : absl::StrCat(actor.display, " is dead: ", cause));
  return WithErrorKind(absl::UnavailableError(text), kind);
}

int PidOf(const std::shared_ptr<const WorkerIdentity>& identity) {
  return identity == nullptr ? 0 : identity->pid;
}

// Why an actor whose constructor did not make an instance is dead.
// The outcome of a run whose worker sent `result`, as the submitter decided it (cancelled, or
// run again), with its detail (the exception type).
std::pair<TaskRun::Outcome, std::string> RunOutcome(const v1::TaskResult& result, bool cancelled,
                                                    bool retried) {
  if (!result.has_error()) return {TaskRun::Outcome::kOk, ""};
  if (cancelled) return {TaskRun::Outcome::kCancelled, ""};
  const std::string& type =
      result.error().type().empty() ? result.error().kind() : result.error().type();
  return {retried ? TaskRun::Outcome::kRetried : TaskRun::Outcome::kError, type};
}

// Bound of the table of function names shared by runs.
constexpr size_t kMaxRunNames = 4096;

std::string ConstructorFailure(const std::string& factory, const v1::TaskError& error) {
  if (error.kind() == "application") {
    return absl::StrCat("its constructor ", factory, " threw ", error.type(),
                        error.message().empty() ? "" : ": ", error.message());
  }
  return absl::StrCat("its constructor ", factory, " could not run: ", error.message());
}

}  // namespace

TaskSubmitter::TaskSubmitter(SubmitterOptions options, LeaseSource* leases, DeliverFn deliver)
    : options_(std::move(options)), leases_(leases), deliver_(std::move(deliver)) {}

void TaskSubmitter::Submit(const LeaseShape& shape, QueuedTask task) {
  std::vector<Outcome> outcomes;
  {
    absl::MutexLock lock(&mu_);
    ++stats_.submitted;
    if (shut_down_) {
      outcomes.emplace_back(task.return_id, absl::CancelledError("tessera is shut down"));
    } else if (cancelled_returns_.erase(task.return_id) > 0) {
      ++stats_.failed;  // cancelled while its arguments resolved: its outcome was delivered
    } else {
      auto [it, inserted] = shapes_.try_emplace(shape.key);
      if (inserted) it->second.shape = shape;
      StampSubmitLocked(task);
      it->second.queue.push_back(std::move(task));
      DispatchLocked(it->second);
    }
  }
  DeliverAll(std::move(outcomes));
}

int TaskSubmitter::CapLocked(const Shape& shape) const {
  // An actor has one worker that runs its calls in order: pipeline as deep as allowed.
  if (shape.actor) return options_.max_in_flight_per_worker;
  if (shape.run_nanos_ewma <= 0) return 1;
  const double cap = absl::ToDoubleNanoseconds(options_.target_queue_time) / shape.run_nanos_ewma;
  return static_cast<int>(std::clamp(cap, 1.0, double(options_.max_in_flight_per_worker)));
}

size_t TaskSubmitter::MinBatchLocked(const Shape& shape, int cap) const {
  // Slow tasks (a cap of a few) go at once; no-op ones wait for up to max_batch_wait of them.
  if (shape.actor) {
    // A call of an actor that runs several at once may be what one in flight waits for.
    const v1::TaskSpec& create = shape.constructor.spec;
    const bool in_order =
        shape.attached ? shape.actor_spec.calls_in_order
                       : create.max_concurrency() <= 1 && create.concurrency_groups().empty();
    if (!in_order) return 1;
  }
  return static_cast<size_t>(std::clamp(cap / 2, 1, std::max(1, options_.max_batch_wait)));
}

void TaskSubmitter::DispatchLocked(Shape& shape) {
  const int cap = CapLocked(shape);
  const size_t min_batch = MinBatchLocked(shape, cap);
  while (!shape.queue.empty()) {
    Worker* best = nullptr;
    for (WorkerHandle handle : shape.workers) {
      Worker& w = workers_.at(handle);
      if (w.doomed || static_cast<int>(w.in_flight.size()) >= cap) continue;
      if (best == nullptr || w.in_flight.size() < best->in_flight.size()) best = &w;
    }
    if (best == nullptr) break;
    if (!best->in_flight.empty() && shape.queue.size() < min_batch) {
      if (shape.actor) {
        for (QueuedTask& task : shape.queue) task.held_back = true;
      }
      break;
    }
    const size_t n = std::min<size_t>(cap - best->in_flight.size(), shape.queue.size());
    v1::TaskBatch batch;
    batch.mutable_tasks()->Reserve(static_cast<int>(n));
    for (size_t i = 0; i < n; ++i) {
      QueuedTask task = std::move(shape.queue.front());
      shape.queue.pop_front();
      task.held_back = false;
      *batch.add_tasks() = task.spec;
      std::string id = task.spec.task_id();
      best->in_flight.emplace(std::move(id), std::move(task));
    }
    best->channel->Send(std::move(batch));
  }
  MaybeGrowLocked(shape);
}

void TaskSubmitter::MaybeGrowLocked(Shape& shape) {
  if (shape.queue.empty() || shape.lease_outstanding || shut_down_) return;
  if (shape.actor && (shape.dead || !shape.workers.empty())) return;
  if (static_cast<int>(shape.workers.size()) >= options_.max_workers_per_shape) return;
  if (shape.start_failures >= options_.max_start_failures) return;
  if (shape.run_nanos_ewma > 0 && !shape.workers.empty()) {
    // Not worth a lease when the workers there are drain the backlog sooner than one starts.
    const double backlog_nanos =
        shape.run_nanos_ewma * double(shape.queue.size()) / double(shape.workers.size());
    if (backlog_nanos < absl::ToDoubleNanoseconds(options_.grow_threshold)) return;
  }
  shape.lease_outstanding = true;
  shape.lease_asked_at = absl::Now();
  ++stats_.leases_requested;
  leases_->RequestWorker(shape.shape);
}

WorkerHandle TaskSubmitter::NewHandle() { return next_handle_.fetch_add(1); }

bool TaskSubmitter::AddWorker(const std::string& shape_key, WorkerHandle handle,
                              std::shared_ptr<WorkerChannel> channel, WorkerIdentity identity) {
  absl::MutexLock lock(&mu_);
  auto it = shapes_.find(shape_key);
  if (shut_down_ || it == shapes_.end()) {
    channel->Close();
    return false;
  }
  Shape& shape = it->second;
  shape.lease_outstanding = false;
  shape.start_failures = 0;
  Worker& worker = workers_[handle];
  worker.handle = handle;
  worker.shape_key = shape_key;
  worker.channel = std::move(channel);
  worker.identity = std::make_shared<const WorkerIdentity>(std::move(identity));
  worker.idle_since = absl::Now();
  shape.workers.push_back(handle);
  ++stats_.workers_started;
  DispatchLocked(shape);
  return true;
}

void TaskSubmitter::LeaseFailed(const std::string& shape_key, const absl::Status& status,
                                bool permanent) {
  std::vector<Outcome> outcomes;
  {
    absl::MutexLock lock(&mu_);
    auto it = shapes_.find(shape_key);
    if (it == shapes_.end()) return;
    Shape& shape = it->second;
    shape.lease_outstanding = false;
    ++shape.start_failures;
    if (shape.actor && shape.workers.empty() &&
        (permanent || shape.start_failures >= options_.max_start_failures)) {
      ActorDeadLocked(shape, absl::StrCat("its worker could not start: ", status.message()),
                      outcomes);
    } else if (shape.workers.empty() &&
               (permanent || shape.start_failures >= options_.max_start_failures)) {
      // Permanent: no node can ever run it (infeasible, or its hard affinity's node is gone).
      FailQueuedLocked(shape,
                       permanent ? WithErrorKind(status, ErrorKind::kTaskUnschedulable) : status,
                       outcomes);
      shape.start_failures = 0;  // a later task may try again
    } else if (!permanent) {
      MaybeGrowLocked(shape);
    }
  }
  DeliverAll(std::move(outcomes));
}

void TaskSubmitter::FailQueuedLocked(Shape& shape, const absl::Status& status,
                                     std::vector<Outcome>& out) {
  for (QueuedTask& task : shape.queue) {
    ++stats_.failed;
    out.emplace_back(task.return_id,
                     WithContext(status, absl::StrCat("task ", task.spec.function(), ": ")));
  }
  shape.queue.clear();
}

void TaskSubmitter::OnResults(WorkerHandle handle, const v1::TaskResultBatch& results) {
  std::vector<Outcome> outcomes;
  std::vector<TaskRun> runs;
  // Results that are ignored (duplicates): what they lent this owner is given back after the
  // mutex.
  std::vector<const v1::TaskResult*> ignored;
  {
    absl::ReleasableMutexLock lock(&mu_);
    auto wit = workers_.find(handle);
    if (wit == workers_.end()) {
      stats_.duplicate_results += results.results_size();
      lock.Release();
      for (const v1::TaskResult& result : results.results()) ignored.push_back(&result);
      DiscardValues(ignored);
      return;
    }
    Worker& worker = wit->second;
    Shape& shape = shapes_.at(worker.shape_key);
    bool worker_gone = false;
    worker.lends_objects = results.lends_objects();
    if (worker.lease_returned && !worker.lends_objects && results.results().empty()) {
      // Kept only as the owner of what others borrowed: nothing is borrowed any more.
      worker.channel->Close();
      RemoveWorkerLocked(worker);
      return;
    }
    for (const v1::TaskResult& result : results.results()) {
      auto it = worker.in_flight.find(result.task_id());
      if (it == worker.in_flight.end()) {
        ++stats_.duplicate_results;
        ignored.push_back(&result);
        continue;
      }
      QueuedTask& task = it->second;
      auto record = [&](bool cancelled, bool retried) {
        mu_.AssertHeld();  // run right here, under this function's lock
        if (!task_event_sink_) return;
        auto [outcome, detail] = RunOutcome(result, cancelled, retried);
        RecordRunLocked(task, worker, result.start_time_us(), result.end_time_us(), outcome,
                        std::move(detail), runs);
      };
      if (task.spec.kind() == v1::ACTOR_CREATE) {
        record(/*cancelled=*/false, /*retried=*/false);
        const bool failed = result.has_error() && shape.actor && !shape.dead;
        const std::string cause =
            failed ? ConstructorFailure(task.spec.function(), result.error()) : "";
        worker.in_flight.erase(it);
        if (!failed) continue;
        // No instance was made: the actor is dead with its constructor's error, not restarted
        // (it would throw again). The calls already sent would only hear "no instance" from the
        // worker, so they get that error here; the worker is let go.
        const absl::Status dead = ActorDeadStatus(shape.actor_spec, cause);
        for (auto& [id, call] : worker.in_flight) {
          ++stats_.failed;
          outcomes.emplace_back(call.return_id, dead);
        }
        worker.in_flight.clear();
        worker.channel->Close();
        ActorDeadLocked(shape, cause, outcomes);
        RemoveWorkerLocked(worker);
        worker_gone = true;
        break;
      }
      const double run = std::max(double(result.run_nanos()), kMinRunNanos);
      shape.run_nanos_ewma =
          shape.run_nanos_ewma <= 0 ? run : 0.8 * shape.run_nanos_ewma + 0.2 * run;
      const bool cancelled = cancelled_.erase(result.task_id()) > 0;
      const bool retry = result.has_error() && result.error().retryable() && !cancelled &&
                         !shut_down_ && task.spec.kind() != v1::ACTOR_CREATE &&
                         task.spec.attempt() + 1 <= task.max_retries;
      record(cancelled, retry);  // before the task moves back into the queue
      if (retry) {
        // retry_exceptions: run again, at the front of the queue, as after a worker's death.
        task.spec.set_attempt(task.spec.attempt() + 1);
        ++stats_.retries;
        shape.queue.push_front(std::move(task));
        worker.in_flight.erase(it);
        continue;
      }
      if (result.has_error()) {
        ++stats_.failed;
        // Interrupted by its cancel (or failing anyway): it ends cancelled.
        outcomes.emplace_back(task.return_id,
                              cancelled ? CancelledStatus(task.spec.function())
                                        : TaskErrorStatus(task.spec.function(), result.error()));
      } else {
        ++stats_.succeeded;
        outcomes.emplace_back(task.return_id, result.value());
      }
      worker.in_flight.erase(it);
    }
    if (!worker_gone && worker.in_flight.empty()) worker.idle_since = absl::Now();
    DispatchLocked(shape);
  }
  DiscardValues(ignored);
  TellTaskEventSink(runs);  // before the outcomes: a timeline asked for after a get has the run
  DeliverAll(std::move(outcomes));
}

void TaskSubmitter::StampSubmitLocked(QueuedTask& task) const {
  if (task_event_sink_ && task.submit_time_us == 0) {
    task.submit_time_us = absl::ToUnixMicros(absl::Now());
  }
}

void TaskSubmitter::RecordRunLocked(const QueuedTask& task, const Worker& worker, int64_t start_us,
                                    int64_t end_us, TaskRun::Outcome outcome, std::string detail,
                                    std::vector<TaskRun>& runs) {
  TaskRun& run = runs.emplace_back();
  run.task_id = ToRunId(task.spec.task_id());
  run.actor_id = ToRunId(task.spec.actor_id());
  run.kind = task.spec.kind();
  run.attempt = task.spec.attempt();
  run.name = RunNameLocked(task.spec.function());
  run.worker = worker.identity;
  run.submit_time_us = task.submit_time_us;
  run.start_time_us = start_us;
  run.end_time_us = end_us;
  run.outcome = outcome;
  run.detail = std::move(detail);
}

std::shared_ptr<const std::string> TaskSubmitter::RunNameLocked(const std::string& function) {
  if (auto it = run_names_.find(function); it != run_names_.end()) return it->second;
  auto name = std::make_shared<const std::string>(function);
  if (run_names_.size() < kMaxRunNames) run_names_.emplace(function, name);
  return name;
}

void TaskSubmitter::TellTaskEventSink(std::vector<TaskRun>& runs) const {
  if (!runs.empty()) task_event_sink_(runs);
}

void TaskSubmitter::LeaveShapeLocked(const Worker& worker) {
  Shape& shape = shapes_.at(worker.shape_key);
  shape.workers.erase(std::remove(shape.workers.begin(), shape.workers.end(), worker.handle),
                      shape.workers.end());
}

void TaskSubmitter::RemoveWorkerLocked(Worker& worker) {
  LeaveShapeLocked(worker);
  workers_.erase(worker.handle);
}

void TaskSubmitter::WorkerDied(WorkerHandle handle, const std::string& cause, bool bundle_removed) {
  std::vector<Outcome> outcomes;
  std::vector<TaskRun> ended;
  {
    absl::MutexLock lock(&mu_);
    auto wit = workers_.find(handle);
    if (wit == workers_.end()) return;  // let go before it exited
    ++stats_.workers_died;
    Worker& worker = wit->second;
    Shape& shape = shapes_.at(worker.shape_key);
    if (task_event_sink_) {
      const int64_t now_us = absl::ToUnixMicros(absl::Now());
      for (const auto& [id, task] : worker.in_flight) {
        const bool cancelled = cancelled_.contains(id);
        RecordRunLocked(task, worker, 0, now_us,
                        cancelled ? TaskRun::Outcome::kCancelled : TaskRun::Outcome::kWorkerDied,
                        cancelled ? "" : cause, ended);
      }
    }
    std::vector<QueuedTask> retry;
    if (shape.actor) {
      ActorWorkerDiedLocked(shape, worker, cause, bundle_removed, outcomes);
      worker.in_flight.clear();
    }
    // Back to the front of the queue: they have waited longest.
    for (auto& [id, task] : worker.in_flight) {
      const int runs = task.spec.attempt() + 1;
      if (auto cancel = cancelled_.find(id); cancel != cancelled_.end()) {
        const bool forced = cancel->second;
        cancelled_.erase(cancel);
        ++stats_.failed;
        outcomes.emplace_back(
            task.return_id,
            forced
                ? WithErrorKind(absl::UnavailableError(absl::StrCat("task ", task.spec.function(),
                                                                    " was cancelled with force: "
                                                                    "its worker was killed (",
                                                                    cause, ")")),
                                ErrorKind::kWorkerCrashed)
                : CancelledStatus(task.spec.function()));
        continue;
      }
      if (bundle_removed) {
        ++stats_.failed;
        outcomes.emplace_back(
            task.return_id,
            WithErrorKind(absl::UnavailableError(absl::StrCat("task ", task.spec.function(),
                                                              " failed: its placement group was "
                                                              "removed while it ran (",
                                                              cause, ")")),
                          ErrorKind::kTaskPlacementGroupRemoved));
        continue;
      }
      if (runs <= task.max_retries && !shut_down_) {
        task.spec.set_attempt(runs);
        ++stats_.retries;
        retry.push_back(std::move(task));
      } else {
        ++stats_.failed;
        outcomes.emplace_back(
            task.return_id,
            WithErrorKind(
                absl::UnavailableError(absl::StrCat(
                    "task ", task.spec.function(), " failed: its worker died (", cause, ") on ",
                    runs == 1 ? "its only attempt" : absl::StrCat("each of ", runs, " attempts"),
                    " (max_retries ", task.max_retries, ")")),
                ErrorKind::kWorkerCrashed));
      }
    }
    for (auto it = retry.rbegin(); it != retry.rend(); ++it) {
      shape.queue.push_front(std::move(*it));
    }
    RemoveWorkerLocked(worker);
    DispatchLocked(shape);
  }
  TellTaskEventSink(ended);
  DeliverAll(std::move(outcomes));
}

absl::Duration TaskSubmitter::IdleForLocked(const Worker& worker, absl::Time now) const {
  if (!worker.in_flight.empty()) return absl::ZeroDuration();
  const Shape& shape = shapes_.at(worker.shape_key);
  // An actor holds its worker for life; a shape with work queued is about to use it.
  if (shape.actor || !shape.queue.empty()) return absl::ZeroDuration();
  return now - worker.idle_since;
}

void TaskSubmitter::ReapIdle(absl::Time now) {
  absl::MutexLock lock(&mu_);
  // A shape whose work waits for a lease, with no worker of its own to run it: idle workers of
  // other shapes are handed back now, not after idle_timeout (Ray returns a lease as soon as
  // its worker has nothing to do).
  std::optional<std::string> starving;
  for (const auto& [key, shape] : shapes_) {
    if (shape.lease_outstanding && !shape.queue.empty() && shape.workers.empty() &&
        now - shape.lease_asked_at >= options_.hand_over_after) {
      starving = key;
      break;
    }
  }
  std::vector<WorkerHandle> idle;
  for (auto& [handle, worker] : workers_) {
    const absl::Duration idle_for = IdleForLocked(worker, now);
    // A worker whose objects others borrow outlives its idle timeout (its process is their
    // owner); work that needs its lease gets the lease, and the process stays.
    if ((idle_for >= options_.idle_timeout && !worker.lends_objects) ||
        (starving.has_value() && *starving != worker.shape_key && !worker.lease_returned &&
         idle_for >= options_.hand_over_after)) {
      idle.push_back(handle);
    }
  }
  for (WorkerHandle handle : idle) LetGoLocked(workers_.at(handle));
}

void TaskSubmitter::HandBackIfIdle(WorkerHandle handle, absl::Time now) {
  absl::MutexLock lock(&mu_);
  auto it = workers_.find(handle);
  if (it == workers_.end() || it->second.lease_returned ||
      IdleForLocked(it->second, now) < options_.hand_over_after) {
    return;
  }
  LetGoLocked(it->second);
}

void TaskSubmitter::LetGoLocked(Worker& worker) {
  if (worker.lends_objects && !worker.lease_returned && worker.in_flight.empty() &&
      !shapes_.at(worker.shape_key).actor && leases_->ReturnLease(worker.handle)) {
    worker.lease_returned = true;
    LeaveShapeLocked(worker);
    return;
  }
  worker.channel->Close();
  RemoveWorkerLocked(worker);
}

absl::StatusOr<bool> TaskSubmitter::CancelLocked(const ObjectId& return_id, bool force,
                                                 bool recursive, std::vector<Outcome>& out) {
  for (auto& [key, shape] : shapes_) {
    auto queued = std::find_if(shape.queue.begin(), shape.queue.end(), [&](const QueuedTask& t) {
      return t.return_id == return_id && t.spec.kind() != v1::ACTOR_CREATE;
    });
    if (queued == shape.queue.end()) continue;
    if (shape.actor && force) {
      return absl::InvalidArgumentError("force=True is not supported for actor tasks");
    }
    ++stats_.failed;
    out.emplace_back(return_id, CancelledStatus(queued->spec.function()));
    shape.queue.erase(queued);
    return true;
  }
  const std::string task_id = return_id.task_id().Binary();
  for (auto& [handle, worker] : workers_) {
    auto it = worker.in_flight.find(task_id);
    if (it == worker.in_flight.end()) continue;
    if (it->second.spec.kind() == v1::ACTOR_METHOD) {
      // As Ray: a running actor call is not interrupted.
      if (force) return absl::InvalidArgumentError("force=True is not supported for actor tasks");
      return true;
    }
    cancelled_[task_id] = force;
    worker.channel->CancelTask(task_id, force, recursive);
    if (force) {
      // Its process ends: the other tasks sent to it go back to the front of the queue (one
      // may have started there: at least once, as after any death) and nothing more is sent.
      worker.doomed = true;
      Shape& shape = shapes_.at(worker.shape_key);
      std::vector<QueuedTask> others;
      for (auto in = worker.in_flight.begin(); in != worker.in_flight.end();) {
        if (in->first == task_id) {
          ++in;
          continue;
        }
        others.push_back(std::move(in->second));
        worker.in_flight.erase(in++);
      }
      for (auto o = others.rbegin(); o != others.rend(); ++o) shape.queue.push_front(std::move(*o));
      DispatchLocked(shape);
    }
    return true;
  }
  return false;
}

absl::Status TaskSubmitter::Cancel(const ObjectId& return_id, bool force, bool recursive) {
  std::vector<Outcome> outcomes;
  absl::Status status;
  bool held_here = true;
  {
    absl::MutexLock lock(&mu_);
    absl::StatusOr<bool> held = CancelLocked(return_id, force, recursive, outcomes);
    if (!held.ok()) {
      status = held.status();
    } else if (!*held) {
      // Not here yet (its arguments resolve: Submit drops it when it comes) or done already.
      held_here = false;
      cancelled_returns_.insert(return_id);
    }
  }
  DeliverAll(std::move(outcomes));
  if (!held_here && !deliver_(return_id, CancelledStatus(return_id.task_id().Hex().substr(0, 8)))) {
    // Done already (a done object ignores the outcome): no Submit will come to drop the mark.
    absl::MutexLock lock(&mu_);
    cancelled_returns_.erase(return_id);
  }
  return status;
}

void TaskSubmitter::CancelSubmittedBy(const std::string& parent, bool force) {
  std::vector<Outcome> outcomes;
  {
    absl::MutexLock lock(&mu_);
    std::vector<ObjectId> returns;
    for (const auto& [key, shape] : shapes_) {
      if (shape.actor) continue;
      for (const QueuedTask& task : shape.queue) {
        if (task.parent_task_id == parent) returns.push_back(task.return_id);
      }
    }
    for (const auto& [handle, worker] : workers_) {
      for (const auto& [id, task] : worker.in_flight) {
        if (task.spec.kind() == v1::TASK && task.parent_task_id == parent) {
          returns.push_back(task.return_id);
        }
      }
    }
    for (const ObjectId& id : returns) {
      IgnoreStatus(CancelLocked(id, force, /*recursive=*/true, outcomes),
                   "only plain tasks are listed: the refusal for actor tasks cannot come");
    }
  }
  DeliverAll(std::move(outcomes));
}

void TaskSubmitter::DiscardValues(const std::vector<const v1::TaskResult*>& results) {
  if (!options_.discard_value) return;
  for (const v1::TaskResult* result : results) {
    if (result->has_value()) options_.discard_value(result->value());
  }
}

void TaskSubmitter::Shutdown() {
  std::vector<Outcome> outcomes;
  {
    absl::MutexLock lock(&mu_);
    shut_down_ = true;
    const absl::Status cancelled = absl::CancelledError("tessera is shut down");
    for (auto& [handle, worker] : workers_) {
      worker.channel->Close();
      for (auto& [id, task] : worker.in_flight) {
        ++stats_.failed;
        outcomes.emplace_back(task.return_id, cancelled);
      }
    }
    workers_.clear();
    for (auto& [key, shape] : shapes_) {
      shape.workers.clear();
      FailQueuedLocked(shape, cancelled, outcomes);
    }
  }
  DeliverAll(std::move(outcomes));
}

void TaskSubmitter::DeliverAll(std::vector<Outcome> outcomes) {
  int64_t duplicates = 0;
  for (auto& [id, value] : outcomes) {
    if (id.IsNil()) continue;  // an actor's constructor
    if (!deliver_(id, std::move(value))) ++duplicates;
  }
  if (duplicates > 0) {
    absl::MutexLock lock(&mu_);
    stats_.duplicate_results += duplicates;
  }
}

void TaskSubmitter::CreateActor(const LeaseShape& shape, ActorSpec actor, QueuedTask constructor) {
  std::vector<Outcome> outcomes;
  {
    absl::MutexLock lock(&mu_);
    auto [it, inserted] = shapes_.try_emplace(shape.key);
    Shape& s = it->second;
    if (!inserted) return;  // one actor per key: a second create is a bug of the caller
    s.shape = shape;
    s.actor = true;
    s.actor_spec = std::move(actor);
    constructor.spec.set_kind(v1::ACTOR_CREATE);
    constructor.spec.set_sequence(0);
    constructor.return_id = ObjectId();
    StampSubmitLocked(constructor);
    s.constructor = constructor;
    if (shut_down_) {
      ActorDeadLocked(s, "tessera is shut down", outcomes);
    } else {
      s.queue.push_back(std::move(constructor));
      DispatchLocked(s);
    }
  }
  DeliverAll(std::move(outcomes));
}

void TaskSubmitter::SubmitActorCall(const std::string& shape_key, QueuedTask call) {
  std::vector<Outcome> outcomes;
  {
    absl::MutexLock lock(&mu_);
    ++stats_.submitted;
    auto it = shapes_.find(shape_key);
    if (it == shapes_.end() || !it->second.actor) {
      ++stats_.failed;
      outcomes.emplace_back(call.return_id,
                            absl::NotFoundError(absl::StrCat("no actor ", shape_key)));
    } else if (it->second.dead || shut_down_) {
      ++stats_.failed;
      outcomes.emplace_back(
          call.return_id, ActorDeadStatus(it->second.actor_spec,
                                          shut_down_ ? "tessera is shut down" : it->second.death, 0,
                                          it->second.death_kind));
    } else {
      Shape& shape = it->second;
      call.spec.set_kind(v1::ACTOR_METHOD);
      call.spec.set_sequence(shape.next_sequence++);
      call.max_retries =
          call.max_task_retries >= 0 ? call.max_task_retries : shape.actor_spec.max_task_retries;
      StampSubmitLocked(call);
      shape.queue.push_back(std::move(call));
      DispatchLocked(shape);
    }
  }
  DeliverAll(std::move(outcomes));
}

void TaskSubmitter::AttachActor(const LeaseShape& shape, ActorSpec actor, WorkerHandle handle,
                                std::shared_ptr<WorkerChannel> channel) {
  absl::MutexLock lock(&mu_);
  auto [it, inserted] = shapes_.try_emplace(shape.key);
  if (!inserted || shut_down_) {
    channel->Close();
    return;
  }
  Shape& s = it->second;
  s.shape = shape;
  s.actor = true;
  s.attached = true;
  actor.max_restarts = 0;  // restarts are its owner's business
  s.actor_spec = std::move(actor);
  Worker& worker = workers_[handle];
  worker.handle = handle;
  worker.shape_key = shape.key;
  worker.channel = std::move(channel);
  worker.idle_since = absl::Now();
  s.workers.push_back(handle);
}

void TaskSubmitter::KillActor(const std::string& shape_key) {
  std::vector<Outcome> outcomes;
  {
    absl::MutexLock lock(&mu_);
    auto it = shapes_.find(shape_key);
    if (it == shapes_.end() || !it->second.actor || it->second.dead) return;
    Shape& shape = it->second;
    for (WorkerHandle handle : std::vector<WorkerHandle>(shape.workers)) {
      Worker& worker = workers_.at(handle);
      // Its process ends now, not once it sees its stream end (a detached one never would);
      // a guest's stream is only closed (the actor is its owner's to end).
      if (!shape.attached) worker.channel->ExitActor();
      worker.channel->Close();
      for (auto& [id, task] : worker.in_flight) {
        if (task.spec.kind() == v1::ACTOR_CREATE) continue;
        ++stats_.failed;
        outcomes.emplace_back(
            task.return_id,
            ActorDeadStatus(shape.actor_spec, "killed by tessera::Kill", PidOf(worker.identity)));
      }
      RemoveWorkerLocked(worker);
    }
    ActorDeadLocked(shape, "killed by tessera::Kill", outcomes);
  }
  DeliverAll(std::move(outcomes));
}

void TaskSubmitter::ActorDeadLocked(Shape& shape, const std::string& cause,
                                    std::vector<Outcome>& out, ErrorKind kind) {
  const bool was_dead = shape.dead;
  shape.dead = true;
  shape.death = cause;
  shape.death_kind = kind;
  // Never run again: the refs its arguments held (an actor handle among them) go.
  shape.constructor.argument_refs.clear();
  if (!was_dead && actor_observer_) {
    actor_observer_(shape.shape.key, ActorChange{ActorChange::Kind::kDead, shape.restarts, cause});
  }
  const absl::Status dead = ActorDeadStatus(shape.actor_spec, cause, 0, kind);
  for (QueuedTask& task : shape.queue) {
    if (task.spec.kind() == v1::ACTOR_CREATE) continue;
    ++stats_.failed;
    out.emplace_back(task.return_id, dead);
  }
  shape.queue.clear();
}

void TaskSubmitter::ActorWorkerDiedLocked(Shape& shape, Worker& worker, const std::string& cause,
                                          bool bundle_removed, std::vector<Outcome>& out) {
  // The calls it had, in the order they were numbered (the constructor is 0), and those kept
  // back for a batch while it ran (it would have had them without the batching).
  std::vector<QueuedTask> pending;
  for (auto& [id, task] : worker.in_flight) {
    if (task.spec.kind() != v1::ACTOR_CREATE) pending.push_back(std::move(task));
  }
  for (auto it = shape.queue.begin(); it != shape.queue.end();) {
    if (!it->held_back) {
      ++it;
      continue;
    }
    pending.push_back(std::move(*it));
    it = shape.queue.erase(it);
  }
  std::sort(pending.begin(), pending.end(), [](const QueuedTask& a, const QueuedTask& b) {
    return a.spec.sequence() < b.spec.sequence();
  });
  if (shape.dead) return;  // killed: its calls were answered then
  if (bundle_removed) {
    // Its placement group is gone: never restarted (it could not be placed again).
    const std::string death = absl::StrCat("its placement group was removed (", cause, ")");
    const absl::Status removed = WithErrorKind(
        absl::UnavailableError(absl::StrCat(shape.actor_spec.display, " is dead: ", death)),
        ErrorKind::kActorPlacementGroupRemoved);
    for (QueuedTask& task : pending) {
      ++stats_.failed;
      out.emplace_back(task.return_id, removed);
    }
    ActorDeadLocked(shape, death, out, ErrorKind::kActorPlacementGroupRemoved);
    return;
  }
  if (shape.restarts >= shape.actor_spec.max_restarts) {
    const std::string death =
        absl::StrCat("its process died (", cause, ") and it was restarted ", shape.restarts,
                     " times (max_restarts ", shape.actor_spec.max_restarts, ")");
    for (QueuedTask& task : pending) {
      ++stats_.failed;
      out.emplace_back(task.return_id,
                       ActorDeadStatus(shape.actor_spec, death, PidOf(worker.identity)));
    }
    ActorDeadLocked(shape, death, out);
    return;
  }
  ++shape.restarts;
  if (actor_observer_) {
    actor_observer_(shape.shape.key,
                    ActorChange{ActorChange::Kind::kRestarting, shape.restarts, cause});
  }
  std::vector<QueuedTask> retry;
  QueuedTask constructor = shape.constructor;
  constructor.spec.set_attempt(shape.restarts);
  retry.push_back(std::move(constructor));
  for (QueuedTask& task : pending) {
    const int runs = task.spec.attempt() + 1;
    if (runs <= task.max_retries) {
      task.spec.set_attempt(runs);
      ++stats_.retries;
      retry.push_back(std::move(task));
    } else {
      // As Ray: the call fails at once, before the restart completes, with the actor's death.
      ++stats_.failed;
      out.emplace_back(
          task.return_id,
          ActorDeadStatus(
              shape.actor_spec,
              absl::StrCat(
                  shape.actor_spec.display, ": call ", task.spec.function(),
                  " failed: the actor's process died (", cause, ") while it ran (",
                  runs == 1 ? "its only attempt" : absl::StrCat("each of ", runs, " attempts"),
                  ", max_task_retries ", task.max_retries, "); the actor restarts (",
                  shape.restarts, " of max_restarts ", shape.actor_spec.max_restarts, ")"),
              PidOf(worker.identity), ErrorKind::kActorDied, /*cause_whole=*/true));
    }
  }
  for (auto it = retry.rbegin(); it != retry.rend(); ++it) shape.queue.push_front(std::move(*it));
}

TaskStats TaskSubmitter::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

size_t TaskSubmitter::queued(const std::string& shape_key) const {
  absl::MutexLock lock(&mu_);
  auto it = shapes_.find(shape_key);
  return it == shapes_.end() ? 0 : it->second.queue.size();
}

size_t TaskSubmitter::workers(const std::string& shape_key) const {
  absl::MutexLock lock(&mu_);
  auto it = shapes_.find(shape_key);
  return it == shapes_.end() ? 0 : it->second.workers.size();
}

int TaskSubmitter::in_flight_cap(const std::string& shape_key) const {
  absl::MutexLock lock(&mu_);
  auto it = shapes_.find(shape_key);
  return it == shapes_.end() ? 0 : CapLocked(it->second);
}

}  // namespace tessera::api
