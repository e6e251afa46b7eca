// The public functions of include/tessera/tessera.h: one DriverRuntime per process between Init
// and Shutdown; in a worker, Init runs the worker and never returns, and the first task, Put or
// actor call from inside a task creates the worker's own DriverRuntime (it owns what it submits;
// abandoned when the worker process exits, which ends its own workers' streams too).
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "api/driver_runtime.h"
#include "api/error_payloads.h"
#include "api/foreign_calls.h"
#include "api/reservations.h"
#include "base/status_macros.h"
#include "tessera/tessera.h"
#include "worker/borrowed_refs.h"
#include "worker/worker_runtime.h"

namespace tessera {
namespace {

absl::Mutex runtime_mu(absl::kConstInit);
std::shared_ptr<api::DriverRuntime>* runtime ABSL_GUARDED_BY(runtime_mu) = nullptr;

// In a worker: why its nested runtime could not be made (tried once; OK until then).
absl::Status* nested_error ABSL_GUARDED_BY(runtime_mu) = nullptr;
// A driver's context (Ray's: its node is the local one, the node whose agent and store it uses).
// One per Init, never freed: a reference handed out stays valid after Shutdown.
const RuntimeContext* driver_context ABSL_GUARDED_BY(runtime_mu) = nullptr;

std::shared_ptr<api::DriverRuntime> Current() {
  absl::ReaderMutexLock lock(&runtime_mu);
  return runtime == nullptr ? nullptr : *runtime;
}

// The runtime calls go through: the driver's, or in a worker its own nested one, made on first
// use. Null with *why set when there is none.
std::shared_ptr<api::DriverRuntime> CurrentOrNested(absl::Status* why) {
  if (auto current = Current(); current != nullptr) return current;
  if (!worker::InWorkerMode()) {
    *why = absl::FailedPreconditionError("call tessera::Init first");
    return nullptr;
  }
  absl::MutexLock lock(&runtime_mu);
  if (runtime != nullptr) return *runtime;
  if (nested_error != nullptr) {
    *why = *nested_error;
    return nullptr;
  }
  auto env = worker::NestedDriverEnvironment();
  absl::StatusOr<std::unique_ptr<api::DriverRuntime>> created =
      env.ok() ? absl::UnknownError("not made yet") : env.status();
  if (env.ok()) {
    InitOptions options;
    options.state_dir = env->state_dir;
    options.head_address = env->head_address;
    // Subtasks are leased from this worker's node first, so they stay local when they fit.
    options.agent_address = env->agent_address;
    options.bind_address = env->bind_address;
    options.worker_env = env->worker_env;
    created = api::DriverRuntime::Create(options);
  }
  if (!created.ok()) {
    nested_error = new absl::Status(
        created.status().code(),
        absl::StrCat("this worker cannot submit tasks: ", created.status().message()));
    *why = *nested_error;
    return nullptr;
  }
  // Never shut down: the worker _exits when its owner lets it go, and the workers this runtime
  // leased then see their stream end and exit too.
  runtime = new std::shared_ptr<api::DriverRuntime>(*std::move(created));
  // A recursive cancel of the worker's task reaches what the task submitted.
  std::weak_ptr<api::DriverRuntime> nested = *runtime;
  // Its objects that others borrow keep the worker from being let go.
  worker::SetLendsObjectsProbe(
      [objects = (*runtime)->objects_shared()] { return objects->BorrowedCount() > 0; });
  worker::SetNestedCancel([nested](const std::string& task_id, bool force) {
    if (auto live = nested.lock(); live != nullptr) live->CancelSubmittedBy(task_id, force);
  });
  return *runtime;
}

// Whether `ref` is owned by `current` (read from its table) rather than by another process.
bool OwnedBy(const api::DriverRuntime& current, const ObjectRefBase& ref) {
  return ref.data().owner.address == current.owner().address;
}

ObjectRefBase FailedRef(absl::Status status) {
  return ObjectRefBase(ObjectRefData{},
                       std::make_shared<internal::LocalReference>(std::move(status)));
}

}  // namespace

bool IsWorkerProcess() { return worker::InWorkerMode(); }

absl::Status Init(InitOptions options) {
  if (worker::InWorkerMode()) worker::RunWorker();  // never returns
  absl::MutexLock lock(&runtime_mu);
  if (runtime != nullptr) {
    return absl::FailedPreconditionError("tessera::Init was already called (call Shutdown first)");
  }
  auto created = api::DriverRuntime::Create(options);
  if (!created.ok()) return created.status();
  runtime = new std::shared_ptr<api::DriverRuntime>(*std::move(created));
  api::RememberReservationCluster(options, (*runtime)->driver_id());
  auto* context = new RuntimeContext();
  context->node_id = (*runtime)->store().node_id();
  driver_context = context;
  return absl::OkStatus();
}

void Shutdown() {
  std::shared_ptr<api::DriverRuntime> old;
  {
    absl::MutexLock lock(&runtime_mu);
    if (runtime == nullptr) return;
    api::ForgetReservationCluster();
    old = std::move(*runtime);
    delete runtime;
    runtime = nullptr;
  }
  old->Shutdown();
}

const RuntimeContext& GetRuntimeContext() {
  const RuntimeContext& current = worker::CurrentContext();
  if (current.in_worker) return current;
  absl::ReaderMutexLock lock(&runtime_mu);
  return driver_context != nullptr ? *driver_context : current;
}

TaskStats GetTaskStats() {
  auto current = Current();
  return current == nullptr ? TaskStats() : current->stats();
}

namespace internal {

ObjectRefBase SubmitTask(AnyFunction fn, const TaskOptions& options,
                         std::vector<TaskArgument> args) {
  absl::Status why;
  auto current = CurrentOrNested(&why);
  if (current == nullptr) return FailedRef(why);
  return current->Submit(fn, options, std::move(args));
}

absl::StatusOr<SerializedValue> GetValue(const ObjectRefBase& ref, absl::Duration timeout) {
  if (absl::Status early = ref.early_error(); !early.ok()) return early;
  if (ref.id().IsNil()) return absl::InvalidArgumentError("an empty ObjectRef has no value");
  // A runtime reads what it owns from its table; in a worker (whose nested runtime, if any, owns
  // only its own puts and subtasks) everything else comes from its owner.
  if (auto current = Current(); current != nullptr) return current->Get(ref, timeout);
  if (worker::InWorkerMode()) {
    bool owner_unreachable = false;
    auto value = worker::FetchObject(ref.data(), timeout, &owner_unreachable);
    if (!value.ok() && owner_unreachable) {
      return api::OwnerDiedStatus(ref.id().Hex(), ref.data().owner.address, value.status());
    }
    return value;
  }
  return absl::FailedPreconditionError("call tessera::Init before reading objects");
}

absl::StatusOr<std::string> GetSerialized(const ObjectRefBase& ref, absl::Duration timeout) {
  auto value = GetValue(ref, timeout);
  if (!value.ok()) return value.status();
  return std::move(*value).ToString();
}

ObjectPathStats GetObjectPathStats() { return ObjectPathSnapshot(); }

std::vector<bool> WaitReady(const std::vector<const ObjectRefBase*>& refs, int num,
                            absl::Duration timeout, bool stop_at_failure) {
  // In a worker, its own runtime asks the owners (made on first use); none: all are ready, the
  // reads say why.
  absl::Status why;
  auto current = CurrentOrNested(&why);
  std::vector<const ObjectRefBase*> live;
  std::vector<size_t> where;
  std::vector<bool> ready(refs.size(), true);
  int already = 0;
  for (size_t i = 0; i < refs.size(); ++i) {
    // A ref born failed is ready: Get answers it at once.
    if (!refs[i]->early_error().ok() || current == nullptr) {
      ++already;
      continue;
    }
    live.push_back(refs[i]);
    where.push_back(i);
  }
  if (live.empty()) return ready;
  const std::vector<bool> live_ready =
      current->Wait(live, std::max(0, num - already), timeout, stop_at_failure);
  for (size_t j = 0; j < live.size(); ++j) ready[where[j]] = live_ready[j];
  return ready;
}

absl::StatusOr<std::optional<ObjectRefBase>> GeneratorNext(const ObjectRefBase& generator,
                                                           int64_t index, absl::Duration timeout) {
  auto current = Current();
  if (current == nullptr) return absl::FailedPreconditionError("call tessera::Init first");
  return current->GeneratorNext(generator, index, timeout);
}

absl::Status WhenReady(const ObjectRefBase& ref, std::function<void()> ready) {
  auto current = Current();
  if (current == nullptr) return absl::FailedPreconditionError("call tessera::Init first");
  return current->WhenReady(ref, std::move(ready));
}

void ReleaseGenerator(const ObjectRefBase& generator, int64_t next_index) {
  if (auto current = Current(); current != nullptr)
    current->ReleaseGenerator(generator, next_index);
}

ObjectRefBase HoldRef(ObjectRefData ref) {
  if (auto current = Current(); current != nullptr) return current->Hold(ref);
  // No runtime here (a worker that has not submitted or put anything): nothing of this
  // process's own, so it is another's object.
  std::shared_ptr<LocalReference> borrowed = worker::Borrow(ref);
  return ObjectRefBase(std::move(ref), std::move(borrowed));
}

// The runtime keeps its actors by their ids' text: ActorIds become it here, and back.

ObjectRefBase ActorLifetimeRef(const ActorId& actor_id) {
  absl::Status why;
  auto current = CurrentOrNested(&why);
  if (current == nullptr) return FailedRef(why);
  return current->ActorLifetimeRef(actor_id.value());
}

size_t OwnedObjectCount() {
  auto current = Current();
  return current == nullptr ? 0 : current->objects().size();
}

absl::Status KnownFailure(const ObjectRefBase& ref) {
  if (absl::Status early = ref.early_error(); !early.ok()) return early;
  auto current = Current();
  return current == nullptr ? absl::OkStatus() : current->Failure(ref);
}

ObjectRefBase PutSerialized(std::string value) {
  absl::Status why;
  auto current = CurrentOrNested(&why);
  if (current == nullptr) return FailedRef(why);
  return current->Put(std::move(value));
}

absl::StatusOr<ActorId> CreateActor(AnyFunction factory, const ActorOptions& options,
                                    std::vector<TaskArgument> args, const char* type_name) {
  absl::Status why;
  auto current = CurrentOrNested(&why);
  if (current == nullptr) return why;
  TESSERA_ASSIGN_OR_RETURN(std::string id,
                           current->CreateActor(factory, options, std::move(args), type_name));
  return ActorId(std::move(id));
}

ObjectRefBase SubmitActorTask(const ActorId& actor_id, const std::string& method,
                              std::vector<TaskArgument> args, const ActorCallOptions& options,
                              std::vector<ObjectRefBase>* more_returns) {
  absl::Status why;
  auto current = CurrentOrNested(&why);
  if (current == nullptr) return FailedRef(why);
  return current->SubmitActorTask(actor_id.value(), method, std::move(args), options, more_returns);
}

absl::Status KillActor(const ActorId& actor_id) {
  absl::Status why;
  auto current = CurrentOrNested(&why);
  if (current == nullptr) return why;
  return current->KillActor(actor_id.value());
}

absl::StatusOr<ActorId> FindNamedActor(const std::string& name, const char* type_name,
                                       const std::string& name_space) {
  absl::Status why;
  auto current = CurrentOrNested(&why);
  if (current == nullptr) return why;
  TESSERA_ASSIGN_OR_RETURN(std::string id, current->FindNamedActor(name, type_name, name_space));
  return ActorId(std::move(id));
}

std::string ActorHandleMetadata(const ActorId& actor_id) {
  absl::Status why;
  auto current = CurrentOrNested(&why);
  return current == nullptr ? "" : current->ActorHandleMetadata(actor_id.value());
}

ObjectRefBase SubmitTaskByName(const FunctionDescriptor& function, const TaskOptions& options,
                               std::vector<TaskArgument> args,
                               std::vector<ObjectRefBase>* more_returns) {
  absl::Status why;
  auto current = CurrentOrNested(&why);
  if (current == nullptr) return FailedRef(why);
  return current->SubmitByName(function, options, std::move(args), more_returns);
}

absl::StatusOr<ActorId> CreateActorByName(const FunctionDescriptor& function,
                                          const ActorOptions& options,
                                          std::vector<TaskArgument> args,
                                          const std::string& type_name) {
  absl::Status why;
  auto current = CurrentOrNested(&why);
  if (current == nullptr) return why;
  TESSERA_ASSIGN_OR_RETURN(
      std::string id, current->CreateActorByName(function, options, std::move(args), type_name));
  return ActorId(std::move(id));
}

ObjectRefBase PutParts(const std::vector<std::string_view>& parts,
                       const std::vector<ObjectRefData>& contained) {
  absl::Status why;
  auto current = CurrentOrNested(&why);
  if (current == nullptr) return FailedRef(why);
  return current->PutParts(parts, contained);
}

absl::StatusOr<ObjectStoreStats> LocalObjectStoreStats() {
  absl::Status why;
  auto current = CurrentOrNested(&why);
  if (current == nullptr) return why;
  return current->store().Stats();
}

ObjectRefBase NewPromise() {
  absl::Status why;
  auto current = CurrentOrNested(&why);
  if (current == nullptr) return FailedRef(why);
  return current->NewPromise();
}

void FulfillPromise(const ObjectRefBase& promise, absl::StatusOr<std::string> value) {
  auto current = Current();
  if (current == nullptr || !OwnedBy(*current, promise)) return;
  current->FulfillPromise(promise.id(), std::move(value));
}

absl::Status AttachActor(const ActorId& actor_id, const std::string& owner_address) {
  absl::Status why;
  auto current = CurrentOrNested(&why);
  if (current == nullptr) return why;
  return current->AttachActorById(actor_id.value(), owner_address);
}

std::string OwnerAddressOfThisProcess() {
  absl::Status why;
  auto current = CurrentOrNested(&why);
  return current == nullptr ? "" : current->owner().address;
}

absl::Status CancelTask(const ObjectRefBase& ref, bool force, bool recursive) {
  if (absl::Status early = ref.early_error(); !early.ok()) return absl::OkStatus();  // failed
  absl::Status why;
  auto current = CurrentOrNested(&why);
  if (current == nullptr) return why;
  return current->Cancel(ref, force, recursive);
}

v1::Language LanguageOfClass(std::string_view class_name) {
  return class_name.substr(0, kPythonClassPrefix.size()) == kPythonClassPrefix ? v1::LANGUAGE_PYTHON
                                                                               : v1::LANGUAGE_CPP;
}

std::string DriverId() {
  auto current = Current();
  return current == nullptr ? "" : current->driver_id();
}

std::string JobId() {
  auto current = Current();
  return current == nullptr ? "" : current->job_id();
}

absl::StatusOr<std::string> TimelineJson() {
  auto current = Current();
  if (current == nullptr) return absl::FailedPreconditionError("tessera is not initialized");
  return current->TimelineJson();
}

}  // namespace internal
}  // namespace tessera
