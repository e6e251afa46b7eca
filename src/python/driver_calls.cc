#include "python/driver_calls.h"

#include <pybind11/stl.h>

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "api/foreign_calls.h"
#include "python/core_error.h"
#include "python/label_selectors.h"
#include "python/object_ref.h"
#include "tessera/tessera.h"

namespace tessera::python {
namespace {

// How long a wait runs without the GIL before it checks for signals (Ctrl-C).
constexpr absl::Duration kSignalSlice = absl::Milliseconds(100);

absl::Duration TimeoutFrom(const py::object& seconds) {
  if (seconds.is_none()) return absl::InfiniteDuration();
  const double value = seconds.cast<double>();
  if (value < 0) throw py::value_error(absl::StrCat("timeout ", value, " is negative"));
  return absl::Seconds(value);
}

// Raises KeyboardInterrupt (or whatever a signal handler raised) between wait slices.
void CheckSignals() {
  if (PyErr_CheckSignals() != 0) throw py::error_already_set();
}

template <typename T>
T Get(const py::dict& options, const char* key, T fallback) {
  if (!options.contains(key)) return fallback;
  py::object value = options[key];
  if (value.is_none()) return fallback;
  return value.cast<T>();
}

std::vector<LabelSelector> LabelSelectors(const py::dict& options) {
  if (!options.contains("label_selectors")) return {};
  return SelectorsFrom(options["label_selectors"], "label_selector");
}

// {name: amount} (options.py's _resource_amounts) as the core's ResourceSet; ValueError naming
// the resource. `fallback` when the dict has no "resources".
ResourceSet ResourcesFrom(const py::dict& options, ResourceSet fallback) {
  if (!options.contains("resources") || options["resources"].is_none()) return fallback;
  auto resources =
      ResourceSet::FromAmounts(options["resources"].cast<std::map<std::string, double>>());
  if (!resources.ok()) throw py::value_error(std::string(resources.status().message()));
  return *std::move(resources);
}

// The keys options.py's _placement writes (at most one kind is set) as the one strategy.
SchedulingStrategy StrategyFrom(const py::dict& options) {
  const std::string group = Get<std::string>(options, "placement_group", "");
  if (!group.empty()) {
    return PlacementGroupScheduling{PlacementGroupName(group),
                                    Get<int>(options, "bundle_index", -1),
                                    Get<bool>(options, "capture_child_tasks", false)};
  }
  const std::string node = Get<std::string>(options, "node_affinity", "");
  if (!node.empty()) {
    return NodeAffinityScheduling{NodeId(node), Get<bool>(options, "node_affinity_soft", false)};
  }
  if (Get<bool>(options, "spread", false)) return SpreadScheduling{};
  return DefaultScheduling{};
}

TaskOptions TaskOptionsFrom(const py::dict& options) {
  TaskOptions out;
  out.resources = ResourcesFrom(options, out.resources);
  out.label_selectors = LabelSelectors(options);
  out.strategy = StrategyFrom(options);
  out.max_retries = Get<int>(options, "max_retries", out.max_retries);
  out.num_returns = Get<int>(options, "num_returns", out.num_returns);
  out.streaming = Get<bool>(options, "streaming", false);
  out.retry_exceptions = Get<bool>(options, "retry_exceptions", false);
  out.retry_exception_types =
      Get<std::vector<std::string>>(options, "retry_exception_type_names", {});
  out.env = Get<std::map<std::string, std::string>>(options, "env", {});
  out.runtime_env_files =
      Get<std::shared_ptr<RuntimeEnvFiles>>(options, "runtime_env_files", nullptr);
  return out;
}

ActorOptions ActorOptionsFrom(const py::dict& options) {
  ActorOptions out;
  out.resources = ResourcesFrom(options, out.resources);
  out.label_selectors = LabelSelectors(options);
  out.strategy = StrategyFrom(options);
  out.name = Get<std::string>(options, "name", "");
  out.detached = Get<bool>(options, "detached", false);
  out.max_restarts = Get<int>(options, "max_restarts", 0);
  out.max_task_retries = Get<int>(options, "max_task_retries", 0);
  out.max_concurrency = Get<int>(options, "max_concurrency", 1);
  out.concurrency_groups = Get<std::map<std::string, int>>(options, "concurrency_groups", {});
  out.name_space = Get<std::string>(options, "namespace", "");
  out.handle_metadata = Get<std::string>(options, "handle_metadata", "");
  out.env = Get<std::map<std::string, std::string>>(options, "env", {});
  out.runtime_env_files =
      Get<std::shared_ptr<RuntimeEnvFiles>>(options, "runtime_env_files", nullptr);
  return out;
}

// A call's options dict (python/tessera/actor.py checks it; its num_returns is checked there).
internal::ActorCallOptions ActorCallOptionsFrom(const py::dict& options) {
  internal::ActorCallOptions out;
  out.max_task_retries = Get<int>(options, "max_task_retries", -1);
  out.retry_exceptions = Get<bool>(options, "retry_exceptions", false);
  out.retry_exception_types = Get<std::vector<std::string>>(options, "retry_exception_types", {});
  out.concurrency_group = Get<std::string>(options, "concurrency_group", "");
  out.num_returns = Get<int>(options, "num_returns", 1);
  out.streaming = Get<bool>(options, "streaming", false);
  return out;
}

// Task arguments: bytes are values, ObjectRefs are resolved to their values by the runtime.
std::vector<internal::TaskArgument> ArgumentsFrom(const py::list& args) {
  std::vector<internal::TaskArgument> out;
  out.reserve(args.size());
  for (py::handle arg : args) {
    if (py::isinstance<py::bytes>(arg)) {
      out.push_back(internal::TaskArgument{arg.cast<std::string>(), std::nullopt});
    } else {
      out.push_back(internal::TaskArgument{std::string(), UnwrapRef(arg)});
    }
  }
  return out;
}

// What a submitted task or actor call gives Python: its ObjectRef, or the list of its
// `num_returns` ObjectRefs when that is more than 1 (`ref` first, then `more`). Its early error
// is raised instead.
py::object SubmittedRefs(ObjectRefBase ref, std::vector<ObjectRefBase> more, int num_returns) {
  if (!ref.early_error().ok()) ThrowStatus(ref.early_error());
  if (num_returns <= 1) return WrapRef(std::move(ref));
  py::list refs;
  refs.append(WrapRef(std::move(ref)));
  for (ObjectRefBase& other : more) refs.append(WrapRef(std::move(other)));
  return py::object(std::move(refs));
}

internal::FunctionDescriptor PythonFunction(const std::string& name, py::handle code) {
  internal::FunctionDescriptor function;
  function.name = name;
  function.language = v1::LANGUAGE_PYTHON;
  function.code = UnwrapRef(code);
  return function;
}

InitOptions InitOptionsFrom(const py::dict& options) {
  InitOptions out;
  out.state_dir = Get<std::string>(options, "state_dir", "");
  out.head_address = Get<std::string>(options, "head_address", "");
  out.token_file = Get<std::string>(options, "token_file", "");
  out.agent_address = Get<std::string>(options, "agent_address", "");
  out.bind_address = Get<std::string>(options, "bind_address", out.bind_address);
  out.worker_idle_timeout = absl::Seconds(Get<double>(
      options, "worker_idle_timeout_s", absl::ToDoubleSeconds(out.worker_idle_timeout)));
  out.max_workers_per_kind = Get<int>(options, "max_workers_per_kind", out.max_workers_per_kind);
  out.forward_worker_output = Get<bool>(options, "forward_worker_output", true);
  out.prefix_worker_output = Get<bool>(options, "prefix_worker_output", false);
  out.worker_command = Get<std::vector<std::string>>(options, "worker_command", {});
  out.worker_env = Get<std::map<std::string, std::string>>(options, "worker_env", {});
  out.record_task_events = Get<bool>(options, "record_task_events", true);
  return out;
}

// The first ref (in order) among those ready that is known to have failed, if any.
std::optional<absl::Status> FirstKnownFailure(const std::vector<ObjectRefBase>& refs,
                                              const std::vector<bool>& ready) {
  for (size_t i = 0; i < refs.size(); ++i) {
    if (!ready[i]) continue;
    if (absl::Status failed = internal::KnownFailure(refs[i]); !failed.ok()) return failed;
  }
  return std::nullopt;
}

// ready[i] per ref once `num` are ready or `timeout` passed, in signal-checked slices; with
// `stop_at_failure` also once one of them failed.
std::vector<bool> WaitInSlices(const std::vector<ObjectRefBase>& refs, int num,
                               absl::Duration timeout, bool stop_at_failure = false) {
  std::vector<const ObjectRefBase*> pointers;
  pointers.reserve(refs.size());
  for (const ObjectRefBase& ref : refs) pointers.push_back(&ref);
  const absl::Time deadline =
      timeout == absl::InfiniteDuration() ? absl::InfiniteFuture() : absl::Now() + timeout;
  while (true) {
    const absl::Duration left = deadline - absl::Now();
    const absl::Duration slice = std::max(absl::ZeroDuration(), std::min(left, kSignalSlice));
    std::vector<bool> ready;
    {
      py::gil_scoped_release release;
      ready = internal::WaitReady(pointers, num, slice, stop_at_failure);
    }
    const int count = static_cast<int>(std::count(ready.begin(), ready.end(), true));
    if (count >= num || absl::Now() >= deadline) return ready;
    if (stop_at_failure && FirstKnownFailure(refs, ready).has_value()) return ready;
    CheckSignals();
  }
}

py::list GetValues(const py::list& ref_list, const py::object& timeout_s) {
  CheckNotForked();
  std::vector<ObjectRefBase> refs;
  refs.reserve(ref_list.size());
  for (py::handle item : ref_list) refs.push_back(UnwrapRef(item));
  const absl::Duration timeout = TimeoutFrom(timeout_s);
  const absl::Time deadline =
      timeout == absl::InfiniteDuration() ? absl::InfiniteFuture() : absl::Now() + timeout;
  // Waited for together (in slices, so Ctrl-C lands), then read in order: the first failed
  // ref raises, at once when it fails while others are still pending (as Ray's get does).
  const std::vector<bool> ready =
      WaitInSlices(refs, static_cast<int>(refs.size()), timeout, /*stop_at_failure=*/true);
  if (std::optional<absl::Status> failed = FirstKnownFailure(refs, ready); failed.has_value()) {
    ThrowStatus(*failed);
  }
  if (std::count(ready.begin(), ready.end(), false) > 0) {
    ThrowStatus(absl::DeadlineExceededError("Get timed out: some object(s) not ready."));
  }
  py::list values;
  for (const ObjectRefBase& ref : refs) {
    absl::StatusOr<internal::SerializedValue> value;
    {
      py::gil_scoped_release release;
      const absl::Duration left =
          deadline == absl::InfiniteFuture() ? absl::InfiniteDuration() : deadline - absl::Now();
      value = internal::GetValue(ref, std::max(left, absl::ZeroDuration()));
    }
    if (!value.ok()) ThrowStatus(value.status());
    values.append(WrapBuffer(*std::move(value)));
  }
  return values;
}

py::dict RuntimeContextDict() {
  const RuntimeContext& context = GetRuntimeContext();
  py::dict out;
  out["in_worker"] = context.in_worker;
  out["node_id"] = context.node_id;
  out["worker_id"] = context.worker_id;
  out["accelerator_ids"] = context.accelerator_ids;
  out["isolation_env"] = context.isolation_env;
  out["node_labels"] = context.node_labels;
  out["job_id"] = internal::DriverId();
  return out;
}

// init, shutdown and what a session is.
void BindSessionCalls(py::module_& m) {
  m.def(
      "init",
      [](const py::dict& options) {
        CheckNotForked();
        InitOptions init = InitOptionsFrom(options);
        absl::Status status;
        {
          py::gil_scoped_release release;
          status = Init(std::move(init));
        }
        if (!status.ok()) ThrowStatus(status);
      },
      py::arg("options"),
      "Connects this process to a cluster as a driver (keys: state_dir, head_address, "
      "token_file, agent_address, bind_address, worker_idle_timeout_s, max_workers_per_kind, "
      "forward_worker_output, worker_command, worker_env).");
  m.def("shutdown", [] {
    if (Forked()) return;
    py::gil_scoped_release release;
    Shutdown();
  });
  m.def("is_worker", [] { return IsWorkerProcess(); });
  m.def("job_id", [] { return internal::JobId(); });
  m.def(
      "timeline_json",
      [] {
        absl::StatusOr<std::string> json;
        {
          py::gil_scoped_release release;
          json = internal::TimelineJson();
        }
        if (!json.ok()) ThrowStatus(json.status());
        return *json;
      },
      "This job's timeline in the Chrome trace format, as JSON text.");
}

// Objects: put, get, wait, and the refs of streaming generators.
void BindObjectCalls(py::module_& m) {
  m.def(
      "put",
      [](const py::list& parts, const py::list& contained) {
        CheckNotForked();
        const PartViews views(parts);  // held while the copy runs without the GIL
        const std::vector<ObjectRefData> refs = RefDataOf(contained);
        ObjectRefBase ref;
        {
          py::gil_scoped_release release;
          ref = internal::PutParts(views.views, refs);
        }
        if (!ref.early_error().ok()) ThrowStatus(ref.early_error());
        return WrapRef(std::move(ref));
      },
      py::arg("parts"), py::arg("contained"),
      "Stores the value made of `parts` (contiguous buffers, concatenated); `contained` are the "
      "ObjectRefs written inside it.");
  m.def(
      "generator_next",
      [](py::handle generator, int64_t index, const py::object& timeout_s) -> py::object {
        CheckNotForked();
        const ObjectRefBase& ref = UnwrapRef(generator);
        const absl::Duration timeout = TimeoutFrom(timeout_s);
        const absl::Time deadline =
            timeout == absl::InfiniteDuration() ? absl::InfiniteFuture() : absl::Now() + timeout;
        while (true) {
          // In slices without the GIL, so Ctrl-C lands between them.
          const absl::Duration slice =
              std::max(absl::ZeroDuration(), std::min(deadline - absl::Now(), kSignalSlice));
          absl::StatusOr<std::optional<ObjectRefBase>> next;
          {
            py::gil_scoped_release release;
            next = internal::GeneratorNext(ref, index, slice);
          }
          if (next.ok()) {
            if (!next->has_value()) return py::none();
            return WrapRef(**std::move(next));
          }
          if (next.status().code() != absl::StatusCode::kDeadlineExceeded ||
              absl::Now() >= deadline) {
            ThrowStatus(next.status());
          }
          CheckSignals();
        }
      },
      py::arg("generator"), py::arg("index"), py::arg("timeout_s") = py::none(),
      "The ObjectRef of value `index` of the streaming generator task whose ref is "
      "`generator`, once it was yielded; None when the task ended before it.");
  m.def(
      "generator_release",
      [](py::handle generator, int64_t next_index) {
        if (Forked()) return;
        const ObjectRefBase& ref = UnwrapRef(generator);
        py::gil_scoped_release release;
        internal::ReleaseGenerator(ref, next_index);
      },
      py::arg("generator"), py::arg("next_index"),
      "The caller is done with the generator before value `next_index`: the values it did not "
      "take are let go.");
  m.def(
      "actor_lifetime",
      [](const std::string& actor_id) {
        CheckNotForked();
        return WrapRef(internal::ActorLifetimeRef(ActorId(actor_id)));
      },
      py::arg("actor_id"),
      "An object standing for the handles of an actor this process made: the actor ends once it "
      "is freed (every handle, here and in other processes, gone).");
  m.def(
      "owned_object_count", [] { return internal::OwnedObjectCount(); },
      "The objects this process owns that are still held (by it or a borrower): tests and "
      "debugging.");
  m.def("get", &GetValues, py::arg("refs"), py::arg("timeout_s") = py::none(),
        "The values (Buffers) of `refs`, in order; CoreError for the first that failed or on "
        "timeout (GET_TIMEOUT).");
  m.def(
      "wait",
      [](const py::list& ref_list, int num, const py::object& timeout_s) {
        CheckNotForked();
        std::vector<ObjectRefBase> refs;
        for (py::handle item : ref_list) refs.push_back(UnwrapRef(item));
        return WaitInSlices(refs, num, TimeoutFrom(timeout_s));
      },
      py::arg("refs"), py::arg("num"), py::arg("timeout_s") = py::none(),
      "ready[i] for each ref once `num` are ready (done, with a value or an error) or the "
      "timeout passed.");
}

// Tasks: their options, submission and cancellation.
void BindTaskCalls(py::module_& m) {
  // A remote function's options read once (python/tessera/remote_function.py keeps it while its
  // options dict is the same object), not key by key on every call.
  py::class_<TaskOptions>(m, "TaskOptions")
      .def(py::init(&TaskOptionsFrom), py::arg("options"),
           "The core's form of a remote function's options dict (what submit_task reads).");
  m.def(
      "submit_task",
      [](const std::string& name, py::handle code, const py::list& args, const TaskOptions& task) {
        CheckNotForked();
        internal::FunctionDescriptor function = PythonFunction(name, code);
        std::vector<internal::TaskArgument> arguments = ArgumentsFrom(args);
        ObjectRefBase ref;
        std::vector<ObjectRefBase> more;
        {
          py::gil_scoped_release release;
          ref = internal::SubmitTaskByName(function, task, std::move(arguments), &more);
        }
        return SubmittedRefs(std::move(ref), std::move(more), task.num_returns);
      },
      py::arg("name"), py::arg("code"), py::arg("args"), py::arg("options"),
      "Submits the Python function stored in `code` (display name `name`) with `args` (bytes "
      "values or ObjectRefs) and `options` (a TaskOptions made from the options dict); the "
      "ObjectRef of its result, or the list of its num_returns ObjectRefs when that is more "
      "than 1.");
  m.def(
      "cancel",
      [](py::handle ref_object, bool force, bool recursive) {
        CheckNotForked();
        ObjectRefBase ref = UnwrapRef(ref_object);
        absl::Status status;
        {
          py::gil_scoped_release release;
          status = internal::CancelTask(ref, force, recursive);
        }
        if (!status.ok()) ThrowStatus(status);
      },
      py::arg("ref"), py::arg("force"), py::arg("recursive"),
      "Cancels the task whose result is `ref` (see TaskSubmitter::Cancel).");
}

// An actor's options as the core reads them: made from actor.py's options dict, or by a gang's
// controller for each rank (run_actor_gang hands them to its start as they are, so they are never
// turned back into a dict to be read again).
void BindActorOptions(py::module_& m) {
  py::class_<ActorOptions>(m, "ActorOptions")
      .def(py::init(&ActorOptionsFrom), py::arg("options"),
           "The core's form of an actor's options dict (what create_actor reads).")
      .def_property_readonly(
          "env", [](const ActorOptions& options) { return options.env; },
          "What the actor's worker adds to its environment (a gang rank's RANK, WORLD_SIZE...).");
}

// Actors: creation, calls, kills, lookup by name, and the owner address their handles name.
void BindActorCalls(py::module_& m) {
  m.def(
      "create_actor",
      [](const std::string& name, py::handle code, const py::list& args,
         const ActorOptions& actor) {
        CheckNotForked();
        internal::FunctionDescriptor function = PythonFunction(name, code);
        std::vector<internal::TaskArgument> arguments = ArgumentsFrom(args);
        absl::StatusOr<ActorId> id;
        {
          py::gil_scoped_release release;
          id = internal::CreateActorByName(
              function, actor, std::move(arguments),
              absl::StrCat(std::string(internal::kPythonClassPrefix), name));
        }
        if (!id.ok()) ThrowStatus(id.status());
        return id->value();
      },
      py::arg("name"), py::arg("code"), py::arg("args"), py::arg("options"),
      "Creates an actor of the Python class stored in `code` with `options` (an ActorOptions); "
      "its id (hex).");
  m.def(
      "submit_actor_task",
      [](const std::string& actor_id, const std::string& method, const py::list& args,
         const py::object& options) {
        CheckNotForked();
        std::vector<internal::TaskArgument> arguments = ArgumentsFrom(args);
        const internal::ActorCallOptions call =
            options.is_none() ? internal::ActorCallOptions{}
                              : ActorCallOptionsFrom(options.cast<py::dict>());
        ObjectRefBase ref;
        std::vector<ObjectRefBase> more;
        {
          py::gil_scoped_release release;
          ref = internal::SubmitActorTask(ActorId(actor_id), method, std::move(arguments), call,
                                          &more);
        }
        return SubmittedRefs(std::move(ref), std::move(more), call.num_returns);
      },
      py::arg("actor_id"), py::arg("method"), py::arg("args"), py::arg("options") = py::none(),
      "Calls `method` of the actor; `options` (may be None): max_task_retries (-1: the "
      "actor's), retry_exceptions, retry_exception_types, concurrency_group, num_returns. The "
      "ObjectRef of its result, or the list of its num_returns ObjectRefs when that is more "
      "than 1.");
  m.def(
      "kill_actor",
      [](const std::string& actor_id) {
        CheckNotForked();
        absl::Status status;
        {
          py::gil_scoped_release release;
          status = internal::KillActor(ActorId(actor_id));
        }
        if (!status.ok()) ThrowStatus(status);
      },
      py::arg("actor_id"));
  m.def(
      "attach_actor",
      [](const std::string& actor_id, const std::string& owner_address) {
        CheckNotForked();
        absl::Status status;
        {
          py::gil_scoped_release release;
          status = internal::AttachActor(ActorId(actor_id), owner_address);
        }
        if (!status.ok()) ThrowStatus(status);
      },
      py::arg("actor_id"), py::arg("owner_address"),
      "Makes calls to an actor owned by another process possible here (a handle passed in).");
  m.def(
      "owner_address",
      [] {
        CheckNotForked();
        py::gil_scoped_release release;
        return internal::OwnerAddressOfThisProcess();
      },
      "The address this process's handles and refs name as their owner.");
  m.def(
      "get_actor",
      [](const std::string& name, const std::string& name_space) {
        CheckNotForked();
        absl::StatusOr<ActorId> id;
        std::string metadata;
        {
          py::gil_scoped_release release;
          id = internal::FindNamedActor(name, "", name_space);
          if (id.ok()) metadata = internal::ActorHandleMetadata(*id);
        }
        if (!id.ok()) ThrowStatus(id.status());
        return py::make_tuple(id->value(), py::bytes(metadata));
      },
      py::arg("name"), py::arg("namespace") = "",
      "The live actor named `name` in `namespace` (this driver's or another's): (its id, the "
      "handle metadata its creator registered, b\"\" none).");
}

// The runtime context and this process's counters.
void BindContextAndStatsCalls(py::module_& m) {
  m.def("runtime_context", &RuntimeContextDict,
        "This process's node, worker, job and accelerator ids (in a driver: in_worker False).");
  m.def("task_stats", [] {
    const TaskStats s = GetTaskStats();
    py::dict out;
    out["submitted"] = s.submitted;
    out["succeeded"] = s.succeeded;
    out["failed"] = s.failed;
    out["retries"] = s.retries;
    out["duplicate_results"] = s.duplicate_results;
    out["workers_started"] = s.workers_started;
    out["workers_died"] = s.workers_died;
    out["leases_requested"] = s.leases_requested;
    return out;
  });
  m.def(
      "object_store_stats",
      [] {
        absl::StatusOr<ObjectStoreStats> stats;
        {
          py::gil_scoped_release release;
          stats = internal::LocalObjectStoreStats();
        }
        if (!stats.ok()) ThrowStatus(stats.status());
        py::dict out;
        out["capacity_bytes"] = stats->capacity_bytes;
        out["allocated_bytes"] = stats->allocated_bytes;
        out["pinned_bytes"] = stats->pinned_bytes;
        out["num_objects"] = stats->num_objects;
        out["num_evictable"] = stats->num_evictable;
        out["evictions"] = stats->evictions;
        out["num_spilled"] = stats->num_spilled;
        out["spilled_bytes"] = stats->spilled_bytes;
        out["spills"] = stats->spills;
        out["restores"] = stats->restores;
        return out;
      },
      "The counters of this driver's node's object store (objects, bytes, spills).");
  m.def("object_path_stats", [] {
    const internal::ObjectPathStats s = internal::GetObjectPathStats();
    py::dict out;
    out["store_puts"] = s.store_puts;
    out["zero_copy_reads"] = s.zero_copy_reads;
    out["pulls"] = s.pulls;
    out["inline_reads"] = s.inline_reads;
    out["store_deletes"] = s.store_deletes;
    return out;
  });
}

}  // namespace

void BindDriverCalls(py::module_& m) {
  BindSessionCalls(m);
  BindObjectCalls(m);
  BindTaskCalls(m);
  BindActorOptions(m);
  BindActorCalls(m);
  BindContextAndStatsCalls(m);
}

}  // namespace tessera::python
