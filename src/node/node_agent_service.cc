#include "node/node_agent_service.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <set>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/ignore_status.h"
#include "node/agent_proto.h"
#include "node/worker_env.h"
#include "node/worker_log_stream.h"
#include "node/working_dir.h"
#include "rpc/status_conversion.h"
#include "wire/proto_convert.h"

namespace tessera {
namespace {

v1::PickStatus LeaseStatusOf(ScheduleStatus status) {
  switch (status) {
    case ScheduleStatus::kPlaced: return v1::PICK_STATUS_PLACED;
    case ScheduleStatus::kPending: return v1::PICK_STATUS_PENDING;
    case ScheduleStatus::kInfeasible: return v1::PICK_STATUS_INFEASIBLE;
  }
  return v1::PICK_STATUS_PENDING;
}

grpc::Status Invalid(const absl::Status& status) {
  return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, std::string(status.message()));
}

grpc::Status NoObjectStore() {
  return grpc::Status(grpc::StatusCode::UNAVAILABLE, "this node agent hosts no object store");
}

grpc::Status UnknownWorker(const std::string& id) {
  return grpc::Status(grpc::StatusCode::NOT_FOUND, absl::StrCat("no worker ", id, " on this node"));
}

// The interface holding `address` (an IPv4 or IPv6 literal), or "" when none does or it is a
// host name.
std::string InterfaceOf(const std::string& address) {
  in_addr v4{};
  in6_addr v6{};
  const bool is_v4 = ::inet_pton(AF_INET, address.c_str(), &v4) == 1;
  const bool is_v6 = !is_v4 && ::inet_pton(AF_INET6, address.c_str(), &v6) == 1;
  if (!is_v4 && !is_v6) return "";
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return "";
  std::string found;
  for (ifaddrs* it = list; it != nullptr && found.empty(); it = it->ifa_next) {
    if (it->ifa_addr == nullptr || it->ifa_name == nullptr) continue;
    if (is_v4 && it->ifa_addr->sa_family == AF_INET &&
        reinterpret_cast<sockaddr_in*>(it->ifa_addr)->sin_addr.s_addr == v4.s_addr) {
      found = it->ifa_name;
    }
    if (is_v6 && it->ifa_addr->sa_family == AF_INET6 &&
        std::memcmp(&reinterpret_cast<sockaddr_in6*>(it->ifa_addr)->sin6_addr, &v6, sizeof(v6)) ==
            0) {
      found = it->ifa_name;
    }
  }
  ::freeifaddrs(list);
  return found;
}

}  // namespace

NodeAgentService::NodeAgentService(AgentServiceOptions options, AgentState* state,
                                   ProcessSupervisor* workers, HeadLink* head,
                                   std::function<void()> on_shutdown)
    : options_(std::move(options)),
      state_(state),
      workers_(workers),
      head_(head),
      on_shutdown_(std::move(on_shutdown)) {
  if (options_.objects.store != nullptr) {
    puller_ =
        std::make_unique<ObjectPuller>(options_.objects, options_.token, options_.pull_timeout);
  }
}

grpc::Status NodeAgentService::RequestLease(grpc::ServerContext*, const v1::LeaseRequest* request,
                                            v1::LeaseReply* reply) {
  // A retried request (same request_id) gets the first answer: one worker, never two.
  LeaseOutcome outcome = lease_cache_.Run(
      request->request_id().empty() ? std::string()
                                    : absl::StrCat("RequestLease/", request->request_id()),
      [&] {
        LeaseOutcome decided = DecideLease(*request);
        CountAnswer(decided);
        return decided;
      });
  *reply = std::move(outcome.reply);
  return outcome.status;
}

void NodeAgentService::CountAnswer(const LeaseOutcome& outcome) {
  if (options_.metrics == nullptr) return;
  LeaseAnswer answer = LeaseAnswer::kRefused;
  if (!outcome.status.ok()) {
    answer = LeaseAnswer::kFailed;
  } else if (outcome.reply.has_granted()) {
    answer = LeaseAnswer::kGranted;
  } else if (outcome.reply.has_spillback()) {
    answer = LeaseAnswer::kSpilledBack;
  }
  options_.metrics->CountLease(answer);
}

NodeAgentService::LeaseOutcome NodeAgentService::DecideLease(const v1::LeaseRequest& request) {
  LeaseOutcome out;
  auto ask = LeaseAskFromProto(request);
  if (!ask.ok()) {
    out.status = Invalid(ask.status());
    return out;
  }
  auto decision = state_->TryLease(*ask);
  if (!decision.ok()) {
    out.status = Invalid(decision.status());
    return out;
  }
  // It could run here once what is held here is free: the owners of this node's workers hear
  // of it, and hand back those that are idle (a bundle's lease waits for its bundle instead).
  if (decision->status == ScheduleStatus::kPending && !ask->bundle.has_value()) {
    leases_wanted_.fetch_add(1);
  }
  v1::LeaseReply& reply = out.reply;
  if (ask->bundle.has_value() && ask->bundle->bundle >= 0 &&
      decision->status == ScheduleStatus::kInfeasible) {
    // This agent holds the targeted bundle and it can never hold the demand: nowhere else can.
    reply.set_status(v1::PICK_STATUS_INFEASIBLE);
    reply.set_explanation(decision->explanation);
    return out;
  }
  switch (NextStepAfterLocal(*decision, request.hops(), options_.max_spillback_hops)) {
    case LeaseNextStep::kGranted:
      out.status = StartWorker(*decision->lease, request.worker(), &reply);
      if (options_.metrics != nullptr) {
        if (out.status.ok()) {
          options_.metrics->CountWorkerStarted();
        } else {
          options_.metrics->CountWorkerStartFailure();
        }
      }
      return out;
    case LeaseNextStep::kAnswerHere:
      reply.set_status(LeaseStatusOf(decision->status));
      reply.set_explanation(absl::StrCat("not sent on after ", request.hops(),
                                         " spillbacks: ", decision->explanation));
      return out;
    case LeaseNextStep::kAskHead: break;
  }
  reply.set_status(LeaseStatusOf(decision->status));
  reply.set_explanation(decision->explanation);
  if (head_ == nullptr) return out;
  auto pick = head_->PickNode(request.request(), {state_->node_id().value()});
  if (!pick.ok()) {
    reply.set_explanation(absl::StrCat(decision->explanation,
                                       "; the head could not be asked: ", pick.status().message()));
    return out;
  }
  if (!pick->node_id().empty() && pick->node_id() != state_->node_id().value()) {
    reply.clear_status();
    reply.clear_explanation();
    reply.mutable_spillback()->set_node_id(pick->node_id());
    reply.mutable_spillback()->set_address(pick->address());
    return out;
  }
  // A lease inside a bundle is the head's to judge: it knows whether the group exists, how many
  // bundles it has, what each reserves and where each is held. This node's PENDING only says
  // that it does not hold the bundle (or that its bundle is busy, and then the head, asked
  // without this node, says pending too), so a group that is gone, a bundle index out of range
  // or a demand no targeted bundle can ever hold is refused at once with the head's reason.
  if (ask->bundle.has_value() && pick->status() == v1::PICK_STATUS_INFEASIBLE) {
    reply.set_status(v1::PICK_STATUS_INFEASIBLE);
    reply.set_explanation(pick->explanation());
    return out;
  }
  // Nobody can take it now. Pending when it could run somewhere later (here or elsewhere).
  const bool pending =
      decision->status == ScheduleStatus::kPending || pick->status() == v1::PICK_STATUS_PENDING;
  reply.set_status(pending ? v1::PICK_STATUS_PENDING : v1::PICK_STATUS_INFEASIBLE);
  if (!pick->explanation().empty()) {
    reply.set_explanation(
        absl::StrCat(decision->explanation, "; other nodes: ", pick->explanation()));
  }
  return out;
}

absl::StatusOr<Allocation> NodeAgentService::VisibleAllocation(const LeaseRecord& lease,
                                                               const v1::WorkerSpec& spec) const {
  if (spec.visible_bundles().empty()) return lease.allocation;
  if (!lease.bundle.has_value()) {
    return absl::InvalidArgumentError("worker.visible_bundles: the lease is not in a bundle");
  }
  const std::set<int> wanted(spec.visible_bundles().begin(), spec.visible_bundles().end());
  std::map<std::string, std::map<int, int64_t>> instances;  // resource -> instance -> amount
  std::set<int> found;
  for (const BundleRecord& bundle : state_->Bundles()) {
    if (bundle.key.group != lease.bundle->group || !wanted.contains(bundle.key.index)) continue;
    found.insert(bundle.key.index);
    for (const DeviceGrant& grant : bundle.allocation.devices) {
      for (size_t i = 0; i < grant.instances.size(); ++i) {
        const int64_t amount = i < grant.amounts.size() ? grant.amounts[i].raw() : 0;
        int64_t& kept = instances[grant.resource][grant.instances[i]];
        kept = std::max(kept, amount);
      }
    }
  }
  if (found.size() != wanted.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("worker.visible_bundles: not every bundle named is held on this node for ",
                     lease.bundle->group));
  }
  Allocation visible;
  for (auto& [resource, by_instance] : instances) {
    DeviceGrant grant;
    grant.resource = resource;
    for (auto& [instance, amount] : by_instance) {
      grant.instances.push_back(instance);
      grant.amounts.push_back(Quantity::FromRaw(amount));
    }
    visible.devices.push_back(std::move(grant));
  }
  return visible;
}

grpc::Status NodeAgentService::StartWorker(const LeaseRecord& lease, const v1::WorkerSpec& spec,
                                           v1::LeaseReply* reply) {
  auto visible = VisibleAllocation(lease, spec);
  if (!visible.ok()) {
    state_->WorkerFailedToStart(lease.worker, std::string(visible.status().message()));
    return Invalid(visible.status());
  }
  std::string cwd;
  if (grpc::Status status = WorkerCwd(lease, spec, cwd); !status.ok()) return status;
  auto isolation = LeaseIsolationEnv(state_->hardware(), *visible);
  if (!isolation.ok()) {
    state_->WorkerFailedToStart(lease.worker, std::string(isolation.status().message()));
    return grpc::Status(
        grpc::StatusCode::INTERNAL,
        absl::StrCat("isolation of lease ", lease.id.value(), ": ", isolation.status().message()));
  }
  const Environment env = WorkerEnvironment(lease, spec, *isolation);

  ChildSpec child;
  child.argv.assign(spec.argv().begin(), spec.argv().end());
  child.env = env.vars();
  child.cwd = cwd;
  if (spec.stdin_pipe()) {
    absl::StatusOr<std::string> pipe =
        options_.stdin_pipes == nullptr
            ? absl::FailedPreconditionError("this node agent forwards no stdin")
            : options_.stdin_pipes->Open(lease.worker);
    if (!pipe.ok()) {
      state_->WorkerFailedToStart(lease.worker, std::string(pipe.status().message()));
      return rpc::ToGrpcStatus(pipe.status());
    }
    child.stdin_path = *pipe;
  }
  child.stdout_path = absl::StrCat(options_.workers_dir, "/", lease.worker.value(), ".out");
  child.stderr_path = absl::StrCat(options_.workers_dir, "/", lease.worker.value(), ".err");
  WorkerStdinPipes* pipes = spec.stdin_pipe() ? options_.stdin_pipes : nullptr;
  WorkerDeviceErrors* device_errors = options_.device_errors;
  ExitCallback on_exit = WorkerExitCallback(spec);
  // Before the start: a worker that fails at once still has its devices' messages.
  if (device_errors != nullptr) device_errors->Started(lease.worker, *visible);
  auto pid = workers_->Start(ChildId(lease.worker.value()), child, std::move(on_exit));
  if (!pid.ok()) {
    if (pipes != nullptr) pipes->Forget(lease.worker);
    // Its messages (what Exited returns) are not kept: the worker never ran.
    if (device_errors != nullptr) device_errors->Exited(lease.worker, /*failed=*/false);
    const std::string reason = absl::StrCat("cannot start worker: ", pid.status().message());
    state_->WorkerFailedToStart(lease.worker, reason);
    return grpc::Status(static_cast<grpc::StatusCode>(pid.status().code()), reason);
  }
  std::map<std::string, std::string> isolation_env = IsolationEnvMap(*isolation);
  if (options_.watchdog != nullptr) WatchStartedWorker(lease, spec, child, *pid);
  IgnoreStatus(state_->WorkerStarted(lease.worker, *pid, child.argv, isolation_env,
                                     child.stdout_path, child.stderr_path),
               "NotFound only when the worker's record is gone: nothing is left to fill in");
  if (auto worker = state_->FindWorker(lease.worker); !state_->HoldsLease(lease.id) &&
                                                      worker.has_value() &&
                                                      worker->state != WorkerState::kExited) {
    // Its bundle was cancelled while it started: it must not run outside a reservation.
    state_->NoteKill(lease.worker, "after its bundle was cancelled while it started",
                     /*bundle_removed=*/true);
    IgnoreStatus(workers_->Signal(ChildId(lease.worker.value()), SIGKILL),
                 "NotFound: it has exited already, which is what the kill is for");
  }

  FillGrant(lease, *pid, isolation_env, *reply);
  return grpc::Status::OK;
}

grpc::Status NodeAgentService::WorkerCwd(const LeaseRecord& lease, const v1::WorkerSpec& spec,
                                         std::string& cwd) {
  cwd = spec.cwd();
  if (!spec.working_dir_job().empty()) {
    const std::string dir = absl::StrCat(options_.working_dirs_root, "/", spec.working_dir_job());
    std::error_code ec;
    if (options_.working_dirs_root.empty() || !IsWorkingDirJobId(spec.working_dir_job()) ||
        !std::filesystem::is_directory(dir, ec)) {
      const std::string why = absl::StrCat("worker.working_dir_job: no working directory of job ",
                                           spec.working_dir_job(), " on this node");
      state_->WorkerFailedToStart(lease.worker, why);
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, why);
    }
    cwd = cwd.empty() || cwd[0] == '/' ? dir : absl::StrCat(dir, "/", cwd);
  }
  return grpc::Status::OK;
}

Environment NodeAgentService::WorkerEnvironment(const LeaseRecord& lease,
                                                const v1::WorkerSpec& spec,
                                                const EnvChanges& isolation) const {
  WorkerEnvParts parts;
  parts.agent = options_.agent_env;
  parts.slice_env = options_.slice_env;
  parts.spec_env.insert(spec.env().begin(), spec.env().end());
  parts.isolation = isolation;
  parts.node = state_->node_id();
  parts.worker = lease.worker;
  parts.lease = lease.id;
  parts.object_store_socket = options_.object_store_socket;
  parts.worker_bind = options_.worker_bind;
  parts.token_file = options_.worker_token_file;
  return BuildWorkerEnvironment(parts);
}

ExitCallback NodeAgentService::WorkerExitCallback(const v1::WorkerSpec& spec) const {
  AgentState* state = state_;
  WorkerWatchdog* watchdog = options_.watchdog;
  WorkerStdinPipes* pipes = spec.stdin_pipe() ? options_.stdin_pipes : nullptr;
  // A detached actor's worker outlives the driver that made it: its exit is told to the head.
  HeadLink* report_to = spec.detached_actor_id().empty() ? nullptr : head_;
  AgentMetrics* metrics = options_.metrics;
  WorkerDeviceErrors* device_errors = options_.device_errors;
  return [state, watchdog, pipes, report_to, metrics, device_errors,
          actor = spec.detached_actor_id()](const ChildId& id, const ExitStatus& exit) {
    const WorkerId worker(id.value());
    if (watchdog != nullptr) watchdog->Remove(worker);
    if (pipes != nullptr) pipes->Forget(worker);
    WorkerExitInfo info = WorkerExitFromStatus(exit);
    if (device_errors != nullptr) {
      info.device_messages = device_errors->Exited(worker, /*failed=*/!exit.success());
    }
    if (report_to != nullptr) {
      report_to->ReportActorWorkerExit(
          actor, id.value(),
          info.device_messages.empty()
              ? info.reason
              : absl::StrCat(info.reason, "; device messages: ", info.device_messages));
    }
    IgnoreStatus(state->WorkerExited(worker, std::move(info)),
                 "NotFound only for a worker the state forgot: nothing is left to mark");
    if (metrics != nullptr) {
      // Read back: the record knows whether the agent killed it (its kill cause).
      if (std::optional<WorkerRecord> record = state->FindWorker(worker); record.has_value()) {
        metrics->CountWorkerExit(ClassifyWorkerExit(*record));
      }
    }
  };
}

void NodeAgentService::WatchStartedWorker(const LeaseRecord& lease, const v1::WorkerSpec& spec,
                                          const ChildSpec& child, pid_t pid) {
  WatchedWorker watched;
  watched.id = lease.worker;
  watched.pid = pid;
  watched.stdout_path = child.stdout_path;
  watched.stderr_path = child.stderr_path;
  watched.stop_when_unwatched = spec.stop_when_unwatched();
  watched.hang_timeout = absl::Milliseconds(std::max<int64_t>(0, spec.hang_timeout_ms()));
  options_.watchdog->Add(watched, options_.clock->Now());
  // It may have exited already (its exit callback ran before Add): forget it then.
  if (!workers_->Pid(ChildId(lease.worker.value())).has_value()) {
    options_.watchdog->Remove(lease.worker);
  }
}

void NodeAgentService::FillGrant(const LeaseRecord& lease, pid_t pid,
                                 const std::map<std::string, std::string>& isolation_env,
                                 v1::LeaseReply& reply) {
  v1::LeaseGrant* grant = reply.mutable_granted();
  grant->set_lease_id(lease.id.value());
  grant->set_worker_id(lease.worker.value());
  grant->set_node_id(state_->node_id().value());
  wire::AllocationToProto(lease.allocation, grant->mutable_allocation());
  for (const auto& [name, value] : isolation_env) (*grant->mutable_isolation_env())[name] = value;
  grant->set_pid(pid);
  reply.set_status(v1::PICK_STATUS_PLACED);
}

WorkerLogStreamHooks NodeAgentService::LogHooks(grpc::ServerContext* context, const WorkerId& id,
                                                std::function<bool(bool, std::string)> send) {
  WorkerLogStreamHooks hooks;
  hooks.send = std::move(send);
  hooks.await_exit = [this, id](absl::Duration timeout) {
    return state_->AwaitWorkerExit(id, timeout);
  };
  hooks.should_stop = [this, context, id] {
    return context->IsCancelled() || !state_->FindWorker(id).has_value();
  };
  return hooks;
}

grpc::Status NodeAgentService::WatchWorker(grpc::ServerContext* context,
                                           const v1::WatchWorkerRequest* request,
                                           grpc::ServerWriter<v1::WorkerEvent>* writer) {
  const WorkerId id(request->worker_id());
  auto worker = state_->FindWorker(id);
  if (!worker.has_value()) return UnknownWorker(request->worker_id());
  auto send = [writer](bool is_stderr, std::string data) {
    v1::WorkerEvent event;
    if (is_stderr) {
      event.set_stderr(std::move(data));
    } else {
      event.set_stdout(std::move(data));
    }
    return writer->Write(event);
  };
  if (options_.watchdog != nullptr) options_.watchdog->WatchStarted(id);
  WorkerLogStreamHooks hooks = LogHooks(context, id, send);
  hooks.tick = [this, writer, seen = leases_wanted_.load()]() mutable {
    const uint64_t now = leases_wanted_.load();
    if (now == seen) return true;
    seen = now;
    v1::WorkerEvent wanted;
    wanted.set_lease_wanted(true);
    return writer->Write(wanted);
  };
  absl::Status streamed = StreamWorkerLogs({worker->stdout_path, worker->stderr_path}, {}, hooks);
  if (options_.watchdog != nullptr) options_.watchdog->WatchEnded(id, options_.clock->Now());
  if (absl::IsCancelled(streamed)) {
    return grpc::Status(grpc::StatusCode::CANCELLED, "the watcher went away");
  }
  if (!streamed.ok()) return rpc::ToGrpcStatus(streamed);
  worker = state_->FindWorker(id);
  if (!worker.has_value() || !worker->exit.has_value()) return UnknownWorker(request->worker_id());
  v1::WorkerEvent event;
  WorkerExitToProto(*worker->exit, event.mutable_exit());
  writer->Write(event);
  return grpc::Status::OK;
}

grpc::Status NodeAgentService::ReadLogs(grpc::ServerContext* context,
                                        const v1::ReadLogsRequest* request,
                                        grpc::ServerWriter<v1::LogChunk>* writer) {
  if (request->stdout_only() && request->stderr_only()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "stdout_only and stderr_only exclude each other");
  }
  const WorkerId id(request->worker_id());
  auto worker = state_->FindWorker(id);
  if (!worker.has_value()) return UnknownWorker(request->worker_id());
  WorkerLogStreamOptions options;
  options.follow = request->follow();
  options.want_stdout = !request->stderr_only();
  options.want_stderr = !request->stdout_only();
  auto send = [writer](bool is_stderr, std::string data) {
    v1::LogChunk chunk;
    chunk.set_data(std::move(data));
    chunk.set_is_stderr(is_stderr);
    return writer->Write(chunk);
  };
  absl::Status streamed = StreamWorkerLogs({worker->stdout_path, worker->stderr_path}, options,
                                           LogHooks(context, id, send));
  if (absl::IsCancelled(streamed)) {
    // A worker that is forgotten while followed ends the stream normally.
    if (!context->IsCancelled() && !state_->FindWorker(id).has_value()) return grpc::Status::OK;
    return grpc::Status(grpc::StatusCode::CANCELLED, "the reader went away");
  }
  return rpc::ToGrpcStatus(streamed);
}

grpc::Status NodeAgentService::OfferObject(grpc::ServerContext*,
                                           const v1::OfferObjectRequest* request,
                                           v1::OfferObjectResponse* response) {
  if (options_.data_server == nullptr) return NoObjectStore();
  auto id = ObjectId::FromBinary(request->object_id());
  if (!id.ok()) return Invalid(id.status());
  auto offer = options_.data_server->OfferObject(*id);
  if (!offer.ok()) return rpc::ToGrpcStatus(offer.status());
  response->set_size(offer->size);
  response->set_metadata(std::move(offer->metadata));
  response->set_data_port(options_.data_server->port());
  response->set_ticket(std::move(offer->ticket));
  response->set_transfer_key(std::move(offer->key));
  return grpc::Status::OK;
}

grpc::Status NodeAgentService::PullObject(grpc::ServerContext*,
                                          const v1::PullObjectRequest* request,
                                          v1::PullObjectResponse* response) {
  if (puller_ == nullptr) return NoObjectStore();
  auto id = ObjectId::FromBinary(request->object_id());
  if (!id.ok()) return Invalid(id.status());
  auto pulled = puller_->Pull(*id, request->from_address());
  if (!pulled.ok()) return rpc::ToGrpcStatus(pulled.status());
  response->set_size(pulled->size);
  response->set_already_here(pulled->already_here);
  return grpc::Status::OK;
}

grpc::Status NodeAgentService::KillWorker(grpc::ServerContext*,
                                          const v1::KillWorkerRequest* request,
                                          v1::KillWorkerResponse*) {
  const WorkerId id(request->worker_id());
  auto worker = state_->FindWorker(id);
  if (!worker.has_value()) return UnknownWorker(request->worker_id());
  if (request->signal() < 0 || request->signal() >= NSIG) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        absl::StrCat("signal: ", request->signal(), " is not a signal"));
  }
  if (worker->state == WorkerState::kExited) return grpc::Status::OK;
  state_->NoteKill(id, "after a KillWorker request");
  absl::Status status = request->signal() == 0
                            ? workers_->Terminate(ChildId(id.value()), options_.kill_grace)
                            : workers_->Signal(ChildId(id.value()), request->signal());
  if (absl::IsNotFound(status)) return grpc::Status::OK;  // it exited meanwhile
  return rpc::ToGrpcStatus(status);
}

grpc::Status NodeAgentService::ReturnLease(grpc::ServerContext*,
                                           const v1::ReturnLeaseRequest* request,
                                           v1::ReturnLeaseResponse*) {
  const WorkerId id(request->worker_id());
  if (!state_->FindWorker(id).has_value()) return UnknownWorker(request->worker_id());
  return rpc::ToGrpcStatus(state_->ReturnLease(id));
}

grpc::Status NodeAgentService::ListWorkers(grpc::ServerContext*, const v1::ListWorkersRequest*,
                                           v1::ListWorkersResponse* response) {
  response->set_node_id(state_->node_id().value());
  for (const WorkerRecord& worker : state_->Workers()) {
    WorkerToProto(worker, response->add_workers());
  }
  return grpc::Status::OK;
}

grpc::Status NodeAgentService::PrepareBundles(grpc::ServerContext* context,
                                              const v1::PrepareBundlesRequest* request,
                                              v1::PrepareBundlesResponse*) {
  // A cancel always wins over a late prepare: one processed after this call arrived, or this
  // call's deadline passing (the head gave up on it and cancels), makes it take nothing.
  PrepareGuard guard;
  guard.arrived_at = state_->BundleWatermark();
  if (context != nullptr) {
    guard.abandoned = [context] {
      return context->IsCancelled() || context->deadline() < std::chrono::system_clock::now();
    };
  }
  auto asks = BundleAsksFromProto(*request);
  if (!asks.ok()) return Invalid(asks.status());
  absl::Status prepared = state_->PrepareBundles(request->placement_group(), *asks, guard);
  if (prepared.ok() && request->commit()) {
    std::vector<int> indices;
    for (const BundleAsk& ask : *asks) indices.push_back(ask.index);
    state_->CommitBundles(request->placement_group(), indices);
  }
  return rpc::ToGrpcStatus(prepared);
}

grpc::Status NodeAgentService::CommitBundles(grpc::ServerContext*,
                                             const v1::CommitBundlesRequest* request,
                                             v1::CommitBundlesResponse*) {
  if (request->placement_group().empty()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "placement_group is empty");
  }
  state_->CommitBundles(request->placement_group(),
                        {request->bundle_indices().begin(), request->bundle_indices().end()});
  return grpc::Status::OK;
}

grpc::Status NodeAgentService::CancelBundles(grpc::ServerContext*,
                                             const v1::CancelBundlesRequest* request,
                                             v1::CancelBundlesResponse* response) {
  if (request->placement_group().empty()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "placement_group is empty");
  }
  std::vector<WorkerId> killed =
      state_->CancelBundles(request->placement_group(),
                            {request->bundle_indices().begin(), request->bundle_indices().end()});
  for (const WorkerId& id : killed) {
    state_->NoteKill(
        id, absl::StrCat("after its bundle of ", request->placement_group(), " was cancelled"),
        /*bundle_removed=*/true);
  }
  KillNow(killed);
  for (const WorkerId& id : killed) response->add_killed_workers(id.value());
  return grpc::Status::OK;
}

void NodeAgentService::KillNow(const std::vector<WorkerId>& workers) {
  for (const WorkerId& id : workers) {
    IgnoreStatus(workers_->Signal(ChildId(id.value()), SIGKILL),
                 "NotFound: it has exited already, which is what the kill is for");
  }
}

void NodeAgentService::TerminateAll() {
  for (const ChildId& id : workers_->Children()) {
    state_->NoteKill(WorkerId(id.value()), "as the node agent shut down");
    IgnoreStatus(workers_->Terminate(id, options_.kill_grace),
                 "NotFound: it has exited already, which is what the stop is for");
  }
}

grpc::Status NodeAgentService::FindFreePort(grpc::ServerContext*, const v1::FindFreePortRequest*,
                                            v1::FindFreePortResponse* response) {
  // Bound on every address, as a rendezvous server binds; the kernel picks an ephemeral port,
  // which stays free until someone binds it (a race any launcher that picks ports has).
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return grpc::Status(grpc::StatusCode::INTERNAL, "cannot open a socket");
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_ANY);
  address.sin_port = 0;
  socklen_t length = sizeof(address);
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0;
  ::close(fd);
  if (!ok) return grpc::Status(grpc::StatusCode::INTERNAL, "cannot find a free port");
  response->set_port(ntohs(address.sin_port));
  response->set_host(options_.worker_bind);
  response->set_interface(InterfaceOf(options_.worker_bind));
  return grpc::Status::OK;
}

grpc::Status NodeAgentService::PrepareWorkingDir(grpc::ServerContext*,
                                                 const v1::PrepareWorkingDirRequest* request,
                                                 v1::PrepareWorkingDirResponse* response) {
  if (options_.working_dirs_root.empty()) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        "this node agent has no folder for working directories");
  }
  auto path = UnpackWorkingDir(options_.working_dirs_root, request->job_id(), request->archive());
  if (!path.ok()) return rpc::ToGrpcStatus(path.status());
  response->set_path(*path);
  return grpc::Status::OK;
}

grpc::Status NodeAgentService::WriteWorkerStdin(grpc::ServerContext*,
                                                const v1::WriteWorkerStdinRequest* request,
                                                v1::WriteWorkerStdinResponse* response) {
  if (options_.stdin_pipes == nullptr) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "this node agent forwards no stdin");
  }
  auto written = options_.stdin_pipes->Write(WorkerId(request->worker_id()), request->data(),
                                             request->close());
  if (!written.ok()) return rpc::ToGrpcStatus(written.status());
  response->set_written(*written);
  return grpc::Status::OK;
}

void NodeAgentService::EnforceWatchdog(absl::Time now) {
  if (options_.watchdog == nullptr) return;
  for (const WatchdogVerdict& verdict : options_.watchdog->Check(now)) {
    state_->NoteKill(verdict.id, verdict.cause);
    const ChildId child(verdict.id.value());
    if (verdict.hung) {
      IgnoreStatus(workers_->Signal(child, SIGKILL),
                   "NotFound: it has exited already, which is what the kill is for");
    } else {
      IgnoreStatus(workers_->Terminate(child, options_.kill_grace),
                   "NotFound: it has exited already, which is what the stop is for");
    }
  }
}

grpc::Status NodeAgentService::Shutdown(grpc::ServerContext*, const v1::ShutdownRequest*,
                                        v1::ShutdownResponse*) {
  if (on_shutdown_) on_shutdown_();
  return grpc::Status::OK;
}

}  // namespace tessera
