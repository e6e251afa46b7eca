#include "api/worker_leases.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "api/local_worker_channel.h"
#include "api/prefixed_output.h"
#include "api/worker_channel.h"
#include "base/ignore_status.h"
#include "base/status_macros.h"
#include "client/cluster_client.h"
#include "client/lease_round.h"
#include "client/list_pages.h"
#include "client/state_folder.h"
#include "rpc/auth.h"
#include "rpc/channel.h"
#include "rpc/retry.h"
#include "rpc/status_conversion.h"
#include "worker/worker_runtime.h"

namespace tessera::api {
namespace {

// This program's command line, with argv[0] made the absolute path of this executable (the
// worker is started from the agent's folder, and may be started on behalf of a relative path).
std::vector<std::string> OwnCommandLine() {
  std::vector<std::string> argv;
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (absl::string_view arg : absl::StrSplit(all, '\0', absl::SkipEmpty())) {
    argv.emplace_back(arg.data(), arg.size());
  }
  std::error_code ec;
  std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (argv.empty()) argv.emplace_back();
  if (!ec) argv[0] = exe.string();
  return argv;
}

void WriteOut(FILE* to, const std::string& data) {
  if (data.empty()) return;
  std::fwrite(data.data(), 1, data.size(), to);
  std::fflush(to);
}

}  // namespace

WorkerLeases::WorkerLeases(WorkerLeasesOptions options, TaskSubmitter* submitter)
    : options_(std::move(options)),
      submitter_(submitter),
      argv_(options_.worker_command.empty() ? OwnCommandLine() : options_.worker_command) {
  std::error_code ec;
  cwd_ = std::filesystem::current_path(ec).string();
  if (!options_.head_address.empty()) {
    head_nodes_ = v1::HeadNodes::NewStub(rpc::MakeChannel(options_.head_address, options_.token));
  }
  monitor_thread_ = std::thread([this] { Monitor(); });
}

WorkerLeases::~WorkerLeases() { Shutdown(); }

void WorkerLeases::RequestWorker(const LeaseShape& shape) {
  ReapFinishedLeaseThreads();
  absl::MutexLock lock(&mu_);
  if (stopping_) return;  // never answered: the submitter is shutting down too
  ++asking_;
  const uint64_t serial = next_lease_thread_++;
  // Under mu_: the entry is whole before the thread can look at it.
  lease_threads_[serial].thread = std::thread([this, serial, shape] { RunLease(serial, shape); });
}

std::string WorkerLeases::LocalAgentAddress() const {
  return client::LocalAgentAddress(client::StateFolder{options_.state_dir});
}

v1::NodeAgent::Stub* WorkerLeases::Agent(const std::string& address) {
  absl::MutexLock lock(&mu_);
  auto& stub = agents_[address];
  if (stub == nullptr) stub = v1::NodeAgent::NewStub(rpc::MakeChannel(address, options_.token));
  return stub.get();
}

void WorkerLeases::RunLease(uint64_t serial, LeaseShape shape) {
  bool permanent = false;
  auto granted = Acquire(shape, permanent);
  if (!granted.ok()) {
    submitter_->LeaseFailed(shape.key, granted.status(), permanent);
  } else {
    const std::string worker_id = granted->first.worker_id();
    {
      absl::MutexLock lock(&mu_);
      Leased& leased = leased_[worker_id];
      leased.shape_key = shape.key;
      leased.agent_address = granted->second;
      leased.grant = std::move(granted->first);
      leased.detached = !shape.detached_actor_id.empty();
      leased.granted_at = absl::Now();
      --asking_;
      changed_.SignalAll();
    }
    Watch(serial, worker_id);
  }
  absl::MutexLock lock(&mu_);
  if (!granted.ok()) --asking_;
  finished_lease_threads_.push_back(serial);
  changed_.SignalAll();  // the monitor joins it
}

void WorkerLeases::ReapFinishedLeaseThreads() {
  std::vector<std::thread> finished;
  {
    absl::MutexLock lock(&mu_);
    for (uint64_t serial : finished_lease_threads_) {
      auto it = lease_threads_.find(serial);
      if (it == lease_threads_.end()) continue;  // Shutdown took it
      finished.push_back(std::move(it->second.thread));
      lease_threads_.erase(it);
    }
    finished_lease_threads_.clear();
  }
  // Each has returned from RunLease's work and at most releases mu_: these joins do not wait
  // long.
  for (std::thread& thread : finished) thread.join();
}

absl::Status WorkerLeases::ShuttingDown() {
  return absl::CancelledError("tessera is shutting down");
}

absl::Status WorkerLeases::WaitBeforeRetry(absl::Duration backoff) {
  absl::MutexLock lock(&mu_);
  const absl::Time retry_at = absl::Now() + backoff;
  while (!stopping_ && absl::Now() < retry_at) changed_.WaitWithDeadline(&mu_, retry_at);
  return stopping_ ? ShuttingDown() : absl::OkStatus();
}

absl::StatusOr<v1::ListNodesResponse> WorkerLeases::ListHeadNodes() {
  return client::ListEveryPageOf(*head_nodes_, &v1::HeadNodes::Stub::ListNodes, absl::Seconds(5),
                                 absl::StrCat("the head at ", options_.head_address));
}

size_t WorkerLeases::lease_threads_for_tests() {
  absl::MutexLock lock(&mu_);
  return lease_threads_.size();
}

void WorkerLeases::CutCallsToDeadNodes() {
  auto nodes = ListHeadNodes();
  if (!nodes.ok()) return;  // next time
  std::set<std::string> dead;
  // Lease requests know their agent's address, not its node: the addresses of dead nodes that
  // no live node has taken over.
  std::set<std::string> dead_addresses;
  std::set<std::string> live_addresses;
  for (const v1::NodeInfo& node : nodes->nodes()) {
    if (node.state() == v1::NODE_STATE_DEAD) {
      dead.insert(node.node().node_id());
      dead_addresses.insert(node.node().address());
    } else {
      live_addresses.insert(node.node().address());
    }
  }
  if (dead.empty()) return;
  for (const std::string& address : live_addresses) dead_addresses.erase(address);
  absl::MutexLock lock(&mu_);
  for (auto& [id, leased] : leased_) {
    if (leased.node_dead || dead.count(leased.grant.node_id()) == 0) continue;
    leased.node_dead = true;
    if (leased.watch != nullptr) leased.watch->TryCancel();
  }
  for (auto& [context, call] : lease_calls_) {
    if (call.node_dead || dead_addresses.count(call.agent_address) == 0) continue;
    call.node_dead = true;
    context->TryCancel();
  }
}

void WorkerLeases::Monitor() {
  absl::Time next_node_check = absl::Now();
  while (true) {
    ReapFinishedLeaseThreads();
    std::vector<std::pair<std::string, std::string>> overdue;  // worker id, its agent
    bool check_nodes = false;
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return;
      const absl::Time now = absl::Now();
      absl::Time next = now + absl::Seconds(1);
      if (head_nodes_ != nullptr && (!leased_.empty() || !lease_calls_.empty())) {
        if (now >= next_node_check) {
          check_nodes = true;
          next_node_check = now + options_.node_check_interval;
        }
        next = std::min(next, next_node_check);
      }
      for (auto& [id, leased] : leased_) {
        if (leased.handle != 0 || leased.ready_failed) continue;
        const absl::Time due = leased.granted_at + options_.ready_timeout;
        if (due <= now) {
          leased.ready_failed = true;
          overdue.emplace_back(id, leased.agent_address);
        } else {
          next = std::min(next, due);
        }
      }
      if (overdue.empty() && !check_nodes) {
        changed_.WaitWithDeadline(&mu_, next);
        continue;
      }
    }
    if (check_nodes) CutCallsToDeadNodes();
    for (const auto& [worker_id, agent] : overdue) {
      v1::KillWorkerRequest kill;
      kill.set_worker_id(worker_id);
      kill.set_signal(SIGKILL);
      v1::KillWorkerResponse killed;
      grpc::ClientContext context;
      rpc::ConfigureClientContext(&context, absl::Seconds(5));
      IgnoreStatus(rpc::FromGrpcStatus(Agent(agent)->KillWorker(&context, kill, &killed)),
                   "when the agent is gone too, so is the worker: its watch ends either way");
    }
  }
}

bool WorkerLeases::ReturnLease(WorkerHandle worker) {
  std::string worker_id;
  std::string agent;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [id, leased] : leased_) {
      if (leased.handle != worker) continue;
      if (leased.exited || leased.detached || leased.grant.allocation().devices_size() > 0) {
        return false;
      }
      worker_id = id;
      agent = leased.agent_address;
      break;
    }
  }
  if (worker_id.empty()) return false;
  struct Call {
    grpc::ClientContext context;
    v1::ReturnLeaseRequest request;
    v1::ReturnLeaseResponse response;
  };
  auto call = std::make_shared<Call>();
  call->request.set_worker_id(worker_id);
  rpc::ConfigureClientContext(&call->context, absl::Seconds(10));
  rpc::KeepCallbackQueueForTheProcess();
  Agent(agent)->async()->ReturnLease(
      &call->context, &call->request, &call->response, [call](grpc::Status status) {
        if (!status.ok()) {
          std::fprintf(stderr, "tessera: worker %s keeps its lease: %s\n",
                       call->request.worker_id().c_str(), status.error_message().c_str());
        }
      });
  return true;
}

absl::StatusOr<std::pair<v1::LeaseGrant, std::string>> WorkerLeases::Acquire(
    const LeaseShape& shape, bool& permanent) {
  v1::LeaseRequest lease;
  *lease.mutable_request() = shape.request;
  v1::WorkerSpec& worker = *lease.mutable_worker();
  for (const std::string& arg : argv_) worker.add_argv(arg);
  auto& env = *worker.mutable_env();
  env.insert(shape.env.begin(), shape.env.end());  // the actor's own; Tessera's below win
  env.insert(options_.worker_env.begin(), options_.worker_env.end());
  if (!options_.worker_env.empty()) {
    // So that the worker's own leases (tasks it submits) pass the same variables on.
    std::vector<std::string> keys;
    for (const auto& [key, value] : options_.worker_env) keys.push_back(key);
    env[std::string(worker::kWorkerEnvKeysEnv)] = absl::StrJoin(keys, ",");
  }
  env[std::string(worker::kWorkerModeEnv)] = std::string("1");
  env[std::string(worker::kOwnerAddressEnv)] = options_.owner_address;
  env[std::string(worker::kJobIdEnv)] = options_.job_id;
  // No token here: the agent gives the worker a private file to read it from.
  env.erase(std::string(worker::kTokenEnv));
  // What the worker's own driver runtime needs when a task submits tasks (nested calls).
  if (!options_.state_dir.empty()) env[std::string(worker::kStateDirEnv)] = options_.state_dir;
  if (!options_.head_address.empty()) {
    env[std::string(worker::kHeadAddressEnv)] = options_.head_address;
  }
  worker.set_cwd(cwd_);
  // A worker belongs to this driver: when the driver dies (its watch of the worker ends), the
  // agent stops the worker, even one busy inside a task or an actor method. A detached actor's
  // outlives it: its agent tells the head when it exits instead.
  worker.set_stop_when_unwatched(shape.detached_actor_id.empty());
  if (!shape.detached_actor_id.empty()) {
    worker.set_detached_actor_id(shape.detached_actor_id);
    env[std::string(worker::kDetachedActorEnv)] = std::string("1");
  }
  lease.set_job_id(options_.job_id);

  rpc::RetryOptions retry;
  // Granting starts the worker process: give it time on a loaded machine.
  retry.attempt_timeout = absl::Seconds(20);
  retry.total_budget = absl::Seconds(60);
  absl::Duration backoff = absl::Milliseconds(20);
  while (true) {
    // SPREAD is a choice among nodes, which only the head can make: it picks the first too.
    const bool head_picks =
        shape.request.strategy() == v1::STRATEGY_SPREAD && head_nodes_ != nullptr;
    const std::string address = head_picks                       ? std::string()
                                : options_.agent_address.empty() ? LocalAgentAddress()
                                                                 : options_.agent_address;
    if (address.empty() && head_nodes_ == nullptr) {
      permanent = true;
      return absl::FailedPreconditionError(
          absl::StrCat("no node agent runs on this host (state folder ", options_.state_dir,
                       ") and no head is known to pick one"));
    }
    client::LeaseRoundCalls calls;
    auto pick_node = [&](const v1::ResourceRequest& request,
                         const std::vector<std::string>& exclude, v1::PickNodeResponse* picked) {
      v1::PickNodeRequest pick;
      *pick.mutable_request() = request;
      for (const std::string& node : exclude) pick.add_exclude_node_ids(node);
      return rpc::RetryUnary(retry, &v1::HeadNodes::Stub::PickNode, head_nodes_.get(), pick,
                             picked);
    };
    calls.pick_node = [&](const v1::ResourceRequest& request, v1::PickNodeResponse* picked) {
      return pick_node(request, {}, picked);
    };
    if (head_nodes_ != nullptr) calls.pick_node_excluding = pick_node;
    calls.request_lease = [&](const std::string& agent, const v1::LeaseRequest& request,
                              v1::LeaseReply* reply) {
      absl::Status s;
      if (shape.files != nullptr) {
        // Its folders are unpacked on that node first (once per node and content).
        v1::LeaseRequest with_files = request;
        s = WithRuntimeEnvFiles(agent, *shape.files, *with_files.mutable_worker());
        if (s.ok()) s = RequestLeaseFrom(agent, with_files, reply);
        if (s.code() == absl::StatusCode::kFailedPrecondition) ForgetPreparedFiles(agent);
      } else {
        s = RequestLeaseFrom(agent, request, reply);
      }
      if (s.ok()) return s;
      permanent = s.code() == absl::StatusCode::kInvalidArgument;
      return absl::Status(s.code(),
                          absl::StrCat("lease from the node agent at ", agent, ": ", s.message()));
    };
    calls.request_id = [] { return client::NewRequestId("lease"); };
    auto round = client::RunLeaseRound(lease, address, calls);
    if (!round.ok()) return round.status();
    if (round->grant.has_value()) return std::make_pair(*std::move(round->grant), round->address);
    // Past the hop limit the lease waits like a pending one.
    const std::string& explanation = round->explanation;
    if (round->status == v1::PICK_STATUS_INFEASIBLE) {
      permanent = true;
      return absl::ResourceExhaustedError(
          absl::StrCat("no node can ever run it (infeasible): ", explanation));
    }
    // Pending: the cluster is busy; ask again shortly.
    TESSERA_RETURN_IF_ERROR(WaitBeforeRetry(backoff));
    backoff = std::min(backoff * 2, absl::Milliseconds(500));
  }
}

absl::StatusOr<std::string> WorkerLeases::PreparedPath(const std::string& agent,
                                                       const RuntimeEnvFiles::Package& package) {
  const std::string key = absl::StrCat(agent, "|", package.id);
  {
    absl::MutexLock lock(&mu_);
    auto it = prepared_.find(key);
    if (it != prepared_.end()) return it->second;
  }
  v1::PrepareWorkingDirRequest request;
  request.set_job_id(package.id);
  request.set_archive(package.archive);
  v1::PrepareWorkingDirResponse response;
  grpc::ClientContext context;
  rpc::ConfigureClientContext(&context, absl::Seconds(60));
  const grpc::Status status = Agent(agent)->PrepareWorkingDir(&context, request, &response);
  if (!status.ok()) {
    const absl::Status s = rpc::FromGrpcStatus(status);
    return absl::Status(s.code(), absl::StrCat("runtime_env folder ", package.id.substr(0, 16),
                                               " on the node agent at ", agent, ": ", s.message()));
  }
  absl::MutexLock lock(&mu_);
  prepared_[key] = response.path();
  return response.path();
}

void WorkerLeases::ForgetPreparedFiles(const std::string& agent) {
  absl::MutexLock lock(&mu_);
  const std::string prefix = absl::StrCat(agent, "|");
  for (auto it = prepared_.lower_bound(prefix);
       it != prepared_.end() && absl::StartsWith(it->first, prefix);) {
    it = prepared_.erase(it);
  }
}

absl::Status WorkerLeases::WithRuntimeEnvFiles(const std::string& agent,
                                               const RuntimeEnvFiles& files,
                                               v1::WorkerSpec& worker) {
  std::vector<std::string> python_path;
  if (files.working_dir.has_value()) {
    TESSERA_ASSIGN_OR_RETURN(std::string path, PreparedPath(agent, *files.working_dir));
    // The agent starts the worker in that folder (an absolute cwd is replaced by it).
    worker.set_working_dir_job(files.working_dir->id);
    worker.set_cwd("");
    python_path.push_back(std::move(path));
  }
  for (const RuntimeEnvFiles::Package& module : files.py_modules) {
    TESSERA_ASSIGN_OR_RETURN(std::string path, PreparedPath(agent, module));
    python_path.push_back(module.entry.empty() ? path : absl::StrCat(path, "/", module.entry));
  }
  auto& env = *worker.mutable_env();
  auto existing = env.find("PYTHONPATH");
  if (existing != env.end() && !existing->second.empty()) python_path.push_back(existing->second);
  env["PYTHONPATH"] = absl::StrJoin(python_path, ":");
  return absl::OkStatus();
}

absl::Status WorkerLeases::RequestLeaseFrom(const std::string& agent,
                                            const v1::LeaseRequest& request,
                                            v1::LeaseReply* reply) {
  // Granting starts the worker process: each attempt has time for that on a loaded machine, and
  // one that timed out is asked again (same request id: one worker, never two). An agent that
  // cannot be reached is given up on after a few quick tries: its machine may be gone while
  // the head still lists it, and the lease round then asks the head for another node. So is one
  // whose node the head declares dead while a call is in flight: the monitor cancels the call.
  constexpr int kUnreachableTries = 3;
  const absl::Time give_up = absl::Now() + absl::Seconds(60);
  absl::Duration backoff = absl::Milliseconds(50);
  int unreachable = 0;
  while (true) {
    grpc::ClientContext context;
    rpc::ConfigureClientContext(&context, absl::Seconds(20));
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return ShuttingDown();
      lease_calls_[&context].agent_address = agent;
    }
    reply->Clear();
    const grpc::Status status = Agent(agent)->RequestLease(&context, request, reply);
    bool node_dead = false;
    bool stopping = false;
    {
      absl::MutexLock lock(&mu_);
      node_dead = lease_calls_[&context].node_dead;
      lease_calls_.erase(&context);
      stopping = stopping_;
    }
    if (status.ok()) return absl::OkStatus();
    if (stopping) return ShuttingDown();
    if (node_dead) {
      return absl::UnavailableError("the head declared its node dead (it lost its heartbeats)");
    }
    const absl::Status s = rpc::FromGrpcStatus(status);
    if (s.code() == absl::StatusCode::kUnavailable) {
      if (++unreachable >= kUnreachableTries) return s;
    } else if (s.code() != absl::StatusCode::kDeadlineExceeded) {
      return s;
    }
    if (absl::Now() + backoff >= give_up) return s;
    TESSERA_RETURN_IF_ERROR(WaitBeforeRetry(backoff));
    backoff = std::min(backoff * 2, absl::Seconds(1));
  }
}

void WorkerLeases::Watch(uint64_t serial, const std::string& worker_id) {
  std::string agent_address;
  std::string prefix;
  {
    absl::MutexLock lock(&mu_);
    const Leased& leased = leased_.at(worker_id);
    agent_address = leased.agent_address;
    if (options_.prefix_output) {
      prefix = absl::StrCat("(pid=", leased.grant.pid(), ", node=", leased.grant.node_id(), ") ");
    }
  }
  // Whole lines, prefixed, when asked; else the bytes as they come.
  PrefixedLines out_lines(prefix);
  PrefixedLines err_lines(prefix);
  auto forward = [&](FILE* to, PrefixedLines& lines, const std::string& chunk) {
    if (!options_.forward_output) return;
    WriteOut(to, options_.prefix_output ? lines.Add(chunk) : chunk);
  };
  std::shared_ptr<grpc::ClientContext> context = WatchContext(serial, worker_id);
  v1::WatchWorkerRequest request;
  request.set_worker_id(worker_id);
  std::unique_ptr<grpc::ClientReader<v1::WorkerEvent>> reader =
      Agent(agent_address)->WatchWorker(context.get(), request);
  v1::WorkerEvent event;
  std::string cause;
  bool bundle_removed = false;
  while (reader->Read(&event)) {
    if (event.event_case() == v1::WorkerEvent::kLeaseWanted) {
      // Another lease waits on its node: an idle worker goes back now.
      WorkerHandle idle = 0;
      {
        absl::MutexLock lock(&mu_);
        auto it = leased_.find(worker_id);
        if (it != leased_.end()) idle = it->second.handle;
      }
      if (idle != 0) submitter_->HandBackIfIdle(idle, absl::Now());
    } else if (event.has_exit()) {
      cause = event.exit().reason();
      bundle_removed = event.exit().bundle_removed();
    } else if (event.has_stdout()) {
      forward(stdout, out_lines, event.stdout());
    } else if (event.has_stderr()) {
      forward(stderr, err_lines, event.stderr());
    }
  }
  if (options_.forward_output && options_.prefix_output) {
    WriteOut(stdout, out_lines.Flush());
    WriteOut(stderr, err_lines.Flush());
  }
  grpc::Status status = reader->Finish();
  if (cause.empty()) {
    absl::MutexLock lock(&mu_);
    auto it = leased_.find(worker_id);
    if (it != leased_.end() && it->second.node_dead) {
      cause = absl::StrCat("its node ", it->second.grant.node_id(),
                           " died (the head lost its heartbeats)");
    } else {
      cause = absl::StrCat("lost contact with its node agent at ", agent_address, ": ",
                           status.error_message());
    }
  }
  EndWatch(worker_id, cause, bundle_removed);
}

std::shared_ptr<grpc::ClientContext> WorkerLeases::WatchContext(uint64_t serial,
                                                                const std::string& worker_id) {
  auto context = std::make_shared<grpc::ClientContext>();
  rpc::ConfigureClientContext(context.get(), absl::InfiniteDuration());
  absl::MutexLock lock(&mu_);
  auto thread = lease_threads_.find(serial);
  if (thread != lease_threads_.end()) thread->second.watch = context;
  if (watches_cut_) context->TryCancel();  // Shutdown cut the others before this one began
  auto it = leased_.find(worker_id);
  if (it != leased_.end()) {
    it->second.watch = context;
    if (it->second.node_dead) context->TryCancel();
  }
  return context;
}

void WorkerLeases::EndWatch(const std::string& worker_id, const std::string& cause,
                            bool bundle_removed) {
  WorkerHandle handle = 0;
  std::string shape_key;
  bool stopping = false;
  bool never_ready = false;
  {
    absl::MutexLock lock(&mu_);
    auto it = leased_.find(worker_id);
    if (it != leased_.end()) {
      handle = it->second.handle;
      shape_key = it->second.shape_key;
      never_ready = it->second.ready_failed;
      leased_.erase(it);
    }
    stopping = stopping_;
    changed_.SignalAll();
  }
  if (handle != 0) {
    submitter_->WorkerDied(handle, cause, bundle_removed);
  } else if (!stopping && never_ready) {
    submitter_->LeaseFailed(shape_key,
                            absl::UnavailableError(absl::StrCat(
                                "its worker ", worker_id, " did not say ready within ",
                                absl::FormatDuration(options_.ready_timeout),
                                " and was killed; see its log in the node's workers folder")),
                            /*permanent=*/false);
  } else if (!stopping && !shape_key.empty()) {
    submitter_->LeaseFailed(shape_key,
                            absl::UnavailableError(absl::StrCat(
                                "its worker ", worker_id, " exited before it was ready (", cause,
                                "); see its log in the node's workers folder")),
                            /*permanent=*/false);
  }
}

void WorkerLeases::FillNodeLabels(const std::string& node_id, v1::WorkerReadyReply& reply) {
  {
    absl::MutexLock lock(&mu_);
    auto it = labels_.find(node_id);
    if (it != labels_.end()) {
      reply.mutable_node_labels()->insert(it->second.begin(), it->second.end());
      return;
    }
  }
  if (head_nodes_ == nullptr) return;
  auto nodes = ListHeadNodes();
  if (!nodes.ok()) return;
  absl::MutexLock lock(&mu_);
  for (const v1::NodeInfo& node : nodes->nodes()) {
    const auto& labels = node.node().labels();
    labels_[node.node().node_id()] =
        std::map<std::string, std::string>(labels.begin(), labels.end());
  }
  auto it = labels_.find(node_id);
  if (it != labels_.end())
    reply.mutable_node_labels()->insert(it->second.begin(), it->second.end());
}

v1::WorkerReadyReply WorkerLeases::WorkerReady(const v1::WorkerReadyRequest& request) {
  v1::WorkerReadyReply reply;
  Leased leased;
  {
    absl::MutexLock lock(&mu_);
    // The worker can be faster than the lease reply that names it.
    const absl::Time until = absl::Now() + absl::Seconds(30);
    while (leased_.count(request.worker_id()) == 0 && !stopping_ && absl::Now() < until) {
      changed_.WaitWithDeadline(&mu_, until);
    }
    auto it = leased_.find(request.worker_id());
    if (it == leased_.end() || stopping_) return reply;  // not accepted
    if (it->second.ready_failed) return reply;           // too late: it is being killed
    leased = it->second;
  }
  const v1::LeaseGrant& grant = leased.grant;
  reply.set_node_id(grant.node_id());
  reply.mutable_isolation_env()->insert(grant.isolation_env().begin(), grant.isolation_env().end());
  for (const v1::DeviceGrant& device : grant.allocation().devices()) {
    (*reply.mutable_accelerator_ids())[device.resource()] = absl::StrJoin(device.instances(), ",");
  }
  FillNodeLabels(grant.node_id(), reply);

  const WorkerHandle handle = submitter_->NewHandle();
  TaskSubmitter* submitter = submitter_;
  auto on_results = [submitter, handle](const v1::TaskResultBatch& results) {
    submitter->OnResults(handle, results);
  };
  std::shared_ptr<grpc::Channel> control = rpc::MakeChannel(request.address(), options_.token);
  std::shared_ptr<WorkerStream> channel;
  // A worker on this host, of this user, offers its stream on a local socket: faster than
  // gRPC's. Anything else (another host, another user, the name taken) falls back to gRPC.
  if (options_.local_streams && !request.local_stream().empty()) {
    auto local = LocalWorkerChannel::Connect(request.local_stream(), request.pid(), control,
                                             on_results, [] {});
    if (local.ok()) channel = *std::move(local);
  }
  if (channel == nullptr) channel = GrpcWorkerChannel::Start(control, on_results, [] {});
  std::vector<std::shared_ptr<WorkerStream>> finished;
  {
    absl::MutexLock lock(&mu_);
    for (auto& c : channels_) {
      if (c->done()) finished.push_back(std::move(c));
    }
    channels_.erase(std::remove(channels_.begin(), channels_.end(), nullptr), channels_.end());
    channels_.push_back(channel);
    auto it = leased_.find(request.worker_id());
    if (it == leased_.end() || it->second.ready_failed) {
      channel->Close();  // it exited meanwhile, or is being killed for being late
      return reply;
    }
    it->second.handle = handle;
  }
  if (submitter_->AddWorker(leased.shape_key, handle, channel,
                            WorkerIdentity{grant.node_id(), grant.worker_id(), request.pid()}) &&
      options_.on_worker_ready) {
    options_.on_worker_ready(leased.shape_key, request.address(), grant.node_id(),
                             grant.worker_id());
  }
  reply.set_accepted(true);
  return reply;
}

void WorkerLeases::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    if (stopping_ && !monitor_thread_.joinable()) return;
    stopping_ = true;
    changed_.SignalAll();
    for (auto& [context, call] : lease_calls_) context->TryCancel();
  }
  if (monitor_thread_.joinable()) monitor_thread_.join();
  {
    // The requests end at once (cancelled, or at their next wait), or with their grant.
    absl::MutexLock lock(&mu_);
    while (asking_ > 0) changed_.Wait(&mu_);
  }
  {
    // Workers let go exit on their own; give them a moment before cutting the watches (detached
    // actors' workers stay: cutting their watches leaves them running).
    absl::MutexLock lock(&mu_);
    auto only_detached_left = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return std::all_of(leased_.begin(), leased_.end(),
                         [](const auto& entry) { return entry.second.detached; });
    };
    const absl::Time until = absl::Now() + absl::Seconds(5);
    while (!only_detached_left() && absl::Now() < until) changed_.WaitWithDeadline(&mu_, until);
    watches_cut_ = true;
    for (auto& [serial, thread] : lease_threads_) {
      if (thread.watch != nullptr) thread.watch->TryCancel();
    }
  }
  std::map<uint64_t, LeaseThread> threads;
  {
    absl::MutexLock lock(&mu_);
    threads.swap(lease_threads_);
    finished_lease_threads_.clear();
  }
  for (auto& [serial, thread] : threads) thread.thread.join();
  // Streams of workers that are gone end by themselves; cut any left, then wait for gRPC.
  std::vector<std::shared_ptr<WorkerStream>> channels;
  {
    absl::MutexLock lock(&mu_);
    channels.swap(channels_);
  }
  for (auto& c : channels) {
    if (!c->done()) c->Cancel();
  }
  for (auto& c : channels) {
    const absl::Time until = absl::Now() + absl::Seconds(10);
    while (!c->done() && absl::Now() < until) absl::SleepFor(absl::Milliseconds(1));
  }
}

}  // namespace tessera::api
