// TaskSubmitter: the owner's queueing of tasks onto leased workers, with no I/O of its own.
//
// Tasks are grouped by lease shape (resources + label selectors: one kind of worker). Each shape
// has a queue, the workers leased for it and at most one lease request outstanding. A task goes
// to the least loaded worker whose tasks in flight are below a cap; the cap is sized from how
// long tasks of that shape run (about target_queue_time of work pushed ahead per worker, so
// no-op tasks pipeline hundreds deep while 100 ms tasks go one at a time and spread over
// workers). Another worker is asked for while tasks wait and the backlog per worker is worth a
// lease (more than grow_threshold of work, or durations not known yet), up to a cap. A worker
// idle for idle_timeout is let go. When a worker dies, its tasks go back to the front of the
// queue until each has used max_retries, then fail naming the exit cause. Each task's result is
// delivered once; later copies are counted, never delivered.
//
// Fast tasks and actor calls go out in batches: a worker with nothing in flight is sent what is
// queued at once, but one that still runs earlier work is topped up only once a batch worth
// sending has queued (MinBatchLocked), so a burst of submissions crosses the wire, and wakes the
// worker, a few dozen at a time rather than one by one. Actors that run calls concurrently are
// never kept waiting (a call may be what another in flight waits for).
//
// Threading: thread-safe (one mutex). Calls into the LeaseSource, the WorkerChannels and the
// actor observer are made under that mutex and must not block or call back into the submitter on
// the same thread; result callbacks run outside it.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "api/error_payloads.h"
#include "api/task_run.h"
#include "tessera/object_id.h"
#include "tessera/object_ref.h"
#include "tessera/tessera.h"
#include "tessera/v1/common.pb.h"
#include "tessera/v1/head.pb.h"
#include "tessera/v1/worker.pb.h"

namespace tessera::api {

// What a lease asks for; `key` identifies the shape (canonical text of the request).
struct LeaseShape {
  std::string key;
  v1::ResourceRequest request;
  // Added to the worker's environment (an actor's ActorOptions::env); part of `key` when set.
  std::map<std::string, std::string> env;
  // A detached actor's id (hex): its worker outlives this driver (WorkerSpec.detached_actor_id).
  std::string detached_actor_id;
  // Folders the worker runs with, unpacked on its node before it starts (nullptr none); their
  // ids are part of `key`.
  std::shared_ptr<const RuntimeEnvFiles> files;
};

struct QueuedTask {
  v1::TaskSpec spec;   // arguments resolved; spec.attempt() counts the runs before this one
  ObjectId return_id;  // nil for an actor's constructor (its outcome is not an object)
  // The task that submitted it (TaskId binary; "" none known): a recursive cancel of that task
  // cancels this one.
  std::string parent_task_id;
  int max_retries = 3;
  // An actor call's own max_task_retries (Python's per-method option); -1: the actor's. It
  // bounds the runs after its process died, and (with retry_exceptions) after its exceptions.
  int max_task_retries = -1;
  // A task of another language: the object holding its code, which workers fetch from this
  // owner, kept as long as the task may still run (retries included).
  std::optional<ObjectRefBase> code;
  // The refs of its arguments, and those written inside them: kept while it may still run (its
  // worker counts itself as a borrower of those it keeps before it answers, docs/objects.md).
  std::vector<ObjectRefBase> argument_refs;
  // When the owner first queued it (Unix µs; 0: not recorded), for its timeline.
  int64_t submit_time_us = 0;
  // Kept back for a larger batch while its actor's worker ran other calls (DispatchLocked): it
  // counts as sent when that worker dies, as it would have been without the batching.
  bool held_back = false;
};

// Told of the runs that ended (ran to a result, failed, or lost with their worker), a batch at
// a time (those of one result batch or one worker's death), outside the submitter's mutex, from
// the thread that heard them: must not block for long (TaskEventReporter::Add).
using TaskEventSink = std::function<void(std::vector<TaskRun>& runs)>;

// An actor as the submitter sees it: a shape of its own with at most one worker, never let go
// while the actor lives, whose constructor task is sent first on every new worker.
struct ActorSpec {
  std::string display;  // "actor Counter (name \"c\")": what errors call it
  // What an actor's death error names, as Ray's ActorDiedError does ("" left out).
  std::string class_name;
  std::string actor_id;  // hex
  std::string name;
  std::string name_space;
  int max_restarts = 0;
  int max_task_retries = 0;
  // Another driver's actor (AttachActor) that runs one call at a time: its calls may wait for a
  // batch. Owned actors are known by their constructor's max_concurrency and groups.
  bool calls_in_order = false;
};

// What became of an actor's process, told to the submitter's actor observer.
struct ActorChange {
  enum class Kind { kRestarting, kDead };
  Kind kind = Kind::kDead;
  int restarts = 0;   // restarts so far (this one included, when restarting)
  std::string cause;  // why its process died (restarting), or why the actor is dead
};
// Called under the submitter's mutex, in the order the changes happen: must not block or call
// back into the submitter.
using ActorObserver = std::function<void(const std::string& shape_key, const ActorChange& change)>;

// A leased worker as the submitter sees it.
class WorkerChannel {
 public:
  virtual ~WorkerChannel() = default;
  // Sends tasks to run in order. Never blocks.
  virtual void Send(v1::TaskBatch batch) = 0;
  // Lets the worker go (it exits; its lease ends). Never blocks.
  virtual void Close() = 0;
  // Asks the worker to cancel task `task_id` it was sent (Worker.CancelTask). Never blocks.
  virtual void CancelTask(const std::string& task_id, bool force, bool recursive) = 0;
  // Tells the actor's process, as its owner, to exit now (Worker.ExitActor). Never blocks.
  virtual void ExitActor() = 0;
};

using WorkerHandle = uint64_t;

class LeaseSource {
 public:
  virtual ~LeaseSource() = default;
  // Starts getting one more worker of `shape`; the answer comes later, on another thread, as
  // TaskSubmitter::AddWorker or LeaseFailed with shape.key.
  virtual void RequestWorker(const LeaseShape& shape) = 0;
  // Gives the lease of `worker` back to its node (what it holds is free for others) while its
  // process goes on: it owns objects other processes borrow, which live in it until they are
  // released. False when that cannot be done (its lease holds devices; no such worker): the
  // submitter then closes it. Never blocks.
  virtual bool ReturnLease(WorkerHandle worker) {
    (void)worker;
    return false;
  }
};

struct SubmitterOptions {
  absl::Duration idle_timeout = absl::Seconds(1);
  // A worker idle this long is let go at once, whatever idle_timeout says, while another shape
  // of this submitter has waited this long for a lease with nothing to run its work: the idle
  // one may hold what the other waits for (another shape's resources on the same node).
  absl::Duration hand_over_after = absl::Milliseconds(200);
  int max_workers_per_shape = 64;
  absl::Duration target_queue_time = absl::Milliseconds(2);
  int max_in_flight_per_worker = 1024;
  // The largest batch a worker with work in flight is kept waiting for (half its cap, for
  // shapes whose cap is lower); 1: every task goes out as soon as there is room.
  int max_batch_wait = 64;
  absl::Duration grow_threshold = absl::Milliseconds(10);
  // Workers that fail to start in a row before the shape's waiting tasks fail.
  int max_start_failures = 3;
  // Sees the value of each result that is ignored (a duplicate, or from a worker let go), outside
  // the submitter's mutex: what it lent the owner is given back (ObjectTable::Discard).
  std::function<void(const std::string& value)> discard_value;
};

class TaskSubmitter {
 public:
  // `deliver` records a task's outcome and returns false when the object already had one.
  using DeliverFn = std::function<bool(const ObjectId&, absl::StatusOr<std::string>)>;

  TaskSubmitter(SubmitterOptions options, LeaseSource* leases, DeliverFn deliver);

  // Set once before the first Submit (the lease source may need the submitter to exist first).
  void SetLeaseSource(LeaseSource* leases) { leases_ = leases; }
  // Set once before the first CreateActor: hears each restart and the death of every actor.
  void SetActorObserver(ActorObserver observer) { actor_observer_ = std::move(observer); }
  // Set once before the first Submit: hears every run that ended (the timelines).
  void SetTaskEventSink(TaskEventSink sink) { task_event_sink_ = std::move(sink); }

  void Submit(const LeaseShape& shape, QueuedTask task);

  // Actors. An actor's calls are sent to its one worker in the order SubmitActorCall numbered
  // them (spec.sequence), after its constructor; when that worker dies the actor is restarted on
  // a new worker (constructor again, then the pending calls that have retries left, still in
  // sequence order) up to max_restarts times, after which every call fails "<display> is dead:
  // <cause>". KillActor ends it for good (pending and later calls fail).
  void CreateActor(const LeaseShape& shape, ActorSpec actor, QueuedTask constructor);
  void SubmitActorCall(const std::string& shape_key, QueuedTask call);
  void KillActor(const std::string& shape_key);
  // An actor another driver owns, reached through `channel` to its process (found by name): its
  // calls go there in order; when the stream ends the actor is dead for this driver.
  void AttachActor(const LeaseShape& shape, ActorSpec actor, WorkerHandle handle,
                   std::shared_ptr<WorkerChannel> channel);

  // A fresh handle for a worker about to be added (its channel's callbacks need it first).
  WorkerHandle NewHandle();
  // A worker leased for `shape_key` is ready. False (the channel closed) after Shutdown.
  bool AddWorker(const std::string& shape_key, WorkerHandle handle,
                 std::shared_ptr<WorkerChannel> channel, WorkerIdentity identity = {});
  // The outstanding lease of `shape_key` gave no worker. `permanent`: asking again cannot help
  // (infeasible, invalid), so the shape's waiting tasks fail at once when it has no worker.
  void LeaseFailed(const std::string& shape_key, const absl::Status& status, bool permanent);

  void OnResults(WorkerHandle worker, const v1::TaskResultBatch& results);
  // The worker's process is gone (`cause`: "killed by signal 9 (SIGKILL)", ...).
  // `bundle_removed`: its agent killed it because its placement group was removed; its tasks
  // then fail TASK_PG_REMOVED and its actor is dead (ACTOR_PG_REMOVED), with no retry or restart.
  void WorkerDied(WorkerHandle worker, const std::string& cause, bool bundle_removed = false);
  // Its node has a lease request waiting for resources (WorkerEvent.lease_wanted): the worker is
  // let go now if it has been idle for hand_over_after with nothing queued for it (not an
  // actor's), instead of after idle_timeout; one whose objects others borrow gives back its
  // lease and stays (LetGoLocked).
  void HandBackIfIdle(WorkerHandle worker, absl::Time now);

  // Cancels the task whose return is `return_id` (tessera.cancel). Queued, or not submitted
  // yet (still waiting for its arguments): it fails TASK_CANCELLED now and never runs. Sent to a
  // worker: the worker is asked to interrupt it (and with `recursive`, to cancel what it
  // submitted); it then ends TASK_CANCELLED whatever error it stops with (a value that comes
  // first still counts). `force`: the worker ends its process, the task fails WORKER_CRASHED;
  // a cancelled task is never retried. An actor call is only dropped while queued (a running
  // one is not interrupted; force is InvalidArgument). Finished or unknown tasks: OK, no effect
  // (a return not submitted yet is remembered, so that a later Submit drops it).
  absl::Status Cancel(const ObjectId& return_id, bool force, bool recursive);
  // Cancels every task not finished (a worker's own runtime when its task is cancelled).
  void CancelSubmittedBy(const std::string& parent, bool force);

  // Lets go of workers idle since before now - idle_timeout.
  void ReapIdle(absl::Time now);
  // Closes every worker and fails every task not finished with Cancelled.
  void Shutdown();

  TaskStats stats() const;
  // For tests: tasks waiting (not sent) for a shape; workers of a shape; the in-flight cap.
  size_t queued(const std::string& shape_key) const;
  size_t workers(const std::string& shape_key) const;
  int in_flight_cap(const std::string& shape_key) const;

 private:
  struct Worker {
    WorkerHandle handle = 0;
    std::string shape_key;
    std::shared_ptr<WorkerChannel> channel;
    std::shared_ptr<const WorkerIdentity> identity;          // shared by the runs it served
    absl::flat_hash_map<std::string, QueuedTask> in_flight;  // by task id
    absl::Time idle_since;
    bool doomed = false;  // a forced cancel ends its process: nothing more is sent to it
    // Its last result said other processes borrow objects it owns: it is not let go at its idle
    // timeout; work that waits for its lease gets the lease (LeaseSource::ReturnLease) while
    // the process stays, kept out of its shape, and is closed once nothing is borrowed.
    bool lends_objects = false;
    bool lease_returned = false;
  };
  struct Shape {
    LeaseShape shape;
    std::deque<QueuedTask> queue;
    std::vector<WorkerHandle> workers;
    bool lease_outstanding = false;
    absl::Time lease_asked_at;  // when the outstanding lease was asked for
    int start_failures = 0;
    double run_nanos_ewma = 0;  // 0: not measured yet
    // Actors only.
    bool actor = false;
    bool attached = false;  // another driver's actor, reached by a guest stream
    ActorSpec actor_spec;
    QueuedTask constructor;
    int restarts = 0;
    int64_t next_sequence = 1;
    bool dead = false;
    std::string death;  // why it is dead
    ErrorKind death_kind = ErrorKind::kActorDied;
  };
  using Outcome = std::pair<ObjectId, absl::StatusOr<std::string>>;

  int CapLocked(const Shape& shape) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // How many queued tasks make a batch worth sending to a worker that has work in flight.
  size_t MinBatchLocked(const Shape& shape, int cap) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  void DispatchLocked(Shape& shape) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Hands the values of ignored results to options_.discard_value (not under mu_).
  void DiscardValues(const std::vector<const v1::TaskResult*>& results) ABSL_LOCKS_EXCLUDED(mu_);
  void MaybeGrowLocked(Shape& shape) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void FailQueuedLocked(Shape& shape, const absl::Status& status, std::vector<Outcome>& out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Takes `worker` out of its shape's workers (nothing more is sent to it).
  void LeaveShapeLocked(const Worker& worker) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RemoveWorkerLocked(Worker& worker) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Lets an idle worker go: closed, or, while others borrow objects it owns, its lease given
  // back and the process kept (out of its shape) until they are released.
  void LetGoLocked(Worker& worker) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // How long `worker` has had nothing to do that could be let go: zero while it runs a task,
  // while its shape has work queued, and for an actor's worker (held for life).
  absl::Duration IdleForLocked(const Worker& worker, absl::Time now) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  void DeliverAll(std::vector<Outcome> outcomes) ABSL_LOCKS_EXCLUDED(mu_);
  // Adds to `runs` (for the task event sink) a run of `task` on `worker` that ended.
  void RecordRunLocked(const QueuedTask& task, const Worker& worker, int64_t start_us,
                       int64_t end_us, TaskRun::Outcome outcome, std::string detail,
                       std::vector<TaskRun>& runs) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The function's name, shared by its runs (a bounded table; past it, a copy per run).
  std::shared_ptr<const std::string> RunNameLocked(const std::string& function)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void TellTaskEventSink(std::vector<TaskRun>& runs) const ABSL_LOCKS_EXCLUDED(mu_);
  // Stamps a task being queued with the time, when runs are recorded.
  void StampSubmitLocked(QueuedTask& task) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  void ActorWorkerDiedLocked(Shape& shape, Worker& worker, const std::string& cause,
                             bool bundle_removed, std::vector<Outcome>& out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The actor is dead for good: its queued and later calls fail with `kind`.
  void ActorDeadLocked(Shape& shape, const std::string& cause, std::vector<Outcome>& out,
                       ErrorKind kind = ErrorKind::kActorDied) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // One task's cancel, under the lock; false when the submitter does not hold it.
  absl::StatusOr<bool> CancelLocked(const ObjectId& return_id, bool force, bool recursive,
                                    std::vector<Outcome>& out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const SubmitterOptions options_;
  LeaseSource* leases_;
  const DeliverFn deliver_;
  ActorObserver actor_observer_;
  TaskEventSink task_event_sink_;

  mutable absl::Mutex mu_;
  std::map<std::string, Shape> shapes_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, std::shared_ptr<const std::string>> run_names_
      ABSL_GUARDED_BY(mu_);
  // Tasks in flight asked to cancel (by task id): whether force was asked.
  absl::flat_hash_map<std::string, bool> cancelled_ ABSL_GUARDED_BY(mu_);
  // Returns cancelled before their task was submitted (its arguments were still resolving).
  absl::flat_hash_set<ObjectId> cancelled_returns_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<WorkerHandle, Worker> workers_ ABSL_GUARDED_BY(mu_);
  std::atomic<WorkerHandle> next_handle_{1};
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
  TaskStats stats_ ABSL_GUARDED_BY(mu_);
};

// The Status a Get sees for a task that failed with `error` in its worker.
absl::Status TaskErrorStatus(const std::string& function, const v1::TaskError& error);

}  // namespace tessera::api
