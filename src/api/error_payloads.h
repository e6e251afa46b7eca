// What kind of failure an absl::Status from the runtime is, and the Python exception behind a
// task error, carried as Status payloads so that they survive every layer between the failure
// site and the caller's Get (the message stays the one readable line it always was). The Python
// package (tessera.exceptions) raises its class from the kind; C++ callers can ignore both.
//
// Threading: pure functions. Cost: a payload copy per call.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace tessera::api {

// The kinds, as the words ErrorKindWord gives (the names of tessera.exceptions' classes).
enum class ErrorKind {
  kTaskError,          // user code raised (the exception payload says what)
  kWorkerCrashed,      // the worker died while running it, more often than max_retries
  kActorDied,          // the actor is dead (killed, out of restarts, its constructor failed)
  kActorUnavailable,   // the actor is restarting or cannot be reached now
  kTaskCancelled,      // cancelled before or while it ran
  kTaskUnschedulable,  // no node can ever run it (e.g. hard affinity to a dead node)
  kActorUnschedulable,
  kObjectLost,  // the only copy of a value went with its node
  kOwnerDied,   // the process owning the value is gone
  kTaskPlacementGroupRemoved,
  kActorPlacementGroupRemoved,
  kObjectStoreFull,  // the value does not fit in its node's object store, even spilled
};

std::string_view ErrorKindWord(ErrorKind kind);

// `status` with its kind set (an OK status is returned unchanged).
absl::Status WithErrorKind(absl::Status status, ErrorKind kind);
// The kind's word, or nullopt when the status has none.
std::optional<std::string> ErrorKindOf(const absl::Status& status);

// A task error's Python exception (a serialized Python value) and its remote traceback.
absl::Status WithException(absl::Status status, std::string_view exception,
                           std::string_view traceback);
std::optional<std::string> ExceptionOf(const absl::Status& status);
std::optional<std::string> TracebackOf(const absl::Status& status);

// A read of `object_hex` from its owner at `owner_address` that could not reach that process:
// the owner has exited and the object went with it (Ray's OwnerDiedError), `reached` saying why.
absl::Status OwnerDiedStatus(const std::string& object_hex, const std::string& owner_address,
                             const absl::Status& reached);

// `status` with `prefix` put before its message and every payload kept (absl::Status(code,
// StrCat(prefix, message)) would drop them).
absl::Status WithContext(const absl::Status& status, std::string_view prefix);

}  // namespace tessera::api
