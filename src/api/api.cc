// The public functions of include/tessera/tessera.h: one DriverRuntime per process between Init
// and Shutdown; in a worker, Init runs the worker and never returns.
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "api/driver_runtime.h"
#include "api/reservations.h"
#include "tessera/tessera.h"
#include "worker/worker_runtime.h"

namespace tessera {
namespace {

absl::Mutex runtime_mu(absl::kConstInit);
std::shared_ptr<api::DriverRuntime>* runtime ABSL_GUARDED_BY(runtime_mu) = nullptr;

std::shared_ptr<api::DriverRuntime> Current() {
  absl::ReaderMutexLock lock(&runtime_mu);
  return runtime == nullptr ? nullptr : *runtime;
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
  api::RememberReservationCluster(options);
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

const RuntimeContext& GetRuntimeContext() { return worker::CurrentContext(); }

TaskStats GetTaskStats() {
  auto current = Current();
  return current == nullptr ? TaskStats() : current->stats();
}

namespace internal {

ObjectRefBase SubmitTask(AnyFunction fn, const TaskOptions& options,
                         std::vector<TaskArgument> args) {
  auto current = Current();
  if (current == nullptr) {
    if (worker::InWorkerMode()) {
      return FailedRef(absl::UnimplementedError(
          "submitting a task from inside a task is not supported yet"));
    }
    return FailedRef(absl::FailedPreconditionError("call tessera::Init before submitting tasks"));
  }
  return current->Submit(fn, options, std::move(args));
}

absl::StatusOr<SerializedValue> GetValue(const ObjectRefBase& ref, absl::Duration timeout) {
  if (absl::Status early = ref.early_error(); !early.ok()) return early;
  if (ref.id().IsNil()) return absl::InvalidArgumentError("an empty ObjectRef has no value");
  auto current = Current();
  if (current != nullptr) return current->Get(ref, timeout);
  if (worker::InWorkerMode()) return worker::FetchObject(ref.data(), timeout);
  return absl::FailedPreconditionError("call tessera::Init before reading objects");
}

absl::StatusOr<std::string> GetSerialized(const ObjectRefBase& ref, absl::Duration timeout) {
  auto value = GetValue(ref, timeout);
  if (!value.ok()) return value.status();
  return std::move(*value).ToString();
}

ObjectPathStats GetObjectPathStats() { return api::ObjectPathSnapshot(); }

std::vector<bool> WaitReady(const std::vector<const ObjectRefBase*>& refs, int num,
                            absl::Duration timeout) {
  auto current = Current();
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
  const std::vector<bool> live_ready = current->Wait(live, std::max(0, num - already), timeout);
  for (size_t j = 0; j < live.size(); ++j) ready[where[j]] = live_ready[j];
  return ready;
}

ObjectRefBase PutSerialized(std::string value) {
  auto current = Current();
  if (current == nullptr) {
    return FailedRef(absl::FailedPreconditionError(
        worker::InWorkerMode() ? "Put inside a task is not supported yet"
                               : "call tessera::Init before Put"));
  }
  return current->Put(std::move(value));
}

absl::StatusOr<std::string> CreateActor(AnyFunction factory, const ActorOptions& options,
                                        std::vector<TaskArgument> args, const char* type_name) {
  auto current = Current();
  if (current == nullptr) {
    return absl::FailedPreconditionError(
        worker::InWorkerMode() ? "creating an actor inside a task is not supported yet"
                               : "call tessera::Init before creating actors");
  }
  return current->CreateActor(factory, options, std::move(args), type_name);
}

ObjectRefBase SubmitActorTask(const std::string& actor_id, const std::string& method,
                              std::vector<TaskArgument> args) {
  auto current = Current();
  if (current == nullptr) {
    return FailedRef(absl::FailedPreconditionError(
        worker::InWorkerMode() ? "calling an actor from inside a task is not supported yet"
                               : "call tessera::Init before calling actors"));
  }
  return current->SubmitActorTask(actor_id, method, std::move(args));
}

absl::Status KillActor(const std::string& actor_id) {
  auto current = Current();
  if (current == nullptr) return absl::FailedPreconditionError("call tessera::Init first");
  return current->KillActor(actor_id);
}

absl::StatusOr<std::string> FindNamedActor(const std::string& name, const char* type_name) {
  auto current = Current();
  if (current == nullptr) return absl::FailedPreconditionError("call tessera::Init first");
  return current->FindNamedActor(name, type_name);
}

}  // namespace internal
}  // namespace tessera
