// Actors: a stateful object living in a worker process of its own, whose methods run remotely.
//
//   class Counter {
//    public:
//     explicit Counter(int start) : n_(start) {}
//     int Add(int k) { return n_ += k; }
//    private:
//     int n_;
//   };
//   std::unique_ptr<Counter> MakeCounter(int start) { return std::make_unique<Counter>(start); }
//   TESSERA_ACTOR(MakeCounter);                 // the factory (returns T or std::unique_ptr<T>)
//   TESSERA_ACTOR_METHOD(&Counter::Add);        // each method called remotely, "Counter::Add"
//
//   tessera::ActorHandle<Counter> c = tessera::Actor(MakeCounter).MaxRestarts(1).Remote(10);
//   tessera::ObjectRef<int> r = c.Task(&Counter::Add).Remote(5);   // Get(r) == 15
//   std::cout << c.id();                     // its ActorId (vocabulary/ids.h), in hex
//   tessera::Kill(c);
//
// Registration: TESSERA_ACTOR(factory) registers a free function under its name, like
// TESSERA_REMOTE; TESSERA_ACTOR_METHOD(&Class::Method) registers a member function (const or not,
// not overloaded) under the spelling "Class::Method" (the leading & dropped). Both at namespace
// scope, in the binary that is also the worker (tessera.h).
//
// Semantics: each actor gets one dedicated worker process that holds its lease for the actor's
// life. Calls from one caller run in the order Remote was called (sequence numbers; kept across
// a restart's retries); with MaxConcurrency(1) (the default) one call at a time, with n > 1 up to
// n at once on a thread pool in the actor's process (then no order among running calls). A method
// that throws: its ref fails (Unknown, "task Counter::Add failed: std::runtime_error: msg") and
// the actor lives on. A process that dies: the actor is restarted on a new worker (factory run
// again with the same arguments: its state starts over), up to MaxRestarts; the calls it was
// running are retried up to MaxTaskRetries each, else fail naming the exit cause. After the last
// restart every call fails Unavailable "actor X is dead: <cause>". Kill ends it for good.
// ObjectRef arguments to actor calls are resolved by the caller before the call is sent (Remote
// waits for them), so that calls keep their order.
//
// Threading: ActorHandle is a value; copies may be used from any thread.
#pragma once

#include <cstring>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <typeinfo>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "tessera/object_ref.h"
#include "tessera/remote_function.h"
#include "tessera/serialization.h"
#include "tessera/task.h"
#include "vocabulary/ids.h"

namespace tessera {

namespace internal {

// The instance of the actor this worker process hosts (one per process), kept type-erased with
// its class's typeid name. Set by the factory's invoker; read by method invokers.
void SetActorInstance(std::shared_ptr<void> instance, const char* type_name);
// The instance, or nullptr with `why` set (not created yet, or its constructor failed).
std::shared_ptr<void> ActorInstance(const char* type_name, std::string* why);

// The registered name ("Class::Method") of a member function, by its bytes and type.
template <typename M>
std::string MethodKey(M method) {
  std::string key = typeid(M).name();
  key.push_back('\0');
  key.append(reinterpret_cast<const char*>(&method), sizeof(method));
  return key;
}
bool RegisterActorMethodName(std::string key, const char* name);
const std::string* FindActorMethodName(const std::string& key);

template <typename T>
struct ActorClassOf {
  using type = T;
};
template <typename T>
struct ActorClassOf<std::unique_ptr<T>> {
  using type = T;
};

template <typename R, typename... Params>
bool RegisterActorFactory(const char* name, R (*factory)(Params...)) {
  using T = typename ActorClassOf<R>::type;
  Invoker invoker = [factory](std::string_view bytes) -> absl::StatusOr<std::string> {
    auto args = DeserializeArgs<std::decay_t<Params>...>(bytes);
    if (!args.ok()) return args.status();
    std::shared_ptr<T> instance;
    if constexpr (std::is_same_v<R, std::unique_ptr<T>>) {
      instance = std::apply(factory, *std::move(args));
      if (instance == nullptr) throw std::runtime_error("the actor factory returned nullptr");
    } else {
      instance = std::make_shared<T>(std::apply(factory, *std::move(args)));
    }
    SetActorInstance(std::move(instance), typeid(T).name());
    return SerializeValue(msgpack::type::nil_t());
  };
  return RegisterFunction(name, reinterpret_cast<AnyFunction>(factory), std::move(invoker));
}

template <typename T, typename M, typename R, typename... Params>
bool RegisterActorMethodImpl(const char* spelled, M method) {
  std::string name = spelled;
  if (!name.empty() && name[0] == '&') name.erase(0, 1);
  Invoker invoker = [method, name](std::string_view bytes) -> absl::StatusOr<std::string> {
    std::string why;
    std::shared_ptr<void> instance = ActorInstance(typeid(T).name(), &why);
    if (instance == nullptr) {
      return absl::FailedPreconditionError(absl::StrCat(name, ": ", why));
    }
    T* self = static_cast<T*>(instance.get());
    auto args = DeserializeArgs<std::decay_t<Params>...>(bytes);
    if (!args.ok()) return args.status();
    auto call = [self, method](auto&&... a) -> R { return (self->*method)(std::move(a)...); };
    if constexpr (std::is_void_v<R>) {
      std::apply(call, *std::move(args));
      return SerializeValue(msgpack::type::nil_t());
    } else {
      return SerializeResult(std::apply(call, *std::move(args)));
    }
  };
  RegisterNamedInvoker(name.c_str(), std::move(invoker));
  return RegisterActorMethodName(MethodKey(method), name.c_str());
}

template <typename T, typename R, typename... Params>
bool RegisterActorMethod(const char* spelled, R (T::*method)(Params...)) {
  return RegisterActorMethodImpl<T, R (T::*)(Params...), R, Params...>(spelled, method);
}
template <typename T, typename R, typename... Params>
bool RegisterActorMethod(const char* spelled, R (T::*method)(Params...) const) {
  return RegisterActorMethodImpl<T, R (T::*)(Params...) const, R, Params...>(spelled, method);
}

// The driver's side (src/api). An actor is named by its id (hex); errors come back as a handle
// whose calls fail with them.
absl::StatusOr<ActorId> CreateActor(AnyFunction factory, const ActorOptions& options,
                                    std::vector<TaskArgument> args, const char* type_name);
// One call's own options (Python's @method and .options on a method).
struct ActorCallOptions {
  int max_task_retries = -1;  // runs again after the process died mid-call; -1: the actor's
  // The call's own exceptions are retried within max_task_retries (as TaskOptions's).
  bool retry_exceptions = false;
  std::vector<std::string> retry_exception_types;
  std::string concurrency_group;  // "" the default group
  // How many objects the call returns (as TaskOptions::num_returns; Python actors).
  int num_returns = 1;
  bool streaming = false;  // a streaming generator method (as TaskOptions::streaming)
};
// `more_returns` (may be null) gets the refs of returns 2..N when options.num_returns is N > 1.
ObjectRefBase SubmitActorTask(const ActorId& actor_id, const std::string& method,
                              std::vector<TaskArgument> args, const ActorCallOptions& options = {},
                              std::vector<ObjectRefBase>* more_returns = nullptr);
absl::Status KillActor(const ActorId& actor_id);
absl::StatusOr<ActorId> FindNamedActor(const std::string& name, const char* type_name,
                                       const std::string& name_space = "");
// The handle metadata (ActorOptions::handle_metadata) of a named actor made here or found by
// FindNamedActor; "" when none is known.
std::string ActorHandleMetadata(const ActorId& actor_id);

}  // namespace internal

template <typename R, typename... Params>
class ActorTaskCaller {
 public:
  ActorTaskCaller(ActorId actor_id, absl::Status error, const std::string* method)
      : actor_id_(std::move(actor_id)), error_(std::move(error)), method_(method) {}

  template <typename... Args>
  ObjectRef<R> Remote(Args&&... args) const {
    static_assert(sizeof...(Args) == sizeof...(Params),
                  "Remote takes exactly the method's parameters");
    if (!error_.ok()) return Failed(error_);
    if (method_ == nullptr) {
      return Failed(absl::InvalidArgumentError(
          "the method is not registered: add TESSERA_ACTOR_METHOD(&Class::Method) at namespace "
          "scope"));
    }
    std::vector<internal::TaskArgument> arguments;
    arguments.reserve(sizeof...(Args));
    (arguments.push_back(internal::MakeArgument<Params>(std::forward<Args>(args))), ...);
    return ObjectRef<R>(internal::SubmitActorTask(actor_id_, *method_, std::move(arguments)));
  }

 private:
  static ObjectRef<R> Failed(absl::Status status) {
    return ObjectRef<R>(ObjectRefBase(
        ObjectRefData{}, std::make_shared<internal::LocalReference>(std::move(status))));
  }
  ActorId actor_id_;
  absl::Status error_;
  const std::string* method_;
};

template <typename T>
class ActorHandle {
 public:
  ActorHandle() : error_(absl::FailedPreconditionError("an empty ActorHandle")) {}
  ActorHandle(ActorId id, absl::Status error) : id_(std::move(id)), error_(std::move(error)) {}

  // The actor's id (hex; operator<< prints it, value() is the text); empty when creating it failed.
  const ActorId& id() const { return id_; }
  // OK, or why the actor could not be created (each call fails with it too).
  const absl::Status& status() const { return error_; }

  template <typename R, typename... Params>
  ActorTaskCaller<R, Params...> Task(R (T::*method)(Params...)) const {
    return ActorTaskCaller<R, Params...>(
        id_, error_, internal::FindActorMethodName(internal::MethodKey(method)));
  }
  template <typename R, typename... Params>
  ActorTaskCaller<R, Params...> Task(R (T::*method)(Params...) const) const {
    return ActorTaskCaller<R, Params...>(
        id_, error_, internal::FindActorMethodName(internal::MethodKey(method)));
  }

 private:
  ActorId id_;
  absl::Status error_;
};

template <typename T, typename R, typename... Params>
class ActorCreator : public internal::DemandSetters<ActorCreator<T, R, Params...>, ActorOptions> {
 public:
  explicit ActorCreator(R (*factory)(Params...)) : factory_(factory) {}

  ActorCreator& Name(std::string name) {
    this->options_.name = std::move(name);
    return *this;
  }
  // See ActorOptions::detached.
  ActorCreator& Detached() {
    this->options_.detached = true;
    return *this;
  }
  ActorCreator& MaxRestarts(int n) {
    this->options_.max_restarts = n;
    return *this;
  }
  ActorCreator& MaxTaskRetries(int n) {
    this->options_.max_task_retries = n;
    return *this;
  }
  ActorCreator& MaxConcurrency(int n) {
    this->options_.max_concurrency = n;
    return *this;
  }
  ActorCreator& Env(std::string name, std::string value) {
    this->options_.env[std::move(name)] = std::move(value);
    return *this;
  }

  // Starts the actor (asynchronously: the handle is usable at once, calls queue meanwhile).
  template <typename... Args>
  ActorHandle<T> Remote(Args&&... args) const {
    static_assert(sizeof...(Args) == sizeof...(Params),
                  "Remote takes exactly the factory's parameters");
    std::vector<internal::TaskArgument> arguments;
    arguments.reserve(sizeof...(Args));
    if (!this->invalid_.ok()) return ActorHandle<T>(ActorId(), this->invalid_);
    (arguments.push_back(internal::MakeArgument<Params>(std::forward<Args>(args))), ...);
    auto id = internal::CreateActor(reinterpret_cast<internal::AnyFunction>(factory_),
                                    this->options_, std::move(arguments), typeid(T).name());
    if (!id.ok()) return ActorHandle<T>(ActorId(), id.status());
    return ActorHandle<T>(*id, absl::OkStatus());
  }

 private:
  R (*factory_)(Params...);
};

// The creator of actors made by `factory` (registered with TESSERA_ACTOR).
template <typename R, typename... Params>
ActorCreator<typename internal::ActorClassOf<R>::type, R, Params...> Actor(
    R (*factory)(Params...)) {
  return ActorCreator<typename internal::ActorClassOf<R>::type, R, Params...>(factory);
}

// Ends the actor for good, from this driver or any other holding its handle: its process exits
// now (it is not restarted), pending calls fail, later calls fail at once.
template <typename T>
absl::Status Kill(const ActorHandle<T>& handle) {
  if (!handle.status().ok()) return handle.status();
  return internal::KillActor(handle.id());
}

// The live actor named `name`: one this driver created, else one another driver of the cluster
// registered in the head's actor directory (calls then go straight to its process on a stream of
// this driver's; restarts are not followed: call GetActor again; Kill ends it). NotFound
// when none; Unavailable while the other driver's actor has no process up (starting or
// restarting: try again); InvalidArgument when it is of another class.
template <typename T>
absl::StatusOr<ActorHandle<T>> GetActor(const std::string& name) {
  auto id = internal::FindNamedActor(name, typeid(T).name());
  if (!id.ok()) return id.status();
  return ActorHandle<T>(*id, absl::OkStatus());
}

}  // namespace tessera

// Registers the actor factory `factory` (a free function returning T or std::unique_ptr<T>).
#define TESSERA_ACTOR(factory)                                                          \
  [[maybe_unused]] static const bool TESSERA_REMOTE_CONCAT_(tessera_actor_, __LINE__) = \
      ::tessera::internal::RegisterActorFactory(#factory, &factory)
// Registers a member function called through ActorHandle::Task: TESSERA_ACTOR_METHOD(&C::M).
#define TESSERA_ACTOR_METHOD(method)                                                           \
  [[maybe_unused]] static const bool TESSERA_REMOTE_CONCAT_(tessera_actor_method_, __LINE__) = \
      ::tessera::internal::RegisterActorMethod(#method, method)
