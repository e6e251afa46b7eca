// HeadServer: the head process's server — the token (created when absent), the HeadService and
// the job manager (tessera.v1.Jobs: jobs' controllers run here, calling this head back over
// gRPC like any client) on a gRPC server, its address and pid files in the state folder, and two
// timer threads: one runs health checks (never blocked by an agent), one reconciliation. RunHead
// serves until the Shutdown RPC, SIGTERM or SIGINT.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "head/head_extension.h"
#include "head/head_http.h"
#include "head/head_service.h"
#include "head/state_store.h"
#include "metrics/metric_registry.h"
#include "rpc/server.h"
#include "rpc/server_metrics.h"
#include "train/job_manager.h"

namespace tessera {

struct HeadOptions {
  std::string state_dir;  // required; created when missing
  std::string bind = "127.0.0.1";
  int port = 0;  // 0: an ephemeral port, written to head.address
  absl::Duration heartbeat_interval = absl::Milliseconds(500);
  absl::Duration node_timeout = absl::Seconds(5);
  // A driver silent this long loses what it owns (HeadServiceOptions::driver_timeout).
  absl::Duration driver_timeout = absl::Seconds(10);
  // Where the head keeps its tables (StateStore): "" in memory, lost with the process; else the
  // Redis server at this address, HOST:PORT or unix:/path (head/redis_state_store.h), which
  // Create connects to first and fails on when it is unreachable or refuses the password.
  std::string redis_address;
  std::string redis_password_file;            // "": the Redis server needs no password
  std::string redis_key_prefix = "tessera:";  // this cluster's namespace in a shared Redis
  // The HTTP endpoint (dashboard, /api/v1, /metrics; head_http.h) on `bind`: 0 an ephemeral
  // port, -1 none. Bound beyond loopback it asks for the cluster token as a bearer token.
  int http_port = 0;
  // How tasks and actors are placed (HeadServiceOptions::scheduling).
  SchedulerOptions scheduling;
  // The dashboard's files; "": found beside the executable or in the source tree.
  std::string dashboard_dir;
  // Services of layers above the head run in its process (head_extension.h): serving.
  std::vector<HeadExtensionFactory> extensions;
};

// Thread-safe: Shutdown and Wait may be called from any thread.
class HeadServer {
 public:
  // Creates the state folder, reads <state>/token or creates it (mode 0600), starts serving, and
  // writes <state>/head.address (host:port with the real port), <state>/head.http (its HTTP
  // endpoint's host:port) and <state>/head.pid. While it runs it keeps
  // <state>/prometheus/targets.json (Prometheus file_sd: the head's and every live agent's
  // HTTP endpoint) up to date.
  static absl::StatusOr<std::unique_ptr<HeadServer>> Create(const HeadOptions& options);
  ~HeadServer();

  int port() const { return server_->port(); }
  const std::string& address() const { return address_; }
  const std::string& token() const { return token_; }
  HeadService* service() { return service_.get(); }
  train::JobManager* jobs() { return jobs_.get(); }
  // The tables' store: a RedisStateStore with options.redis_address, else an InMemoryStateStore.
  StateStore* store() { return store_.get(); }

  // Stops the running jobs (their gangs and reservations), then serving and the ticker, and
  // removes head.address and head.pid. Idempotent.
  void Shutdown();
  // Blocks until the Shutdown RPC arrives or Shutdown() is called.
  void Wait();
  // Whether the Shutdown RPC (or Shutdown()) has been asked for.
  bool shutdown_requested() const { return requested_.HasBeenNotified(); }
  // Waits up to `timeout` for a shutdown request; true when there is one.
  bool WaitForShutdownRequest(absl::Duration timeout) const {
    return requested_.WaitForNotificationWithTimeout(timeout);
  }

 private:
  HeadServer() = default;
  // The steps of Create, in order.
  // Reads the cluster token (made when missing) and writes the scrape token beside it.
  absl::Status ReadTokens();
  // The tables' store: Redis when options_.redis_address names one, else in memory.
  absl::Status OpenStore();
  // The head's service and its metrics, with what a previous head left in the store restored.
  absl::Status StartService();
  void StartJobManager();
  // Builds options_.extensions over the head's parts.
  absl::Status BuildExtensions();
  absl::Status ServeRpc();
  // The HTTP endpoint (options_.http_port); shuts the head down when it cannot serve.
  absl::Status ServeHttp();
  // Writes head.pid, head.http and head.address; shuts the head down when it cannot.
  absl::Status PublishAddresses();
  // Starts the extensions once the head's addresses are published; shuts the head down when one
  // cannot start.
  absl::Status StartExtensions();
  absl::Duration TickPeriod() const;
  // Health checks, on the ticker thread: they take the cluster lock only and make no RPC.
  void HealthLoop();
  // Reconciliation (drivers gone, reservations retried and synced), on a thread of its own;
  // it also rewrites the Prometheus targets file when they changed.
  void ReconcileLoop();
  void WritePrometheusTargets();

  HeadOptions options_;
  std::string token_;
  std::string address_;
  // The head's metric families (its HTTP endpoint's /metrics); declared before everything that
  // feeds them, so it outlives them.
  metrics::MetricRegistry registry_;
  std::unique_ptr<rpc::RpcServerMetrics> rpc_metrics_;
  std::unique_ptr<StateStore> store_;                   // declared before service_, which uses it
  std::unique_ptr<train::JobRecordStore> job_records_;  // over store_; null without Redis
  std::unique_ptr<HeadService> service_;
  std::unique_ptr<train::JobManager> jobs_;
  std::vector<std::unique_ptr<HeadExtension>> extensions_;
  std::unique_ptr<rpc::RpcServer> server_;
  std::unique_ptr<HeadHttp> http_;
  std::string http_address_;
  std::string prometheus_targets_;  // what targets.json holds now (reconciler thread only)
  absl::Notification requested_;
  absl::Notification stop_ticker_;
  std::thread ticker_;
  std::thread reconciler_;
  absl::Mutex shutdown_mu_;
  bool shut_down_ ABSL_GUARDED_BY(shutdown_mu_) = false;
};

// Serves until the Shutdown RPC, SIGTERM or SIGINT, then shuts down and removes the pid and
// address files. Blocks SIGTERM and SIGINT in the calling thread (and the threads it starts) to
// receive them synchronously.
absl::Status RunHead(const HeadOptions& options);

}  // namespace tessera
