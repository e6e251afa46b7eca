// The runtime's calls for front ends in other languages (the Python package's tessera._core):
// tasks and actors named by what they run instead of by a registered C++ function, and values
// put in pieces. They go through the same runtime as the C++ API (the driver's, or in a worker
// its nested one), so refs, leases and errors behave exactly alike.
//
// Threading: thread-safe once tessera::Init has returned OK (or inside a worker).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "objects/object_store.h"
#include "tessera/tessera.h"
#include "tessera/v1/worker.pb.h"
#include "vocabulary/ids.h"

namespace tessera::internal {

// What a task or an actor runs. C++: `name` is the registered function and `code` is empty.
// Other languages: `name` is a display name and `code` the object holding the function or class
// as that language's workers read it (kept alive by the caller while tasks may still run).
struct FunctionDescriptor {
  std::string name;
  v1::Language language = v1::LANGUAGE_CPP;
  std::optional<ObjectRefBase> code;
};

// `more_returns` (may be null) gets the refs of returns 2..N when options.num_returns is N > 1.
ObjectRefBase SubmitTaskByName(const FunctionDescriptor& function, const TaskOptions& options,
                               std::vector<TaskArgument> args,
                               std::vector<ObjectRefBase>* more_returns = nullptr);
// The ref of item `index` of the streaming generator task whose ref is `generator` (a task
// submitted with TaskOptions::streaming by this process), waiting up to `timeout` for it;
// nullopt when the task ended before yielding it; DeadlineExceeded while it is not there yet.
absl::StatusOr<std::optional<ObjectRefBase>> GeneratorNext(const ObjectRefBase& generator,
                                                           int64_t index, absl::Duration timeout);
// The caller is done with `generator` before item `next_index`: the items it did not take go.
void ReleaseGenerator(const ObjectRefBase& generator, int64_t next_index);
// Runs `ready` once `ref`, an object this process's runtime owns (a call's result), is done: on
// the thread that completes it, or on this one at once when it is done already; GetValue then
// reads it without waiting. `ready` must not block (it holds up the thread that delivers this
// process's results). FailedPrecondition, and `ready` never runs, for another process's object or
// without a runtime: wait with GetValue instead.
absl::Status WhenReady(const ObjectRefBase& ref, std::function<void()> ready);
// The most returns a task may have (num_returns).
inline constexpr int kMaxTaskReturns = 10000;
// The new actor's id (hex). `type_name` is what GetActor matches a found actor's class against;
// an actor of another language has its class named with that language's prefix, so that a
// driver that finds it by name sends its calls to the right kind of worker.
inline constexpr std::string_view kPythonClassPrefix = "python:";
v1::Language LanguageOfClass(std::string_view class_name);
// The class's own name, without its language's prefix (what errors call it).
inline std::string_view ClassNameOf(std::string_view type_name) {
  return type_name.substr(0, kPythonClassPrefix.size()) == kPythonClassPrefix
             ? type_name.substr(kPythonClassPrefix.size())
             : type_name;
}
absl::StatusOr<ActorId> CreateActorByName(const FunctionDescriptor& function,
                                          const ActorOptions& options,
                                          std::vector<TaskArgument> args,
                                          const std::string& type_name);
// A value made of `parts` (concatenated): into this node's store, each part copied once, when it
// is large; inline otherwise. `contained` are the refs written inside it (kept alive while it
// lives: borrowing, docs/objects.md).
ObjectRefBase PutParts(const std::vector<std::string_view>& parts,
                       const std::vector<ObjectRefData>& contained);
// internal::HoldRef (tessera/object_ref.h): DriverRuntime::Hold, or in a worker with no
// runtime yet a borrow (nothing there is its own).
// The objects this process owns whose refs it holds, with their borrowers: the number of
// objects its table holds (tests and debugging; 0 outside a runtime).
size_t OwnedObjectCount();
// DriverRuntime::ActorLifetimeRef of this process's runtime (a failed ref outside one).
ObjectRefBase ActorLifetimeRef(const ActorId& actor_id);
// The counters of this process's node's object store (ObjectStore::Stats): Unavailable when the
// node has none, FailedPrecondition outside a runtime.
absl::StatusOr<ObjectStoreStats> LocalObjectStoreStats();
// An object whose value is given later by FulfillPromise (a placement group's ready()): Get and
// Wait wait for it meanwhile. A value or an error, given once; FulfillPromise of an object that
// is not a pending promise of this process does nothing.
ObjectRefBase NewPromise();
void FulfillPromise(const ObjectRefBase& promise, absl::StatusOr<std::string> value);
// Makes calls to actor `actor_id` (owned by the process at `owner_address`) possible from this
// process: a handle passed here in a value.
absl::Status AttachActor(const ActorId& actor_id, const std::string& owner_address);
// This process's Owner address: what a handle of an actor it owns names.
std::string OwnerAddressOfThisProcess();
// Cancels the task whose result is `ref` (DriverRuntime::Cancel, TaskSubmitter::Cancel).
absl::Status CancelTask(const ObjectRefBase& ref, bool force, bool recursive);
// The id the head knows this process's runtime by; "" before Init.
std::string DriverId();
// The job this process's work belongs to (DriverRuntime::job_id); "" before Init.
std::string JobId();
// This job's timeline in the Chrome trace format (DriverRuntime::TimelineJson); FailedPrecondition
// before Init.
absl::StatusOr<std::string> TimelineJson();

}  // namespace tessera::internal
