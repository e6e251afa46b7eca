#include "api/driver_runtime.h"

#include <cstdlib>
#include <filesystem>
#include <optional>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "api/error_payloads.h"
#include "api/multiple_returns.h"
#include "api/owner_service.h"
#include "base/ignore_status.h"
#include "base/status_macros.h"
#include "base/string_util.h"
#include "client/cluster_client.h"
#include "client/state_folder.h"
#include "labels/label_selector.h"
#include "objects/object_location.h"
#include "resources/resource_set.h"
#include "rpc/auth.h"
#include "rpc/channel.h"
#include "rpc/retry.h"
#include "rpc/state_names.h"
#include "rpc/status_conversion.h"
#include "timeline/chrome_trace.h"
#include "wire/proto_convert.h"
#include "worker/borrowed_refs.h"
#include "worker/owner_fetch.h"
#include "worker/worker_runtime.h"

namespace tessera::api {
namespace {

// The lease shape key of an actor this driver owns: "actor:<id>|<shape>".
constexpr std::string_view kOwnedActorPrefix = "actor:";

// The shape key of an actor another process owns, reached through its process at an address:
// "attached:<id>@<address>".
constexpr std::string_view kAttachedActorPrefix = "attached:";

// How often the processes counted as borrowers of this driver's objects are probed.
constexpr absl::Duration kBorrowerProbePeriod = absl::Seconds(3);

// How long looking up a named actor whose process is starting waits for it.
constexpr absl::Duration kNamedActorStartWait = absl::Seconds(60);

std::optional<std::string> AttachedActorId(const std::string& shape_key) {
  if (!absl::StartsWith(shape_key, ToAbsl(kAttachedActorPrefix))) return std::nullopt;
  const size_t end = shape_key.find('@', kAttachedActorPrefix.size());
  if (end == std::string::npos) return std::nullopt;
  return shape_key.substr(kAttachedActorPrefix.size(), end - kAttachedActorPrefix.size());
}

// The actor id of an owned actor's shape key; nullopt for any other key (task workers,
// attached actors).
std::optional<std::string> OwnedActorId(const std::string& shape_key) {
  if (!absl::StartsWith(shape_key, ToAbsl(kOwnedActorPrefix))) return std::nullopt;
  const size_t end = shape_key.find('|', kOwnedActorPrefix.size());
  if (end == std::string::npos) return std::nullopt;
  return shape_key.substr(kOwnedActorPrefix.size(), end - kOwnedActorPrefix.size());
}

// A ref owned here: its last copy drops the value from the table.
// One local reference of the table's count (none when the entry was freed already: reading
// the ref then says so).
class OwnedReference final : public internal::LocalReference {
 public:
  OwnedReference(std::shared_ptr<ObjectTable> table, ObjectId id)
      : table_(std::move(table)), id_(id), held_(table_->AddLocal(id_)) {}
  ~OwnedReference() override {
    if (held_) table_->Release(id_);
  }

 private:
  std::shared_ptr<ObjectTable> table_;
  ObjectId id_;
  bool held_;
};

// This driver's node: the one whose agent it leases through (`agent_address`), else the first
// live agent of this host's state folder (as WorkerLeases picks it). "" when there is none.
std::pair<std::string, std::string> LocalNode(const client::StateFolder& state,
                                              const std::string& agent_address) {
  for (const std::string& node : client::NodeIdsInStateFolder(state)) {
    auto address = client::ReadFirstLine(state.AgentAddressFile(node));
    if (!address.ok() || address->empty()) continue;
    if (!agent_address.empty()) {
      if (*address == agent_address) return {node, *address};
      continue;
    }
    const auto pid = client::ReadPidFile(state.AgentPidFile(node));
    if (pid.has_value() && client::ProcessAlive(*pid)) return {node, *address};
  }
  return {"", agent_address};
}

// The task's (or actor's) placement group and whether its children go there too, in its spec.
void SetPlacementGroup(const SchedulingStrategy& strategy, v1::TaskSpec& spec) {
  if (const auto* group = std::get_if<PlacementGroupScheduling>(&strategy)) {
    spec.set_placement_group(group->placement_group.value());
    spec.set_capture_child_tasks(group->capture_child_tasks);
  }
}

// This driver's node's object store (the node of LocalNode), owned by driver `driver_task`.
std::shared_ptr<NodeObjectStore> OpenNodeStore(const client::StateFolder& state,
                                               const std::string& agent_address,
                                               const std::string& token,
                                               const std::string& head_address,
                                               const TaskId& driver_task) {
  const auto [node_id, agent] = LocalNode(state, agent_address);
  NodeObjectStoreOptions store;
  store.node_id = node_id;
  store.agent_address = agent;
  // Its path even before the agent has made it: the store connects on first use.
  store.socket_path =
      node_id.empty() ? "" : client::StateFolder{state.root}.ObjectStoreSocket(node_id);
  store.token = token;
  store.head_address = head_address;
  store.state_dir = state.root;
  // This driver owns what it puts: the store frees it when the driver exits or dies.
  store.owner_id = absl::StrCat("driver-", driver_task.Hex().substr(0, 12));
  store.declare_owner = true;
  return std::make_shared<NodeObjectStore>(std::move(store));
}

ObjectRefBase Failed(absl::Status status) {
  return ObjectRefBase(ObjectRefData{},
                       std::make_shared<internal::LocalReference>(std::move(status)));
}

}  // namespace

absl::StatusOr<std::unique_ptr<DriverRuntime>> DriverRuntime::Create(const InitOptions& options) {
  std::unique_ptr<DriverRuntime> runtime(new DriverRuntime());
  runtime->options_ = options;
  auto trusted = client::TrustedStateFolder(options.state_dir);
  if (!trusted.ok()) return trusted.status();
  const client::StateFolder state = *std::move(trusted);
  auto token = client::FindToken(state, options.token_file);
  if (!token.ok()) {
    return absl::Status(token.status().code(),
                        absl::StrCat("cannot find the cluster token: ", token.status().message()));
  }
  std::string head_address = options.head_address;
  if (head_address.empty()) {
    auto from_file = client::ReadFirstLine(state.HeadAddressFile());
    if (from_file.ok()) head_address = *from_file;
  }
  runtime->state_dir_ = state.root;
  // Made first: the driver's id (its owner id in the stores and at the head) derives from it.
  runtime->driver_task_ = TaskId::FromRandom();
  runtime->store_ =
      OpenNodeStore(state, options.agent_address, *token, head_address, runtime->driver_task_);
  auto own_address = std::make_shared<std::string>();  // set once this owner serves
  runtime->MakeObjectTable(own_address);
  runtime->MakeSubmitter();
  TESSERA_RETURN_IF_ERROR(runtime->ServeOwner(*token, *own_address));
  TESSERA_RETURN_IF_ERROR(runtime->StartLeases(state, *token, head_address));
  runtime->StartBackgroundWork();
  // Connected now, not at the first large put: the connection is this driver's life in its
  // node's store, so the results its workers store there go when it does, whatever it put.
  runtime->store_->Available();
  return runtime;
}

void DriverRuntime::MakeObjectTable(const std::shared_ptr<std::string>& own_address) {
  // A stored value's copies go when its last reference does (refs may outlive the runtime, so
  // the hook holds the store).
  // A value's entry holds the refs inside it as this process's borrowed references, counted
  // for it by whoever made the value (its put, or the worker that returned it).
  objects_ = std::make_shared<ObjectTable>(
      [store = store_, lifetimes = lifetimes_](const ObjectId& id, const std::string& value) {
        if (auto where = DecodeStoredEnvelope(value); where.has_value()) store->Delete(id, *where);
        absl::MutexLock lock(&lifetimes->mu);
        if (auto it = lifetimes->actor_of.find(id); it != lifetimes->actor_of.end()) {
          lifetimes->unreferenced.push_back(std::move(it->second));
          lifetimes->actor_of.erase(it);
        }
      },
      [own_address](const std::string& value) {
        ObjectTable::Holds holds;
        for (const ObjectRefData& ref : RefsInsideValue(value)) {
          holds.push_back(worker::LentReference(ref, *own_address));
        }
        return holds;
      });
}

void DriverRuntime::MakeSubmitter() {
  SubmitterOptions submitter_options;
  submitter_options.idle_timeout = options_.worker_idle_timeout;
  submitter_options.max_workers_per_shape = options_.max_workers_per_kind;
  submitter_options.discard_value = [objects = objects_](const std::string& value) {
    objects->Discard(value);
  };
  std::shared_ptr<ObjectTable> objects = objects_;
  // The leases are created below; the submitter only calls them after Submit.
  returns_ = std::make_shared<MultipleReturns>(objects.get());
  generators_ = std::make_shared<StreamingGenerators>(objects.get());
  submitter_ = std::make_unique<TaskSubmitter>(
      submitter_options, nullptr,
      [objects, returns = returns_, generators = generators_](const ObjectId& id,
                                                              absl::StatusOr<std::string> value) {
        // A generator's outcome comes after every item it yielded (reported before it).
        generators->Finish(id.task_id(), value.ok() ? absl::OkStatus() : value.status());
        return returns->Deliver(id, std::move(value));
      });
}

absl::Status DriverRuntime::ServeOwner(const std::string& token, std::string& own_address) {
  std::shared_ptr<ObjectTable> objects = objects_;
  auto service = std::make_unique<OwnerService>(this);
  rpc::ServerOptions server_options;
  server_options.bind_address = options_.bind_address;
  server_options.token = token;
  auto server = rpc::RpcServer::Start(server_options, {service.get()});
  if (!server.ok()) return server.status();
  owner_service_ = std::move(service);
  server_ = *std::move(server);
  owner_ = OwnerAddress{"", server_->address(),
                        absl::StrCat("driver-", driver_task_.Hex().substr(0, 12))};
  own_address = owner_.address;
  worker::SetBorrowToken(token);
  // A driver borrows under its Owner address; a worker under its Worker service's (set when
  // the worker started serving).
  if (!worker::InWorkerMode()) worker::SetBorrowerId(owner_.address);
  borrower_watch_ =
      std::make_unique<BorrowerWatch>(objects, token, owner_.address, kBorrowerProbePeriod);
  // Counts for this process's own objects change its table at once.
  worker::SetLocalOwner(owner_.address,
                        [table = std::weak_ptr<ObjectTable>(objects)](
                            const ObjectId& id, const std::string& borrower, int64_t delta) {
                          if (auto live = table.lock(); live != nullptr) {
                            // False: the table no longer holds it, so nothing is counted.
                            live->UpdateBorrows(id, borrower, delta);
                          }
                        });
  return absl::OkStatus();
}

absl::Status DriverRuntime::StartLeases(const client::StateFolder& state, const std::string& token,
                                        const std::string& head_address) {
  WorkerLeasesOptions leases;
  leases.token = token;
  leases.head_address = head_address;
  leases.agent_address = options_.agent_address;
  leases.state_dir = state.root;
  leases.owner_address = server_->address();
  // The job: the one this process runs in (a task's nested driver, a `tessera run` program, a
  // gang's rank), else this driver itself.
  const char* job = std::getenv(worker::kJobIdEnv);
  leases.job_id = job != nullptr && *job != '\0' ? std::string(job) : owner_.worker_id;
  job_id_ = leases.job_id;
  leases.forward_output = options_.forward_worker_output;
  leases.prefix_output = options_.prefix_worker_output;
  leases.local_streams = options_.local_worker_streams;
  leases.worker_command = options_.worker_command;
  leases.worker_env = options_.worker_env;
  token_ = token;
  if (!head_address.empty()) {
    const std::shared_ptr<grpc::Channel> channel = rpc::MakeChannel(head_address, token);
    head_actors_ = v1::HeadActors::NewStub(channel);
    head_reservations_ = v1::HeadReservations::NewStub(channel);
    head_jobs_ = v1::HeadJobs::NewStub(channel);
  }
  DriverRuntime* runtime_ptr = this;
  leases.on_worker_ready = [runtime_ptr](const std::string& key, const std::string& address,
                                         const std::string& node_id, const std::string& worker_id) {
    runtime_ptr->OnWorkerReady(key, address, node_id, worker_id);
  };
  if (head_actors_ != nullptr) {
    directory_ = std::make_unique<ActorDirectoryClient>(head_actors_.get());
  }
  submitter_->SetActorObserver([runtime_ptr](const std::string& key, const ActorChange& change) {
    runtime_ptr->OnActorChanged(key, change);
  });
  if (leases.agent_address.empty() && head_address.empty() &&
      client::NodeIdsInStateFolder(state).empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "no cluster in the state folder ", state.root,
        " (start one with `tessera up` or `tessera start`, or set TESSERA_STATE_DIR)"));
  }
  leases_ = std::make_unique<WorkerLeases>(leases, submitter_.get());
  submitter_->SetLeaseSource(leases_.get());
  return absl::OkStatus();
}

void DriverRuntime::StartBackgroundWork() {
  if (head_reservations_ != nullptr) {
    keepalive_ = std::make_unique<DriverKeepAlive>(head_reservations_.get(), driver_id());
  }
  if (head_jobs_ != nullptr && options_.record_task_events) {
    TaskEventReporterOptions reporter;
    reporter.job_id = job_id_;
    task_events_ = std::make_unique<TaskEventReporter>(head_jobs_.get(), std::move(reporter));
    TaskEventReporter* sink = task_events_.get();
    submitter_->SetTaskEventSink([sink](std::vector<TaskRun>& runs) { sink->Add(runs); });
  }
  DriverRuntime* self = this;
  reaper_ = std::thread([self] {
    while (!self->stop_reaper_.WaitForNotificationWithTimeout(absl::Milliseconds(100))) {
      self->submitter_->ReapIdle(absl::Now());
      self->EndUnreferencedActors();
    }
  });
}

DriverRuntime::~DriverRuntime() { Shutdown(); }

void DriverRuntime::Shutdown() {
  if (!reaper_.joinable()) return;
  stop_reaper_.Notify();
  reaper_.join();
  // What the head should know of this driver's named actors is sent before it hears the driver
  // exited; then what this driver reserved is released, and its actors not detached die.
  if (directory_ != nullptr) directory_->Stop();
  if (keepalive_ != nullptr) keepalive_->Stop();
  submitter_->Shutdown();
  leases_->Shutdown();
  // After the submitter: the last runs it saw are sent too.
  if (task_events_ != nullptr) task_events_->Stop();
  {
    absl::MutexLock lock(&attached_mu_);
    for (auto& c : attached_) {
      const absl::Time until = absl::Now() + absl::Seconds(5);
      while (!c->done() && absl::Now() < until) absl::SleepFor(absl::Milliseconds(1));
      if (!c->done()) c->Cancel();
    }
  }
  objects_->FailAllPending(absl::CancelledError("tessera is shut down"));
  worker::SetLocalOwner("", nullptr);
  borrower_watch_->Stop();
  server_->Shutdown(absl::Milliseconds(100));
  server_->Wait();
}

absl::StatusOr<std::string> DriverRuntime::TimelineJson() {
  if (head_jobs_ == nullptr) {
    return absl::FailedPreconditionError(
        "a timeline needs the cluster's head; this driver has none");
  }
  if (task_events_ != nullptr) task_events_->Flush();
  timeline::TimelineInput input;
  input.job_id = job_id_;
  int64_t after = 0;
  while (true) {
    v1::GetTaskEventsRequest request;
    request.set_job_id(job_id_);
    request.set_after(after);
    v1::GetTaskEventsResponse response;
    grpc::ClientContext context;
    rpc::ConfigureClientContext(&context, absl::Seconds(30));
    grpc::Status got = head_jobs_->GetTaskEvents(&context, request, &response);
    if (got.error_code() == grpc::StatusCode::NOT_FOUND) break;  // nothing ran yet
    if (!got.ok()) return rpc::FromGrpcStatus(got);
    input.dropped = response.dropped();
    for (v1::TaskEvent& event : *response.mutable_events()) input.tasks.push_back(std::move(event));
    if (!response.more()) break;
    after = response.next();
  }
  input.now = absl::Now();
  return timeline::ChromeTrace(input).dump();
}

absl::StatusOr<const LeaseShape*> DriverRuntime::ShapeFor(const TaskOptions& options) {
  absl::MutexLock lock(&shapes_mu_);
  auto it = shapes_.find(options);
  if (it == shapes_.end()) {
    // The submitter's name for the shape: only an identity (nothing reads it back).
    std::string name = absl::StrCat("shape ", shapes_.size() + 1);
    it = shapes_.emplace(LeaseShapeKey::Of(options), MakeShape(std::move(name), options)).first;
  }
  if (!it->second.ok()) return it->second.status();
  return &*it->second;  // a node of the map: stays where it is (entries are never erased)
}

absl::StatusOr<LeaseShape> DriverRuntime::MakeShape(std::string key, const TaskOptions& options) {
  LeaseShape shape;
  shape.key = std::move(key);
  shape.env = options.env;
  shape.files = options.runtime_env_files;
  TESSERA_RETURN_IF_ERROR(wire::DemandToProto(options.resources, options.label_selectors,
                                              options.strategy, &shape.request));
  return shape;
}

ObjectRefBase DriverRuntime::MakeOwnedRef(const ObjectId& id) {
  return ObjectRefBase(ObjectRefData{id, owner_}, std::make_shared<OwnedReference>(objects_, id));
}

ObjectRefBase DriverRuntime::Hold(const ObjectRefData& ref) {
  if (ref.owner.address != owner_.address) return ObjectRefBase(ref, worker::Borrow(ref));
  return MakeOwnedRef(ref.id);
}

void DriverRuntime::HoldRefsInside(const std::string& value, std::vector<ObjectRefBase>* holds) {
  for (const ObjectRefData& ref : RefsInsideValue(value)) holds->push_back(Hold(ref));
}

ObjectRefBase DriverRuntime::Submit(internal::AnyFunction fn, const TaskOptions& options,
                                    std::vector<internal::TaskArgument> args) {
  const std::string* name = internal::FindFunctionName(fn);
  if (name == nullptr) {
    return Failed(absl::InvalidArgumentError(
        "the function is not registered: add TESSERA_REMOTE(its_name) at namespace scope"));
  }
  return SubmitByName(internal::FunctionDescriptor{*name}, options, std::move(args));
}

absl::Status DriverRuntime::CheckNumReturns(const std::string& name, int num_returns,
                                            v1::Language language) {
  if (num_returns < 0 || num_returns > internal::kMaxTaskReturns) {
    return absl::InvalidArgumentError(absl::StrCat("task ", name, ": num_returns ", num_returns,
                                                   " is not between 0 and ",
                                                   internal::kMaxTaskReturns));
  }
  if (num_returns > 1 && language != v1::LANGUAGE_PYTHON) {
    return absl::InvalidArgumentError(
        absl::StrCat("task ", name, ": num_returns ", num_returns,
                     " is for Python tasks (a C++ task returns one value: return a tuple)"));
  }
  return absl::OkStatus();
}

absl::Status DriverRuntime::CheckStreaming(const std::string& name, bool streaming, int num_returns,
                                           v1::Language language) {
  if (!streaming) return absl::OkStatus();
  if (language != v1::LANGUAGE_PYTHON) {
    return absl::InvalidArgumentError(
        absl::StrCat("task ", name, ": streaming generators are for Python tasks"));
  }
  if (num_returns != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "task ", name, ": a streaming generator has one ref (its outcome), not num_returns ",
        num_returns));
  }
  return absl::OkStatus();
}

void DriverRuntime::ExpectStream(const ObjectId& first, bool streaming, v1::TaskSpec& spec) {
  if (!streaming) return;
  spec.set_streaming(true);
  spec.set_generator_owner(owner_.address);
  generators_->Expect(first.task_id());
}

absl::StatusOr<std::optional<ObjectRefBase>> DriverRuntime::GeneratorNext(
    const ObjectRefBase& generator, int64_t index, absl::Duration timeout) {
  if (generator.data().owner.address != owner_.address) {
    return absl::FailedPreconditionError(
        absl::StrCat("generator ", generator.id().Hex(),
                     " belongs to another process: only the caller "
                     "that started it reads its values"));
  }
  const absl::Time deadline =
      timeout == absl::InfiniteDuration() ? absl::InfiniteFuture() : absl::Now() + timeout;
  absl::StatusOr<std::optional<ObjectId>> next =
      generators_->Next(generator.id().task_id(), index, deadline);
  if (!next.ok()) return next.status();
  if (!next->has_value()) return std::optional<ObjectRefBase>();
  return std::optional<ObjectRefBase>(MakeOwnedRef(**next));
}

absl::Status DriverRuntime::WhenReady(const ObjectRefBase& ref, std::function<void()> ready) {
  if (!ref.early_error().ok()) return ref.early_error();
  if (ref.id().IsNil() || ref.data().owner.address != owner_.address) {
    return absl::FailedPreconditionError(
        absl::StrCat("object ", ref.id().Hex(), " is not this process's: wait for it with Get"));
  }
  objects_->OnReady(ref.id(),
                    [ready = std::move(ready)](const absl::StatusOr<std::string>&) { ready(); });
  return absl::OkStatus();
}

void DriverRuntime::ReleaseGenerator(const ObjectRefBase& generator, int64_t next_index) {
  if (generator.data().owner.address != owner_.address) return;
  generators_->Release(generator.id().task_id(), next_index);
}

void DriverRuntime::ExpectMoreReturns(const ObjectId& first, int num_returns,
                                      std::vector<ObjectRefBase>* more_returns) {
  if (num_returns <= 1) return;
  for (int i = 2; i <= num_returns; ++i) {
    const ObjectId id = ObjectId::ForTaskReturn(first.task_id(), static_cast<uint32_t>(i));
    objects_->AddPending(id);
    if (more_returns != nullptr) more_returns->push_back(MakeOwnedRef(id));
  }
  returns_->Expect(first, num_returns);
}

ObjectRefBase DriverRuntime::SubmitByName(const internal::FunctionDescriptor& function,
                                          const TaskOptions& options,
                                          std::vector<internal::TaskArgument> args,
                                          std::vector<ObjectRefBase>* more_returns) {
  const std::string* name = &function.name;
  if (options.max_retries < 0) {
    return Failed(absl::InvalidArgumentError(
        absl::StrCat("task ", *name, ": max_retries ", options.max_retries, " is negative")));
  }
  auto shape = ShapeFor(options);
  if (!shape.ok()) {
    return Failed(absl::Status(shape.status().code(),
                               absl::StrCat("task ", *name, ": ", shape.status().message())));
  }
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i].ref.has_value() && !args[i].ref->early_error().ok()) {
      return Failed(absl::Status(args[i].ref->early_error().code(),
                                 absl::StrCat("task ", *name, ": argument ", i, ": ",
                                              args[i].ref->early_error().message())));
    }
  }

  if (absl::Status valid = CheckNumReturns(*name, options.num_returns, function.language);
      !valid.ok()) {
    return Failed(valid);
  }
  if (absl::Status valid =
          CheckStreaming(*name, options.streaming, options.num_returns, function.language);
      !valid.ok()) {
    return Failed(valid);
  }

  const TaskId task_id = TaskId::FromRandom();
  const ObjectId return_id = ObjectId::ForTaskReturn(task_id, 1);
  objects_->AddPending(return_id);
  ObjectRefBase result = MakeOwnedRef(return_id);
  ExpectMoreReturns(return_id, options.num_returns, more_returns);
  auto task = std::make_shared<QueuedTask>();
  // Submitted from inside a task (this thread runs it): a recursive cancel of that task reaches
  // this one, and only tasks it submitted.
  task->parent_task_id = worker::RunningTaskOnThisThread();
  task->code = function.code;  // fetched by the worker: kept while the task may run
  task->return_id = return_id;
  task->max_retries = options.max_retries;
  task->spec.set_retry_exceptions(options.retry_exceptions);
  for (const std::string& type : options.retry_exception_types) {
    task->spec.add_retry_exception_types(type);
  }
  task->spec.set_num_returns(std::max(1, options.num_returns));
  ExpectStream(return_id, options.streaming, task->spec);
  SetPlacementGroup(options.strategy, task->spec);
  task->spec.set_task_id(task_id.Binary());
  task->spec.set_caller(owner_.address);
  task->spec.set_function(*name);
  task->spec.set_language(function.language);
  if (function.code.has_value())
    RefToProto(function.code->data(), task->spec.mutable_function_ref());
  // Arguments owned here wait in the table; each is inlined when its value arrives.
  std::vector<std::pair<int, ObjectRefBase>> waits = AddArguments(args, *task);
  if (waits.empty()) {
    submitter_->Submit(**shape, std::move(*task));
    return result;
  }
  SubmitWhenArgumentsReady(task, **shape, waits);
  return result;
}

std::vector<std::pair<int, ObjectRefBase>> DriverRuntime::AddArguments(
    std::vector<internal::TaskArgument>& args, QueuedTask& task) {
  std::vector<std::pair<int, ObjectRefBase>> waits;
  for (size_t i = 0; i < args.size(); ++i) {
    v1::TaskArg* arg = task.spec.add_args();
    if (!args[i].ref.has_value()) {
      HoldRefsInside(args[i].value, &task.argument_refs);
      arg->set_value(std::move(args[i].value));
      continue;
    }
    task.argument_refs.push_back(*args[i].ref);
    const ObjectRefData& ref = args[i].ref->data();
    if (ref.owner.address == owner_.address) {
      waits.emplace_back(static_cast<int>(i), *args[i].ref);
    } else {
      RefToProto(ref, arg->mutable_ref());
    }
  }
  return waits;
}

void DriverRuntime::SubmitWhenArgumentsReady(
    std::shared_ptr<QueuedTask> task, const LeaseShape& shape,
    const std::vector<std::pair<int, ObjectRefBase>>& waits) {
  const ObjectId return_id = task->return_id;
  struct Pending {
    absl::Mutex mu;
    int left;
    absl::Status failed;
  };
  auto pending = std::make_shared<Pending>();
  pending->left = static_cast<int>(waits.size());
  // The arguments' refs live until the task is done: a stored one is read by the worker from a
  // store, and must not be deleted before that.
  {
    std::vector<ObjectRefBase> keep;
    for (const auto& wait : waits) keep.push_back(wait.second);
    objects_->OnReady(return_id, [keep = std::move(keep)](const absl::StatusOr<std::string>&) {});
  }
  const OwnerAddress owner = owner_;
  TaskSubmitter* submitter = submitter_.get();
  std::shared_ptr<MultipleReturns> returns = returns_;
  auto lease_shape = std::make_shared<const LeaseShape>(shape);
  for (const auto& wait : waits) {
    const int index = wait.first;
    // The callback holds the argument's ref, so its value stays until the task has it.
    objects_->OnReady(wait.second.id(), [=, ref = wait.second](
                                            const absl::StatusOr<std::string>& value) {
      bool last = false;
      absl::Status failed;
      {
        absl::MutexLock lock(&pending->mu);
        if (value.ok() && IsStoredEnvelope(*value)) {
          // Large: the worker asks this owner where it lies and reads it from a store.
          RefToProto(ObjectRefData{ref.id(), owner}, task->spec.mutable_args(index)->mutable_ref());
        } else if (value.ok()) {
          task->spec.mutable_args(index)->set_value(*value);
        } else if (pending->failed.ok()) {
          pending->failed = WithContext(value.status(), absl::StrCat("task ", task->spec.function(),
                                                                     ": argument ", index, ": "));
        }
        last = --pending->left == 0;
        failed = pending->failed;
      }
      if (!last) return;
      if (!failed.ok()) {
        returns->Deliver(task->return_id, failed);
      } else {
        submitter->Submit(*lease_shape, std::move(*task));
      }
    });
  }
}

absl::StatusOr<internal::SerializedValue> DriverRuntime::Get(const ObjectRefBase& ref,
                                                             absl::Duration timeout) {
  const absl::Time deadline =
      timeout == absl::InfiniteDuration() ? absl::InfiniteFuture() : absl::Now() + timeout;
  if (ref.data().owner.address != owner_.address) {
    // Another process's object (a task's nested put or subtask, an actor's result) comes from
    // that owner, wherever it runs; in a worker, through the worker's own runtime.
    return ReadForeign(ref, timeout);
  }
  absl::StatusOr<std::string> value = objects_->Get(ref.id(), deadline);
  if (!value.ok()) return value.status();
  std::optional<v1::StoredObject> where = DecodeStoredEnvelope(*value);
  if (!where.has_value()) {
    CountObjectPath(&internal::ObjectPathStats::inline_reads);
    return internal::SerializedValue(*std::move(value));
  }
  return store_->Read(ref.id(), *where, deadline);
}

absl::StatusOr<internal::SerializedValue> DriverRuntime::ReadForeign(const ObjectRefBase& ref,
                                                                     absl::Duration timeout) {
  bool owner_unreachable = false;
  absl::StatusOr<internal::SerializedValue> value =
      worker::InWorkerMode()
          ? worker::FetchObject(ref.data(), timeout, &owner_unreachable)
          : worker::ReadFromOwner(worker::OwnerStubFor(ref.data().owner.address, token_),
                                  ref.data(), store_.get(), timeout, &owner_unreachable);
  if (!value.ok() && owner_unreachable) {
    return OwnerDiedStatus(ref.id().Hex(), ref.data().owner.address, value.status());
  }
  return value;
}

std::string DriverRuntime::StoreSocketOf(const std::string& node_id) const {
  const std::string socket = client::StateFolder{state_dir_}.ObjectStoreSocket(node_id);
  std::error_code ec;
  return std::filesystem::exists(socket, ec) ? socket : "";
}

std::vector<bool> DriverRuntime::Wait(const std::vector<const ObjectRefBase*>& refs, int num,
                                      absl::Duration timeout, bool stop_at_failure) {
  const absl::Time deadline =
      timeout == absl::InfiniteDuration() ? absl::InfiniteFuture() : absl::Now() + timeout;
  std::vector<ObjectId> ids;  // this owner's
  std::vector<size_t> own;    // their places in `refs`
  std::vector<size_t> foreign;
  for (size_t i = 0; i < refs.size(); ++i) {
    if (refs[i]->data().owner.address == owner_.address) {
      ids.push_back(refs[i]->id());
      own.push_back(i);
    } else {
      foreign.push_back(i);
    }
  }
  if (foreign.empty()) return objects_->Wait(ids, num, deadline, stop_at_failure);
  // Other processes' objects are asked about at their owners (a peek, not the value), between
  // waits on this owner's own that grow from 1 ms to 50 ms.
  std::vector<bool> ready(refs.size(), false);
  absl::Duration pause = absl::Milliseconds(1);
  while (true) {
    int count = 0;
    for (size_t i : foreign) {
      if (!ready[i]) {
        ready[i] =
            worker::IsDoneAtOwner(worker::OwnerStubFor(refs[i]->data().owner.address, token_),
                                  refs[i]->data(), absl::ZeroDuration());
      }
      count += ready[i] ? 1 : 0;
    }
    const absl::Time now = absl::Now();
    const std::vector<bool> own_ready = objects_->Wait(
        ids, std::max(0, num - count), std::min(deadline, now + pause), stop_at_failure);
    bool failed = false;
    for (size_t j = 0; j < own.size(); ++j) {
      ready[own[j]] = own_ready[j];
      count += own_ready[j] ? 1 : 0;
      failed = failed || (stop_at_failure && own_ready[j] && !objects_->Failure(ids[j]).ok());
    }
    if (count >= num || count == static_cast<int>(refs.size()) || failed ||
        absl::Now() >= deadline) {
      return ready;
    }
    pause = std::min(pause * 2, absl::Milliseconds(50));
  }
}

absl::Status DriverRuntime::Failure(const ObjectRefBase& ref) const {
  if (ref.data().owner.address != owner_.address) return absl::OkStatus();
  return objects_->Failure(ref.id());
}

ObjectRefBase DriverRuntime::Put(std::string value) {
  return PutParts({value}, RefsInsideValue(value));
}

absl::Status DriverRuntime::Cancel(const ObjectRefBase& ref, bool force, bool recursive) {
  if (ref.data().owner.address != owner_.address) {
    return absl::InvalidArgumentError(
        absl::StrCat("object ", ref.id().Hex(),
                     " is owned by another process: only its owner can cancel "
                     "the task that makes it"));
  }
  if (ref.id() != ObjectId::ForTaskReturn(ref.id().task_id(), 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("object ", ref.id().Hex(), " is not a task's result (a put value?)"));
  }
  if (objects_->Wait({ref.id()}, 1, absl::Now())[0]) return absl::OkStatus();  // done already
  return submitter_->Cancel(ref.id(), force, recursive);
}

ObjectRefBase DriverRuntime::ActorLifetimeRef(const std::string& actor_id) {
  const ObjectId id = ObjectId::ForPut(driver_task_, puts_.fetch_add(1));
  {
    absl::MutexLock lock(&lifetimes_->mu);
    lifetimes_->actor_of[id] = actor_id;
  }
  objects_->AddValue(id, std::string("\xc0", 1));  // msgpack nil: a value, never read
  return MakeOwnedRef(id);
}

void DriverRuntime::EndUnreferencedActors() {
  std::vector<std::string> actors;
  {
    absl::MutexLock lock(&lifetimes_->mu);
    actors.swap(lifetimes_->unreferenced);
  }
  for (const std::string& actor_id : actors) {
    // After the calls made before it; then ended for good (not restarted).
    ObjectRefBase stop = SubmitActorTask(actor_id, "__ray_terminate__", {});
    if (!stop.early_error().ok()) continue;  // dead already
    objects_->OnReady(stop.id(), [this, actor_id, stop](const absl::StatusOr<std::string>&) {
      IgnoreStatus(KillActor(actor_id),
                   "after its terminate call: an actor that ended already needs no kill");
    });
  }
}

ObjectRefBase DriverRuntime::NewPromise() {
  const ObjectId id = ObjectId::ForPut(driver_task_, puts_.fetch_add(1));
  objects_->AddPending(id);
  return MakeOwnedRef(id);
}

void DriverRuntime::FulfillPromise(const ObjectId& id, absl::StatusOr<std::string> value) {
  // The value's entry holds the refs inside it, counted for this process first.
  if (value.ok()) worker::Lend(RefsInsideValue(*value), owner_.address);
  objects_->Complete(id, std::move(value));
}

ObjectRefBase DriverRuntime::PutParts(const std::vector<std::string_view>& parts,
                                      const std::vector<ObjectRefData>& contained) {
  // The put's entry holds the refs inside its value (as the value's envelope lists them for a
  // stored one), counted for this process first.
  worker::Lend(contained, owner_.address);
  const ObjectId id = ObjectId::ForPut(driver_task_, puts_.fetch_add(1));
  size_t size = 0;
  for (std::string_view part : parts) size += part.size();
  if (size >= kInlineValueLimitBytes) {
    // Into this node's store; only a node without a store keeps large values inline. A store
    // that refuses it (full even after spilling) fails the put: never the heap in its place.
    auto where = store_->PutParts(id, parts);
    if (where.ok()) {
      for (const ObjectRefData& ref : contained) RefToProto(ref, where->add_contained_refs());
      objects_->AddValue(id, EncodeStoredEnvelope(*where));
      return MakeOwnedRef(id);
    }
    if (where.status().code() != absl::StatusCode::kUnavailable) {
      worker::Unlend(contained, owner_.address);
      return Failed(where.status());
    }
  }
  std::string value;
  value.reserve(size);
  for (std::string_view part : parts) value.append(part.data(), part.size());
  objects_->AddValue(id, std::move(value));
  return MakeOwnedRef(id);
}

absl::StatusOr<std::string> DriverRuntime::CreateActor(internal::AnyFunction factory,
                                                       const ActorOptions& options,
                                                       std::vector<internal::TaskArgument> args,
                                                       const char* type_name) {
  const std::string* name = internal::FindFunctionName(factory);
  if (name == nullptr) {
    return absl::InvalidArgumentError(
        "the actor factory is not registered: add TESSERA_ACTOR(its_name) at namespace scope");
  }
  return CreateActorByName(internal::FunctionDescriptor{*name}, options, std::move(args),
                           type_name);
}

absl::StatusOr<std::string> DriverRuntime::CreateActorByName(
    const internal::FunctionDescriptor& function, const ActorOptions& options,
    std::vector<internal::TaskArgument> args, const std::string& type_name) {
  const std::string* name = &function.name;
  if (options.max_restarts < 0 || options.max_task_retries < 0 || options.max_concurrency < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "actor ", *name,
        ": max_restarts and max_task_retries must be >= 0 and max_concurrency "
        ">= 1 (got ",
        options.max_restarts, ", ", options.max_task_retries, ", ", options.max_concurrency, ")"));
  }
  TaskOptions task_options;
  task_options.resources = options.resources;
  task_options.label_selectors = options.label_selectors;
  task_options.strategy = options.strategy;
  auto shape = ShapeFor(task_options);
  if (!shape.ok()) {
    return absl::Status(shape.status().code(),
                        absl::StrCat("actor ", *name, ": ", shape.status().message()));
  }
  const TaskId actor_task = TaskId::FromRandom();
  const std::string id = actor_task.Hex();
  QueuedTask constructor;
  constructor.spec.set_task_id(actor_task.Binary());
  constructor.spec.set_function(*name);
  constructor.spec.set_actor_id(actor_task.Binary());
  constructor.spec.set_max_concurrency(options.max_concurrency);
  SetPlacementGroup(options.strategy, constructor.spec);
  for (const auto& [group, limit] : options.concurrency_groups) {
    if (group.empty() || limit < 1) {
      return absl::InvalidArgumentError(absl::StrCat("actor ", *name, ": concurrency group ",
                                                     Quote(group),
                                                     " must be named and allow >= 1 "
                                                     "calls at once (got ",
                                                     limit, ")"));
    }
    (*constructor.spec.mutable_concurrency_groups())[group] = limit;
  }
  constructor.spec.set_language(function.language);
  if (function.code.has_value()) {
    RefToProto(function.code->data(), constructor.spec.mutable_function_ref());
  }
  TESSERA_RETURN_IF_ERROR(AddConstructorArguments(*name, args, constructor));
  ActorSpec actor;
  actor.display = options.name.empty() ? absl::StrCat("actor ", *name, " ", id.substr(0, 8))
                                       : absl::StrCat("actor ", Quote(options.name));
  actor.class_name = std::string(internal::ClassNameOf(type_name));
  actor.actor_id = id;
  actor.name = options.name;
  actor.name_space = options.name_space;
  actor.max_restarts = options.max_restarts;
  actor.max_task_retries = options.max_task_retries;
  if (options.detached && options.name.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "actor ", *name, ": a detached actor must be named (other drivers find it by its name)"));
  }
  LeaseShape actor_shape = **shape;
  actor_shape.key = absl::StrCat(ToAbsl(kOwnedActorPrefix), id, "|", (*shape)->key);
  actor_shape.env = options.env;
  actor_shape.files = options.runtime_env_files;
  if (options.detached) actor_shape.detached_actor_id = id;
  ActorEntry entry{actor_shape.key, options.name, type_name, options.name_space};
  entry.owner = driver_id();
  entry.detached = options.detached;
  entry.calls_in_order = options.max_concurrency <= 1 && options.concurrency_groups.empty();
  if (!options.name.empty()) entry.handle_metadata = options.handle_metadata;
  entry.language = function.language;
  entry.code = function.code;
  TESSERA_RETURN_IF_ERROR(RegisterActor(id, entry, options));
  submitter_->CreateActor(actor_shape, std::move(actor), std::move(constructor));
  return id;
}

absl::Status DriverRuntime::AddConstructorArguments(const std::string& name,
                                                    std::vector<internal::TaskArgument>& args,
                                                    QueuedTask& constructor) {
  for (size_t i = 0; i < args.size(); ++i) {
    if (!args[i].ref.has_value()) {
      HoldRefsInside(args[i].value, &constructor.argument_refs);
      constructor.spec.add_args()->set_value(std::move(args[i].value));
      continue;
    }
    // The constructor runs again on every restart: its arguments are resolved once, here.
    auto value = Get(*args[i].ref, absl::InfiniteDuration());
    if (!value.ok()) {
      return WithContext(value.status(), absl::StrCat("actor ", name, ": argument ", i, ": "));
    }
    std::string bytes = std::move(*value).ToString();
    // The refs inside it live while the actor may still read them (its worker borrows them).
    HoldRefsInside(bytes, &constructor.argument_refs);
    constructor.spec.add_args()->set_value(std::move(bytes));
  }
  return absl::OkStatus();
}

absl::Status DriverRuntime::RegisterActor(const std::string& id, const ActorEntry& entry,
                                          const ActorOptions& options) {
  {
    absl::MutexLock lock(&actors_mu_);
    if (!options.name.empty()) {
      const std::pair<std::string, std::string> key{options.name_space, options.name};
      if (actor_names_.count(key) > 0) {
        return absl::AlreadyExistsError(absl::StrCat(
            "an actor named ", Quote(options.name), " in namespace ", Quote(options.name_space),
            " already exists in this driver (actor ", actor_names_[key], ")"));
      }
      actor_names_[key] = id;
    }
    actors_[id] = entry;
  }
  if (!options.name.empty() && directory_ != nullptr) {
    // The head holds the cluster's names: a name another live actor holds fails the create
    // here, before any worker is asked for.
    auto registered = directory_->Create(DirectoryRecord(id, entry, v1::ACTOR_STATE_PENDING));
    if (!registered.ok()) {
      absl::MutexLock lock(&actors_mu_);
      actor_names_.erase({options.name_space, options.name});
      actors_.erase(id);
      return absl::Status(
          registered.status().code(),
          absl::StrCat("actor ", Quote(options.name), ": ", registered.status().message()));
    }
  }
  return absl::OkStatus();
}

ObjectRefBase DriverRuntime::SubmitActorTask(const std::string& actor_id, const std::string& method,
                                             std::vector<internal::TaskArgument> args,
                                             const internal::ActorCallOptions& options,
                                             std::vector<ObjectRefBase>* more_returns) {
  std::string shape_key;
  v1::Language language = v1::LANGUAGE_CPP;
  {
    absl::MutexLock lock(&actors_mu_);
    auto it = actors_.find(actor_id);
    if (it == actors_.end()) {
      return Failed(absl::NotFoundError(absl::StrCat("no actor ", actor_id, " in this driver")));
    }
    shape_key = it->second.shape_key;
    language = it->second.language;
  }
  if (absl::Status valid = CheckNumReturns(method, options.num_returns, language); !valid.ok()) {
    return Failed(valid);
  }
  if (absl::Status valid = CheckStreaming(method, options.streaming, options.num_returns, language);
      !valid.ok()) {
    return Failed(valid);
  }
  const TaskId task_id = TaskId::FromRandom();
  QueuedTask call;
  call.spec.set_task_id(task_id.Binary());
  call.spec.set_caller(owner_.address);
  call.spec.set_function(method);
  call.spec.set_language(language);
  call.spec.set_concurrency_group(options.concurrency_group);
  call.spec.set_retry_exceptions(options.retry_exceptions);
  for (const std::string& type : options.retry_exception_types) {
    call.spec.add_retry_exception_types(type);
  }
  call.max_task_retries = options.max_task_retries;
  call.return_id = ObjectId::ForTaskReturn(task_id, 1);
  for (size_t i = 0; i < args.size(); ++i) {
    if (!args[i].ref.has_value()) {
      HoldRefsInside(args[i].value, &call.argument_refs);
      call.spec.add_args()->set_value(std::move(args[i].value));
      continue;
    }
    // Resolved before the call is numbered, so calls keep the order they were made in.
    auto value = Get(*args[i].ref, absl::InfiniteDuration());
    if (!value.ok()) {
      return Failed(
          WithContext(value.status(), absl::StrCat("task ", method, ": argument ", i, ": ")));
    }
    std::string bytes = std::move(*value).ToString();
    HoldRefsInside(bytes, &call.argument_refs);  // until the call is done
    call.spec.add_args()->set_value(std::move(bytes));
  }
  objects_->AddPending(call.return_id);
  ObjectRefBase result = MakeOwnedRef(call.return_id);
  ExpectMoreReturns(call.return_id, options.num_returns, more_returns);
  call.spec.set_num_returns(std::max(1, options.num_returns));
  ExpectStream(call.return_id, options.streaming, call.spec);
  submitter_->SubmitActorCall(shape_key, std::move(call));
  return result;
}

absl::Status DriverRuntime::KillActor(const std::string& actor_id) {
  std::string shape_key;
  bool named_here = false;
  std::optional<ActorEntry> attached;
  {
    absl::MutexLock lock(&actors_mu_);
    auto it = actors_.find(actor_id);
    if (it == actors_.end()) {
      return absl::NotFoundError(absl::StrCat("no actor ", actor_id, " in this driver"));
    }
    shape_key = it->second.shape_key;
    // Its name is free again; calls through existing handles fail "is dead".
    if (!it->second.name.empty()) actor_names_.erase({it->second.name_space, it->second.name});
    named_here = !it->second.attached && !it->second.name.empty();
    if (it->second.attached && !it->second.dead) attached = it->second;
  }
  if (attached.has_value()) {
    absl::Status ended = KillAttachedActor(actor_id, *attached);
    submitter_->KillActor(shape_key);
    return ended;
  }
  // Its death reaches the head through OnActorChanged; waiting for it frees the name cluster-wide
  // before Kill returns.
  submitter_->KillActor(shape_key);
  if (named_here && directory_ != nullptr) directory_->Flush();
  return absl::OkStatus();
}

absl::Status DriverRuntime::KillOwnedActor(const std::string& actor_id) {
  {
    absl::MutexLock lock(&actors_mu_);
    auto it = actors_.find(actor_id);
    if (it == actors_.end() || it->second.attached) {
      return absl::NotFoundError(absl::StrCat("no actor ", actor_id, " is owned by this process"));
    }
  }
  return KillActor(actor_id);
}

absl::StatusOr<std::string> DriverRuntime::FindNamedActor(const std::string& name,
                                                          const char* type_name,
                                                          const std::string& name_space) {
  {
    absl::MutexLock lock(&actors_mu_);
    auto it = actor_names_.find({name_space, name});
    if (it != actor_names_.end()) {
      if (*type_name != '\0' && actors_.at(it->second).type_name != type_name) {
        return absl::InvalidArgumentError(
            absl::StrCat("the actor named ", Quote(name), " is of another class"));
      }
      return it->second;
    }
  }
  return AttachNamedActor(name, type_name, name_space);
}

absl::Status DriverRuntime::KillAttachedActor(const std::string& actor_id,
                                              const ActorEntry& entry) {
  const std::string cause = absl::StrCat("killed by tessera::Kill from driver ", driver_id());
  if (!entry.name.empty() && directory_ != nullptr) {
    // With no owner left to end it, the head hears of its death from here, before its process
    // goes (so the cause is this, not the exit its agent reports).
    absl::StatusOr<v1::ActorInfo> record = directory_->Get(entry.name, entry.name_space);
    if (record.ok() && record->actor_id() == actor_id && record->owner().empty()) {
      directory_->Died(actor_id, cause);
      directory_->Flush();
    }
  }
  auto worker = v1::Worker::NewStub(rpc::MakeChannel(entry.address, token_));
  v1::ExitActorRequest request;
  v1::ExitActorReply reply;
  rpc::RetryOptions retry;
  retry.attempt_timeout = absl::Seconds(15);
  retry.total_budget = absl::Seconds(15);
  absl::Status exited =
      rpc::RetryUnary(retry, &v1::Worker::Stub::ExitActor, worker.get(), request, &reply);
  // A process that cannot be reached has ended already.
  if (exited.ok() || absl::IsUnavailable(exited)) return absl::OkStatus();
  return absl::Status(exited.code(), absl::StrCat("cannot end actor ", actor_id, " at ",
                                                  entry.address, ": ", exited.message()));
}

v1::ActorInfo DriverRuntime::DirectoryRecord(const std::string& id, const ActorEntry& entry,
                                             v1::ActorState state) const {
  v1::ActorInfo info;
  info.set_actor_id(id);
  info.set_name(entry.name);
  info.set_namespace_(entry.name_space);
  info.set_class_name(entry.type_name);
  info.set_owner(entry.owner);
  info.set_detached(entry.detached);
  info.set_calls_in_order(entry.calls_in_order);
  info.set_handle_metadata(entry.handle_metadata);
  info.set_state(state);
  info.set_restarts(entry.restarts);
  return info;
}

void DriverRuntime::OnWorkerReady(const std::string& shape_key, const std::string& address,
                                  const std::string& node_id, const std::string& worker_id) {
  const std::optional<std::string> id = OwnedActorId(shape_key);
  if (!id.has_value()) return;  // a task worker
  absl::MutexLock lock(&actors_mu_);
  auto it = actors_.find(*id);
  if (it == actors_.end()) return;
  ActorEntry& entry = it->second;
  if (entry.shape_key != shape_key || entry.attached) return;
  // On every (re)start: processes holding its handle (LocateActor) and other drivers (the
  // directory, when it is named) find the actor's current process.
  entry.address = address;
  entry.worker_id = worker_id;
  if (directory_ == nullptr || entry.name.empty()) return;
  v1::ActorInfo alive = DirectoryRecord(*id, entry, v1::ACTOR_STATE_ALIVE);
  alive.set_address(address);
  alive.set_node_id(node_id);
  alive.set_worker_id(worker_id);
  directory_->Update(std::move(alive));
}

absl::StatusOr<v1::LocateActorReply> DriverRuntime::LocateOwnedActor(const std::string& actor_id) {
  absl::MutexLock lock(&actors_mu_);
  auto it = actors_.find(actor_id);
  if (it == actors_.end() || it->second.attached) {
    return absl::NotFoundError(absl::StrCat("no actor ", actor_id, " is owned by this process"));
  }
  if (it->second.dead) {
    return absl::UnavailableError(absl::StrCat("actor ", actor_id, " is dead"));
  }
  if (it->second.address.empty()) {
    return absl::UnavailableError(
        absl::StrCat("actor ", actor_id, " has no live process now (starting or restarting)"));
  }
  v1::LocateActorReply located;
  located.set_address(it->second.address);
  located.set_class_name(it->second.type_name);
  located.set_calls_in_order(it->second.calls_in_order);
  return located;
}

absl::Status DriverRuntime::AttachActorById(const std::string& actor_id,
                                            const std::string& owner_address) {
  {
    absl::MutexLock lock(&actors_mu_);
    auto it = actors_.find(actor_id);
    // Owned here, or attached to its live process already.
    if (it != actors_.end() && !(it->second.attached && it->second.dead)) return absl::OkStatus();
  }
  auto owner = v1::Owner::NewStub(rpc::MakeChannel(owner_address, token_));
  v1::LocateActorRequest request;
  request.set_actor_id(actor_id);
  v1::LocateActorReply reply;
  rpc::RetryOptions retry;
  // A restarting actor answers UNAVAILABLE for a while: wait for its new process.
  retry.total_budget = absl::Seconds(30);
  absl::Status located =
      rpc::RetryUnary(retry, &v1::Owner::Stub::LocateActor, owner.get(), request, &reply);
  if (!located.ok()) {
    return WithErrorKind(
        absl::Status(located.code(), absl::StrCat("actor ", actor_id, " from its owner at ",
                                                  owner_address, ": ", located.message())),
        ErrorKind::kActorUnavailable);
  }
  return AttachAt(actor_id, "", "", reply.class_name(), reply.address(), reply.calls_in_order());
}

void DriverRuntime::OnActorChanged(const std::string& shape_key, const ActorChange& change) {
  if (const std::optional<std::string> attached = AttachedActorId(shape_key);
      attached.has_value() && change.kind == ActorChange::Kind::kDead) {
    // Its process is gone for this driver (its stream ended): the next AttachActorById finds
    // where it runs now (it may have restarted).
    absl::MutexLock lock(&actors_mu_);
    auto it = actors_.find(*attached);
    if (it != actors_.end() && it->second.shape_key == shape_key) it->second.dead = true;
    return;
  }
  const std::optional<std::string> owned = OwnedActorId(shape_key);
  if (!owned.has_value()) return;
  const std::string& id = *owned;
  absl::MutexLock lock(&actors_mu_);
  auto it = actors_.find(id);
  if (it == actors_.end()) return;
  ActorEntry& entry = it->second;
  if (entry.shape_key != shape_key || entry.attached) return;
  entry.restarts = change.restarts;
  entry.address.clear();  // until its next process is ready
  if (change.kind == ActorChange::Kind::kDead) entry.dead = true;
  if (entry.name.empty()) return;
  if (change.kind == ActorChange::Kind::kDead) {
    // Its name is free again, here and (once the queue is sent) in the cluster.
    auto named = actor_names_.find({entry.name_space, entry.name});
    if (named != actor_names_.end() && named->second == id) actor_names_.erase(named);
    if (directory_ != nullptr) directory_->Died(id, change.cause);
  } else if (directory_ != nullptr) {
    directory_->Update(DirectoryRecord(id, entry, v1::ACTOR_STATE_RESTARTING));
  }
}

absl::StatusOr<std::string> DriverRuntime::AttachNamedActor(const std::string& name,
                                                            const char* type_name,
                                                            const std::string& name_space) {
  const absl::Status not_found = absl::NotFoundError(
      absl::StrCat("no live actor named ", Quote(name), " in namespace ", Quote(name_space)));
  if (directory_ == nullptr) return not_found;
  // An actor whose process is starting (or restarting) is waited for: Ray's get_actor hands out
  // a pending actor's handle, whose calls then wait for it.
  const absl::Time deadline = absl::Now() + kNamedActorStartWait;
  absl::StatusOr<v1::ActorInfo> found;
  while (true) {
    found = directory_->Get(name, name_space);
    if (absl::IsNotFound(found.status())) return not_found;
    if (!found.ok()) {
      return absl::Status(found.status().code(),
                          absl::StrCat("cannot look up the actor named ", Quote(name),
                                       " at the head: ", found.status().message()));
    }
    const bool starting = found->state() == v1::ACTOR_STATE_PENDING ||
                          found->state() == v1::ACTOR_STATE_RESTARTING ||
                          (found->state() == v1::ACTOR_STATE_ALIVE && found->address().empty());
    if (!starting || absl::Now() >= deadline) break;
    absl::SleepFor(absl::Milliseconds(50));
  }
  if (*type_name != '\0' && found->class_name() != type_name) {
    return absl::InvalidArgumentError(
        absl::StrCat("the actor named ", Quote(name), " is of another class"));
  }
  if (found->state() != v1::ACTOR_STATE_ALIVE || found->address().empty()) {
    return absl::UnavailableError(
        absl::StrCat("the actor named ", Quote(name), " is ",
                     absl::AsciiStrToLower(ToAbsl(rpc::ActorStateName(found->state()))),
                     ": its process did not come up within ",
                     absl::FormatDuration(kNamedActorStartWait), "; try again"));
  }
  const std::string id = found->actor_id();
  TESSERA_RETURN_IF_ERROR(AttachAt(id, name, name_space, found->class_name(), found->address(),
                                   found->calls_in_order()));
  absl::MutexLock lock(&actors_mu_);
  if (auto it = actors_.find(id); it != actors_.end()) {
    it->second.handle_metadata = found->handle_metadata();
  }
  return id;
}

std::string DriverRuntime::ActorHandleMetadata(const std::string& actor_id) {
  absl::MutexLock lock(&actors_mu_);
  auto it = actors_.find(actor_id);
  return it == actors_.end() ? "" : it->second.handle_metadata;
}

absl::Status DriverRuntime::AttachAt(const std::string& id, const std::string& name,
                                     const std::string& name_space, const std::string& class_name,
                                     const std::string& address, bool calls_in_order) {
  LeaseShape shape;
  shape.key = absl::StrCat(ToAbsl(kAttachedActorPrefix), id, "@", address);
  {
    absl::MutexLock lock(&actors_mu_);
    auto it = actors_.find(id);
    if (it != actors_.end() && it->second.shape_key == shape.key) {
      // Another thread attaches it at this address: its calls may go once that one has.
      auto attached = [this, &id, &shape]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(actors_mu_) {
        auto entry = actors_.find(id);
        return entry == actors_.end() || entry->second.shape_key != shape.key ||
               !entry->second.attaching;
      };
      actors_mu_.Await(absl::Condition(&attached));
      return absl::OkStatus();
    }
    ActorEntry entry{shape.key, name, class_name, name_space, /*attached=*/true};
    entry.language = internal::LanguageOfClass(class_name);
    entry.address = address;
    entry.attaching = true;
    actors_[id] = std::move(entry);
  }
  const WorkerHandle handle = submitter_->NewHandle();
  TaskSubmitter* submitter = submitter_.get();
  auto channel = GrpcWorkerChannel::Start(
      rpc::MakeChannel(address, token_),
      [submitter, handle](const v1::TaskResultBatch& results) {
        submitter->OnResults(handle, results);
      },
      [submitter, handle, address] {
        submitter->WorkerDied(handle, absl::StrCat("its stream to ", address, " ended"));
      },
      /*guest=*/true);
  {
    absl::MutexLock lock(&attached_mu_);
    attached_.push_back(channel);
  }
  ActorSpec actor;
  actor.class_name = std::string(internal::ClassNameOf(class_name));
  actor.actor_id = id;
  actor.name = name;
  actor.name_space = name_space;
  actor.display =
      name.empty() ? absl::StrCat("actor ", id.substr(0, 8)) : absl::StrCat("actor ", Quote(name));
  actor.calls_in_order = calls_in_order;
  submitter_->AttachActor(shape, std::move(actor), handle, channel);
  absl::MutexLock lock(&actors_mu_);
  if (auto it = actors_.find(id); it != actors_.end() && it->second.shape_key == shape.key) {
    it->second.attaching = false;
  }
  return absl::OkStatus();
}

}  // namespace tessera::api
