#include "worker/worker_runtime.h"

#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/status_macros.h"
#include "objects/object_location.h"
#include "objects/object_node_store.h"
#include "rpc/auth.h"
#include "rpc/channel.h"
#include "rpc/local_stream_socket.h"
#include "rpc/retry.h"
#include "rpc/server.h"
#include "rpc/status_conversion.h"
#include "rpc/token.h"
#include "tessera/v1/worker.grpc.pb.h"
#include "worker/borrowed_refs.h"
#include "worker/owner_fetch.h"
#include "worker/task_executor.h"

namespace tessera::worker {
namespace {

// How long a worker that said it is ready waits for its owner's stream before giving up.
constexpr absl::Duration kNoOwnerTimeout = absl::Seconds(60);
// How long another driver's stream waits for this process's actor to be constructed.
constexpr absl::Duration kGuestWaitForActor = absl::Seconds(60);

struct WorkerGlobals {
  std::string token;
  std::string owner_address;
  std::unique_ptr<v1::Owner::Stub> owner;
  RuntimeContext context;
  // This node's object store (large results go there; stored arguments are read from it).
  std::unique_ptr<NodeObjectStore> store;
  // This node's agent (read beside the store's socket).
  std::string agent_address;
  std::string bind_address = "127.0.0.1";
  TaskRunner runner;
  CancelHook on_cancel;
  AsyncTaskRunner async_runner;    // may be empty
  SequenceRunner sequence_runner;  // may be empty
  bool detached = false;           // a detached actor's worker (kDetachedActorEnv)
};

// The nested runtime's cancel of what a task submitted (SetNestedCancel).
absl::Mutex nested_cancel_mu(absl::kConstInit);
std::function<void(const std::string&, bool)>* nested_cancel ABSL_GUARDED_BY(nested_cancel_mu) =
    nullptr;

// Whether this process's own runtime owns objects others borrow (SetLendsObjectsProbe).
absl::Mutex lends_mu(absl::kConstInit);
std::function<bool()>* lends_probe ABSL_GUARDED_BY(lends_mu) = nullptr;

bool LendsObjects() {
  absl::MutexLock lock(&lends_mu);
  return lends_probe != nullptr && (*lends_probe)();
}

thread_local std::string running_task;         // RunningTaskOnThisThread
thread_local std::string running_task_caller;  // RunningTaskCallerOnThisThread

WorkerGlobals* globals = nullptr;  // set once by RunWorker before any task runs

std::string Env(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? "" : value;
}

[[noreturn]] void Die(const std::string& why) {
  std::fprintf(stderr, "tessera worker: %s\n", why.c_str());
  std::fflush(stderr);
  _exit(1);
}

// Up to `limit` threads running an actor's calls when it allows several at once, started as
// calls arrive with none idle (an actor allowing 1000 holds only as many as ran at once).
// Thread-safe; the destructor runs what was queued, then joins.
class CallPool {
 public:
  explicit CallPool(int limit) : limit_(limit) {}
  ~CallPool() {
    std::vector<std::thread> threads;
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;
      changed_.SignalAll();
      threads.swap(threads_);  // no thread starts once stopping
    }
    for (std::thread& t : threads) t.join();
  }
  void Run(std::function<void()> fn) {
    absl::MutexLock lock(&mu_);
    queue_.push_back(std::move(fn));
    if (idle_ < static_cast<int>(queue_.size()) && static_cast<int>(threads_.size()) < limit_) {
      threads_.emplace_back([this] { Loop(); });
    } else {
      changed_.Signal();
    }
  }

 private:
  void Loop() {
    while (true) {
      std::function<void()> fn;
      {
        absl::MutexLock lock(&mu_);
        ++idle_;
        while (!stopping_ && queue_.empty()) changed_.Wait(&mu_);
        --idle_;
        if (queue_.empty()) return;
        fn = std::move(queue_.front());
        queue_.pop_front();
      }
      fn();
    }
  }
  const int limit_;
  absl::Mutex mu_;
  absl::CondVar changed_;
  std::deque<std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  int idle_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::thread> threads_ ABSL_GUARDED_BY(mu_);
};

// How often a worker whose objects were borrowed checks whether they still are.
constexpr absl::Duration kLendingCheckPeriod = absl::Milliseconds(500);

// The calls of one stream handed to the async runner and not yet answered: the stream is
// written under one mutex, and must not end before the last reply is written.
// How a task stream is read and written: Worker.PushTasks's gRPC stream, or the owner's local
// socket (rpc/local_stream_socket.h). Read blocks for the next batch (false: the stream is over);
// Write sends one batch (false: the peer is gone).
using BatchReader = std::function<bool(v1::TaskBatch*)>;
using BatchWriter = std::function<bool(const v1::TaskResultBatch&)>;

class StreamReplies {
 public:
  explicit StreamReplies(BatchWriter write) : write_(std::move(write)) {}
  // Writes one batch (from the reading thread or a reply).
  bool Write(v1::TaskResultBatch& batch) {
    // What the tasks borrowed from their arguments, and lent their callers inside their results,
    // is counted at the owners before the callers hear of the results and let go of theirs.
    FlushBorrows();
    absl::MutexLock lock(&write_mu_);
    // Read under the lock: the batches say it in the order they are written.
    lends_ = LendsObjects();
    batch.set_lends_objects(lends_);
    return write_(batch);
  }
  // Tells the owner, with a batch of no results, once the objects the last batch said others
  // borrow are no longer borrowed (so it may let this worker go when idle).
  void TellIfNoLongerLending() {
    {
      absl::MutexLock lock(&write_mu_);
      if (!lends_ || LendsObjects()) return;
    }
    v1::TaskResultBatch none;
    Write(none);
  }
  // Hands `task` to the async runner; its reply is written as one batch when it comes.
  void Start(const v1::TaskSpec& task, const ArgumentFetcher& fetch) {
    {
      absl::MutexLock lock(&mu_);
      ++outstanding_;
    }
    const int64_t start_us = absl::ToUnixMicros(absl::Now());
    globals->async_runner(task, fetch, [this, start_us](v1::TaskResult result) {
      result.set_start_time_us(start_us);
      result.set_end_time_us(absl::ToUnixMicros(absl::Now()));
      v1::TaskResultBatch one;
      *one.add_results() = std::move(result);
      Write(one);
      absl::MutexLock lock(&mu_);
      --outstanding_;
    });
  }
  // Hands `run` (tasks that execute in order) to the sequence runner; their results are written
  // as one batch by the thread that ran the last of them.
  void StartRun(std::vector<v1::TaskSpec> run, const ArgumentFetcher& fetch) {
    {
      absl::MutexLock lock(&mu_);
      ++outstanding_;
    }
    globals->sequence_runner(std::move(run), fetch, [this](std::vector<v1::TaskResult> results) {
      v1::TaskResultBatch batch;
      batch.mutable_results()->Reserve(static_cast<int>(results.size()));
      for (v1::TaskResult& result : results) *batch.add_results() = std::move(result);
      Write(batch);
      absl::MutexLock lock(&mu_);
      --outstanding_;
    });
  }
  // Returns once every started call has been answered.
  void WaitForAll() {
    absl::MutexLock lock(&mu_);
    auto none = [this] {
      mu_.AssertHeld();
      return outstanding_ == 0;
    };
    mu_.Await(absl::Condition(&none));
  }

 private:
  const BatchWriter write_;
  absl::Mutex write_mu_;
  bool lends_ ABSL_GUARDED_BY(write_mu_) = false;  // what the last batch written said
  absl::Mutex mu_;
  int outstanding_ ABSL_GUARDED_BY(mu_) = 0;
};

// The task thread's hook (SetTaskThreadPumpHook) and the pump offered to it now.
absl::Mutex pump_hook_mu(absl::kConstInit);
std::function<void()>* pump_hook ABSL_GUARDED_BY(pump_hook_mu) = nullptr;
std::atomic<OwnerStreamPump*> offered_pump{nullptr};

bool PumpHookSet() {
  absl::MutexLock lock(&pump_hook_mu);
  return pump_hook != nullptr;
}

// The owner's local stream lent to the task thread (OwnerStreamPump) by the stream's thread,
// which waits meanwhile. Lives on that thread's stack until given back.
class InlinePump final : public OwnerStreamPump {
 public:
  // `run`: hands a batch's tasks to the sequence runner; false when the batch has a task that
  // must go through the stream's thread.
  using InOrderFn = std::function<bool(v1::TaskBatch&)>;
  // `buffered`: whether `read` holds bytes read from the socket already (more to take now,
  // though the socket may have nothing).
  InlinePump(const BatchReader& read, std::function<bool()> buffered, int fd, InOrderFn run)
      : read_(read), buffered_(std::move(buffered)), fd_(fd), run_(std::move(run)) {}

  int fd() const override { return fd_; }

  bool Pump() override {
    do {
      v1::TaskBatch batch;
      if (!read_(&batch)) {
        GiveBack(/*over=*/true, {});
        return false;
      }
      if (!run_(batch)) {
        GiveBack(/*over=*/false, std::move(batch));
        return true;
      }
    } while (buffered_());
    return true;
  }

  // Offers the pump to the task thread and waits until it is given back: true when the stream
  // is over, else false with the batch the stream's thread must handle in `handed_back`.
  bool OfferAndWait(v1::TaskBatch* handed_back) {
    offered_pump.store(this);
    {
      absl::MutexLock lock(&pump_hook_mu);
      if (pump_hook != nullptr) (*pump_hook)();
    }
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(&returned_));
    *handed_back = std::move(handed_back_);
    return over_;
  }

 private:
  void GiveBack(bool over, v1::TaskBatch batch) {
    offered_pump.store(nullptr);
    absl::MutexLock lock(&mu_);
    over_ = over;
    handed_back_ = std::move(batch);
    returned_ = true;
  }

  const BatchReader& read_;
  const std::function<bool()> buffered_;
  const int fd_;
  const InOrderFn run_;
  absl::Mutex mu_;
  bool returned_ ABSL_GUARDED_BY(mu_) = false;
  bool over_ ABSL_GUARDED_BY(mu_) = false;
  v1::TaskBatch handed_back_ ABSL_GUARDED_BY(mu_);
};

// Calls of an actor run at once: its default group's max_concurrency and each concurrency
// group's limit together.
int ActorConcurrency(const v1::TaskSpec& create) {
  int total = std::max(1, create.max_concurrency());
  for (const auto& [group, limit] : create.concurrency_groups()) total += std::max(0, limit);
  return total;
}

// Resolves an ObjectRef argument: its value, through its owner.
absl::StatusOr<internal::SerializedValue> FetchFromOwner(const v1::ObjectRefProto& ref) {
  auto id = ObjectId::FromBinary(ref.object_id());
  if (!id.ok()) return id.status();
  ObjectRefData data{*id,
                     OwnerAddress{ref.owner_node_id(), ref.owner_address(), ref.owner_worker_id()}};
  return FetchObject(data, absl::InfiniteDuration());
}

// A large value of `result` goes into this node's store and the result says where it lies (the
// stored-value envelope) instead of carrying it.
void StoreLargeValue(const v1::TaskSpec& task, v1::TaskResult& result) {
  // Several returns arrive encoded, each large one stored already (objects/task_returns.h).
  if (!result.has_value() || result.value().size() < kInlineValueLimitBytes || globals == nullptr ||
      globals->store == nullptr || task.num_returns() > 1) {
    return;
  }
  auto task_id = TaskId::FromBinary(task.task_id());
  if (task_id.ok()) {
    auto where = globals->store->Put(ObjectId::ForTaskReturn(*task_id, 1), result.value());
    // No store on this node: the value goes inline as it would have without one. A store that
    // refuses it (full even after spilling) fails the task once, saying so; never inline.
    const std::vector<ObjectRefData> contained = RefsInsideValue(result.value());
    if (where.ok()) {
      // The caller's entry holds the refs inside it (lent to it by SerializeResult).
      for (const ObjectRefData& ref : contained) RefToProto(ref, where->add_contained_refs());
      result.set_value(EncodeStoredEnvelope(*where));
    } else if (where.status().code() != absl::StatusCode::kUnavailable) {
      Unlend(contained, task.caller());  // the caller gets an error, holding nothing
      *result.mutable_error() = ResultNotStoredError(where.status());
    }
  }
}

// Runs `task` (its large value stored). Each result says when the task began and ended here
// (its owner's timeline).
v1::TaskResult Execute(const v1::TaskSpec& task, const ArgumentFetcher& fetch) {
  const int64_t start_us = absl::ToUnixMicros(absl::Now());
  // A C++ task runs on this thread: what it submits is its own (recursive cancel).
  SetRunningTaskOnThisThread(task.task_id(), task.caller());
  v1::TaskResult result = globals->runner(task, fetch);
  SetRunningTaskOnThisThread("");
  result.set_start_time_us(start_us);
  StoreLargeValue(task, result);
  result.set_end_time_us(absl::ToUnixMicros(absl::Now()));
  return result;
}

// Serves one owner's stream of task batches, one task at a time in order. A process hosting an
// actor also serves guest streams: other drivers that found the actor by name (their calls run
// in their stream's order, one at a time with the owner's when max_concurrency is 1); the
// process still ends with its owner's stream, unless its actor is detached.
// Thread-safe: gRPC may call PushTasks on any thread; a second stream waits for the actor to be
// constructed, and is refused by a plain worker.
class WorkerService final : public v1::Worker::Service {
 public:
  grpc::Status PushTasks(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<v1::TaskResultBatch, v1::TaskBatch>* stream) override {
    // A guest says so: it can come before the owner's stream (it learned the address from the
    // owner, which opens its own stream a moment later).
    if (context->client_metadata().count(kGuestStreamKey) > 0) {
      // A guest can arrive as soon as the owner knows the worker's address, before the actor's
      // constructor ran here: it waits for that (a plain task worker never hosts one).
      if (!actor_created_.WaitForNotificationWithTimeout(kGuestWaitForActor)) {
        return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                            "this worker already serves its owner's stream and hosts no actor");
      }
      return ServeGuest(stream);
    }
    if (!BeginOwnerStream()) {
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                          "this worker already serves its owner's stream");
    }
    ServeOwner([stream](v1::TaskBatch* batch) { return stream->Read(batch); },
               [stream](const v1::TaskResultBatch& results) { return stream->Write(results); });
    return grpc::Status::OK;
  }

  // Claims the one owner's stream (Worker.PushTasks or the local socket): false when another
  // came first. Stops offering the local socket either way.
  bool BeginOwnerStream() {
    absl::MutexLock lock(&mu_);
    if (local_listener_ >= 0) shutdown(local_listener_, SHUT_RDWR);  // its thread ends
    if (streaming_) return false;
    streaming_ = true;
    return true;
  }
  void SetLocalListener(int fd) {
    absl::MutexLock lock(&mu_);
    local_listener_ = fd;
  }
  void CloseLocalListener() {
    absl::MutexLock lock(&mu_);
    if (local_listener_ >= 0) close(local_listener_);
    local_listener_ = -1;
  }

  // Serves the owner's stream on the local socket `listener` offered in WorkerReady, if the
  // owner opens it (the first connection of this process's user; the socket closes then, or
  // when the owner opens Worker.PushTasks instead).
  void ServeLocalOwner(int listener) {
    pthread_setname_np(pthread_self(), "owner-stream");
    absl::StatusOr<int> fd = rpc::AcceptSameUser(listener);
    CloseLocalListener();
    if (!fd.ok()) return;
    if (!BeginOwnerStream()) {
      close(*fd);
      return;
    }
    rpc::FrameReader reader(*fd);
    const int out = *fd;
    ServeOwner([&reader](v1::TaskBatch* batch) { return reader.Next(batch); },
               [out](const v1::TaskResultBatch& results) {
                 std::string frame;
                 rpc::AppendFrame(results, &frame);
                 return rpc::WriteAll(out, frame);
               },
               out, [&reader] { return reader.buffered(); });
    if (!reader.error().empty()) {
      std::fprintf(stderr, "tessera worker: the owner's task stream broke: %s\n",
                   reader.error().c_str());
    }
    shutdown(out, SHUT_RDWR);  // the owner sees the end after the last results
    close(out);
  }

  // Serves the owner's stream of task batches, one task at a time in order (BeginOwnerStream
  // first). `pump_fd`: the local socket `read` reads (-1 for gRPC's stream), which the task
  // thread may read itself (OwnerStreamPump); `buffered` says whether `read` holds bytes of it
  // already.
  void ServeOwner(const BatchReader& read, BatchWriter write, int pump_fd = -1,
                  const std::function<bool()>& buffered = nullptr) {
    started_.Notify();
    // The owner opens this stream from inside its WorkerReady handler, so it can arrive before
    // the reply that fills the runtime context: no task runs until the context is there.
    context_ready_.WaitForNotification();
    v1::TaskBatch batch;
    ArgumentFetcher fetch = FetchFromOwner;
    // An actor that allows several calls at once hands them to the async runner, or runs them
    // on a pool; results then go back one per call, as they finish (the owner matches them by
    // task id).
    std::unique_ptr<CallPool> pool;
    StreamReplies replies(std::move(write));
    absl::Notification stream_ended;
    std::thread lending_watch([&replies, &stream_ended] {
      while (!stream_ended.WaitForNotificationWithTimeout(kLendingCheckPeriod)) {
        replies.TellIfNoLongerLending();
      }
    });
    // Runs or hands over the tasks of one batch: false when the stream cannot be written.
    auto handle = [&](v1::TaskBatch& batch) {
      v1::TaskResultBatch results;
      auto& tasks = *batch.mutable_tasks();
      for (int i = 0; i < tasks.size(); ++i) {
        if (const int end = HandOver(tasks, i, /*guest=*/false, fetch, replies); end > i) {
          i = end - 1;
          continue;
        }
        const v1::TaskSpec& task = tasks[i];
        if (pool != nullptr && task.kind() == v1::ACTOR_METHOD) {
          pool->Run([task, &fetch, &replies] {
            v1::TaskResultBatch one;
            *one.add_results() = Execute(task, fetch);
            replies.Write(one);
          });
          continue;
        }
        if (task.kind() == v1::ACTOR_METHOD) {
          absl::MutexLock exec(&exec_mu_);
          *results.add_results() = Execute(task, fetch);
          continue;
        }
        *results.add_results() = Execute(task, fetch);
        if (task.kind() == v1::ACTOR_CREATE) {
          if (auto id = TaskId::FromBinary(task.actor_id()); id.ok()) {
            absl::MutexLock lock(&mu_);
            actor_id_ = id->Hex();
          }
          const int concurrency = ActorConcurrency(task);
          actor_concurrency_.store(concurrency);
          if (concurrency > 1 && pool == nullptr && !globals->async_runner) {
            pool = std::make_unique<CallPool>(concurrency);
          }
          if (!actor_created_.HasBeenNotified()) actor_created_.Notify();
        }
      }
      return results.results_size() == 0 || replies.Write(results);
    };
    bool over = false;
    while (!over && read(&batch)) {
      if (!handle(batch)) break;
      // Every task from now on runs in order on the task thread: that thread reads the stream
      // itself while it has nothing to run, until the stream ends or brings a task it cannot
      // run there (handed back here). Lent only with nothing read ahead here, since the task
      // thread waits for the socket.
      while (pump_fd >= 0 && MayPump() && !buffered()) {
        InlinePump pump(read, buffered, pump_fd,
                        [&](v1::TaskBatch& tasks) { return PumpInOrder(tasks, fetch, replies); });
        v1::TaskBatch handed_back;
        if (pump.OfferAndWait(&handed_back)) {
          over = true;
          break;
        }
        if (!handle(handed_back)) {
          over = true;
          break;
        }
      }
    }
    pool.reset();  // waits for the calls still running
    replies.WaitForAll();
    stream_ended.Notify();
    lending_watch.join();
    finished_.Notify();
  }

  // Another driver's stream of calls to this process's actor.
  grpc::Status ServeGuest(grpc::ServerReaderWriter<v1::TaskResultBatch, v1::TaskBatch>* stream) {
    context_ready_.WaitForNotification();
    ArgumentFetcher fetch = FetchFromOwner;
    v1::TaskBatch batch;
    StreamReplies replies(
        [stream](const v1::TaskResultBatch& results) { return stream->Write(results); });
    while (stream->Read(&batch)) {
      v1::TaskResultBatch results;
      auto& tasks = *batch.mutable_tasks();
      for (int i = 0; i < tasks.size(); ++i) {
        if (const int end = HandOver(tasks, i, /*guest=*/true, fetch, replies); end > i) {
          i = end - 1;
          continue;
        }
        const v1::TaskSpec& task = tasks[i];
        if (task.kind() != v1::ACTOR_METHOD) {
          v1::TaskResult* r = results.add_results();
          r->set_task_id(task.task_id());
          r->mutable_error()->set_kind("invalid");
          r->mutable_error()->set_message(
              "a guest of an actor's process may only call its methods");
          continue;
        }
        if (actor_concurrency_.load() == 1) {
          absl::MutexLock exec(&exec_mu_);
          *results.add_results() = Execute(task, fetch);
        } else {
          *results.add_results() = Execute(task, fetch);
        }
      }
      if (results.results_size() == 0) continue;
      if (!replies.Write(results)) break;
    }
    replies.WaitForAll();
    return grpc::Status::OK;
  }

  grpc::Status CancelTask(grpc::ServerContext*, const v1::CancelTaskRequest* request,
                          v1::CancelTaskReply*) override {
    if (request->recursive()) {
      std::function<void(const std::string&, bool)> cancel;
      {
        absl::MutexLock lock(&nested_cancel_mu);
        if (nested_cancel != nullptr) cancel = *nested_cancel;
      }
      if (cancel) cancel(request->task_id(), request->force());
    }
    if (request->force()) {
      // The owner counts this worker's death as the forced cancel's end; the reply goes first.
      std::thread([] {
        absl::SleepFor(absl::Milliseconds(20));
        std::fflush(stdout);
        std::fflush(stderr);
        kill(getpid(), SIGKILL);
      }).detach();
      return grpc::Status::OK;
    }
    if (globals != nullptr && globals->on_cancel) globals->on_cancel(request->task_id());
    return grpc::Status::OK;
  }

  grpc::Status ExitActor(grpc::ServerContext*, const v1::ExitActorRequest* request,
                         v1::ExitActorReply*) override {
    std::string actor_id;
    {
      absl::MutexLock lock(&mu_);
      actor_id = actor_id_;
    }
    if (actor_id.empty()) {
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "this worker hosts no actor");
    }
    const bool owner_streams = started_.HasBeenNotified() && !finished_.HasBeenNotified();
    if (!request->from_owner() && owner_streams && globals != nullptr) {
      // Its owner ends it (and so knows not to restart it): the owner's own ExitActor follows.
      v1::KillActorRequest kill;
      kill.set_actor_id(actor_id);
      v1::KillActorReply killed;
      rpc::RetryOptions retry;
      retry.attempt_timeout = absl::Seconds(5);
      retry.total_budget = absl::Seconds(10);
      if (rpc::RetryUnary(retry, &v1::Owner::Stub::KillActor, globals->owner.get(), kill, &killed)
              .ok()) {
        return grpc::Status::OK;
      }
      // An owner that cannot be reached is going: the process ends here, as it would with it.
    }
    // The reply goes first.
    std::thread([] {
      absl::SleepFor(absl::Milliseconds(50));
      std::fflush(stdout);
      std::fflush(stderr);
      _exit(0);
    }).detach();
    return grpc::Status::OK;
  }

  absl::Notification& started() { return started_; }
  absl::Notification& context_ready() { return context_ready_; }
  absl::Notification& finished() { return finished_; }

 private:
  // Whether the task thread may read the owner's stream itself: its runner asked to
  // (SetTaskThreadPumpHook) and every task the owner sends from now on runs in order there (a
  // plain task worker, or an actor that runs one call at a time).
  bool MayPump() const {
    return globals->sequence_runner && PumpHookSet() && actor_concurrency_.load() <= 1;
  }
  // A batch the task thread read: handed to the sequence runner when all of it runs in order
  // (true), else left for the stream's thread (false).
  bool PumpInOrder(v1::TaskBatch& batch, const ArgumentFetcher& fetch, StreamReplies& replies) {
    auto& tasks = *batch.mutable_tasks();
    for (const v1::TaskSpec& task : tasks) {
      if (!RunsInOrder(task, /*guest=*/false)) return false;
    }
    if (tasks.empty()) return true;
    RunInOrder(tasks, 0, /*guest=*/false, fetch, replies);
    return true;
  }

  // A plain task (not from a guest), or a call of an actor that runs one call at a time: run in
  // the stream's order.
  bool RunsInOrder(const v1::TaskSpec& task, bool guest) const {
    return (task.kind() == v1::TASK && !guest) ||
           (task.kind() == v1::ACTOR_METHOD && actor_concurrency_.load() <= 1);
  }

  // Hands the tasks of `tasks` from `begin` that run in order (RunsInOrder) to the sequence
  // runner, their results written through `replies` when the last has run: the index after the
  // last one handed over (`begin` when none was: no sequence runner, or task `begin` does not run
  // in order).
  int RunInOrder(google::protobuf::RepeatedPtrField<v1::TaskSpec>& tasks, int begin, bool guest,
                 const ArgumentFetcher& fetch, StreamReplies& replies) {
    if (!globals->sequence_runner) return begin;
    int end = begin;
    while (end < tasks.size() && RunsInOrder(tasks[end], guest)) ++end;
    if (end == begin) return begin;
    std::vector<v1::TaskSpec> run;
    run.reserve(end - begin);
    for (int i = begin; i < end; ++i) run.push_back(std::move(tasks[i]));
    replies.StartRun(std::move(run), fetch);
    return end;
  }

  // What both streams (the owner's and a guest's) hand over before looking at task `begin`
  // themselves: the run of tasks from it that go in order (RunInOrder), else a call of an actor
  // that allows several at once, to the async runner. The index after what was handed over;
  // `begin` when nothing was.
  int HandOver(google::protobuf::RepeatedPtrField<v1::TaskSpec>& tasks, int begin, bool guest,
               const ArgumentFetcher& fetch, StreamReplies& replies) {
    if (const int end = RunInOrder(tasks, begin, guest, fetch, replies); end > begin) return end;
    const v1::TaskSpec& task = tasks[begin];
    if (task.kind() == v1::ACTOR_METHOD && actor_concurrency_.load() > 1 && globals->async_runner) {
      replies.Start(task, fetch);
      return begin + 1;
    }
    return begin;
  }

  absl::Mutex mu_;
  bool streaming_ ABSL_GUARDED_BY(mu_) = false;
  int local_listener_ ABSL_GUARDED_BY(mu_) = -1;  // the local socket offered to the owner
  std::string actor_id_ ABSL_GUARDED_BY(mu_);     // hex, once this process's actor is created
  // 0: no actor here; else the calls it allows at once (ActorConcurrency).
  std::atomic<int> actor_concurrency_{0};
  // Held around each actor call when max_concurrency is 1 (the owner's and guests' streams) that
  // runs on the thread that read it (a sequence runner orders its own).
  absl::Mutex exec_mu_;
  absl::Notification started_;
  absl::Notification context_ready_;
  absl::Notification actor_created_;  // this process's actor's constructor has run
  absl::Notification finished_;
};

std::vector<int> ParseIds(const std::string& text) {
  std::vector<int> ids;
  for (absl::string_view piece : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    int id = 0;
    if (absl::SimpleAtoi(piece, &id)) ids.push_back(id);
  }
  return ids;
}

// The service and server of the running worker (leaked on purpose: the process ends with _exit,
// never by unwinding main).
WorkerService* service = nullptr;
rpc::RpcServer* server = nullptr;

// Serves the Worker service (on TESSERA_WORKER_BIND when set); what the worker borrows is
// counted under the server's address.
absl::Status ServeWorker(WorkerGlobals& g) {
  service = new WorkerService();
  rpc::ServerOptions server_options;
  server_options.token = g.token;
  if (std::string bind = Env(kWorkerBindEnv); !bind.empty()) {
    server_options.bind_address = bind;
    g.bind_address = bind;
  }
  auto started = rpc::RpcServer::Start(server_options, {service});
  if (!started.ok()) {
    return absl::Status(started.status().code(),
                        absl::StrCat("cannot serve: ", started.status().message()));
  }
  server = started->release();
  // What this worker borrows is counted under its address: its owners see it gone when it is.
  SetBorrowerId(server->address());
  return absl::OkStatus();
}

// Tells the owner this worker is ready (retrying while it is unavailable): its answer, which
// accepted the worker.
absl::StatusOr<v1::WorkerReadyReply> TellOwnerReady(WorkerGlobals& g,
                                                    const std::string& worker_id) {
  v1::WorkerReadyRequest ready;
  ready.set_worker_id(worker_id);
  ready.set_address(server->address());
  ready.set_pid(getpid());
  // The owner may open its stream on a local socket instead (same host and user): offered when
  // one can be made, else the owner uses Worker.PushTasks.
  if (absl::StatusOr<rpc::LocalListener> local = rpc::ListenLocal(/*backlog=*/4); local.ok()) {
    service->SetLocalListener(local->fd);
    ready.set_local_stream(local->name);
    std::thread([fd = local->fd] { service->ServeLocalOwner(fd); }).detach();
  }
  v1::WorkerReadyReply reply;
  rpc::RetryOptions retry;
  // An owner serves before it asks for workers, so a port that refuses connections means the
  // owner is gone (a worker's own runtime let go while this lease was being granted): give up
  // after a second of that instead of the whole budget. Other failures get the usual 10 s.
  retry.total_budget = absl::Seconds(1);
  const absl::Time give_up = absl::Now() + absl::Seconds(10);
  absl::Status told;
  while (true) {
    reply.Clear();
    told = rpc::RetryUnary(retry, &v1::Owner::Stub::WorkerReady, g.owner.get(), ready, &reply);
    if (told.ok() || !absl::IsUnavailable(told) || absl::Now() >= give_up ||
        absl::StrContains(told.message(), "Connection refused")) {
      break;
    }
  }
  if (!told.ok()) {
    return absl::Status(told.code(), absl::StrCat("cannot reach the owner at ", g.owner_address,
                                                  ": ", told.message()));
  }
  if (!reply.accepted()) {
    return absl::FailedPreconditionError("the owner does not want this worker any more");
  }
  return reply;
}

// What the owner's answer says of this worker's node, devices and store.
void ApplyReadyReply(WorkerGlobals& g, const v1::WorkerReadyReply& reply) {
  if (!reply.node_id().empty()) g.context.node_id = reply.node_id();
  g.context.node_labels.insert(reply.node_labels().begin(), reply.node_labels().end());
  g.context.isolation_env.insert(reply.isolation_env().begin(), reply.isolation_env().end());
  for (const auto& [resource, ids] : reply.accelerator_ids()) {
    g.context.accelerator_ids[resource] = ParseIds(ids);
  }
  std::string socket = Env(kObjectStoreSocketEnv);
  if (socket.empty()) socket = reply.object_store_socket();
  if (!socket.empty()) {
    NodeObjectStoreOptions store;
    store.socket_path = socket;
    store.node_id = g.context.node_id;
    store.token = g.token;
    // Results belong to the owner: the store frees them when it dies, not when this worker does.
    store.owner_id = reply.owner_id();
    // The agent's address file lies beside its store's socket, in the node's folder.
    std::ifstream agent(std::filesystem::path(socket).parent_path() / "agent.address");
    std::getline(agent, store.agent_address);
    g.agent_address = store.agent_address;
    g.store = std::make_unique<NodeObjectStore>(std::move(store));
  }
}

// The process ends with its owner's stream, whatever runs the tasks (or without one: after
// kNoOwnerTimeout).
void ExitWithOwnerStream() {
  std::thread([] {
    if (!service->started().WaitForNotificationWithTimeout(kNoOwnerTimeout)) {
      Die("the owner never pushed tasks; exiting");
    }
    service->finished().WaitForNotification();
    // A detached actor serves the other drivers that call it until it is told to exit.
    if (globals->detached) return;
    absl::SleepFor(absl::Seconds(2));
    ExitWorker();
  }).detach();
}

}  // namespace

bool InWorkerMode() { return Env(kWorkerModeEnv) == "1"; }

void SetTaskThreadPumpHook(std::function<void()> offered) {
  absl::MutexLock lock(&pump_hook_mu);
  delete pump_hook;
  pump_hook = new std::function<void()>(std::move(offered));
}

OwnerStreamPump* TaskThreadPump() { return offered_pump.load(); }

const RuntimeContext& CurrentContext() {
  static const RuntimeContext* driver_context = new RuntimeContext();
  return globals != nullptr ? globals->context : *driver_context;
}

void SetNestedCancel(std::function<void(const std::string& task_id, bool force)> cancel_submitted) {
  absl::MutexLock lock(&nested_cancel_mu);
  delete nested_cancel;
  nested_cancel = new std::function<void(const std::string&, bool)>(std::move(cancel_submitted));
}

const std::string& RunningTaskOnThisThread() { return running_task; }

void SetRunningTaskOnThisThread(std::string task_id, std::string caller) {
  running_task = std::move(task_id);
  running_task_caller = std::move(caller);
}

const std::string& RunningTaskCallerOnThisThread() { return running_task_caller; }

void SetLendsObjectsProbe(std::function<bool()> probe) {
  absl::MutexLock lock(&lends_mu);
  delete lends_probe;
  lends_probe = new std::function<bool()>(std::move(probe));
}

absl::Status StartWorker(TaskRunner runner, CancelHook on_cancel, AsyncTaskRunner async_runner,
                         SequenceRunner sequence_runner) {
  if (globals != nullptr) return absl::FailedPreconditionError("the worker is already started");
  auto* g = new WorkerGlobals();
  g->runner = std::move(runner);
  g->on_cancel = std::move(on_cancel);
  g->async_runner = std::move(async_runner);
  g->sequence_runner = std::move(sequence_runner);
  const std::string token_file = Env(kTokenFileEnv);
  if (token_file.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(kTokenFileEnv, " is not set"));
  }
  absl::StatusOr<std::string> token = rpc::ReadTokenFile(token_file);
  if (!token.ok()) return token.status();
  g->token = *std::move(token);
  SetBorrowToken(g->token);
  g->owner_address = Env(kOwnerAddressEnv);
  g->detached = Env(kDetachedActorEnv) == "1";
  const std::string worker_id = Env(kWorkerIdEnv);
  if (g->owner_address.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(kOwnerAddressEnv, " is not set"));
  }
  if (worker_id.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(kWorkerIdEnv, " is not set"));
  }
  g->owner = v1::Owner::NewStub(rpc::MakeChannel(g->owner_address, g->token));
  g->context.in_worker = true;
  g->context.worker_id = worker_id;
  g->context.node_id = Env(kNodeIdEnv);

  TESSERA_RETURN_IF_ERROR(ServeWorker(*g));
  TESSERA_ASSIGN_OR_RETURN(const v1::WorkerReadyReply reply, TellOwnerReady(*g, worker_id));
  ApplyReadyReply(*g, reply);
  globals = g;
  service->context_ready().Notify();
  ExitWithOwnerStream();
  return absl::OkStatus();
}

bool WaitForWorkerEnd(absl::Duration timeout) {
  if (globals != nullptr && globals->detached) {
    absl::SleepFor(timeout);
    return false;
  }
  return service != nullptr && service->finished().WaitForNotificationWithTimeout(timeout);
}

void ExitWorker() {
  // Once: a second caller (the watcher, or the runner's thread) waits here for the exit.
  static std::once_flag exiting;
  std::call_once(exiting, [] {
    // Lets the stream's final status reach the owner before the process goes.
    if (server != nullptr) server->Shutdown(absl::Milliseconds(200));
    std::fflush(stdout);
    std::fflush(stderr);
    _exit(0);
  });
  _exit(0);
}

void RunWorker() {
  if (absl::Status started = StartWorker(ExecuteTask); !started.ok()) {
    Die(std::string(started.message()));
  }
  service->finished().WaitForNotification();
  // A detached actor lives on, serving other drivers, until ExitActor or a signal ends it.
  while (globals->detached) absl::SleepFor(absl::Hours(1));
  ExitWorker();
}

absl::Status ReportGeneratorItem(const v1::TaskSpec& task, int64_t index, std::string value) {
  if (globals == nullptr)
    return absl::FailedPreconditionError("this process is not a running worker");
  if (!task.streaming() || task.generator_owner().empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("task ", task.function(), " is not a streaming generator"));
  }
  FlushBorrows();  // the refs inside the item are counted for the caller before it has them
  v1::Owner::Stub* stub = &OwnerStubFor(task.generator_owner(), globals->token);
  v1::ReportGeneratorItemRequest request;
  request.set_task_id(task.task_id());
  request.set_index(index);
  request.set_value(std::move(value));
  v1::ReportGeneratorItemReply reply;
  grpc::ClientContext context;
  rpc::ConfigureClientContext(&context, absl::Seconds(60));
  grpc::Status status = stub->ReportGeneratorItem(&context, request, &reply);
  if (status.ok()) return absl::OkStatus();
  absl::Status s = rpc::FromGrpcStatus(status);
  return absl::Status(
      s.code(), absl::StrCat("reporting value ", index, " of generator ", task.function(),
                             " to its caller at ", task.generator_owner(), ": ", s.message()));
}

absl::StatusOr<std::string> PutTaskReturn(const std::string& task_id,
                                          const std::vector<std::string_view>& parts,
                                          uint32_t return_index,
                                          const std::vector<ObjectRefData>& contained) {
  if (globals == nullptr || globals->store == nullptr) {
    return absl::UnavailableError("this worker has no object store");
  }
  auto task = TaskId::FromBinary(task_id);
  if (!task.ok()) return task.status();
  auto where = globals->store->PutParts(ObjectId::ForTaskReturn(*task, return_index), parts);
  if (!where.ok()) return where.status();
  for (const ObjectRefData& ref : contained) RefToProto(ref, where->add_contained_refs());
  return EncodeStoredEnvelope(*where);
}

absl::StatusOr<NestedDriverEnv> NestedDriverEnvironment() {
  if (globals == nullptr) {
    return absl::FailedPreconditionError("this process is not a running worker");
  }
  NestedDriverEnv env;
  env.token = globals->token;
  env.state_dir = Env(kStateDirEnv);
  env.head_address = Env(kHeadAddressEnv);
  env.agent_address = globals->agent_address;
  if (env.agent_address.empty() && !env.state_dir.empty() && !globals->context.node_id.empty()) {
    std::ifstream agent(std::filesystem::path(env.state_dir) / "nodes" / globals->context.node_id /
                        "agent.address");
    std::getline(agent, env.agent_address);
  }
  env.bind_address = globals->bind_address;
  for (absl::string_view key : absl::StrSplit(Env(kWorkerEnvKeysEnv), ',', absl::SkipEmpty())) {
    const std::string name(key);
    if (const char* value = std::getenv(name.c_str()); value != nullptr)
      env.worker_env[name] = value;
  }
  return env;
}

absl::StatusOr<internal::SerializedValue> FetchObject(const ObjectRefData& ref,
                                                      absl::Duration timeout,
                                                      bool* owner_unreachable) {
  if (globals == nullptr) {
    return absl::FailedPreconditionError("fetching an object needs a running worker");
  }
  if (ref.owner.address == globals->owner_address) {
    return ReadFromOwner(*globals->owner, ref, globals->store.get(), timeout, owner_unreachable);
  }
  return ReadFromOwner(OwnerStubFor(ref.owner.address, globals->token), ref, globals->store.get(),
                       timeout, owner_unreachable);
}

}  // namespace tessera::worker
