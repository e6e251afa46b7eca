// ProxyManager: the serve controller's part that runs the HTTP proxies of the nodes (docs/serve.md,
// "Proxies"; the serving reference's §1.3, Ray's ProxyStateManager), through a ProxyRuntime. The
// head's own proxy (in the head's process) is not one of them: the head's extension runs it.
//
// Which nodes: with proxy_location "EveryNode", every alive node that has a replica (Ray's
// EveryNode: "a proxy on every node that has at least one replica"; the head's proxy is the one
// that always runs). "HeadOnly", "Disabled" and Serve not started: none (those there are
// killed). A node that joins gets its proxy once a replica is placed on it; a node that leaves
// (dead, or gone from the head's table) has its proxy dropped.
//
// A proxy's life, each step at an Update (the controller's loop calls it every 0.1 s):
//   STARTING   StartProxy was asked (found by name, else made; then ready()). Its answer makes it
//              HEALTHY with its address, or UNHEALTHY with why.
//   HEALTHY    check_health() every health_check_period, each allowed health_check_timeout;
//              unhealthy_threshold failures in a row make it UNHEALTHY; a check that finds its
//              actor dead makes it UNHEALTHY at once (Ray's PROXY_HEALTH_CHECK_* constants).
//   UNHEALTHY  made again (StartProxy with `replace`: any actor of its name is killed first)
//              restart_backoff after it became so, and STARTING again.
//   DRAINING   its node has no replica any more: start_draining() (its /-/healthz answers 503,
//              so load balancers leave it; it still serves what comes). After
//              min_draining_period, is_drained() is asked every health_check_period; once it
//              has no request in flight it is killed and forgotten (Ray's DRAINED, which then
//              stops it). A replica placed on the node again meanwhile: stop_draining(), HEALTHY.
// A STARTING or UNHEALTHY proxy whose node needs none any more is killed at once (it serves
// nothing yet).
//
// Ports: a proxy binds http_options' host on http_port, except where another proxy of this
// Serve already listens on the same host (the head's proxy on the head's machine, or a node
// proxy started earlier there, as when every node of a local cluster shares one host): there
// it binds a free port (0), and its ready() reports the address it bound. http_port 0 is always
// a free port. Statuses() shows every proxy's address.
//
// A controller started after a head restart adopts the proxies a previous one left: StartProxy
// looks the name up before it makes one, and each alive node that needs no proxy is looked up
// once, when first listed (FindProxy); one found is kept, as HEALTHY, and drains like any other.
//
// Threading: thread-safe; one mutex guards the proxies. No ProxyRuntime call is made with it held;
// the runtime's callbacks take it, and may come on any thread, also after the manager is gone
// (then they do nothing). Update runs on one thread at a time (the controller's loop). Cost: an
// Update is O(nodes + proxies), plus one listing of the nodes every node_list_period.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/callback_anchor.h"
#include "base/clock.h"
#include "serve/serve_states.h"
#include "serve_runtime/proxy_runtime.h"
#include "tessera/v1/serve.pb.h"

namespace tessera::serve {

// The host of a "host:port" address ("[::1]:80" gives "::1"); the whole text when it has no port.
std::string HostOfAddress(const std::string& address);

// An alive node of the cluster, as the head's node table has it.
struct ServeNode {
  std::string node_id;
  std::string host;  // the host its agent is reached at
};

struct ProxyManagerOptions {
  Clock* clock = Clock::Real();     // not owned
  ProxyRuntime* runtime = nullptr;  // not owned; required; outlives the manager
  // The cluster's alive nodes (the head's node table); required. An error keeps the last list.
  std::function<absl::StatusOr<std::vector<ServeNode>>()> list_nodes;
  // The host of the head's machine, where the head's proxy listens ("" when not known).
  std::function<std::string()> head_host;
  absl::Duration node_list_period = absl::Seconds(1);
  // Ray's PROXY_HEALTH_CHECK_PERIOD_S, _TIMEOUT_S, _UNHEALTHY_THRESHOLD.
  absl::Duration health_check_period = absl::Seconds(10);
  absl::Duration health_check_timeout = absl::Seconds(10);
  int unhealthy_threshold = 3;
  // Ray's PROXY_MIN_DRAINING_PERIOD_S.
  absl::Duration min_draining_period = absl::Seconds(30);
  absl::Duration restart_backoff = absl::Seconds(5);
};

class ProxyManager {
 public:
  // InvalidArgument (one line) for a missing runtime or node list, durations that are not
  // positive (min_draining_period may be 0) or a threshold below 1.
  static absl::StatusOr<std::unique_ptr<ProxyManager>> Create(ProxyManagerOptions options);
  ~ProxyManager();  // later callbacks of the runtime do nothing
  ProxyManager(const ProxyManager&) = delete;
  ProxyManager& operator=(const ProxyManager&) = delete;

  // One step towards what Serve wants now: `start` its start options (nullopt: not started, every
  // proxy is killed), `replica_nodes` the nodes its replicas run on.
  void Update(const std::optional<v1::ServeStartOptions>& start,
              const std::set<std::string>& replica_nodes) ABSL_LOCKS_EXCLUDED(mu_);

  // Every proxy: node id, status word, address (once known) and message, by node id.
  std::vector<v1::ServeProxyStatus> Statuses() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // What the runtime's callbacks reach the manager through.
  using Anchor = CallbackAnchor<ProxyManager>;

  struct Proxy {
    std::string host;
    ProxyStatus status = ProxyStatus::kStarting;
    std::string address;
    std::string message;
    int port = 0;             // the port it was asked to bind (0: any)
    uint64_t generation = 0;  // its current start: answers of an older one are ignored
    bool starting = false;    // a StartProxy in flight
    // A call in flight (check_health, is_drained, start_draining, stop_draining): one at a
    // time, so that a drain and its end reach the actor in order.
    bool calling = false;
    bool actor_draining = false;  // what the actor was last told (ready() ends a drain)
    int failures = 0;             // health checks failed in a row
    absl::Time next_check = absl::InfinitePast();
    absl::Time restart_at = absl::InfinitePast();
  };

  // What Update carries out once the lock is released.
  using Actions = std::vector<std::function<void()>>;

  explicit ProxyManager(ProxyManagerOptions options);

  void RefreshNodesLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void StopAllLocked(Actions& actions) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ReconcileLocked(const std::set<std::string>& replica_nodes, absl::Time now, Actions& actions)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // One proxy's step (`wanted`: its node has a replica); false when it is to be killed and
  // forgotten.
  bool StepLocked(const std::string& node_id, Proxy& proxy, bool wanted, absl::Time now,
                  Actions& actions) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Asks the runtime for the proxy of `node_id` (a new generation: STARTING).
  void StartLocked(const std::string& node_id, Proxy& proxy, bool replace, Actions& actions)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Calls `method` of the proxy (its answer: OnCalled).
  void CallLocked(const std::string& node_id, Proxy& proxy, const std::string& method,
                  Actions& actions) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void FindLocked(const std::string& node_id, Actions& actions) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void KillLocked(const std::string& node_id, Actions& actions) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The port a new proxy of `node_id` on `host` binds (see Ports above).
  int PortForLocked(const std::string& node_id, const std::string& host) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // The runtime's answers.
  void OnStarted(const std::string& node_id, uint64_t generation,
                 const absl::StatusOr<std::string>& address) ABSL_LOCKS_EXCLUDED(mu_);
  void OnCalled(const std::string& node_id, uint64_t generation, const std::string& method,
                const absl::StatusOr<std::string>& result) ABSL_LOCKS_EXCLUDED(mu_);
  void OnFound(const std::string& node_id, const absl::StatusOr<std::string>& address)
      ABSL_LOCKS_EXCLUDED(mu_);
  // A call's outcome as a health check's: a failure counts (a dead actor's at once).
  void OnHealthCheckedLocked(Proxy& proxy, const absl::Status& status, absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const ProxyManagerOptions options_;
  const std::shared_ptr<Anchor> anchor_;

  mutable absl::Mutex mu_;
  std::map<std::string, Proxy> proxies_ ABSL_GUARDED_BY(mu_);      // by node id
  std::map<std::string, std::string> alive_ ABSL_GUARDED_BY(mu_);  // node id -> host
  bool listed_ ABSL_GUARDED_BY(mu_) = false;                       // alive_ holds a listing
  absl::Time next_list_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  // Serve's start options at the last Update that had them (what proxies are made with).
  v1::ServeStartOptions start_ ABSL_GUARDED_BY(mu_);
  bool list_failing_ ABSL_GUARDED_BY(mu_) = false;  // one log line per outage of list_nodes
  // Nodes looked up once for a previous controller's proxy (FindProxy).
  std::set<std::string> looked_up_ ABSL_GUARDED_BY(mu_);
  uint64_t next_generation_ ABSL_GUARDED_BY(mu_) = 1;
};

}  // namespace tessera::serve
