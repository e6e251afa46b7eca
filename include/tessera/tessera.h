// Tessera's C++ API (docs/api.md): remote tasks on the cluster and the objects they return.
//
//   #include "tessera/tessera.h"
//
//   int Square(int x) { return x * x; }
//   TESSERA_REMOTE(Square);
//
//   int main() {
//     if (absl::Status s = tessera::Init(); !s.ok()) { ... }   // FIRST thing in main
//     auto ref = tessera::Task(Square).Remote(7);
//     absl::StatusOr<int> v = tessera::Get(ref);
//     tessera::Shutdown();
//   }
//
// The worker contract: your own binary is the worker. To run tasks, the driver leases workers
// from the node agents whose command is this same executable (same arguments, same working
// folder) with TESSERA_WORKER_MODE=1 in its environment. In that mode Init() never returns: it
// serves tasks until the driver lets the worker go, then exits the process. So call Init() first
// in main, before anything with side effects (or test IsWorkerProcess() and call Init() then).
// Inside a task or an actor method, Task/Put/Actor/actor calls work as in a driver: the worker
// becomes the owner of what it submits (docs/api.md, "from inside tasks"); a task blocked in Get
// keeps its resources, so leave room for its subtasks.
//
// Errors: Get returns a Status. A task whose user code threw: Unknown, "task Square failed:
// std::runtime_error: <message>". A task whose worker died more than max_retries times:
// Unavailable, naming the exit cause ("killed by signal 9 (SIGKILL)"). Bad options or an
// unregistered function: InvalidArgument, at once. Timeout: DeadlineExceeded.
//
// Threading: every function here is thread-safe once Init has returned OK.
//
// Also reachable from here: placement groups and slices (tessera/placement_group.h) and gangs
// (tessera/gang.h), included at the end (gang.h builds on what this header declares).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "tessera/actor.h"
#include "tessera/object_ref.h"
#include "tessera/remote_function.h"
#include "tessera/runtime_context.h"
#include "tessera/serialization.h"
#include "tessera/task.h"

namespace tessera {

struct InitOptions {
  // The cluster's state folder on this machine; "" is $TESSERA_STATE_DIR, else the per-user
  // ~/.local/state/tessera. A folder another user owns or can write is refused.
  std::string state_dir;
  // The head, when it is not in the state folder (another machine); "" reads <state>/head.address.
  std::string head_address;
  // The cluster token file; "" is $TESSERA_TOKEN, else <state>/token.
  std::string token_file;
  // The node agent asked for leases; "" is the first live agent of this host's state folder
  // (else the node the head picks).
  std::string agent_address;
  // Where this driver serves its Owner service (workers call back to it): with workers on
  // other machines, this machine's address on the cluster's network.
  std::string bind_address = "127.0.0.1";
  // A worker without work this long is let go (its lease ends).
  absl::Duration worker_idle_timeout = absl::Seconds(1);
  // Most workers held at once per kind of task (resources + selectors).
  int max_workers_per_kind = 64;
  // Copy workers' stdout and stderr to this process's.
  bool forward_worker_output = true;
  // ... each line starting with the worker's pid and node: "(pid=4242, node=n1) hello".
  bool prefix_worker_output = false;
  // Open the task stream of a worker on this host, running as this user, on the local socket it
  // offers (no TLS, no HTTP/2, fewer thread hand-offs: lower latency per call) instead of its
  // gRPC service. Workers elsewhere always use gRPC. false: gRPC for every worker.
  bool local_worker_streams = true;
  // The command a leased worker runs; empty is this program's own command line (the worker
  // contract above). A front end in another language names its worker here (the Python
  // package: its interpreter with -m tessera._private.worker_main).
  std::vector<std::string> worker_command;
  // Added to every leased worker's environment (Tessera's own worker variables win).
  std::map<std::string, std::string> worker_env;
  // Report the runs of this driver's tasks and actor calls to the head, for `tessera timeline`
  // (a bounded buffer, sent every second; never slows the work).
  bool record_task_events = true;
};

// Connects this program to the cluster as a driver, or, in a worker process, runs tasks and never
// returns (see above). Calling it twice without Shutdown is FailedPrecondition.
absl::Status Init(InitOptions options = {});
// Lets every worker go and disconnects. Refs taken before can no longer be read.
void Shutdown();
// True in a process the runtime started as a worker (TESSERA_WORKER_MODE=1).
bool IsWorkerProcess();

namespace internal {
// The serialized bytes of a value: owned, or a view of an object in this node's object store,
// pinned (the store keeps it) while this lives, so a large value is read where it lies.
// Threading: a value for one thread at a time.
class SerializedValue {
 public:
  SerializedValue() = default;
  SerializedValue(std::string bytes) : owned_(std::move(bytes)) {}  // NOLINT: implicit on purpose
  SerializedValue(std::shared_ptr<const void> pin, std::string_view view)
      : pin_(std::move(pin)), view_(view) {}
  std::string_view view() const { return pin_ != nullptr ? view_ : std::string_view(owned_); }
  bool zero_copy() const { return pin_ != nullptr; }
  // The bytes as a string (a copy when they are a view).
  std::string ToString() && { return pin_ != nullptr ? std::string(view_) : std::move(owned_); }

 private:
  std::string owned_;
  std::shared_ptr<const void> pin_;
  std::string_view view_;
};

// The serialized value of `ref` (owner's table or node store, or fetched through the owner in
// a worker); GetSerialized is the same as a string.
absl::StatusOr<SerializedValue> GetValue(const ObjectRefBase& ref, absl::Duration timeout);
absl::StatusOr<std::string> GetSerialized(const ObjectRefBase& ref, absl::Duration timeout);

// How this process's values traveled (for tests and status): what went into and came out of
// its node's object store, and what was read inline.
struct ObjectPathStats {
  int64_t store_puts = 0;       // large values this process put into its node's store
  int64_t zero_copy_reads = 0;  // reads served from a pinned view of the local store
  int64_t pulls = 0;            // objects pulled into the local store from another node
  int64_t inline_reads = 0;     // reads of values held inline
  int64_t store_deletes = 0;    // stored copies deleted when their owner's last reference went
};
ObjectPathStats GetObjectPathStats();
// ready[i] for each ref once `num` are ready or the timeout passes; with `stop_at_failure`,
// also as soon as one of them failed.
std::vector<bool> WaitReady(const std::vector<const ObjectRefBase*>& refs, int num,
                            absl::Duration timeout, bool stop_at_failure = false);
// The error `ref` is known to have failed with: OK while it is pending or has a value (and for a
// ref of another process, whose outcome only a read learns).
absl::Status KnownFailure(const ObjectRefBase& ref);
ObjectRefBase PutSerialized(std::string value);
}  // namespace internal

// The value of `ref`, waiting up to `timeout` for it.
template <typename T>
absl::StatusOr<T> Get(const ObjectRef<T>& ref, absl::Duration timeout = absl::InfiniteDuration()) {
  // Deserialized straight from where the bytes lie (the store's pinned view for a large
  // value), unpinned when `bytes` goes.
  auto bytes = internal::GetValue(ref, timeout);
  if (!bytes.ok()) return bytes.status();
  return Deserialize<T>(bytes->view());
}
// A void task: OK once it finished without error.
inline absl::Status Get(const ObjectRef<void>& ref,
                        absl::Duration timeout = absl::InfiniteDuration()) {
  return internal::GetValue(ref, timeout).status();
}
// Every value, in order. An error fails the whole call as soon as it is known, even while
// other refs are still pending (the first failed ref in order, among those done); so does the
// timeout, over all of them.
template <typename T>
absl::StatusOr<std::vector<T>> Get(const std::vector<ObjectRef<T>>& refs,
                                   absl::Duration timeout = absl::InfiniteDuration()) {
  const absl::Time deadline =
      timeout == absl::InfiniteDuration() ? absl::InfiniteFuture() : absl::Now() + timeout;
  {
    std::vector<const ObjectRefBase*> bases;
    bases.reserve(refs.size());
    for (const auto& ref : refs) bases.push_back(&ref);
    const std::vector<bool> ready = internal::WaitReady(bases, static_cast<int>(bases.size()),
                                                        timeout, /*stop_at_failure=*/true);
    for (size_t i = 0; i < refs.size(); ++i) {
      if (!ready[i]) continue;
      if (absl::Status failed = internal::KnownFailure(refs[i]); !failed.ok()) return failed;
    }
  }
  std::vector<T> values;
  values.reserve(refs.size());
  for (const ObjectRef<T>& ref : refs) {
    const absl::Duration left =
        deadline == absl::InfiniteFuture() ? absl::InfiniteDuration() : deadline - absl::Now();
    auto value = Get(ref, left);
    if (!value.ok()) return value.status();
    values.push_back(*std::move(value));
  }
  return values;
}

// Stores `value` in this process (the owner); the ref can be passed to tasks.
template <typename T>
ObjectRef<T> Put(const T& value) {
  return ObjectRef<T>(internal::PutSerialized(SerializeValue(value)));
}

template <typename T>
struct WaitResult {
  std::vector<ObjectRef<T>> ready;  // in the order given
  std::vector<ObjectRef<T>> not_ready;
};
// Waits until `num` of `refs` are ready (finished, with a value or an error) or `timeout` passes.
template <typename T>
WaitResult<T> Wait(const std::vector<ObjectRef<T>>& refs, int num,
                   absl::Duration timeout = absl::InfiniteDuration()) {
  std::vector<const ObjectRefBase*> bases;
  bases.reserve(refs.size());
  for (const auto& ref : refs) bases.push_back(&ref);
  const std::vector<bool> ready = internal::WaitReady(bases, num, timeout);
  WaitResult<T> result;
  for (size_t i = 0; i < refs.size(); ++i) {
    (ready[i] ? result.ready : result.not_ready).push_back(refs[i]);
  }
  return result;
}

// Counts since Init, for tests and logs (a retried task counts once in finished, and each
// retry once in retries).
struct TaskStats {
  int64_t submitted = 0;
  int64_t succeeded = 0;
  int64_t failed = 0;
  int64_t retries = 0;
  // Results that arrived for a task already recorded (ignored, never delivered twice).
  int64_t duplicate_results = 0;
  int64_t workers_started = 0;
  int64_t workers_died = 0;
  int64_t leases_requested = 0;
};
TaskStats GetTaskStats();

}  // namespace tessera

// After the declarations above, which gang.h's templates use (gang.h includes this header too).
#include "tessera/gang.h"             // IWYU pragma: export
#include "tessera/placement_group.h"  // IWYU pragma: export
