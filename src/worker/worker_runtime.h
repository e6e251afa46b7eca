// Worker mode: the user's binary started by a node agent for one of a driver's leases
// (TESSERA_WORKER_MODE=1, TESSERA_OWNER_ADDRESS, TESSERA_TOKEN_FILE, TESSERA_WORKER_ID). RunWorker
// serves the Worker service, tells the owner it is ready (Owner.WorkerReady), runs the tasks the
// owner pushes, and exits the process when the owner's stream ends: the owner let it go, or the
// owner disappeared. It also exits when no owner connects within a while after it said ready.
//
// Threading: RunWorker is called once, from main (through tessera::Init); FetchObject may be
// called by tasks on any thread.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "tessera/object_ref_data.h"
#include "tessera/runtime_context.h"
#include "tessera/tessera.h"
#include "tessera/v1/worker.pb.h"
#include "worker/task_executor.h"

namespace tessera::worker {

inline constexpr char kWorkerModeEnv[] = "TESSERA_WORKER_MODE";
inline constexpr char kOwnerAddressEnv[] = "TESSERA_OWNER_ADDRESS";
// The cluster token is never in a worker's environment: the lease carries none (a TESSERA_TOKEN
// there is removed) and the agent names a private file to read it from.
inline constexpr char kTokenEnv[] = "TESSERA_TOKEN";
inline constexpr char kTokenFileEnv[] = "TESSERA_TOKEN_FILE";
inline constexpr char kWorkerIdEnv[] = "TESSERA_WORKER_ID";
// The names of the variables the owner added to every worker's environment
// (InitOptions::worker_env), comma separated: a worker's own leases pass them on.
inline constexpr char kWorkerEnvKeysEnv[] = "TESSERA_WORKER_ENV_KEYS";
// The job (driver id at the head) whose lease started this worker.
inline constexpr char kJobIdEnv[] = "TESSERA_JOB_ID";
inline constexpr char kNodeIdEnv[] = "TESSERA_NODE_ID";
// This node's object store socket, set by the agent (src/node/worker_env.h); when unset the
// worker uses the one its owner names in WorkerReadyReply.
inline constexpr char kObjectStoreSocketEnv[] = "TESSERA_OBJECT_STORE_SOCKET";
// The address the worker's service binds: its agent sets the host it is reached at (unset:
// 127.0.0.1, drivers on this host only).
inline constexpr char kWorkerBindEnv[] = "TESSERA_WORKER_BIND";
// Set by the owner's lease so a task can submit tasks of its own (a nested driver runtime):
// the cluster's state folder on the owner's host and the head's address.
inline constexpr char kStateDirEnv[] = "TESSERA_STATE_DIR";
inline constexpr char kHeadAddressEnv[] = "TESSERA_HEAD_ADDRESS";
// "1" in the worker of a detached actor: it outlives its owner's stream (it ends by
// Worker.ExitActor or a signal), so it keeps serving the other drivers that call its actor.
inline constexpr char kDetachedActorEnv[] = "TESSERA_DETACHED_ACTOR";

// Whether this process was started as a worker.
bool InWorkerMode();

// Never returns: exits the process when its work is over (0), or when it cannot start (1, with
// the reason on stderr, which is the worker's log). Runs C++ tasks (ExecuteTask).
[[noreturn]] void RunWorker();

// The metadata key of a guest's Worker.PushTasks stream (another driver calling this process's
// actor), so that the worker never takes a guest for its owner, whichever stream comes first.
inline constexpr char kGuestStreamKey[] = "x-tessera-guest-stream";

// What runs each pushed task, on the gRPC thread that received it (one at a time for a stream,
// or up to an actor's max_concurrency at once): ExecuteTask for C++ workers; the Python package
// hands tasks to its interpreter's main thread. A result whose value is already the
// stored-value envelope (see PutTaskReturn) passes through unchanged.
using TaskRunner = std::function<v1::TaskResult(const v1::TaskSpec&, const ArgumentFetcher&)>;

// RunWorker in two halves, for a worker whose tasks run elsewhere than in a registry: serves and
// says ready to the owner, then returns (an error when it cannot start). From then on a watcher
// exits the process (0) two seconds after the owner's stream ended, whatever the interpreter
// is doing (never, in a detached actor's worker: see kDetachedActorEnv), and (1) when no owner
// connects in time.
//
// `on_cancel` (may be empty) is told of every non-forced cancel of a task pushed here, with the
// task's id, on a gRPC thread: the Python runner interrupts the task if it is the one running.
using CancelHook = std::function<void(const std::string& task_id)>;
// A runner that answers later: it takes the task and returns at once; `reply` is called once,
// from any thread, with the result. Given, the calls of an actor that allows several at once
// (max_concurrency or concurrency groups above 1) go through it from the thread that read them,
// so no thread waits per call in flight (a Python async actor's coroutines run on its event
// loop, its threaded calls on its groups' pools); without it they run on a pool of that many
// threads. The stream ends only once every reply has been written.
using ReplyFn = std::function<void(v1::TaskResult)>;
using AsyncTaskRunner =
    std::function<void(const v1::TaskSpec&, const ArgumentFetcher&, ReplyFn reply)>;
// A runner for a run of tasks that execute one after another (plain tasks, and the calls of an
// actor that runs one at a time) from one batch: handed over together, so the thread that runs
// them is woken once per run, not once per task, and answered together: `done` is called once,
// from any thread (the one that ran the last task), with the results in the tasks' order, each
// with its start and end times and its large values already stored (PutTaskReturn). The runner
// runs every task it is given one at a time, in the order given across calls. The thread that
// read the run goes on reading meanwhile. Without it each task goes through `runner`.
using RunDoneFn = std::function<void(std::vector<v1::TaskResult> results)>;
using SequenceRunner =
    std::function<void(std::vector<v1::TaskSpec> tasks, const ArgumentFetcher&, RunDoneFn done)>;
// The owner's local stream, read by the thread that runs the tasks (the one the sequence runner
// hands them to) while it has none to run, instead of by a thread that reads and then wakes it:
// one thread wake-up fewer per task. Offered (TaskThreadPump non-null) once every task the owner
// sends runs in order on that thread (a plain task worker; an actor that runs one call at a
// time), only to a runner that set SetTaskThreadPumpHook before StartWorker, and only on the
// local stream (WorkerReadyRequest.local_stream), never on gRPC's.
class OwnerStreamPump {
 public:
  virtual ~OwnerStreamPump() = default;
  // The socket to wait on (readable: a batch, or the stream's end, has come).
  virtual int fd() const = 0;
  // Reads the next batch, blocking until it is whole, and hands its tasks to the sequence runner
  // (queued when it returns), or, when one of them cannot run on the task thread, gives the pump
  // back to the stream's thread with the batch (TaskThreadPump is then null until offered
  // again). False once the stream is over (the pump is given back for good).
  virtual bool Pump() = 0;
};
// The pump the task thread may use now (null: none; wait for tasks as usual). Only one thread,
// the task thread, may call it.
OwnerStreamPump* TaskThreadPump();
// Asks for the pump, and says how to wake the task thread when it is offered: `offered` is called
// (from the stream's thread) each time TaskThreadPump becomes non-null.
void SetTaskThreadPumpHook(std::function<void()> offered);

absl::Status StartWorker(TaskRunner runner, CancelHook on_cancel = nullptr,
                         AsyncTaskRunner async_runner = nullptr,
                         SequenceRunner sequence_runner = nullptr);
// What a recursive cancel also does: cancel the work this process's own runtime submitted from
// inside the cancelled task `task_id` (binary), and only that (set by the API when a task makes
// that runtime). `force`: as the cancel was asked.
void SetNestedCancel(std::function<void(const std::string& task_id, bool force)> cancel_submitted);
// The task the calling thread runs now (TaskId binary; "" none): the parent of the tasks it
// submits. C++ tasks set it on their thread; the Python worker on the thread that runs a task.
const std::string& RunningTaskOnThisThread();
// The Owner address of the process that submitted that task ("" none known): the borrower the
// refs inside its result are lent to (SerializeResult).
const std::string& RunningTaskCallerOnThisThread();
void SetRunningTaskOnThisThread(std::string task_id, std::string caller = "");
// Whether this process's own runtime owns objects other processes borrow (set by the API when a
// task makes that runtime): each result says so (TaskResult.lends_objects), and the worker's
// owner keeps the worker while it does.
void SetLendsObjectsProbe(std::function<bool()> probe);
// Waits up to `timeout` for the owner's stream to end; true once it has (never true in a detached
// actor's worker, which outlives that stream).
bool WaitForWorkerEnd(absl::Duration timeout);
// Exits the process now (0), letting the stream's final status reach the owner first.
[[noreturn]] void ExitWorker();

// Puts the value made of `parts` (concatenated) into this node's store as task `task_id`'s
// return `return_index` (1: its only or first one), and gives the stored-value envelope to put
// in the TaskResult; Unavailable when this worker has no store (the value then goes inline);
// another error when the store refused it (ResultNotStoredError makes the task's error from it).
// The envelope lists `contained`, the refs written inside the value.
absl::StatusOr<std::string> PutTaskReturn(const std::string& task_id,
                                          const std::vector<std::string_view>& parts,
                                          uint32_t return_index,
                                          const std::vector<ObjectRefData>& contained);

// Sends item `index` (from 0) of streaming generator `task` (TaskSpec.streaming) to its caller's
// Owner service, waiting for the answer: `value` is the item's serialized value, or the
// stored-value envelope of a large one put as return index + 2 (PutTaskReturn). NotFound when the
// caller let the generator go (stop producing).
absl::Status ReportGeneratorItem(const v1::TaskSpec& task, int64_t index, std::string value);

// The value of an object owned by another process (a ref received inside a value), from its
// owner's GetObject: inline, or read from this node's store (pulled there first when the owner
// says it lies on another node). Only in worker mode (elsewhere FailedPrecondition).
// *owner_unreachable as ReadFromOwner (worker/owner_fetch.h) sets it.
absl::StatusOr<internal::SerializedValue> FetchObject(const ObjectRefData& ref,
                                                      absl::Duration timeout,
                                                      bool* owner_unreachable = nullptr);

// What a worker's own driver runtime (tasks, Puts and actors from inside a task) connects with:
// the cluster as the worker's owner named it, and the worker's node agent, so subtasks are
// leased there first. FailedPrecondition before RunWorker has learned its context.
struct NestedDriverEnv {
  std::string token;
  // What the owner added to this worker's environment, for the workers it leases in turn.
  std::map<std::string, std::string> worker_env;
  std::string state_dir;      // "" when the owner did not say
  std::string head_address;   // "" when the owner did not say
  std::string agent_address;  // this worker's node agent ("" when unknown)
  std::string bind_address;   // where the worker's services bind
};
absl::StatusOr<NestedDriverEnv> NestedDriverEnvironment();

// The context RunWorker learned (in a driver: a context with in_worker false).
const RuntimeContext& CurrentContext();

}  // namespace tessera::worker
