// WorkerLeases: the LeaseSource of a driver on a real cluster. For each lease request it asks a
// node agent (this host's, else the node the head picks) for a lease whose worker is this very
// program in worker mode, follows spillbacks, keeps asking while the cluster answers pending,
// and fails the request when it is infeasible. It watches every granted worker through the
// agent's WatchWorker stream (its output is copied to this process; its exit, with the cause,
// is what tells the submitter a worker died), and turns the worker's WorkerReady call into a
// worker stream handed to the submitter (a LocalWorkerChannel for a worker on this host of this
// user, else a GrpcWorkerChannel).
//
// Threading: thread-safe. Each lease request runs on a thread of its own (the submitter asks for
// one lease of a shape at a time, so these are at most one per shape), which then watches the
// granted worker until the lease ends, and is joined as soon as it does: a long-running driver
// holds as many lease threads as leases held or being asked for, not as leases it ever held. So
// an agent that does not answer (its machine stopped, or too loaded to start a worker) holds up
// only the requests sent to it, never another shape's; and once the head declares its node
// dead, the requests in flight to it are cancelled and go elsewhere like those to an agent that
// cannot be reached. One more thread looks out for workers that never say ready and for dead
// nodes (a ListNodes on the head every node_check_interval while workers are held or lease
// requests are in flight), and joins finished lease threads; WorkerReady runs on the Owner
// service's threads.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "api/task_submitter.h"
#include "api/worker_channel.h"
#include "tessera/v1/head.grpc.pb.h"
#include "tessera/v1/node_agent.grpc.pb.h"
#include "tessera/v1/worker.pb.h"

namespace tessera::api {

struct WorkerLeasesOptions {
  std::string token;
  std::string head_address;   // "" no head: only the agent below
  std::string agent_address;  // "" ask the head which node (PickNode)
  std::string state_dir;      // to find this host's live agent when agent_address is ""
  std::string owner_address;  // this driver's Owner service
  std::string job_id;
  // What workers run (empty: this program's own command line) and what is added to their
  // environment (InitOptions::worker_command, worker_env).
  std::vector<std::string> worker_command;
  std::map<std::string, std::string> worker_env;
  bool forward_output = true;
  bool prefix_output = false;  // InitOptions::prefix_worker_output
  bool local_streams = true;   // InitOptions::local_worker_streams
  // How long a granted worker may take to call WorkerReady.
  absl::Duration ready_timeout = absl::Seconds(30);
  // How often the head is asked for dead nodes while workers are held or lease requests are in
  // flight (with a head).
  absl::Duration node_check_interval = absl::Seconds(1);
  // Called once a leased worker of `shape_key` is handed to the submitter, with its address,
  // node and the agent's id of it (named actors are registered alive there for other drivers).
  // Runs on the Owner service's thread; must not block long.
  std::function<void(const std::string& shape_key, const std::string& address,
                     const std::string& node_id, const std::string& worker_id)>
      on_worker_ready;
};

class WorkerLeases final : public LeaseSource {
 public:
  WorkerLeases(WorkerLeasesOptions options, TaskSubmitter* submitter);
  ~WorkerLeases() override;

  void RequestWorker(const LeaseShape& shape) override;
  // NodeAgent.ReturnLease for the worker, sent without waiting (a refusal is printed; the
  // worker then keeps its lease until it is closed). False for a worker not held, or whose
  // lease holds devices.
  bool ReturnLease(WorkerHandle worker) override;

  // A worker this driver leased says it serves at `request.address()`.
  v1::WorkerReadyReply WorkerReady(const v1::WorkerReadyRequest& request);

  // Stops asking for leases (cancelling the requests in flight) and waits (bounded) for every
  // watched worker to exit.
  void Shutdown();

  // Lease threads started and not yet joined (for tests). One is joined promptly after its
  // lease ends (or its request fails): by the monitor thread, woken when it finishes, or before
  // the next one starts.
  size_t lease_threads_for_tests() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Leased {
    std::string shape_key;
    std::string agent_address;
    v1::LeaseGrant grant;
    WorkerHandle handle = 0;  // 0 until ready
    bool exited = false;
    bool ready_failed = false;  // no WorkerReady in time: killed, its ready call refused
    bool node_dead = false;     // the head declared its node dead: its watch is cut
    bool detached = false;      // a detached actor's: it outlives this driver (not waited for)
    absl::Time granted_at;
    std::shared_ptr<grpc::ClientContext> watch;  // set once its watch started
  };
  // Cancellable state of one RequestLease call in flight.
  struct LeaseCall {
    std::string agent_address;
    bool node_dead = false;  // the head declared the agent's node dead: the call is cancelled
  };
  // Kills every granted worker that has not called WorkerReady within ready_timeout (a worker
  // stuck before serving would hold its lease, and its shape's one lease request, forever);
  // its watch then reports the lease failed, a start failure. And, while workers are held or
  // lease requests are in flight, asks the head every node_check_interval which nodes are dead,
  // and cuts the watches of workers and the lease requests there: a machine that vanished
  // without closing its connections (power, network, a stopped agent) leaves them hanging
  // otherwise, its workers' tasks would never be retried, and a lease sent there would wait
  // out its attempts (20 s each, up to 60 s) before trying another node.
  void Monitor();
  // Cuts the watches of workers, and cancels the lease requests in flight, on nodes the head
  // lists as DEAD.
  void CutCallsToDeadNodes();
  // Runs one request to a grant, or an error (permanent: infeasible or invalid).
  absl::StatusOr<std::pair<v1::LeaseGrant, std::string>> Acquire(const LeaseShape& shape,
                                                                 bool& permanent);
  // The error of every call cut short by Shutdown.
  static absl::Status ShuttingDown();
  // Waits `backoff` before the next attempt; ShuttingDown() when Shutdown comes first.
  absl::Status WaitBeforeRetry(absl::Duration backoff) ABSL_LOCKS_EXCLUDED(mu_);
  // Every node the head lists (paged).
  absl::StatusOr<v1::ListNodesResponse> ListHeadNodes();
  // RequestLease on one agent, retried as the lease's contract allows (see the .cc).
  absl::Status RequestLeaseFrom(const std::string& agent, const v1::LeaseRequest& request,
                                v1::LeaseReply* reply);
  // The path where `package` is unpacked on `agent`'s node: asked of that agent once (it unpacks
  // it, or finds it cached by its content id) and remembered.
  absl::StatusOr<std::string> PreparedPath(const std::string& agent,
                                           const RuntimeEnvFiles::Package& package)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Forgets what `agent` was found to hold (its node may have lost it: a restarted agent).
  void ForgetPreparedFiles(const std::string& agent) ABSL_LOCKS_EXCLUDED(mu_);
  // Makes `files` ready on `agent`'s node and sets `worker` to start in the working_dir with it
  // and the py_modules first on its PYTHONPATH.
  absl::Status WithRuntimeEnvFiles(const std::string& agent, const RuntimeEnvFiles& files,
                                   v1::WorkerSpec& worker) ABSL_LOCKS_EXCLUDED(mu_);
  std::string LocalAgentAddress() const;
  v1::NodeAgent::Stub* Agent(const std::string& address);
  // A lease thread: asks for a lease of `shape` and, once granted, watches its worker until the
  // lease ends; then marks lease thread `serial` finished, to be joined by
  // ReapFinishedLeaseThreads.
  void RunLease(uint64_t serial, LeaseShape shape);
  void Watch(uint64_t serial, const std::string& worker_id);
  // The context of the watch of `worker_id` (lease thread `serial`), cut at once when Shutdown
  // has cut the watches or the worker's node is dead.
  std::shared_ptr<grpc::ClientContext> WatchContext(uint64_t serial, const std::string& worker_id)
      ABSL_LOCKS_EXCLUDED(mu_);
  // The watch of `worker_id` ended (`cause`): the worker is forgotten, and the submitter told
  // that it died, or that its lease failed when it never became ready.
  void EndWatch(const std::string& worker_id, const std::string& cause, bool bundle_removed)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Joins the lease threads that have finished and forgets them.
  void ReapFinishedLeaseThreads() ABSL_LOCKS_EXCLUDED(mu_);
  void FillNodeLabels(const std::string& node_id, v1::WorkerReadyReply& reply);

  const WorkerLeasesOptions options_;
  TaskSubmitter* const submitter_;
  std::unique_ptr<v1::HeadNodes::Stub> head_nodes_;  // ListNodes, PickNode; null without a head
  std::vector<std::string> argv_;
  std::string cwd_;

  absl::Mutex mu_;
  absl::CondVar changed_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::map<std::string, Leased> leased_ ABSL_GUARDED_BY(mu_);  // by worker id
  std::map<std::string, std::unique_ptr<v1::NodeAgent::Stub>> agents_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::map<std::string, std::string>> labels_ ABSL_GUARDED_BY(mu_);
  // Where each runtime_env folder lies on each agent's node, by "<agent>|<content id>".
  std::map<std::string, std::string> prepared_ ABSL_GUARDED_BY(mu_);
  // Every RequestLease call in flight, by its context (alive while listed).
  std::map<grpc::ClientContext*, LeaseCall> lease_calls_ ABSL_GUARDED_BY(mu_);
  // Lease threads still asking for their lease (Shutdown waits for none before the watches).
  int asking_ ABSL_GUARDED_BY(mu_) = 0;
  struct LeaseThread {
    std::thread thread;
    std::shared_ptr<grpc::ClientContext> watch;  // set once its watch stream starts
  };
  // Every lease thread not yet joined, by serial; those whose thread has returned (or is about
  // to) are listed in finished_lease_threads_ until ReapFinishedLeaseThreads joins them.
  std::map<uint64_t, LeaseThread> lease_threads_ ABSL_GUARDED_BY(mu_);
  std::vector<uint64_t> finished_lease_threads_ ABSL_GUARDED_BY(mu_);
  uint64_t next_lease_thread_ ABSL_GUARDED_BY(mu_) = 0;
  // Set when Shutdown cuts every watch: a watch that starts later is cut at once.
  bool watches_cut_ ABSL_GUARDED_BY(mu_) = false;
  // Every worker stream, kept until gRPC is done with it (then dropped on one of our threads).
  std::vector<std::shared_ptr<WorkerStream>> channels_ ABSL_GUARDED_BY(mu_);
  std::thread monitor_thread_;
};

}  // namespace tessera::api
