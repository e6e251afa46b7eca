// Remote tasks: tessera::Task(fn) names a registered function (TESSERA_REMOTE), options are
// chained, Remote(args...) submits it and returns an ObjectRef at once.
//
//   tessera::ObjectRef<int> sum = tessera::Task(Add).Resources({{"CPU", 1}}).Remote(1, 2);
//   absl::StatusOr<int> value = tessera::Get(sum);
//
// An argument is a value convertible to the parameter's type, or an ObjectRef to one: the owner
// waits for that object (without holding a worker) and the task receives its value.
// Errors found before anything is sent (unregistered function, an invalid resource amount or
// strategy, Init not called) come back as a ref whose Get fails at once with a one-line message.
//
// Threading: a TaskCaller is a value; Remote may be called from any thread.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "tessera/demand_setters.h"
#include "tessera/object_ref.h"
#include "tessera/remote_function.h"
#include "tessera/serialization.h"
#include "vocabulary/task_options.h"

namespace tessera {

namespace internal {
struct TaskArgument {
  std::string value;                 // msgpack of one value, when ref is empty
  std::optional<ObjectRefBase> ref;  // an ObjectRef argument, resolved to its value
};
ObjectRefBase SubmitTask(AnyFunction fn, const TaskOptions& options,
                         std::vector<TaskArgument> args);

template <typename Param, typename Arg>
TaskArgument MakeArgument(Arg&& arg) {
  using P = std::decay_t<Param>;
  using A = std::decay_t<Arg>;
  if constexpr (IsObjectRef<A>::value) {
    static_assert(std::is_same_v<typename A::ValueType, P>,
                  "an ObjectRef argument must refer to the parameter's exact type");
    return TaskArgument{std::string(), ObjectRefBase(std::forward<Arg>(arg))};
  } else if constexpr (std::is_same_v<A, P>) {
    return TaskArgument{SerializeValue(arg), std::nullopt};
  } else {
    static_assert(std::is_convertible_v<Arg&&, P>,
                  "a task argument must convert to the function's parameter type");
    return TaskArgument{SerializeValue(static_cast<P>(std::forward<Arg>(arg))), std::nullopt};
  }
}
}  // namespace internal

template <typename R, typename... Params>
class TaskCaller : public internal::DemandSetters<TaskCaller<R, Params...>, TaskOptions> {
 public:
  explicit TaskCaller(R (*fn)(Params...)) : fn_(fn) {}

  TaskCaller& MaxRetries(int retries) {
    this->options_.max_retries = retries;
    return *this;
  }

  template <typename... Args>
  ObjectRef<R> Remote(Args&&... args) const {
    static_assert(sizeof...(Args) == sizeof...(Params),
                  "Remote takes exactly the function's parameters");
    std::vector<internal::TaskArgument> arguments;
    arguments.reserve(sizeof...(Args));
    if (!this->invalid_.ok()) {
      return ObjectRef<R>(ObjectRefBase(
          ObjectRefData{}, std::make_shared<internal::LocalReference>(this->invalid_)));
    }
    (arguments.push_back(internal::MakeArgument<Params>(std::forward<Args>(args))), ...);
    return ObjectRef<R>(internal::SubmitTask(reinterpret_cast<internal::AnyFunction>(fn_),
                                             this->options_, std::move(arguments)));
  }

 private:
  R (*fn_)(Params...);
};

template <typename R, typename... Params>
TaskCaller<R, Params...> Task(R (*fn)(Params...)) {
  return TaskCaller<R, Params...>(fn);
}

}  // namespace tessera
