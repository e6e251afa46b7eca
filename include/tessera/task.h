// Remote tasks: tessera::Task(fn) names a registered function (TESSERA_REMOTE), options are
// chained, Remote(args...) submits it and returns an ObjectRef at once.
//
//   tessera::ObjectRef<int> sum = tessera::Task(Add).Resources("CPU=1").Remote(1, 2);
//   absl::StatusOr<int> value = tessera::Get(sum);
//
// An argument is a value convertible to the parameter's type, or an ObjectRef to one: the owner
// waits for that object (without holding a worker) and the task receives its value.
// Errors found before anything is sent (unregistered function, unparsable resources or selector,
// Init not called) come back as a ref whose Get fails at once with a one-line message.
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

#include "tessera/object_ref.h"
#include "tessera/remote_function.h"
#include "tessera/serialization.h"

namespace tessera {

// Folders a task's or actor's worker runs with (Ray's runtime_env working_dir and py_modules):
// each a packed DirectoryArchive under its content id (WorkingDirContentId, "env-<sha256>"),
// unpacked once per node by that node's agent and reused by every worker that names it. Made
// once (Python: per remote function or actor class and runtime_env) and shared, never copied per
// call.
struct RuntimeEnvFiles {
  struct Package {
    std::string id;       // the archive's content id
    std::string archive;  // serialized tessera.v1.DirectoryArchive
    // What goes on the worker's PYTHONPATH: the unpacked folder ("") or an entry in it (a zip).
    std::string entry;
  };
  std::optional<Package> working_dir;  // the worker's cwd, and first on its PYTHONPATH
  std::vector<Package> py_modules;     // then these, in order
  // The ids in order ("wd=<id>;py=<id>/<entry>;..."): part of the lease shape, so a worker
  // started with these folders serves only tasks that ask for the same.
  std::string key;
};

struct TaskOptions {
  // What one run of the task holds ("CPU=1,GPU=1", parsed like `tessera run --resources`).
  std::string resources = "CPU=1";
  // Label selectors: the first is the request's, the rest are fallbacks tried in order.
  std::vector<std::string> label_selectors;
  // Runs again on a new worker when its worker dies, up to this many times (exceptions are not
  // retried: they are the task's answer).
  int max_retries = 3;
  // Run inside this placement group's (or reserved slice's) bundle; "" none. bundle_index -1:
  // any bundle of the group.
  std::string placement_group;
  int bundle_index = -1;
  // How many objects the task returns (Ray's num_returns; Python tasks): 1, the one result; N > 1,
  // the N values of the sequence it returns, each its own object; 0, none (the task still runs).
  int num_returns = 1;
  // A streaming generator (Ray's num_returns="streaming"; Python tasks): each value it yields
  // becomes an object as soon as it is made (internal::GeneratorNext); its ref is the task's
  // outcome. num_returns is then 1.
  bool streaming = false;
  // Whether the task's own submissions default to its placement group (Ray's
  // placement_group_capture_child_tasks): the worker is told (TaskSpec.capture_child_tasks).
  bool capture_child_tasks = false;
  // Run on this node (its id, as `tessera list nodes` shows it); "" anywhere. Hard (the
  // default): only there, and an error naming the node when it is dead, unknown or can never
  // fit the task. Soft: there when it can take the task now, else wherever else fits.
  std::string node_affinity;
  bool node_affinity_soft = false;
  // Retry the task's own exceptions too (within max_retries): any, when retry_exception_types
  // is empty, else only those whose type name is listed (C++: as the error names it, e.g.
  // "std::runtime_error").
  bool retry_exceptions = false;
  std::vector<std::string> retry_exception_types;
  // Ray's "SPREAD": each worker leased for this kind of task goes to the least used node that
  // fits, in turn, instead of packing onto the first.
  bool spread = false;
  // Added to the environment of the task's worker process (Ray's runtime_env env_vars); part of
  // the worker's shape. Tessera's own worker variables cannot be overridden.
  std::map<std::string, std::string> env;
  // The folders its worker runs with (nullptr none); part of the worker's shape.
  std::shared_ptr<const RuntimeEnvFiles> runtime_env_files;
};

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
class TaskCaller {
 public:
  explicit TaskCaller(R (*fn)(Params...)) : fn_(fn) {}

  TaskCaller& Resources(std::string resources) {
    options_.resources = std::move(resources);
    return *this;
  }
  // The first call sets the selector, each further call adds a fallback.
  TaskCaller& LabelSelector(std::string selector) {
    options_.label_selectors.push_back(std::move(selector));
    return *this;
  }
  TaskCaller& MaxRetries(int retries) {
    options_.max_retries = retries;
    return *this;
  }
  TaskCaller& PlacementGroup(std::string group, int bundle_index = -1) {
    options_.placement_group = std::move(group);
    options_.bundle_index = bundle_index;
    return *this;
  }
  // Hard (soft false): only on `node_id`; soft: prefer it, else anywhere. See TaskOptions.
  TaskCaller& NodeAffinity(std::string node_id, bool soft = false) {
    options_.node_affinity = std::move(node_id);
    options_.node_affinity_soft = soft;
    return *this;
  }
  TaskCaller& Options(TaskOptions options) {
    options_ = std::move(options);
    return *this;
  }

  template <typename... Args>
  ObjectRef<R> Remote(Args&&... args) const {
    static_assert(sizeof...(Args) == sizeof...(Params),
                  "Remote takes exactly the function's parameters");
    std::vector<internal::TaskArgument> arguments;
    arguments.reserve(sizeof...(Args));
    (arguments.push_back(internal::MakeArgument<Params>(std::forward<Args>(args))), ...);
    return ObjectRef<R>(internal::SubmitTask(reinterpret_cast<internal::AnyFunction>(fn_),
                                             options_, std::move(arguments)));
  }

 private:
  R (*fn_)(Params...);
  TaskOptions options_;
};

template <typename R, typename... Params>
TaskCaller<R, Params...> Task(R (*fn)(Params...)) {
  return TaskCaller<R, Params...>(fn);
}

}  // namespace tessera
