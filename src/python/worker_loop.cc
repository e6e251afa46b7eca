#include "python/worker_loop.h"

#include <poll.h>
#include <pthread.h>
#include <pybind11/stl.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "objects/object_location.h"
#include "objects/task_returns.h"
#include "python/core_error.h"
#include "python/object_ref.h"
#include "worker/borrowed_refs.h"
#include "worker/worker_runtime.h"

namespace tessera::python {
namespace {

// One pushed task between the gRPC thread that waits for it and the Python code that runs it.
struct PendingTask {
  v1::TaskSpec spec;
  std::vector<internal::SerializedValue> args;  // in order; refs already fetched
  std::chrono::steady_clock::time_point started;
  int64_t started_us = 0;   // when the main thread took it (wall clock, µs)
  int64_t finished_us = 0;  // when it was answered
  v1::TaskResult result;
  // Claimed by the one answer (task_done, task_failed or a cancel before it ran), before it
  // writes `result`: a second answer, from any thread, is refused.
  std::atomic<bool> answered{false};
  absl::Notification done;
  // Set for a task handed over by RunOnPythonAsync: the answer goes there instead of `done`.
  worker::ReplyFn reply;
};

// The tasks handed to the main thread. While it has none, the main thread reads the owner's
// stream itself when the worker runtime lends it (worker::TaskThreadPump): it then waits in
// poll(2) on that socket and on `wake_fd_`, which a Push from another thread (a guest's call, an
// async actor's) writes to.
class TaskQueue {
 public:
  TaskQueue() : wake_fd_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {}

  void Push(std::shared_ptr<PendingTask> task) {
    absl::MutexLock lock(&mu_);
    queue_.push_back(std::move(task));
    if (polling_ && wake_fd_ >= 0) {
      const uint64_t one = 1;
      (void)!write(wake_fd_, &one, sizeof(one));
    }
  }
  // The worker runtime lends the main thread its stream: wakes it if it waits without it.
  void PumpOffered() {
    absl::MutexLock lock(&mu_);
    pump_offered_ = true;
  }
  // The next task, or nullptr when none came within `timeout`. Main thread only.
  std::shared_ptr<PendingTask> Pop(absl::Duration timeout) {
    const absl::Time deadline = absl::Now() + timeout;
    absl::MutexLock lock(&mu_);
    while (queue_.empty()) {
      worker::OwnerStreamPump* pump = wake_fd_ >= 0 ? worker::TaskThreadPump() : nullptr;
      if (pump == nullptr) {
        pump_offered_ = false;
        auto ready = [this] {
          mu_.AssertHeld();  // a Condition is evaluated under the mutex it waits with
          return !queue_.empty() || pump_offered_;
        };
        if (!mu_.AwaitWithDeadline(absl::Condition(&ready), deadline)) break;
        continue;
      }
      const absl::Duration left = deadline - absl::Now();
      if (left <= absl::ZeroDuration()) break;
      polling_ = true;
      mu_.Unlock();
      pollfd waits[2] = {{pump->fd(), POLLIN, 0}, {wake_fd_, POLLIN, 0}};
      const int ready = poll(waits, 2, static_cast<int>(absl::ToInt64Milliseconds(left)) + 1);
      if (ready > 0 && (waits[1].revents & POLLIN) != 0) {
        uint64_t count;
        (void)!read(wake_fd_, &count, sizeof(count));
      }
      const bool readable = ready > 0 && waits[0].revents != 0;
      mu_.Lock();
      polling_ = false;
      if (readable) {
        mu_.Unlock();
        pump->Pump();  // queues the batch's tasks here (or hands the stream back)
        mu_.Lock();
      }
    }
    if (queue_.empty()) return nullptr;
    std::shared_ptr<PendingTask> task = std::move(queue_.front());
    queue_.pop_front();
    return task;
  }

 private:
  const int wake_fd_;  // -1 when no eventfd could be made: no pump then
  absl::Mutex mu_;
  std::deque<std::shared_ptr<PendingTask>> queue_ ABSL_GUARDED_BY(mu_);
  bool polling_ ABSL_GUARDED_BY(mu_) = false;       // the main thread waits in poll(2)
  bool pump_offered_ ABSL_GUARDED_BY(mu_) = false;  // since the main thread last looked
};

TaskQueue* queue = nullptr;  // made by start_worker, never freed (the process _exits)

// The plain task the main thread runs now, and the ones cancelled before they started: a cancel
// interrupts the first (KeyboardInterrupt in the main thread) and makes next_task answer the
// others without running them.
absl::Mutex running_mu(absl::kConstInit);
std::string* running ABSL_GUARDED_BY(running_mu) = nullptr;
absl::flat_hash_set<std::string>* cancelled_early ABSL_GUARDED_BY(running_mu) = nullptr;

// The interpreter's main thread (where tasks run), set by start_worker.
pthread_t main_thread;

void OnCancel(const std::string& task_id) {
  absl::MutexLock lock(&running_mu);
  if (running != nullptr && *running == task_id) {
    // A real SIGINT to the main thread: it also wakes a task out of a blocking call (sleep,
    // select), which only setting Python's interrupt flag would not.
    pthread_kill(main_thread, SIGINT);
    return;
  }
  cancelled_early->insert(task_id);
}

v1::TaskResult Failure(const v1::TaskSpec& spec, std::string message) {
  v1::TaskResult result;
  result.set_task_id(spec.task_id());
  result.mutable_error()->set_kind("invalid");
  result.mutable_error()->set_message(std::move(message));
  return result;
}

// The task as Python will see it, its arguments fetched; else the result that refuses it.
std::variant<std::shared_ptr<PendingTask>, v1::TaskResult> Prepare(
    v1::TaskSpec spec, const worker::ArgumentFetcher& fetch) {
  if (auto refused = worker::RefuseOtherLanguage(spec, v1::LANGUAGE_PYTHON, "Python")) {
    return *std::move(refused);
  }
  auto task = std::make_shared<PendingTask>();
  task->spec = std::move(spec);
  for (int i = 0; i < task->spec.args_size(); ++i) {
    const v1::TaskArg& arg = task->spec.args(i);
    if (!arg.has_ref()) {
      task->args.emplace_back(arg.value());
      continue;
    }
    auto value = fetch(arg.ref());
    if (!value.ok()) {
      return Failure(task->spec, absl::StrCat("argument ", i, ": ", value.status().message()));
    }
    task->args.push_back(*std::move(value));
  }
  return task;
}

// The runner the C++ worker calls on its gRPC threads: waits for the answer.
v1::TaskResult RunOnPython(const v1::TaskSpec& spec, const worker::ArgumentFetcher& fetch) {
  auto prepared = Prepare(spec, fetch);
  if (auto* refused = std::get_if<v1::TaskResult>(&prepared)) return std::move(*refused);
  std::shared_ptr<PendingTask> task = std::get<std::shared_ptr<PendingTask>>(std::move(prepared));
  queue->Push(task);
  task->done.WaitForNotification();
  return std::move(task->result);
}

// The runner of a run of tasks that execute in order: each is queued as soon as its arguments
// are there (so the main thread, once woken, goes from one to the next without sleeping), and
// the main thread, answering the last, hands all the results over (it writes them to the
// stream: no other thread is woken for it).
void RunOnPythonInOrder(std::vector<v1::TaskSpec> specs, const worker::ArgumentFetcher& fetch,
                        worker::RunDoneFn done) {
  struct Run {
    std::vector<v1::TaskResult> results;  // sized once: each slot written by one thread
    // Answers still to come, plus one this thread holds until every task is queued.
    std::atomic<size_t> left{0};
    worker::RunDoneFn done;
    void Answered() {
      if (left.fetch_sub(1, std::memory_order_acq_rel) == 1) done(std::move(results));
    }
  };
  auto run = std::make_shared<Run>();
  run->results.resize(specs.size());
  run->left.store(specs.size() + 1, std::memory_order_relaxed);
  run->done = std::move(done);
  for (size_t i = 0; i < specs.size(); ++i) {
    auto prepared = Prepare(std::move(specs[i]), fetch);
    if (auto* refused = std::get_if<v1::TaskResult>(&prepared)) {
      run->results[i] = std::move(*refused);
      run->Answered();
      continue;
    }
    std::shared_ptr<PendingTask> task = std::get<std::shared_ptr<PendingTask>>(std::move(prepared));
    // The task owns its reply: a raw pointer back to it, valid while it is answered.
    task->reply = [run, i, pending = task.get()](v1::TaskResult result) {
      result.set_start_time_us(pending->started_us);
      result.set_end_time_us(pending->finished_us);
      run->results[i] = std::move(result);
      run->Answered();
    };
    queue->Push(std::move(task));
  }
  run->Answered();  // every task is queued (or refused)
}

// The runner of the calls of an actor that allows several at once: queued for the main thread,
// which hands them to the actor's event loop or thread pools; answered through `reply`.
void RunOnPythonAsync(const v1::TaskSpec& spec, const worker::ArgumentFetcher& fetch,
                      worker::ReplyFn reply) {
  auto prepared = Prepare(spec, fetch);
  if (auto* refused = std::get_if<v1::TaskResult>(&prepared)) {
    reply(std::move(*refused));
    return;
  }
  std::shared_ptr<PendingTask> task = std::get<std::shared_ptr<PendingTask>>(std::move(prepared));
  task->reply = std::move(reply);
  queue->Push(std::move(task));
}

// What Python sees of a task: read-only fields and the argument Buffers.
struct PyTask {
  std::shared_ptr<PendingTask> pending;
};

ObjectRefBase RefFromProto(const v1::ObjectRefProto& proto) {
  ObjectRefData data;
  if (auto id = ObjectId::FromBinary(proto.object_id()); id.ok()) data.id = *id;
  data.owner = OwnerAddress{proto.owner_node_id(), proto.owner_address(), proto.owner_worker_id()};
  return ObjectRefBase(std::move(data), nullptr);
}

// The task's code has returned (or raised): a cancel no longer interrupts it.
void NoLongerRunning(const PendingTask& task) {
  absl::MutexLock lock(&running_mu);
  if (running != nullptr && *running == task.spec.task_id()) running->clear();
  if (cancelled_early != nullptr) cancelled_early->erase(task.spec.task_id());
}

// Claims the one answer of `task`; RuntimeError when it was answered already.
void Claim(PendingTask& task) {
  if (task.answered.exchange(true)) throw std::runtime_error("this task was already answered");
}

// One return's value made of `parts`: its bytes inline, or for a large one the stored-value
// envelope once it went straight into this node's store as return `index` (only a node without a
// store keeps it inline). An error when the store refused it (full even after spilling): the task
// fails once with the reason. Called without the GIL.
// Who the refs inside `task`'s results are lent to: the process that submitted it.
const std::string& Caller(const v1::TaskSpec& task) {
  return task.caller().empty() ? task.generator_owner() : task.caller();
}

absl::StatusOr<std::string> ReturnValue(const std::string& task_id, const PartViews& parts,
                                        uint32_t index,
                                        const std::vector<ObjectRefData>& contained) {
  if (parts.size >= kInlineValueLimitBytes) {
    absl::StatusOr<std::string> envelope =
        worker::PutTaskReturn(task_id, parts.views, index, contained);
    if (envelope.ok() || envelope.status().code() != absl::StatusCode::kUnavailable) {
      return envelope;
    }
  }
  std::string value;
  value.reserve(parts.size);
  for (std::string_view view : parts.views) value.append(view.data(), view.size());
  return value;
}

// Sends the claimed answer to the gRPC thread waiting for it.
void Finish(PendingTask& task) {
  task.finished_us = absl::ToUnixMicros(absl::Now());
  NoLongerRunning(task);
  task.result.set_task_id(task.spec.task_id());
  task.result.set_run_nanos(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                std::chrono::steady_clock::now() - task.started)
                                .count());
  if (task.reply) {
    task.reply(std::move(task.result));
    return;
  }
  task.done.Notify();
}

// The Task class next_task() hands out, and the task kinds it names.
void BindTaskClass(py::module_& m) {
  py::class_<PyTask>(m, "Task", "A task pushed to this worker, as next_task() hands it out.")
      .def_property_readonly("task_id",
                             [](const PyTask& t) { return py::bytes(t.pending->spec.task_id()); })
      .def_property_readonly(
          "kind", [](const PyTask& t) { return static_cast<int>(t.pending->spec.kind()); })
      .def_property_readonly("function", [](const PyTask& t) { return t.pending->spec.function(); })
      .def_property_readonly("code",
                             [](const PyTask& t) -> py::object {
                               if (!t.pending->spec.has_function_ref()) return py::none();
                               return WrapRef(RefFromProto(t.pending->spec.function_ref()));
                             })
      .def_property_readonly("actor_id",
                             [](const PyTask& t) { return py::bytes(t.pending->spec.actor_id()); })
      .def_property_readonly("attempt", [](const PyTask& t) { return t.pending->spec.attempt(); })
      .def_property_readonly(
          "num_returns", [](const PyTask& t) { return std::max(1, t.pending->spec.num_returns()); })
      .def_property_readonly("streaming",
                             [](const PyTask& t) { return t.pending->spec.streaming(); })
      .def_property_readonly("placement_group",
                             [](const PyTask& t) { return t.pending->spec.placement_group(); })
      .def_property_readonly("capture_child_tasks",
                             [](const PyTask& t) { return t.pending->spec.capture_child_tasks(); })
      .def_property_readonly("max_concurrency",
                             [](const PyTask& t) { return t.pending->spec.max_concurrency(); })
      .def_property_readonly("concurrency_groups",
                             [](const PyTask& t) {
                               const auto& groups = t.pending->spec.concurrency_groups();
                               return std::map<std::string, int>(groups.begin(), groups.end());
                             })
      .def_property_readonly("concurrency_group",
                             [](const PyTask& t) { return t.pending->spec.concurrency_group(); })
      .def_property_readonly("retry_exceptions",
                             [](const PyTask& t) { return t.pending->spec.retry_exceptions(); })
      .def_property_readonly("retry_exception_types",
                             [](const PyTask& t) {
                               const auto& types = t.pending->spec.retry_exception_types();
                               return std::vector<std::string>(types.begin(), types.end());
                             })
      .def_property_readonly("args", [](const PyTask& t) {
        py::list args;
        // Buffers over the task's own argument bytes: they live as long as the task does.
        for (const internal::SerializedValue& value : t.pending->args) {
          args.append(WrapBuffer(value));
        }
        return args;
      });
  // Task kinds, as TaskSpec numbers them.
  m.attr("TASK") = static_cast<int>(v1::TASK);
  m.attr("ACTOR_CREATE") = static_cast<int>(v1::ACTOR_CREATE);
  m.attr("ACTOR_METHOD") = static_cast<int>(v1::ACTOR_METHOD);
}

// Serving, taking the next task, and which task the calling thread runs.
void BindIntakeCalls(py::module_& m) {
  m.def(
      "start_worker",
      [] {
        queue = new TaskQueue();
        main_thread = pthread_self();
        {
          absl::MutexLock lock(&running_mu);
          running = new std::string();
          cancelled_early = new absl::flat_hash_set<std::string>();
        }
        absl::Status started;
        {
          py::gil_scoped_release release;
          // The main thread reads the owner's stream itself while idle, when lent it.
          worker::SetTaskThreadPumpHook([] { queue->PumpOffered(); });
          started =
              worker::StartWorker(RunOnPython, OnCancel, RunOnPythonAsync, RunOnPythonInOrder);
        }
        if (!started.ok()) ThrowStatus(started);
      },
      "Serves the Worker service and tells the owner this worker is ready.");
  m.def(
      "next_task",
      [](double timeout_s) -> py::object {
        std::shared_ptr<PendingTask> task;
        const absl::Time deadline = absl::Now() + absl::Seconds(timeout_s);
        while (true) {
          {
            py::gil_scoped_release release;
            task = queue->Pop(std::max(absl::ZeroDuration(), deadline - absl::Now()));
          }
          if (task == nullptr) return py::none();
          task->started = std::chrono::steady_clock::now();
          task->started_us = absl::ToUnixMicros(absl::Now());
          bool cancelled = false;
          {
            absl::MutexLock lock(&running_mu);
            cancelled = cancelled_early->erase(task->spec.task_id()) > 0;
            if (!cancelled && task->spec.kind() == v1::TASK) *running = task->spec.task_id();
          }
          if (!cancelled) break;
          // Cancelled before it started: answered without running (the owner reports it
          // cancelled).
          task->answered.store(true);
          v1::TaskError* error = task->result.mutable_error();
          error->set_kind("application");
          error->set_type("TaskCancelledError");
          error->set_message("cancelled before it started");
          py::gil_scoped_release release;  // a reply writes to the owner's stream
          Finish(*task);
        }
        return py::cast(PyTask{std::move(task)});
      },
      py::arg("timeout_s"), "The next task, or None when none came within the timeout.");
  m.def(
      "worker_ended",
      [](double timeout_s) {
        py::gil_scoped_release release;
        return worker::WaitForWorkerEnd(absl::Seconds(timeout_s));
      },
      py::arg("timeout_s"), "Whether the owner's stream has ended (waiting up to the timeout).");
  m.def(
      "set_running_task",
      [](const py::bytes& task_id) { worker::SetRunningTaskOnThisThread(std::string(task_id)); },
      py::arg("task_id"),
      "The task the calling thread runs from now (b'' none): the parent of what it submits, "
      "which a recursive cancel of that task reaches.");
}

// A task's values: its return, its returns, and a streaming generator's items.
void BindValueCalls(py::module_& m) {
  m.def(
      "task_done",
      [](const PyTask& task, const py::list& parts, const py::list& contained) {
        const PartViews parts_in(parts);  // held while the copy runs without the GIL
        const std::vector<ObjectRefData> refs = RefDataOf(contained);
        PendingTask& pending = *task.pending;
        Claim(pending);
        // A small value without refs is copied and sent with the GIL held: letting it go for
        // those few microseconds would hand it to the main thread (waiting with the next task)
        // and wait for it back, which costs more than the answer.
        std::optional<py::gil_scoped_release> release;
        if (!refs.empty() || parts_in.size >= kInlineValueLimitBytes) release.emplace();
        // Counted for the caller while this process's refs still hold them.
        worker::Lend(refs, Caller(pending.spec));
        absl::StatusOr<std::string> value = ReturnValue(pending.spec.task_id(), parts_in, 1, refs);
        if (value.ok()) {
          pending.result.set_value(*std::move(value));
        } else {
          worker::Unlend(refs, Caller(pending.spec));
          *pending.result.mutable_error() = ResultNotStoredError(value.status());
        }
        Finish(pending);
      },
      py::arg("task"), py::arg("parts"), py::arg("contained") = py::list(),
      "Answers `task` with the value made of `parts`; `contained` are the refs written inside "
      "it (lent to the caller).");
  m.def(
      "report_generator_item",
      [](const PyTask& task, int64_t index, const py::list& parts, const py::list& contained) {
        const PartViews parts_in(parts);  // held while the copy runs without the GIL
        const std::vector<ObjectRefData> refs = RefDataOf(contained);
        const v1::TaskSpec& spec = task.pending->spec;
        absl::Status status;
        {
          py::gil_scoped_release release;
          worker::Lend(refs, Caller(spec));
          absl::StatusOr<std::string> value =
              ReturnValue(spec.task_id(), parts_in, static_cast<uint32_t>(index + 2), refs);
          status = value.ok() ? worker::ReportGeneratorItem(spec, index, *std::move(value))
                              : value.status();
          // Not made, or refused by the caller (it let the generator go): nothing was lent. A
          // caller that did not answer may have taken it (or is gone): the count stays.
          if (!value.ok() || absl::IsNotFound(status) || absl::IsFailedPrecondition(status) ||
              absl::IsInvalidArgument(status)) {
            worker::Unlend(refs, Caller(spec));
          }
        }
        if (!status.ok()) ThrowStatus(status);
      },
      py::arg("task"), py::arg("index"), py::arg("parts"), py::arg("contained") = py::list(),
      "Sends value `index` (from 0) a streaming generator task yielded, made of `parts`, to its "
      "caller, once it has it; CoreError (NOT_FOUND: the caller let the generator go) when it "
      "cannot.");
  m.def(
      "task_done_returns",
      [](const PyTask& task, const py::list& values, const py::list& contained) {
        std::vector<PartViews> parts_in;  // held while the copies run without the GIL
        parts_in.reserve(values.size());
        for (py::handle parts : values) parts_in.emplace_back(parts.cast<py::list>());
        std::vector<std::vector<ObjectRefData>> refs(parts_in.size());
        for (size_t i = 0; i < refs.size() && i < contained.size(); ++i) {
          refs[i] = RefDataOf(contained[i].cast<py::list>());
        }
        PendingTask& pending = *task.pending;
        Claim(pending);
        py::gil_scoped_release release;
        for (const auto& one : refs) worker::Lend(one, Caller(pending.spec));
        std::vector<std::string> encoded;
        encoded.reserve(parts_in.size());
        for (size_t i = 0; i < parts_in.size(); ++i) {
          absl::StatusOr<std::string> value = ReturnValue(pending.spec.task_id(), parts_in[i],
                                                          static_cast<uint32_t>(i + 1), refs[i]);
          if (!value.ok()) {
            for (const auto& one : refs) worker::Unlend(one, Caller(pending.spec));
            *pending.result.mutable_error() = ResultNotStoredError(value.status());
            Finish(pending);
            return;
          }
          encoded.push_back(*std::move(value));
        }
        pending.result.set_value(EncodeTaskReturns(encoded));
        Finish(pending);
      },
      py::arg("task"), py::arg("values"), py::arg("contained") = py::list(),
      "Answers `task`, whose num_returns is len(values), with one value per return (each the "
      "list of parts it is made of); contained[i] are the refs written inside value i.");
}

// A task that raised, a task whose code returned, and the worker's end.
void BindEndCalls(py::module_& m) {
  m.def(
      "task_failed",
      [](const PyTask& task, const std::string& type, const std::string& message,
         py::bytes exception, const std::string& traceback, bool retryable) {
        PendingTask& pending = *task.pending;
        Claim(pending);
        v1::TaskError* error = pending.result.mutable_error();
        error->set_kind("application");
        error->set_type(type);
        error->set_message(message);
        error->set_exception(std::string(exception));
        error->set_traceback(traceback);
        error->set_retryable(retryable);
        py::gil_scoped_release release;  // a reply writes to the owner's stream
        Finish(pending);
      },
      py::arg("task"), py::arg("type"), py::arg("message"), py::arg("exception"),
      py::arg("traceback"), py::arg("retryable") = false,
      "Answers `task` with the exception its code raised (a serialized Python value).");
  m.def(
      "task_returned", [](const PyTask& task) { NoLongerRunning(*task.pending); }, py::arg("task"),
      "The task's code has returned or raised: a cancel from now on does not interrupt it.");
  m.def(
      "worker_exit",
      [] {
        py::gil_scoped_release release;
        worker::ExitWorker();
      },
      "Ends this worker process now (after the owner's stream ended).");
}

}  // namespace

void BindWorkerLoop(py::module_& m) {
  BindTaskClass(m);
  BindIntakeCalls(m);
  BindValueCalls(m);
  BindEndCalls(m);
}

}  // namespace tessera::python
