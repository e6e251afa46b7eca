// ActorReplicaRuntime: ReplicaRuntime over the C++ API of this process's runtime (tessera::Init
// has returned OK): each replica is a detached Python actor of class
// tessera.serve.replica.ReplicaActor named by its replica id in the namespace "serve", made with
// the class by reference as its code (python_call_codec.h) and the replica spec as its one
// argument.
//
// - Start: the placement group of the replica's bundles when it has any (one per replica, named
//   "serve:<replica id>", detached, the actor in bundle 0), or its TPU slice when it takes one
//   (resources.slice: a whole slice, or a block of a larger one, reserved with ReserveSlices
//   under the same name, detached, every host's bundle its chips plus the slice's per_host; the
//   actor in host 0's bundle with its child tasks captured, and told the slice in its
//   environment: kReplicaSliceEnv, its name, which is the group its child actors are placed in,
//   and kReplicaSliceHostsEnv, its hosts). Either is asked for in rounds of pending_interval,
//   each round's refusal being the `pending` explanation ("waiting for resources: <the
//   refusal>", the head's explanation of the reservation included), since a wait that runs out
//   withdraws the reservation (a slice the cluster has none of is refused at once: it is asked
//   for again after pending_interval, as a group waits for the cluster to grow); a reservation
//   of that name left by an unfinished start of the same replica is removed and asked for
//   again. Then the actor (max_restarts 0: the controller replaces a dead replica), then
//   initialize() and check_health(). While the actor is not ready, `pending` hears every
//   pending_interval: "waiting for resources: <resources>; <the scheduler's explanation>"
//   (explain_pending: which resources are short and who holds them) while the head's record
//   says its process is not up (with `actor_record`; without it the runtime cannot tell a
//   process not placed from a constructor still running, and says so).
// - Call: the method with one bytes argument (or none), its result decoded (None "", an int as
//   decimal text, str or bytes as they are); errors as ReplicaRuntime says: Unavailable for a
//   dead actor (or none by that name), DeadlineExceeded past the timeout (the call is
//   cancelled), Internal with the Python exception's text.
// - CallStreaming: a streaming generator call whose items (each a bytes value) are read in
//   order; Cancel cancels the task (CancelTask) and, since the runtime does not interrupt a
//   running async actor call, also calls the replica's cancel_request(request_id), the id taken
//   from the frame when the method is handle_http (the HTTP frame's head), so the user's
//   coroutine gets CancelledError at its next await. handle_http is not one generator call:
//   the replica's handle_http_first answers the first item in one plain call (most responses
//   are whole in it), submitted on the caller's thread when the actor is known already and
//   handed on by the thread that brings the answer (internal::WhenReady), with no thread
//   waiting for it; a response whose first item's head names a "rest" goes on as the stream
//   handle_http_rest(rest), read on a pool thread.
// - Find: the live actor of that name (FindNamedActor), Kill: KillActor and the replica's
//   placement group or slice released (RemovePlacementGroup of its name, which releases a slice
//   too: a replica a previous controller made may have either).
// - Proxies (ProxyRuntime, proxy_runtime.h): a node's proxy is a detached Python actor of class
//   tessera.serve.proxy.ProxyActor named ProxyActorName(node) in the namespace "serve", holding
//   no resources (as Ray's proxies: one fits on any node), pinned to its node (hard node
//   affinity), never restarted by the runtime (the controller replaces it), its constructor
//   argument the ProxyLaunch as JSON text ({"node_id", "node_host", "http_host", "http_port",
//   "request_timeout_s", "keep_alive_timeout_s"}). StartProxy looks the name up first (a
//   previous controller's proxy is adopted), else makes the actor (a name taken meanwhile: the
//   actor that took it), then waits up to proxy_ready_timeout for ready(); one that does not
//   answer by then is killed.
//
// Why the proxy is a Python actor whose process runs the C++ proxy, and not a C++ actor: the
// head's driver runtime starts every worker it leases with one command (InitOptions::
// worker_command, the Python worker: replicas are Python), and the C++ API has no command of a
// worker per actor. The proxy's hot path is C++ all the same (HttpProxyServer, the routers,
// this runtime's calls of the replicas, in the proxy's process); Python only holds the process.
//
// Threading: thread-safe. Each operation runs on a thread of a pool of its own while it waits
// (threads are reused; the pool holds as many as ever ran at once), so every callback runs on
// one of those threads, never inside the call; except a whole HTTP response's on_item and
// on_end, which run on the thread of this process's runtime that delivered it: they must not
// block (the proxy's hand the response to its loop). Waits are in slices of poll_slice,
// between which Stop is looked at. A stream's on_item may block (the proxy waits for a slow
// client there): only that stream waits. Cost: per Call one actor call and one thread
// hand-off; per Start an actor creation, two calls and, with bundles or a slice, a reservation
// per round of waiting for it; per stream item one GeneratorNext and one read of the item; per
// whole HTTP response one actor call and no thread hand-off in this process.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/clock.h"
#include "serve_runtime/proxy_runtime.h"
#include "serve_runtime/replica_runtime.h"
#include "tessera/tessera.h"
#include "tessera/v1/head.pb.h"

namespace tessera::serve {

// The class replicas are made of, as a Python worker imports it.
inline constexpr char kReplicaActorModule[] = "tessera.serve.replica";
inline constexpr char kReplicaActorClass[] = "ReplicaActor";
// What a replica on a slice is told in its environment (python/tessera/serve/_constants.py
// reads them): its slice's name (also the placement group its hosts' bundles are) and hosts.
inline constexpr char kReplicaSliceEnv[] = "TESSERA_SERVE_REPLICA_SLICE";
inline constexpr char kReplicaSliceHostsEnv[] = "TESSERA_SERVE_REPLICA_SLICE_HOSTS";
// The class of the nodes' proxies.
inline constexpr char kProxyActorModule[] = "tessera.serve.proxy";
inline constexpr char kProxyActorClass[] = "ProxyActor";

struct ActorReplicaRuntimeOptions {
  Clock* clock = Clock::Real();  // not owned: the pending reports' and the calls' timeouts
  // How often `pending` hears while a replica is not ready (and a placement group or slice round).
  absl::Duration pending_interval = absl::Seconds(5);
  // How long a proxy may take to answer its first ready() (its worker's start, its import of
  // tessera.serve, its server's bind).
  absl::Duration proxy_ready_timeout = absl::Seconds(60);
  // The slice of every wait between two looks at Stop and at a stream's Cancel.
  absl::Duration poll_slice = absl::Milliseconds(100);
  // The head's record of the actor named `name` in the namespace "serve" (its state and node):
  // the head's actor directory in the head's process, HeadActors.GetActor elsewhere. Optional:
  // without it, `pending` cannot tell placement from construction, and addresses carry no node.
  std::function<absl::StatusOr<v1::ActorInfo>(const std::string& name)> actor_record;
  // The scheduler's explanation of why an actor made with these options cannot be placed now
  // (which resources, held by whom), "" when it could be: the head's own in the head's process
  // (head_actor_records.h). Optional: without it, `pending` names the resources only.
  std::function<std::string(const ActorOptions& options)> explain_pending;
};

class ActorReplicaRuntime : public ReplicaRuntime, public ProxyRuntime {
 public:
  explicit ActorReplicaRuntime(ActorReplicaRuntimeOptions options = {});
  ~ActorReplicaRuntime() override;  // Stop()
  ActorReplicaRuntime(const ActorReplicaRuntime&) = delete;
  ActorReplicaRuntime& operator=(const ActorReplicaRuntime&) = delete;

  void Start(const ReplicaLaunch& launch,
             std::function<void(const std::string& explanation)> pending,
             std::function<void(absl::StatusOr<ReplicaAddress>)> done) override;
  void Find(const std::string& replica_id,
            std::function<void(absl::StatusOr<ReplicaAddress>)> done) override;
  void Call(const std::string& replica_id, const std::string& method,
            std::optional<std::string> argument, absl::Duration timeout,
            std::function<void(absl::StatusOr<std::string>)> done) override;
  std::unique_ptr<ReplicaStream> CallStreaming(
      const std::string& replica_id, const std::string& method, std::string argument,
      std::function<void(std::string item)> on_item,
      std::function<void(absl::Status end)> on_end) override;
  void Kill(const std::string& replica_id) override;
  // With actor_record: no live actor holds the replica's name any more (the head frees a dead
  // actor's name at once), or its record says DEAD.
  std::optional<std::string> DeathOf(const std::string& replica_id) override;

  // ProxyRuntime.
  void StartProxy(const ProxyLaunch& launch,
                  std::function<void(absl::StatusOr<std::string>)> done) override;
  void FindProxy(const std::string& node_id,
                 std::function<void(absl::StatusOr<std::string>)> done) override;
  void CallProxy(const std::string& node_id, const std::string& method, absl::Duration timeout,
                 std::function<void(absl::StatusOr<std::string>)> done) override;
  void KillProxy(const std::string& node_id) override;

  // Ends every wait at its next slice (starts fail Cancelled, streams end Cancelled, calls
  // fail Cancelled) and joins the threads; later operations fail Cancelled at once (on a
  // thread of the pool). A step that does not wait in slices (a placement group or slice round, a
  // lookup by name, a kill, a stream's on_item) is waited for. Idempotent; not from a
  // callback. Actors are left as they are (they are detached).
  void Stop();

 private:
  class Stream;
  struct StreamState;
  struct StartState;
  struct HttpCall;

  // An actor this runtime calls: a replica (named by its replica id) or a node's proxy.
  struct Target {
    std::string name;       // its actor's name in the namespace "serve"
    std::string type_name;  // the class a lookup by name must find ("python:ReplicaActor")
    std::string what;       // what errors call it ("replica <id>", "the proxy of node <id>")
  };
  static Target ReplicaTarget(const std::string& replica_id);
  static Target ProxyTarget(const std::string& node_id);

  // Runs `job` on a pool thread.
  void Post(std::function<void()> job) ABSL_LOCKS_EXCLUDED(mu_);
  void WorkerLoop() ABSL_LOCKS_EXCLUDED(mu_);
  bool stopping() const ABSL_LOCKS_EXCLUDED(mu_);

  // The jobs.
  absl::StatusOr<ReplicaAddress> StartReplica(const ReplicaLaunch& launch, StartState& state);
  absl::StatusOr<std::string> RunCall(const Target& target, const std::string& method,
                                      std::string encoded_arguments, absl::Duration timeout);
  // Ends the actor of `target` when one lives, and forgets it.
  void KillNamed(const Target& target);
  // Steps of StartProxy.
  absl::StatusOr<std::string> StartProxyActor(const ProxyLaunch& launch);
  absl::StatusOr<ActorId> CreateProxyActor(const ProxyLaunch& launch, const Target& target);
  // A stream's job: its end (OK at the generator's end), after each item went to `on_item`.
  absl::Status RunStream(const std::string& replica_id, const std::string& method,
                         std::string encoded_arguments, const std::shared_ptr<StreamState>& state,
                         const std::function<void(std::string)>& on_item);
  // handle_http as handle_http_first's one call (submitted on the caller's thread when the
  // replica's actor is known, its whole answer handed on by the thread that brings it), then,
  // when the response goes on, handle_http_rest's stream on a pool thread.
  void StartHttp(std::shared_ptr<HttpCall> http, std::string frame);
  void SubmitHttpFirst(const std::shared_ptr<HttpCall>& http, const ActorId& actor,
                       std::string frame);
  // `may_block`: on a pool thread (it waits for the answer, and reads a stream right here);
  // else the answer is here and a stream goes to the pool.
  void FinishHttpFirst(const std::shared_ptr<HttpCall>& http, const ObjectRefBase& first,
                       bool may_block);
  // Reads items from `next` on, counting them in `next`.
  absl::Status ReadItems(const ObjectRefBase& generator, const std::string& replica_id,
                         const std::string& method, StreamState& state,
                         const std::function<void(std::string)>& on_item, int64_t& next);
  // ReplicaStream::Cancel: marks the stream; a submitted one is cancelled on a pool thread.
  void CancelStream(const std::string& replica_id, const std::shared_ptr<StreamState>& state);
  // Cancels the submitted task (CancelTask) and the replica's request (cancel_request).
  void CancelSubmitted(const std::string& replica_id, StreamState& state);

  // Steps of Start. What a replica is placed in: the group of its bundles, or its slice (a
  // group of the same name, whose hosts' bundles it has), or neither.
  struct Placement {
    std::optional<PlacementGroupName> group;
    int slice_hosts = 0;  // > 0: `group` is a slice of that many hosts
  };
  absl::StatusOr<Placement> Reserve(const ReplicaLaunch& launch, StartState& state);
  absl::StatusOr<Placement> ReserveSlice(const ReplicaLaunch& launch, StartState& state);
  // Waits `duration` on the clock in slices of poll_slice, less once Stop is called.
  void SleepUnlessStopped(absl::Duration duration) ABSL_LOCKS_EXCLUDED(mu_);
  // The class `module`.`qualname` by reference, put once (the actor's code).
  absl::StatusOr<ObjectRefBase> ClassCode(const std::string& module, const std::string& qualname)
      ABSL_LOCKS_EXCLUDED(mu_);
  // The value of `ref`, waited for in slices (reporting `state`'s pending explanation between
  // them when given) until `deadline`, Stop, or `cancelled` says so.
  absl::StatusOr<internal::SerializedValue> Await(const ObjectRefBase& ref, absl::Time deadline,
                                                  StartState* state,
                                                  const std::function<bool()>& cancelled);
  void ReportPending(StartState& state);
  // "waiting for resources: <resources>", then the scheduler's explanation when it has one.
  std::string PendingText(const StartState& state) const;

  // The actor of `target`: known here, or found by name; NotFound when none lives.
  absl::StatusOr<ActorId> ActorOf(const Target& target) ABSL_LOCKS_EXCLUDED(mu_);
  // The actor named `name` when this runtime knows it already (no lookup).
  std::optional<ActorId> KnownActor(const std::string& name) const ABSL_LOCKS_EXCLUDED(mu_);
  // Forgets the actor named `name` (found by name again at its next use).
  void Forget(const std::string& name) ABSL_LOCKS_EXCLUDED(mu_);
  ReplicaAddress AddressOf(const std::string& replica_id, const ActorId& actor) const;

  const ActorReplicaRuntimeOptions options_;

  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // The actors' classes by reference, by "module.qualname".
  absl::flat_hash_map<std::string, ObjectRefBase> class_codes_ ABSL_GUARDED_BY(mu_);
  // Actor name (a replica id, a proxy's name) -> its actor, and whether this runtime made it
  // (its owner is this process).
  struct Known {
    ActorId actor;
    bool ours = false;
  };
  absl::flat_hash_map<std::string, Known> actors_ ABSL_GUARDED_BY(mu_);
  // The pool: queued jobs, idle threads, every thread started.
  std::deque<std::function<void()>> jobs_ ABSL_GUARDED_BY(mu_);
  int idle_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::thread> threads_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tessera::serve
