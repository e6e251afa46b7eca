#include "python/gang_calls.h"

#include <pybind11/stl.h>

#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "labels/label_selector.h"
#include "python/core_error.h"
#include "python/label_selectors.h"
#include "python/object_ref.h"
#include "python/vocabulary_values.h"
#include "rpc/state_names.h"
#include "tessera/actor.h"
#include "tessera/gang.h"
#include "tessera/tessera.h"
#include "vocabulary/slice_shape.h"

namespace tessera::python {
namespace {

const std::set<std::string>& GangOptionKeys() {
  static const std::set<std::string> keys = {
      "name",       "accelerator_type", "topology",
      "num_slices", "workers",          "resources_per_worker",
      "strategy",   "label_selectors",  "max_restarts",
      "torch_env",  "start_timeout_s",  "stop_grace_s",
      "env"};
  return keys;
}

template <typename T>
T Get(const py::dict& options, const char* key, T fallback) {
  if (!options.contains(key)) return fallback;
  py::object value = options[key];
  if (value.is_none()) return fallback;
  try {
    return value.cast<T>();
  } catch (const py::cast_error&) {
    throw py::type_error(absl::StrCat("gang option '", key, "' has the wrong type (",
                                      std::string(py::str(value.get_type().attr("__name__"))),
                                      ")"));
  }
}

GangOptions GangOptionsFrom(const py::dict& options) {
  for (const auto& [key, value] : options) {
    const std::string name = py::str(key);
    if (!GangOptionKeys().contains(name)) {
      throw py::value_error(absl::StrCat("unknown gang option '", name,
                                         "' (known: ", absl::StrJoin(GangOptionKeys(), ", "), ")"));
    }
  }
  GangOptions out;
  out.name = Get<std::string>(options, "name", "");
  const std::string accelerator = Get<std::string>(options, "accelerator_type", "");
  if (!accelerator.empty()) {
    // The one parse of the slice's shape; a bad one is CoreError INVALID, as the C++ API's was.
    absl::StatusOr<SliceShape> shape =
        ParseSliceShape(accelerator, Get<std::string>(options, "topology", ""), std::nullopt);
    if (!shape.ok()) {
      ThrowStatus(absl::InvalidArgumentError(
          absl::StrCat("gang: accelerator_type/topology: ", shape.status().message())));
    }
    out.slice = *std::move(shape);
  }
  out.num_slices = Get<int>(options, "num_slices", out.num_slices);
  out.workers = Get<int>(options, "workers", 0);
  // Ray Train's values (_config.py's gang_options), each its type once, here.
  if (options.contains("resources_per_worker") && !options["resources_per_worker"].is_none()) {
    out.resources_per_worker =
        ResourceSetFrom(options["resources_per_worker"], "resources_per_worker");
  }
  if (options.contains("strategy") && !options["strategy"].is_none()) {
    out.strategy = PlacementStrategyFrom(options["strategy"], "strategy");
  }
  if (options.contains("label_selectors")) {
    out.label_selectors = SelectorsFrom(options["label_selectors"], "label_selectors");
  }
  out.max_restarts = Get<int>(options, "max_restarts", 0);
  out.torch_env = Get<bool>(options, "torch_env", true);
  const double start_timeout_s =
      Get<double>(options, "start_timeout_s", absl::ToDoubleSeconds(out.start_timeout));
  if (start_timeout_s <= 0) {
    throw py::value_error(absl::StrCat("start_timeout_s ", start_timeout_s, " is not positive"));
  }
  out.start_timeout = absl::Seconds(start_timeout_s);
  const double stop_grace_s =
      Get<double>(options, "stop_grace_s", absl::ToDoubleSeconds(out.stop_grace));
  if (stop_grace_s < 0) {
    throw py::value_error(absl::StrCat("stop_grace_s ", stop_grace_s, " is negative"));
  }
  out.stop_grace = absl::Seconds(stop_grace_s);
  out.env = Get<std::map<std::string, std::string>>(options, "env", {});
  return out;
}

py::dict GangStatusDict(const GangStatus& s) {
  py::list ranks;
  for (const GangRank& r : s.ranks) {
    py::dict rank;
    rank["rank"] = r.rank;
    rank["local_rank"] = r.local_rank;
    rank["node_rank"] = r.node_rank;
    rank["node_id"] = r.node_id;
    rank["host"] = r.host;
    rank["worker_id"] = r.worker_id;
    rank["pid"] = r.pid;
    rank["state"] = std::string(rpc::GangRankStateName(r.state));
    rank["exit_reason"] = r.exit_reason;
    ranks.append(rank);
  }
  py::dict out;
  out["id"] = s.id.value();
  out["name"] = s.name;
  out["state"] = std::string(rpc::GangStateName(s.state));
  out["message"] = s.message;
  out["restart_count"] = s.restart_count;
  out["membership_changes"] = s.membership_changes;
  out["world_size"] = s.world_size;
  out["exit_code"] = s.exit_code;
  out["log_dir"] = s.log_dir;
  out["ranks"] = ranks;
  return out;
}

// "TypeName: message" of the Python exception being handled (one line for a failed start).
std::string ExceptionText(const py::error_already_set& e) {
  std::string type = "Exception";
  if (e.type()) type = py::str(e.type().attr("__name__"));
  std::string message = e.value() ? std::string(py::str(e.value())) : std::string();
  return message.empty() ? type : absl::StrCat(type, ": ", message);
}

// Runs with the GIL held: the Python start's (actor id, ObjectRef), copied into C++ values. The
// rank's options go to Python as they are (a _core.ActorOptions, which create_actor takes), so
// nothing is turned into Ray's values and parsed back.
absl::StatusOr<std::pair<std::string, ObjectRefBase>> CallStart(py::handle start,
                                                                const ActorOptions& options) {
  try {
    py::object result =
        py::reinterpret_borrow<py::object>(start)(py::cast(options, py::return_value_policy::copy));
    if (!py::isinstance<py::tuple>(result) || py::len(result) != 2) {
      return absl::InvalidArgumentError(
          "run_actor_gang: start must return (actor id hex, ObjectRef of the rank's call)");
    }
    py::tuple pair = result.cast<py::tuple>();
    return std::make_pair(pair[0].cast<std::string>(), UnwrapRef(pair[1]));
  } catch (py::error_already_set& e) {
    return absl::FailedPreconditionError(ExceptionText(e));
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("run_actor_gang: start: ", e.what()));
  }
}

py::dict RunActorGangFromPython(const py::dict& options, const py::function& start) {
  CheckNotForked();
  GangOptions gang = GangOptionsFrom(options);
  // `start` outlives the run (this frame holds it); the controller's threads borrow it and call
  // it with the GIL. The member's wait and kill touch only C++ values.
  py::handle borrowed = start;
  internal::StartActorGangMember start_member =
      [borrowed](const ActorOptions& actor_options) -> absl::StatusOr<internal::ActorGangMember> {
    absl::StatusOr<std::pair<std::string, ObjectRefBase>> started;
    {
      py::gil_scoped_acquire gil;
      started = CallStart(borrowed, actor_options);
    }
    if (!started.ok()) return started.status();
    internal::ActorGangMember member;
    member.wait = [ref = started->second] {
      return internal::GetValue(ref, absl::InfiniteDuration()).status();
    };
    member.kill = [actor_id = ActorId(started->first)] { return internal::KillActor(actor_id); };
    return member;
  };
  absl::StatusOr<GangStatus> status;
  {
    py::gil_scoped_release release;
    status = internal::RunActorGang(gang, std::move(start_member));
  }
  if (!status.ok()) ThrowStatus(status.status());
  return GangStatusDict(*status);
}

}  // namespace

void BindGangCalls(py::module_& m) {
  m.def("run_actor_gang", &RunActorGangFromPython, py::arg("options"), py::arg("start"),
        "Runs an actor gang to its end (blocks, without the GIL). options: name; "
        "accelerator_type+topology+num_slices, or workers+resources_per_worker+strategy; "
        "label_selectors, max_restarts, torch_env, start_timeout_s, stop_grace_s, env. For "
        "each rank of each attempt the controller calls start(actor_options) -> (actor id "
        "hex, ObjectRef of the rank's call); actor_options is the ActorOptions create_actor "
        "takes, with the rank's bundle and environment (its env). Returns the gang's status "
        "dict (state, message, restart_count, world_size, ranks).");
}

}  // namespace tessera::python
