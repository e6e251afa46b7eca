// ReplicaRuntime: how the serve controller and the routers reach replicas, which are Python
// actors of the cluster (python/tessera/serve/replica.py: ReplicaActor). The controller starts,
// checks, reconfigures and stops them; the proxy and the routers' probes call them.
// ActorReplicaRuntime (actor_replica_runtime.h) implements it over the C++ API in the process's
// driver runtime; the controller's and the proxy's tests implement it in memory.
//
// A replica is named by its replica id ("<app>#<deployment>#<suffix>"), which is also its
// actor's name in the namespace kServeNamespace: a controller started again after a head restart
// finds the replicas a previous one started (Find), since they are detached actors.
//
// Threading: implementations are thread-safe. Callbacks run on the implementation's threads,
// never inside the call that was given them; a caller must not hold a lock a callback takes
// while it waits for one. Cost: one actor call per Call; Start is an actor creation plus two
// calls (initialize, check_health).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "tessera/v1/serve.pb.h"

namespace tessera::serve {

inline constexpr char kServeNamespace[] = "serve";

// What a replica's actor is made with.
struct ReplicaLaunch {
  std::string replica_id;
  std::string application;
  std::string deployment;
  // The ReplicaActor's constructor argument (the client's serialized spec; opaque here).
  std::string replica_spec;
  v1::ServeReplicaResources resources;
  // Calls the actor runs at once: above max_ongoing_requests, so that probes, health checks and
  // reconfigures are not queued behind requests.
  int max_concurrency = 1000;
};

// Where a started replica is: what routers need to call it.
struct ReplicaAddress {
  std::string actor_id;       // hex
  std::string owner_address;  // the Owner service that locates the actor
  std::string node_id;
  int pid = 0;  // the replica's process (what initialize() answered); 0 when not known
};

// A streaming call in flight (CallStreaming); destroying it does not cancel it.
class ReplicaStream {
 public:
  virtual ~ReplicaStream() = default;
  // The replica's task is cancelled (its coroutine gets CancelledError at its next await); the
  // stream then ends with Cancelled. Idempotent.
  virtual void Cancel() = 0;
};

class ReplicaRuntime {
 public:
  virtual ~ReplicaRuntime() = default;

  // Makes the replica's actor and runs its initialize() (the user's constructor and first
  // reconfigure; it answers the process id) and one check_health(). While the actor cannot be
  // placed, `pending` gets the scheduler's explanation (which resources, which holders), at most
  // every few seconds. `done` gets the replica's address, or why it could not start (the
  // constructor's error text: FailedPrecondition; the actor could not be made: its status).
  virtual void Start(const ReplicaLaunch& launch,
                     std::function<void(const std::string& explanation)> pending,
                     std::function<void(absl::StatusOr<ReplicaAddress>)> done) = 0;

  // A replica a previous controller started: its address, NotFound when its actor is gone.
  virtual void Find(const std::string& replica_id,
                    std::function<void(absl::StatusOr<ReplicaAddress>)> done) = 0;

  // Calls ReplicaActor method `method` with `argument` (one bytes argument; none when nullopt)
  // and gives its result as bytes (a str or bytes result; an int as its decimal text; None as
  // ""), or the error: Unavailable when the actor died (the router drops it), DeadlineExceeded
  // past `timeout` (the call is cancelled), Internal with the Python exception's text.
  virtual void Call(const std::string& replica_id, const std::string& method,
                    std::optional<std::string> argument, absl::Duration timeout,
                    std::function<void(absl::StatusOr<std::string>)> done) = 0;

  // Calls a streaming (generator) method: `on_item` gets each bytes item in order, as the
  // replica yields it, then `on_end` once (OK at the generator's end, else the error).
  virtual std::unique_ptr<ReplicaStream> CallStreaming(
      const std::string& replica_id, const std::string& method, std::string argument,
      std::function<void(std::string item)> on_item,
      std::function<void(absl::Status end)> on_end) = 0;

  // Ends the replica's actor at once (its process is killed). Unknown replicas are ignored.
  virtual void Kill(const std::string& replica_id) = 0;

  // Why the started replica's actor is dead, when the cluster's records say so now (its process
  // exited or was killed), without calling it; nullopt while it lives or when this runtime cannot
  // tell (the next call or health check finds out then). Cheap: the controller asks about every
  // running replica each second. Runs on the caller's thread.
  virtual std::optional<std::string> DeathOf(const std::string& replica_id) {
    (void)replica_id;
    return std::nullopt;
  }
};

}  // namespace tessera::serve
