// NodeAgentService: the NodeAgent gRPC service (proto/tessera/v1/node_agent.proto) over the
// agent's state, its worker pool and its link to the head.
//
// RequestLease decides locally first; when this node cannot take the lease (pending or
// infeasible here, a selector it does not match, a bundle held elsewhere) it asks the head which
// node can (PickNode, excluding this node) and answers Spillback; past the hop limit it answers
// with the local explanation. A granted lease starts its worker at once with the isolation
// environment of its device instances; the worker's exit releases the lease.
//
// PrepareBundles takes nothing when a cancel of its bundles was processed after it arrived, or
// when its deadline passed before it could be applied (the head gave up on it): a cancel always
// wins over a late prepare.
//
// Thread-safe: gRPC calls handlers concurrently; all shared state is in AgentState (its own
// mutex), the ProcessSupervisor (its own) and the request cache (its own).
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "absl/time/time.h"
#include "base/clock.h"
#include "hardware/environment.h"
#include "node/agent_metrics.h"
#include "node/agent_state.h"
#include "node/head_link.h"
#include "node/object_data_server.h"
#include "node/object_transfer.h"
#include "node/worker_device_errors.h"
#include "node/worker_env.h"
#include "node/worker_log_stream.h"
#include "node/worker_stdin.h"
#include "node/worker_watchdog.h"
#include "process/process_supervisor.h"
#include "rpc/request_cache.h"
#include "tessera/v1/node_agent.grpc.pb.h"

namespace tessera {

struct AgentServiceOptions {
  std::string workers_dir;  // <state>/nodes/<node-id>/workers
  Environment agent_env;    // what every worker inherits
  std::map<std::string, std::string> slice_env;
  int max_spillback_hops = 4;
  absl::Duration kill_grace = absl::Seconds(2);
  // The node's object store and the server of its data port; without them, OfferObject and
  // PullObject answer UNAVAILABLE.
  LocalObjectStore objects;
  ObjectDataServer* data_server = nullptr;
  // Where workers reach that store (their TESSERA_OBJECT_STORE_SOCKET); "" without one.
  std::string object_store_socket;
  // The host workers serve on (TESSERA_WORKER_BIND): the host this agent is reached at.
  std::string worker_bind;
  // The 0600 file holding the cluster token that workers read (TESSERA_TOKEN_FILE); the token
  // itself never enters a worker's environment. "" gives workers no token.
  std::string worker_token_file;
  // For calls to other agents (PullObject).
  std::string token;
  absl::Duration pull_timeout = absl::Minutes(10);
  // The rules for owned and hang-checked workers (WorkerSpec); null: those fields are ignored.
  // Not owned.
  WorkerWatchdog* watchdog = nullptr;
  // The time the watchdog is told (AgentOptions::clock). Not owned.
  Clock* clock = Clock::Real();
  // Where jobs' working directories are unpacked (<state>/nodes/<node-id>/jobs); "": refused.
  std::string working_dirs_root;
  // The stdin pipes of workers that asked for one (WorkerSpec.stdin_pipe); null: refused.
  // Not owned.
  WorkerStdinPipes* stdin_pipes = nullptr;
  // Counts lease answers and worker starts and exits (tessera_leases_total, ...); null: not
  // counted. Not owned; must outlive the service and its workers' exit callbacks.
  AgentMetrics* metrics = nullptr;
  // The device messages a failed worker's exit reason gets (worker_device_errors.h); null: none.
  // Not owned; must outlive the service and its workers' exit callbacks.
  WorkerDeviceErrors* device_errors = nullptr;
};

class NodeAgentService final : public v1::NodeAgent::Service {
 public:
  // `head` may be null (an agent without a head decides every lease locally). `on_shutdown` is
  // called from the Shutdown handler and must not block on the server.
  NodeAgentService(AgentServiceOptions options, AgentState* state, ProcessSupervisor* workers,
                   HeadLink* head, std::function<void()> on_shutdown);

  grpc::Status RequestLease(grpc::ServerContext* context, const v1::LeaseRequest* request,
                            v1::LeaseReply* reply) override;
  grpc::Status WatchWorker(grpc::ServerContext* context, const v1::WatchWorkerRequest* request,
                           grpc::ServerWriter<v1::WorkerEvent>* writer) override;
  grpc::Status KillWorker(grpc::ServerContext* context, const v1::KillWorkerRequest* request,
                          v1::KillWorkerResponse* response) override;
  grpc::Status ReturnLease(grpc::ServerContext* context, const v1::ReturnLeaseRequest* request,
                           v1::ReturnLeaseResponse* response) override;
  grpc::Status ListWorkers(grpc::ServerContext* context, const v1::ListWorkersRequest* request,
                           v1::ListWorkersResponse* response) override;
  grpc::Status ReadLogs(grpc::ServerContext* context, const v1::ReadLogsRequest* request,
                        grpc::ServerWriter<v1::LogChunk>* writer) override;
  grpc::Status PrepareBundles(grpc::ServerContext* context,
                              const v1::PrepareBundlesRequest* request,
                              v1::PrepareBundlesResponse* response) override;
  grpc::Status CommitBundles(grpc::ServerContext* context, const v1::CommitBundlesRequest* request,
                             v1::CommitBundlesResponse* response) override;
  grpc::Status CancelBundles(grpc::ServerContext* context, const v1::CancelBundlesRequest* request,
                             v1::CancelBundlesResponse* response) override;
  grpc::Status OfferObject(grpc::ServerContext* context, const v1::OfferObjectRequest* request,
                           v1::OfferObjectResponse* response) override;
  grpc::Status PullObject(grpc::ServerContext* context, const v1::PullObjectRequest* request,
                          v1::PullObjectResponse* response) override;
  grpc::Status FindFreePort(grpc::ServerContext* context, const v1::FindFreePortRequest* request,
                            v1::FindFreePortResponse* response) override;
  grpc::Status PrepareWorkingDir(grpc::ServerContext* context,
                                 const v1::PrepareWorkingDirRequest* request,
                                 v1::PrepareWorkingDirResponse* response) override;
  grpc::Status WriteWorkerStdin(grpc::ServerContext* context,
                                const v1::WriteWorkerStdinRequest* request,
                                v1::WriteWorkerStdinResponse* response) override;
  grpc::Status Shutdown(grpc::ServerContext* context, const v1::ShutdownRequest* request,
                        v1::ShutdownResponse* response) override;

  // Stops the workers the watchdog found unwatched or hung (called by the agent's watchdog
  // thread).
  void EnforceWatchdog(absl::Time now);

  // Kills workers at once (SIGKILL): their reservation is gone.
  void KillNow(const std::vector<WorkerId>& workers);
  // SIGTERM to every running worker, SIGKILL after the grace period (shutdown).
  void TerminateAll();

 private:
  struct LeaseOutcome {
    grpc::Status status;
    v1::LeaseReply reply;
  };
  LeaseOutcome DecideLease(const v1::LeaseRequest& request);
  // Counts the answer in the metrics (when there are any).
  void CountAnswer(const LeaseOutcome& outcome);
  // Starts the granted lease's worker and fills the grant; on failure the lease is released.
  grpc::Status StartWorker(const LeaseRecord& lease, const v1::WorkerSpec& spec,
                           v1::LeaseReply* reply);
  // The steps of StartWorker.
  // The worker's working directory, into `cwd`: spec.cwd, inside its job's working directory
  // when it has one; FAILED_PRECONDITION (the worker failed to start) when that is not here.
  grpc::Status WorkerCwd(const LeaseRecord& lease, const v1::WorkerSpec& spec, std::string& cwd);
  // The agent's environment, the slice's, the spec's and the devices' isolation, for the worker.
  Environment WorkerEnvironment(const LeaseRecord& lease, const v1::WorkerSpec& spec,
                                const EnvChanges& isolation) const;
  // What the worker's exit does: it is no longer watched, its exit is recorded and counted, and
  // (a detached actor's worker) told to the head.
  ExitCallback WorkerExitCallback(const v1::WorkerSpec& spec) const;
  // The watchdog watches the started worker (unless it has exited already).
  void WatchStartedWorker(const LeaseRecord& lease, const v1::WorkerSpec& spec,
                          const ChildSpec& child, pid_t pid);
  void FillGrant(const LeaseRecord& lease, pid_t pid,
                 const std::map<std::string, std::string>& isolation_env, v1::LeaseReply& reply);
  // How a log stream of worker `id` sends, waits for the exit and notices the client leaving.
  // The devices the worker sees: its own lease's, or with visible_bundles the union of those
  // bundles of its group held here.
  absl::StatusOr<Allocation> VisibleAllocation(const LeaseRecord& lease,
                                               const v1::WorkerSpec& spec) const;
  WorkerLogStreamHooks LogHooks(grpc::ServerContext* context, const WorkerId& id,
                                std::function<bool(bool, std::string)> send);

  const AgentServiceOptions options_;
  AgentState* const state_;
  ProcessSupervisor* const workers_;
  HeadLink* const head_;
  const std::function<void()> on_shutdown_;
  rpc::RequestCache<LeaseOutcome> lease_cache_;
  // Counts the lease requests answered PENDING on this node (nothing free here now): each
  // WatchWorker stream tells its watcher when it moves (WorkerEvent.lease_wanted).
  std::atomic<uint64_t> leases_wanted_{0};
  std::unique_ptr<ObjectPuller> puller_;  // null without an object store
};

}  // namespace tessera
