// PowerOfTwoChoicesRouter: the request router every caller of a deployment owns (the proxy, and
// each handle in each process), as Ray Serve's PowerOfTwoChoicesRequestRouter. Requests wait
// here, at the caller, in one FIFO queue (never at the controller); `max_queued_requests` caps
// it. Routing tasks (at most min(50, 2 x replicas), as many as requests wait) each take the
// oldest request not yet taken, pick a candidate set for it (replicas holding its multiplexed
// model for a random wait in [1 s, 2 s], then those with the fewest loaded models once, then
// all; without a model id and with locality preferred: the caller's node once, then its
// availability zone once, then all), sample two distinct candidates and choose the one with
// the shorter queue among those below their max_ongoing_requests. The replica found goes to the
// oldest waiting request (for a multiplexed model, the oldest waiting request of that model
// first). Queue lengths come from a cache (valid 10 s, counted up on each send and down on
// OnRequestFinished; an entry at or over the cap is probed again rather than trusted); a miss
// is probed through the caller's ReplicaProber, with a deadline of 0.1 s doubling per failed
// attempt up to 1 s. When no candidate can take the request, the task retries at once, then
// after 25 ms, 50 ms, ... up to 500 ms, forever; with no replicas at all requests wait for
// UpdateReplicas (a cold start, which HasQueuedWorkWithoutReplicas signals to the autoscaler).
//
//   auto router = PowerOfTwoChoicesRouter::Create({.clock = clock, .prober = &prober});
//   TESSERA_RETURN_IF_ERROR((*router)->UpdateReplicas(replicas));  // again at each change
//   Ticket t = (*router)->Route({.request_id = id}, [](absl::StatusOr<std::string> replica) {
//     ...send to *replica, then OnRequestFinished(*replica), or OnReplicaRejected(...)
//   });
//
// Threading: thread-safe; one mutex guards the state. The router runs one thread of its own,
// which makes every routing decision, calls the prober and calls every RouteCallback (exactly
// once per request: outside the mutex, so a callback may call the router again, but must not
// destroy it). It waits on the injected Clock, so a FakeClock drives backoff, probe deadlines
// and cache expiry in tests. Probe callbacks may come from any thread, also after the router is
// gone (then they do nothing).
//
// Cost per route: with a valid cached queue length, O(1) expected: a few hash lookups, two
// random draws and one std::function call; otherwise one or two probes and their round trip.
// Each wake of the thread (a request, a probe's answer, a deadline) also walks the routing tasks
// (at most 50) and the outstanding probes (two per task, one per replica in the background).
// Cancel, OnRequestFinished and OnReplicaRejected are O(1) expected; UpdateReplicas and a dead
// replica's removal are O(replicas + cached entries + their model ids); Stats is O(tasks + cached
// entries).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/clock.h"

namespace tessera::serve {

// The names of the metrics a router's stats feed (Ray Serve's, as scraped).
inline constexpr char kRouterRequestsMetric[] = "ray_serve_num_router_requests_total";
inline constexpr char kQueuedQueriesMetric[] = "ray_serve_deployment_queued_queries";
inline constexpr char kRouterQueueLenMetric[] = "ray_serve_request_router_queue_len";
inline constexpr char kSchedulingTasksMetric[] = "ray_serve_num_scheduling_tasks";
inline constexpr char kSchedulingTasksInBackoffMetric[] =
    "ray_serve_num_scheduling_tasks_in_backoff";

// One running replica of the deployment, as the controller publishes it.
struct RouterReplica {
  std::string replica_id;
  std::string node_id;
  std::string availability_zone;  // "" when unknown: never matches the caller's zone
  int64_t max_ongoing_requests = 5;
  std::vector<std::string> multiplexed_model_ids;  // the models it has loaded
};

struct RouteRequest {
  std::string request_id;            // named in errors and warnings
  std::string multiplexed_model_id;  // "" for none
};

// The chosen replica's id, or: ResourceExhausted (backpressure: Ray's BackPressureError text),
// Cancelled (Cancel came first, or the router was destroyed first).
using RouteCallback = std::function<void(absl::StatusOr<std::string> replica_id)>;

// A replica's answer to a probe: how many requests it is running (get_num_ongoing_requests).
struct ProbeReply {
  int64_t queue_len = 0;
};

// A probe's failures: NotFound means the replica's actor died (the router drops the replica
// until UpdateReplicas names it again), Unavailable that it cannot be reached now (its cached
// queue length is forgotten); any other error, and no answer by the deadline, skip the replica
// for this attempt only.
absl::Status ReplicaDiedError(const std::string& replica_id);
absl::Status ReplicaUnavailableError(const std::string& replica_id);

using ProbeCallback = std::function<void(absl::StatusOr<ProbeReply>)>;

// Asks a replica for its queue length. Implementations are thread-safe and asynchronous: Probe
// returns at once (or after calling `callback` itself) and calls `callback` at most once, from
// any thread. An answer after `deadline` is ignored; the prober may give up at the deadline.
class ReplicaProber {
 public:
  virtual ~ReplicaProber() = default;
  virtual void Probe(const std::string& replica_id, absl::Time deadline,
                     ProbeCallback callback) = 0;
};

struct RouterOptions {
  Clock* clock = Clock::Real();      // not owned
  ReplicaProber* prober = nullptr;   // not owned; required; outlives the router
  int64_t max_queued_requests = -1;  // >= 1, or -1 for no cap
  // Locality: the caller's node and zone ("" = unknown), and whether to prefer them (proxies
  // do by default; handles only with _prefer_local_routing).
  std::string self_node_id;
  std::string self_availability_zone;
  bool prefer_local_node = false;
  bool prefer_local_az = false;
  // RAY_SERVE_QUEUE_LENGTH_CACHE_TIMEOUT_S.
  absl::Duration queue_len_cache_timeout = absl::Seconds(10);
  // RAY_SERVE_QUEUE_LENGTH_RESPONSE_DEADLINE_S and its maximum.
  absl::Duration probe_deadline = absl::Milliseconds(100);
  absl::Duration max_probe_deadline = absl::Seconds(1);
  // RAY_SERVE_ROUTER_RETRY_INITIAL_BACKOFF_S, _BACKOFF_MULTIPLIER, _MAX_BACKOFF_S.
  absl::Duration initial_backoff = absl::Milliseconds(25);
  double backoff_multiplier = 2.0;
  absl::Duration max_backoff = absl::Milliseconds(500);
  // RAY_SERVE_MULTIPLEXED_MODEL_ID_MATCHING_TIMEOUT_S: each request waits for a replica holding
  // its model for a random time in [this, 2 x this].
  absl::Duration multiplexed_matching_timeout = absl::Seconds(1);
  int max_routing_tasks_cap = 50;
  uint64_t seed = 0;  // the sampling's random numbers (tests fix it)
};

// A snapshot of the router's figures; the fields' names follow the metrics they feed.
struct RouterStats {
  int64_t num_router_requests_total = 0;  // requests assigned a replica so far
  int64_t deployment_queued_queries = 0;  // requests waiting for a replica now
  int64_t num_scheduling_tasks = 0;       // routing tasks now
  int64_t num_scheduling_tasks_in_backoff = 0;
  // The cached queue length of each replica with a valid entry, by replica id.
  std::map<std::string, int64_t> request_router_queue_len;
  int64_t probes_sent = 0;     // probes asked of the prober so far
  int64_t backoff_rounds = 0;  // failed rounds after which a task waited (the first for 0 s)
  int64_t num_replicas = 0;    // the replicas routed to (died ones left out)
  // When the earliest task in backoff tries again; InfiniteFuture when none waits.
  absl::Time next_retry_at = absl::InfiniteFuture();
};

class PowerOfTwoChoicesRouter {
 public:
  using Ticket = uint64_t;  // 0 is never a request's

  // InvalidArgument (one line) for options out of range. Starts the router's thread.
  static absl::StatusOr<std::unique_ptr<PowerOfTwoChoicesRouter>> Create(RouterOptions options);
  // Stops the thread; each request still waiting gets Cancelled.
  ~PowerOfTwoChoicesRouter();
  PowerOfTwoChoicesRouter(const PowerOfTwoChoicesRouter&) = delete;
  PowerOfTwoChoicesRouter& operator=(const PowerOfTwoChoicesRouter&) = delete;

  // The deployment's running replicas now (the whole set). Cached queue lengths of replicas no
  // longer in it are forgotten. InvalidArgument (and nothing changes) for an empty or repeated
  // replica id or a max_ongoing_requests below 1.
  absl::Status UpdateReplicas(std::vector<RouterReplica> replicas) ABSL_LOCKS_EXCLUDED(mu_);

  // Queues `request`; `callback` is called once, from the router's thread. With
  // max_queued_requests requests already waiting it gets ResourceExhausted at once (the ticket
  // then cancels nothing). An empty callback queues nothing and returns 0.
  Ticket Route(RouteRequest request, RouteCallback callback) ABSL_LOCKS_EXCLUDED(mu_);
  // Drops a request still waiting (its callback gets Cancelled): true. False when it was
  // assigned (or refused, or cancelled) already.
  bool Cancel(Ticket ticket) ABSL_LOCKS_EXCLUDED(mu_);

  // A request sent to `replica_id` ended (however it ended): its cached queue length goes down
  // by one.
  void OnRequestFinished(const std::string& replica_id) ABSL_LOCKS_EXCLUDED(mu_);
  // `replica_id` refused a request because it was full, with `queue_len` running: the cache
  // takes that length, and `request` waits again at the front of the queue, under the new
  // ticket returned. Backpressure does not apply (the request was admitted already). An empty
  // callback changes nothing and returns 0.
  Ticket OnReplicaRejected(const std::string& replica_id, int64_t queue_len, RouteRequest request,
                           RouteCallback callback) ABSL_LOCKS_EXCLUDED(mu_);
  // A request sent to `replica_id` found its actor dead (Ray's ActorDiedError): the replica is
  // dropped until UpdateReplicas names it again, as when a probe finds it gone. Unknown ids
  // change nothing.
  void OnReplicaDied(const std::string& replica_id) ABSL_LOCKS_EXCLUDED(mu_);

  // Requests waiting for a replica.
  int64_t NumQueued() const ABSL_LOCKS_EXCLUDED(mu_);
  // Requests wait and there is no replica: the autoscaler's cold-start signal.
  bool HasQueuedWorkWithoutReplicas() const ABSL_LOCKS_EXCLUDED(mu_);
  RouterStats Stats() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct ReplyInbox;  // where probe callbacks find the router while it lives

  // A waiting request. `model_position` is its place in pending_by_model_ (when it has a model).
  struct Pending {
    Ticket ticket = 0;
    RouteRequest request;
    RouteCallback callback;
    std::list<Ticket>::iterator model_position;
  };
  using PendingList = std::list<Pending>;

  // What a routing task knows of the request it routes for (kept after that request is served
  // elsewhere, as Ray's routing context is).
  struct RoutingContext {
    bool has_request = false;  // false: no request was waiting untaken; route for any
    std::string request_id;
    std::string model_id;
    absl::Time started = absl::InfinitePast();
    std::optional<absl::Time> multiplex_started;  // set at the first multiplexed attempt
    absl::Duration multiplex_wait = absl::ZeroDuration();
    bool tried_fewest_models = false;
    bool tried_same_node = false;
    bool tried_same_az = false;
  };

  // One replica probed in a task's round: answered, with its queue length when it gave one.
  struct ProbeSlot {
    std::string replica_id;
    bool answered = false;
    std::optional<int64_t> queue_len;
  };

  enum class Phase {
    kNextRequest,  // take the oldest untaken request
    kAttempt,      // choose candidates and a replica now
    kProbing,      // wait for the round's probes (or their deadline)
    kBackoff,      // wait until wake_at
  };

  struct RoutingTask {
    uint64_t id = 0;
    Phase phase = Phase::kNextRequest;
    RoutingContext context;
    bool should_backoff = true;  // false after a same-node or same-zone try
    int failed_attempts = 0;     // sets the probe deadline (0.1 s x 2^n)
    int backoff_sleeps = 0;      // sets the backoff (initial x multiplier^n)
    bool in_backoff = false;
    absl::Time wake_at = absl::InfinitePast();
    uint64_t round = 0;
    absl::Time round_deadline = absl::InfinitePast();
    std::vector<ProbeSlot> slots;
  };

  // A probe asked and not yet answered. task_id 0: a background probe that only fills the cache.
  struct OutstandingProbe {
    std::string replica_id;
    absl::Time deadline;
    uint64_t task_id = 0;
    uint64_t round = 0;
  };
  struct OutgoingProbe {
    uint64_t probe_id = 0;
    std::string replica_id;
    absl::Time deadline;
  };
  struct Delivery {
    RouteCallback callback;
    absl::StatusOr<std::string> result;
  };

  struct CacheEntry {
    int64_t queue_len = 0;
    absl::Time updated;
  };

  // Up to two candidates drawn, as indices into replicas_.
  struct Sample {
    std::array<size_t, 2> index = {0, 0};
    int count = 0;
  };

  explicit PowerOfTwoChoicesRouter(RouterOptions options);

  // The router's thread: waits for work or the next deadline, routes, then (outside the mutex)
  // sends probes and calls callbacks.
  void Run() ABSL_LOCKS_EXCLUDED(mu_);
  absl::Time NextDeadlineLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void PassLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CancelAllLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SendProbes(std::vector<OutgoingProbe> probes) ABSL_LOCKS_EXCLUDED(mu_);
  void OnProbeReply(uint64_t probe_id, absl::StatusOr<ProbeReply> reply) ABSL_LOCKS_EXCLUDED(mu_);
  // What a probe's answer changes (the cache, or the replica set); the queue length when it
  // gave a usable one.
  std::optional<int64_t> ApplyProbeResultLocked(const std::string& replica_id,
                                                const absl::StatusOr<ProbeReply>& reply)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Routing tasks. RunTaskLocked steps a task as far as it goes without waiting; false: the
  // task ends (more tasks than waiting requests need).
  size_t MaxTasksLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  size_t TargetTasksLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool RunTaskLocked(RoutingTask& task, absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void TakeNextRequestLocked(RoutingTask& task, absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void AttemptLocked(RoutingTask& task, absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool RoundOverLocked(const RoutingTask& task, absl::Time now) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The best replica the round's answers allow, handed out: true; false when none can take it.
  bool ConcludeRoundLocked(RoutingTask& task, absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void FailAttemptLocked(RoutingTask& task, absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ServedLocked(RoutingTask& task) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Candidate sets (indices into replicas_) and the draw of two.
  const std::vector<size_t>& CandidatesLocked(RoutingTask& task, absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  const std::vector<size_t>& MultiplexCandidatesLocked(RoutingContext& context, absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Sample DrawTwoLocked(const std::vector<size_t>& candidates) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Duration ProbeDeadlineFor(int failed_attempts) const;
  absl::Duration BackoffFor(int sleeps) const;

  // Probes: a task's round, or one in the background (at most one per replica at a time).
  void SendProbeLocked(const std::string& replica_id, absl::Time deadline, uint64_t task_id,
                       uint64_t round) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SweepExpiredProbesLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // The queue-length cache.
  std::optional<int64_t> CachedQueueLenLocked(const std::string& replica_id, absl::Time now) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // The replica set and its indices.
  void RebuildIndicesLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void DropReplicaLocked(const std::string& replica_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // The waiting requests.
  Ticket EnqueueLocked(RouteRequest request, RouteCallback callback, bool at_front)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RemovePendingLocked(PendingList::iterator it) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Hands `replica_id` to the oldest waiting request of `model_id` (when not ""), else to the
  // oldest waiting request, and counts the send in the cache.
  void AssignLocked(const std::string& replica_id, const std::string& model_id, absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const RouterOptions options_;
  const std::shared_ptr<ReplyInbox> inbox_;

  mutable absl::Mutex mu_;
  bool wake_ ABSL_GUARDED_BY(mu_) = false;  // something changed: the thread looks again
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::mt19937_64 rng_ ABSL_GUARDED_BY(mu_);

  // Replicas, and the candidate sets derived from them (indices into replicas_).
  std::vector<RouterReplica> replicas_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, size_t> replica_index_ ABSL_GUARDED_BY(mu_);
  std::vector<size_t> all_ ABSL_GUARDED_BY(mu_);
  std::vector<size_t> same_node_ ABSL_GUARDED_BY(mu_);
  std::vector<size_t> same_az_ ABSL_GUARDED_BY(mu_);
  std::vector<size_t> fewest_models_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, std::vector<size_t>> model_holders_ ABSL_GUARDED_BY(mu_);

  absl::flat_hash_map<std::string, CacheEntry> cache_ ABSL_GUARDED_BY(mu_);

  // Waiting requests, oldest first; by ticket; by model; those no task has taken yet (stale
  // tickets are skipped when taken).
  PendingList pending_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<Ticket, PendingList::iterator> pending_by_ticket_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, std::list<Ticket>> pending_by_model_ ABSL_GUARDED_BY(mu_);
  std::deque<Ticket> untaken_ ABSL_GUARDED_BY(mu_);
  Ticket next_ticket_ ABSL_GUARDED_BY(mu_) = 1;

  std::map<uint64_t, RoutingTask> tasks_ ABSL_GUARDED_BY(mu_);  // by id, oldest first
  uint64_t next_task_id_ ABSL_GUARDED_BY(mu_) = 1;
  absl::flat_hash_map<uint64_t, OutstandingProbe> outstanding_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<std::string> background_probed_ ABSL_GUARDED_BY(mu_);
  uint64_t next_probe_id_ ABSL_GUARDED_BY(mu_) = 1;

  // Work for the thread to do outside the mutex.
  std::vector<OutgoingProbe> outgoing_ ABSL_GUARDED_BY(mu_);
  std::vector<Delivery> deliveries_ ABSL_GUARDED_BY(mu_);

  int64_t routed_total_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t probes_sent_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t backoff_rounds_ ABSL_GUARDED_BY(mu_) = 0;

  std::thread thread_;
};

}  // namespace tessera::serve
