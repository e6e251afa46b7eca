// NodeAgentServer: a running node agent — hardware loaded, the NodeAgent service listening (with
// the cluster token checked on every call), registered with the head and heartbeating, and its
// address and pid written to <state>/nodes/<node-id>/agent.address and agent.pid (the address
// last, after the first registration attempt, so a reader of the file finds the node registered).
// RunNodeAgent is the `tessera start --address ...` process: it serves until the Shutdown RPC,
// SIGTERM or SIGINT.
//
// It also serves HTTP (AgentOptions::http_port): Prometheus /metrics (node/agent_metrics.h) on
// the bind host, requiring the cluster token as a bearer token unless bound to loopback, with
// its host:port in <state>/nodes/<node-id>/agent.http (written before agent.address) and in the
// node's registration. A TelemetrySampler thread reads the devices and workers every
// telemetry_interval_ms for /metrics and the heartbeat's device samples.
//
// Workers start from a pool of prestarted tessera-launcher processes (AgentOptions::
// prestarted_workers, launcher), so a lease that starts a worker does not fork the agent; without
// a launcher beside the agent's executable the agent says so on stderr and forks them.
//
// Thread-safe: Shutdown, RequestShutdown and Wait may be called from any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "metrics/http_server.h"
#include "metrics/metric_registry.h"
#include "node/agent_metrics.h"
#include "node/agent_options.h"
#include "node/agent_state.h"
#include "node/head_link.h"
#include "node/node_agent_service.h"
#include "node/object_data_server.h"
#include "node/telemetry_sampler.h"
#include "node/worker_device_errors.h"
#include "node/worker_stdin.h"
#include "node/worker_watchdog.h"
#include "objects/object_store_server.h"
#include "process/launcher_pool.h"
#include "process/process_supervisor.h"
#include "rpc/server.h"
#include "rpc/server_metrics.h"

namespace tessera {

class NodeAgentServer {
 public:
  // Errors: ResolveAgentOptions' and LoadNodeHardware's, a state folder that cannot be written,
  // and a port that cannot be bound. A head that cannot be reached is not an error: the agent
  // registers once it answers.
  static absl::StatusOr<std::unique_ptr<NodeAgentServer>> Create(const AgentOptions& options);
  ~NodeAgentServer();  // Shutdown()
  NodeAgentServer(const NodeAgentServer&) = delete;
  NodeAgentServer& operator=(const NodeAgentServer&) = delete;

  int port() const { return server_->port(); }
  // host:port other processes dial.
  const std::string& address() const { return address_; }
  const NodeId& node_id() const { return state_->node_id(); }
  const std::string& incarnation() const { return incarnation_; }
  // The node folder: <state>/nodes/<node-id>.
  const std::string& node_dir() const { return node_dir_; }
  AgentState& state() { return *state_; }
  // host:port of the HTTP endpoint (/metrics); "" when it serves none (http_port -1).
  const std::string& http_address() const { return http_address_; }
  // The device and worker figures behind /metrics and the heartbeat's device samples.
  const TelemetrySampler& telemetry() const { return *telemetry_; }
  // Null when the agent runs without a head.
  HeadLink* head_link() { return head_.get(); }
  // The prestarted worker launchers; null when workers are forked from the agent.
  LauncherPool* launcher_pool() { return launchers_.get(); }
  // The node's object store; null without one (AgentOptions::object_store_bytes 0).
  ObjectStoreServer* object_store() { return objects_.get(); }
  // Where other agents receive this store's objects (NodeAgent.OfferObject); null without a store.
  ObjectDataServer* object_data_server() { return object_data_.get(); }

  // Asks Wait() to shut the agent down; returns at once (the Shutdown RPC uses it).
  void RequestShutdown();
  // Blocks until a shutdown is requested, then shuts down.
  void Wait();
  // Kills the workers (SIGTERM, then SIGKILL after the grace period), stops serving (HTTP first)
  // and heartbeating, removes agent.address, agent.http and agent.pid. Deregisters nothing: the
  // head notices by timeout or by a new incarnation. Idempotent.
  void Shutdown();

 private:
  NodeAgentServer() = default;

  // The steps of Create, in order.
  // The node's object store of `store_bytes` and its data port for other agents' pulls.
  absl::Status StartObjectStore(const AgentOptions& options, uint64_t store_bytes);
  // The telemetry sampler and the agent's metrics, which read it.
  absl::Status StartMetrics(const AgentOptions& options);
  // The HTTP endpoint that serves /metrics (AgentOptions::http_port).
  absl::Status ServeHttp(const AgentOptions& options);
  // The link that registers the node with the head and heartbeats.
  void LinkToHead(const AgentOptions& options);
  // The NodeAgent service, with the watchdog, device errors and stdin pipes its workers use.
  void StartService(const AgentOptions& options, const NodeId& node, const std::string& workers_dir,
                    AgentServiceOptions service_options);
  // The RPC server for the service, and the watchdog's thread.
  absl::Status StartServing(const AgentOptions& options);
  // Registers with the head, then writes agent.pid, agent.http and agent.address.
  absl::Status RegisterAndPublish();

  AgentOptions options_;
  std::string incarnation_;
  std::string node_dir_;
  std::string address_;
  std::unique_ptr<AgentState> state_;
  std::unique_ptr<ObjectStoreServer> objects_;  // before service_: outlives the service
  // The store's data port for other agents' pulls; after objects_: stopped before the store.
  std::unique_ptr<ObjectDataServer> object_data_;
  std::unique_ptr<TelemetrySampler> telemetry_;  // before head_ and metrics_, which read it
  metrics::MetricRegistry registry_;
  // Before workers_ and service_, which count into it; after what its callbacks read.
  std::unique_ptr<AgentMetrics> metrics_;
  std::unique_ptr<rpc::RpcServerMetrics> rpc_metrics_;  // before server_, which counts into it
  std::unique_ptr<LauncherPool> launchers_;             // before workers_: outlives the supervisor
  // Before workers_ and service_: the workers' exit callbacks and the service use them.
  std::unique_ptr<WorkerWatchdog> watchdog_;
  std::unique_ptr<WorkerDeviceErrors> device_errors_;
  std::unique_ptr<WorkerStdinPipes> stdin_pipes_;
  std::unique_ptr<ProcessSupervisor> workers_;
  std::unique_ptr<HeadLink> head_;
  std::unique_ptr<NodeAgentService> service_;
  // Runs the watchdog's rules, and reads the device messages' streams, every 100 ms until
  // Shutdown.
  std::thread watchdog_thread_;
  std::unique_ptr<rpc::RpcServer> server_;
  std::string http_address_;
  std::unique_ptr<metrics::HttpServer> http_;  // last: stopped first, before what it reads

  absl::Mutex mu_;
  bool requested_ ABSL_GUARDED_BY(mu_) = false;
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_watchdog_ ABSL_GUARDED_BY(mu_) = false;
  absl::Mutex shutdown_mu_;  // serializes Shutdown()
};

// Serves until the Shutdown RPC, SIGTERM or SIGINT; then shuts down as Shutdown() does. Errors
// are Create's.
absl::Status RunNodeAgent(const AgentOptions& options);

}  // namespace tessera
