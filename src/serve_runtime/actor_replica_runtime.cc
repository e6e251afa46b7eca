#include "serve_runtime/actor_replica_runtime.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "api/error_payloads.h"
#include "api/foreign_calls.h"
#include "base/ignore_status.h"
#include "base/status_macros.h"
#include "base/string_util.h"
#include "hardware/node_label_keys.h"
#include "serve_runtime/python_call_codec.h"
#include "wire/proto_convert.h"

namespace tessera::serve {
namespace {

constexpr char kHttpMethod[] = "handle_http";
// What a handle_http stream is made of: one plain call for the first item (the whole of most
// responses), then, when its head says more follows, a stream of the rest.
constexpr char kHttpFirstMethod[] = "handle_http_first";
constexpr char kHttpRestMethod[] = "handle_http_rest";
constexpr char kCancelMethod[] = "cancel_request";
constexpr char kProxyReadyMethod[] = "ready";
// A cancel_request call is best effort: it is not waited for past this.
constexpr absl::Duration kCancelCallTimeout = absl::Seconds(10);

// What GetActor matches a found actor's class against ("python:ReplicaActor").
std::string PythonTypeName(std::string_view class_name) {
  return absl::StrCat(ToAbsl(internal::kPythonClassPrefix), ToAbsl(class_name));
}

// The name of a replica's reservation: the placement group of its bundles, or its slice (a
// slice is placed in as a group of the same name). One name for both, so that Kill, which
// cannot tell which a replica had (a previous controller may have made it), removes either.
PlacementGroupName GroupOf(const std::string& replica_id) {
  return PlacementGroupName(absl::StrCat("serve:", replica_id));
}

SliceGroupName SliceOf(const std::string& replica_id) {
  return SliceGroupName(GroupOf(replica_id).value());
}

absl::Status Stopped() { return absl::CancelledError("the replica runtime is stopped"); }

bool KindIs(const absl::Status& status, api::ErrorKind kind) {
  const std::optional<std::string> word = api::ErrorKindOf(status);
  return word.has_value() && *word == api::ErrorKindWord(kind);
}

// An error of the runtime as ReplicaRuntime names it: Unavailable for a replica (or proxy) whose
// actor is dead or gone, Internal for the Python exception of the method, Cancelled for a
// cancel. `who` is what the message calls the actor ("replica <id>").
absl::Status CallError(const absl::Status& status, std::string_view who,
                       const std::string& method) {
  const std::string what = absl::StrCat(ToAbsl(who), " ", method, ": ", status.message());
  if (KindIs(status, api::ErrorKind::kTaskError)) return absl::InternalError(what);
  if (KindIs(status, api::ErrorKind::kTaskCancelled)) return absl::CancelledError(what);
  if (KindIs(status, api::ErrorKind::kActorDied) ||
      KindIs(status, api::ErrorKind::kActorUnavailable) ||
      KindIs(status, api::ErrorKind::kWorkerCrashed) ||
      KindIs(status, api::ErrorKind::kActorUnschedulable) || absl::IsNotFound(status) ||
      absl::IsUnavailable(status)) {
    return absl::UnavailableError(what);
  }
  return absl::Status(status.code(), what);
}

// The request id in a handle_http frame's head ("" when it has none).
std::string RequestIdOfFrame(std::string_view frame) {
  absl::StatusOr<FrameParts> parts = SplitFrame(frame);
  if (!parts.ok()) return "";
  nlohmann::json head = nlohmann::json::parse(parts->head.begin(), parts->head.end(), nullptr,
                                              /*allow_exceptions=*/false);
  if (!head.is_object()) return "";
  auto id = head.find("request_id");
  return id != head.end() && id->is_string() ? id->get<std::string>() : "";
}

// The key a response's first item names for the rest of it ("rest" in its head), "" when the
// response is whole (or the item is not a frame: the proxy reports that).
std::string RestOfResponse(std::string_view item) {
  absl::StatusOr<FrameParts> parts = SplitFrame(item);
  if (!parts.ok()) return "";
  nlohmann::json head = nlohmann::json::parse(parts->head.begin(), parts->head.end(), nullptr,
                                              /*allow_exceptions=*/false);
  if (!head.is_object()) return "";
  auto more = head.find("more");
  auto rest = head.find("rest");
  if (more == head.end() || !more->is_boolean() || !more->get<bool>() || rest == head.end() ||
      !rest->is_string()) {
    return "";
  }
  return rest->get<std::string>();
}

// The process id initialize() answered; 0 when it answered anything else (None: an older
// replica's code), which only leaves the pid unknown.
int PidOf(const internal::SerializedValue& value) {
  absl::StatusOr<std::string> text = DecodeResult(value.view());
  int pid = 0;
  if (!text.ok() || !absl::SimpleAtoi(*text, &pid) || pid < 0) return 0;
  return pid;
}

absl::StatusOr<PlacementStrategy> StrategyNamed(const std::string& word) {
  if (word.empty()) return PlacementStrategy::kPack;
  for (PlacementStrategy strategy :
       {PlacementStrategy::kPack, PlacementStrategy::kSpread, PlacementStrategy::kStrictPack,
        PlacementStrategy::kStrictSpread}) {
    if (PlacementStrategyName(strategy) == word) return strategy;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "placement_group_strategy ", word, " is none of PACK, SPREAD, STRICT_PACK, STRICT_SPREAD"));
}

// The replica's actor options, but where it is placed.
absl::StatusOr<ActorOptions> ReplicaActorOptions(const ReplicaLaunch& launch) {
  const v1::ServeReplicaResources& wanted = launch.resources;
  if (wanted.max_replicas_per_node() > 0) {
    return absl::UnimplementedError(absl::StrCat("replica ", launch.replica_id,
                                                 ": max_replicas_per_node is not supported yet"));
  }
  ActorOptions options;
  absl::StatusOr<ResourceSet> resources = ResourceSet::FromAmounts(
      std::map<std::string, double>(wanted.amounts().begin(), wanted.amounts().end()));
  if (!resources.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("replica ", launch.replica_id, ": ", resources.status().message()));
  }
  options.resources = *std::move(resources);
  if (!wanted.accelerator_type().empty()) {
    absl::StatusOr<LabelSelector> selector =
        LabelSelector::Of({LabelConstraint{std::string(labels::kAcceleratorType),
                                           SelectorOperator::kIn,
                                           {wanted.accelerator_type()}}});
    if (!selector.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "replica ", launch.replica_id, ": accelerator_type: ", selector.status().message()));
    }
    options.label_selectors.push_back(*std::move(selector));
  }
  options.env =
      std::map<std::string, std::string>(wanted.env_vars().begin(), wanted.env_vars().end());
  options.name = launch.replica_id;
  options.name_space = kServeNamespace;
  options.detached = true;   // a controller started again finds it (Find)
  options.max_restarts = 0;  // the controller replaces a dead replica
  options.max_concurrency = std::max(1, launch.max_concurrency);
  return options;
}

absl::StatusOr<PlacementGroupOptions> GroupOptions(const ReplicaLaunch& launch,
                                                   absl::Duration round) {
  PlacementGroupOptions group;
  group.name = GroupOf(launch.replica_id);
  TESSERA_ASSIGN_OR_RETURN(group.strategy,
                           StrategyNamed(launch.resources.placement_group_strategy()));
  for (int i = 0; i < launch.resources.placement_group_bundles_size(); ++i) {
    const auto& amounts = launch.resources.placement_group_bundles(i).amounts();
    absl::StatusOr<ResourceSet> bundle =
        ResourceSet::FromAmounts(std::map<std::string, double>(amounts.begin(), amounts.end()));
    if (!bundle.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("replica ", launch.replica_id, ": bundle ", i,
                                                     ": ", bundle.status().message()));
    }
    group.bundles.push_back(*std::move(bundle));
  }
  group.timeout = round;
  group.wait_while_infeasible = true;  // as Ray's: it waits for the cluster to grow
  group.detached = true;               // it lives as long as the replica, past this process
  return group;
}

// The replica's slice reservation, asked for in rounds of `round`. The shape was parsed where
// it entered (the Python binding); here it is only read back from the protocol's numbers.
absl::StatusOr<SliceOptions> SliceOptionsOf(const ReplicaLaunch& launch, absl::Duration round) {
  const v1::ServeReplicaSlice& wanted = launch.resources.slice();
  const auto invalid = [&launch](const absl::Status& status) {
    return absl::InvalidArgumentError(
        absl::StrCat("replica ", launch.replica_id, ": slice: ", status.message()));
  };
  SliceOptions slice;
  slice.name = SliceOf(launch.replica_id);
  absl::StatusOr<SliceShape> shape = wire::SliceShapeFromProto(wanted.shape());
  if (!shape.ok()) return invalid(shape.status());
  slice.shape = *std::move(shape);
  absl::StatusOr<ResourceSet> per_host = ResourceSet::FromAmounts(
      std::map<std::string, double>(wanted.per_host().begin(), wanted.per_host().end()));
  if (!per_host.ok()) return invalid(per_host.status());
  slice.per_host = *std::move(per_host);
  slice.sub_slice = wanted.sub_slice();
  slice.timeout = round;
  slice.detached = true;  // as the replica actor: it outlives this process (a head restart)
  return slice;
}

// A proxy actor's constructor argument (python/tessera/serve/proxy.py reads it).
std::string ProxyOptionsJson(const ProxyLaunch& launch) {
  const nlohmann::json json = {
      {"node_id", launch.node_id},
      {"node_host", launch.node_host},
      {"http_host", launch.http_host},
      {"http_port", launch.http_port},
      {"request_timeout_s", launch.request_timeout_s},
      {"keep_alive_timeout_s", launch.keep_alive_timeout_s},
  };
  return json.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// What a proxy's actor is made with, but its name.
ActorOptions ProxyActorOptions(const ProxyLaunch& launch) {
  ActorOptions options;
  options.resources = ResourceSet();  // as Ray's proxies: it holds nothing, so it fits any node
  options.strategy = NodeAffinityScheduling{.node = NodeId(launch.node_id), .soft = false};
  options.name_space = kServeNamespace;
  options.detached = true;   // a controller started again finds it (StartProxy, FindProxy)
  options.max_restarts = 0;  // the controller replaces a dead proxy
  return options;
}

}  // namespace

// What a start reports while it waits.
struct ActorReplicaRuntime::StartState {
  std::string replica_id;
  std::function<void(const std::string&)> pending;
  std::string resources;                // the actor's, for the explanation
  std::optional<ActorOptions> options;  // the actor's, for the scheduler's explanation
  bool waiting_for_actor = false;
  absl::Time next_pending = absl::InfiniteFuture();
};

// A stream's state, shared by its reading job and its handle.
struct ActorReplicaRuntime::StreamState {
  std::string request_id;  // set before the stream starts; "" when the frame names none
  absl::Mutex mu;
  bool cancelled ABSL_GUARDED_BY(mu) = false;
  // The call in flight: the generator; for HTTP, the first item's call, then the rest's stream.
  std::optional<ObjectRefBase> submitted ABSL_GUARDED_BY(mu);
};

// An HTTP stream (handle_http_first, then handle_http_rest) and where its items go.
struct ActorReplicaRuntime::HttpCall {
  std::string replica_id;
  std::shared_ptr<StreamState> state;
  std::function<void(std::string)> on_item;
  std::function<void(absl::Status)> on_end;
  // WhenReady is being called on the submitting thread (see SubmitHttpFirst).
  std::atomic<bool> watching{false};
};

class ActorReplicaRuntime::Stream : public ReplicaStream {
 public:
  Stream(ActorReplicaRuntime* runtime, std::string replica_id, std::shared_ptr<StreamState> state)
      : runtime_(runtime), replica_id_(std::move(replica_id)), state_(std::move(state)) {}
  void Cancel() override { runtime_->CancelStream(replica_id_, state_); }

 private:
  ActorReplicaRuntime* const runtime_;
  const std::string replica_id_;
  const std::shared_ptr<StreamState> state_;
};

ActorReplicaRuntime::ActorReplicaRuntime(ActorReplicaRuntimeOptions options)
    : options_(std::move(options)) {}

ActorReplicaRuntime::~ActorReplicaRuntime() { Stop(); }

// --- The pool ---------------------------------------------------------------------------------

void ActorReplicaRuntime::Post(std::function<void()> job) {
  absl::MutexLock lock(&mu_);
  jobs_.push_back(std::move(job));
  // Every job may wait long (a stream lasts as long as its response): one that finds no idle
  // thread gets a thread of its own.
  if (static_cast<int>(jobs_.size()) > idle_) threads_.emplace_back([this] { WorkerLoop(); });
}

void ActorReplicaRuntime::WorkerLoop() {
  absl::MutexLock lock(&mu_);
  while (true) {
    ++idle_;
    auto ready = [this]()
                     ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !jobs_.empty() || stopping_; };
    mu_.Await(absl::Condition(&ready));
    --idle_;
    if (jobs_.empty()) return;  // stopping, and nothing is left to run
    std::function<void()> job = std::move(jobs_.front());
    jobs_.pop_front();
    mu_.Unlock();
    job();
    mu_.Lock();
  }
}

bool ActorReplicaRuntime::stopping() const {
  absl::MutexLock lock(&mu_);
  return stopping_;
}

void ActorReplicaRuntime::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  // Jobs posted meanwhile (operations refused at once) may start threads: join until none.
  while (true) {
    std::vector<std::thread> threads;
    {
      absl::MutexLock lock(&mu_);
      threads.swap(threads_);
    }
    if (threads.empty()) return;
    for (std::thread& thread : threads) thread.join();
  }
}

// --- Waits ------------------------------------------------------------------------------------

absl::StatusOr<internal::SerializedValue> ActorReplicaRuntime::Await(
    const ObjectRefBase& ref, absl::Time deadline, StartState* state,
    const std::function<bool()>& cancelled) {
  while (true) {
    if (stopping()) return Stopped();
    if (cancelled && cancelled()) return absl::CancelledError("cancelled");
    absl::Duration slice = options_.poll_slice;
    if (deadline != absl::InfiniteFuture()) {
      slice = std::min(slice, deadline - options_.clock->Now());
      if (slice <= absl::ZeroDuration()) return absl::DeadlineExceededError("past its deadline");
    }
    absl::StatusOr<internal::SerializedValue> value = internal::GetValue(ref, slice);
    if (value.ok() || !absl::IsDeadlineExceeded(value.status())) return value;
    if (state != nullptr) ReportPending(*state);
  }
}

void ActorReplicaRuntime::ReportPending(StartState& state) {
  const absl::Time now = options_.clock->Now();
  if (!state.waiting_for_actor || now < state.next_pending) return;
  state.next_pending = now + options_.pending_interval;
  if (!options_.actor_record) {
    state.pending(absl::StrCat("not ready: waiting for resources (", state.resources,
                               ") or for its constructor"));
    return;
  }
  absl::StatusOr<v1::ActorInfo> record = options_.actor_record(state.replica_id);
  // Up at an address: its constructor (initialize) runs; nothing waits for the cluster.
  if (record.ok() && record->state() == v1::ACTOR_STATE_ALIVE && !record->address().empty()) {
    return;
  }
  state.pending(PendingText(state));
}

std::string ActorReplicaRuntime::PendingText(const StartState& state) const {
  std::string text = absl::StrCat("waiting for resources: ", state.resources);
  if (options_.explain_pending && state.options.has_value()) {
    const std::string why = options_.explain_pending(*state.options);
    if (!why.empty()) absl::StrAppend(&text, "; ", why);
  }
  return text;
}

// --- Start ------------------------------------------------------------------------------------

void ActorReplicaRuntime::Start(const ReplicaLaunch& launch,
                                std::function<void(const std::string& explanation)> pending,
                                std::function<void(absl::StatusOr<ReplicaAddress>)> done) {
  Post([this, launch, pending = std::move(pending), done = std::move(done)] {
    StartState state{.replica_id = launch.replica_id, .pending = pending};
    done(StartReplica(launch, state));
  });
}

absl::StatusOr<ObjectRefBase> ActorReplicaRuntime::ClassCode(const std::string& module,
                                                             const std::string& qualname) {
  const std::string key = absl::StrCat(module, ".", qualname);
  absl::MutexLock lock(&mu_);
  auto known = class_codes_.find(key);
  if (known != class_codes_.end()) return known->second;
  ObjectRefBase ref = internal::PutParts({EncodeGlobalReference(module, qualname)}, {});
  if (!ref.early_error().ok()) return ref.early_error();
  class_codes_.emplace(key, ref);
  return ref;
}

absl::StatusOr<ActorReplicaRuntime::Placement> ActorReplicaRuntime::Reserve(
    const ReplicaLaunch& launch, StartState& state) {
  const bool bundles = launch.resources.placement_group_bundles_size() > 0;
  if (bundles && launch.resources.has_slice()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "replica ", launch.replica_id, ": a slice and placement_group_bundles are exclusive"));
  }
  if (launch.resources.has_slice()) return ReserveSlice(launch, state);
  if (!bundles) return Placement{};
  TESSERA_ASSIGN_OR_RETURN(PlacementGroupOptions group,
                           GroupOptions(launch, options_.pending_interval));
  bool retried_taken = false;
  while (true) {
    if (stopping()) return Stopped();
    absl::StatusOr<PlacementGroup> made = CreatePlacementGroup(group);
    if (made.ok()) return Placement{.group = group.name};
    if (absl::IsAlreadyExists(made.status()) && !retried_taken) {
      // Left by an earlier start of this replica id that did not finish: it is ours to redo.
      retried_taken = true;
      IgnoreStatus(RemovePlacementGroup(group.name), "asked for again at once; a failure shows");
      continue;
    }
    // A round that ran out withdrew the group: its refusal (the head's explanation of the group
    // included) is the explanation; ask again.
    if (!absl::IsDeadlineExceeded(made.status())) return made.status();
    state.pending(absl::StrCat("waiting for resources: ", made.status().message()));
  }
}

absl::StatusOr<ActorReplicaRuntime::Placement> ActorReplicaRuntime::ReserveSlice(
    const ReplicaLaunch& launch, StartState& state) {
  TESSERA_ASSIGN_OR_RETURN(SliceOptions slice, SliceOptionsOf(launch, options_.pending_interval));
  bool retried_taken = false;
  while (true) {
    if (stopping()) return Stopped();
    absl::StatusOr<SliceReservation> reserved = ReserveSlices(slice);
    if (reserved.ok()) {
      return Placement{.group = PlacementGroupName(slice.name.value()),
                       .slice_hosts = static_cast<int>(reserved->hosts.size())};
    }
    if (absl::IsAlreadyExists(reserved.status()) && !retried_taken) {
      // Left by an earlier start of this replica id that did not finish: it is ours to redo.
      retried_taken = true;
      IgnoreStatus(ReleaseSlices(slice.name), "asked for again at once; a failure shows");
      continue;
    }
    // A round that ran out withdrew the reservation (the slices are busy), and one the cluster
    // has no slice for is refused at once: either way the refusal is the explanation, and the
    // replica waits for a slice, as a group of bundles waits for the cluster to grow.
    const bool infeasible = absl::IsResourceExhausted(reserved.status());
    if (!infeasible && !absl::IsDeadlineExceeded(reserved.status())) return reserved.status();
    state.pending(std::string(reserved.status().message()));
    if (infeasible) SleepUnlessStopped(options_.pending_interval);
  }
}

void ActorReplicaRuntime::SleepUnlessStopped(absl::Duration duration) {
  const absl::Time until = options_.clock->Now() + duration;
  while (!stopping()) {
    const absl::Duration left = until - options_.clock->Now();
    if (left <= absl::ZeroDuration()) return;
    options_.clock->SleepFor(std::min(left, options_.poll_slice));
  }
}

absl::StatusOr<ReplicaAddress> ActorReplicaRuntime::StartReplica(const ReplicaLaunch& launch,
                                                                 StartState& state) {
  if (stopping()) return Stopped();
  TESSERA_ASSIGN_OR_RETURN(ActorOptions options, ReplicaActorOptions(launch));
  TESSERA_ASSIGN_OR_RETURN(Placement placement, Reserve(launch, state));
  const std::optional<PlacementGroupName>& group = placement.group;
  auto give_back = [&group] {
    if (group.has_value()) {
      // A slice's name is a group's too: RemovePlacementGroup releases it.
      IgnoreStatus(RemovePlacementGroup(*group),
                   "the replica failed to start; a group or slice left "
                   "over is removed again by its Kill");
    }
  };
  if (group.has_value()) {
    // In host 0's bundle of a slice, with what the replica starts (its engine workers) kept in
    // the slice; in bundle 0 of its bundles' group.
    options.strategy = PlacementGroupScheduling{*group, 0, /*capture_child_tasks=*/true};
  }
  if (placement.slice_hosts > 0) {
    options.env[kReplicaSliceEnv] = group->value();
    options.env[kReplicaSliceHostsEnv] = absl::StrCat(placement.slice_hosts);
  }
  absl::StatusOr<ObjectRefBase> code = ClassCode(kReplicaActorModule, kReplicaActorClass);
  if (!code.ok()) {
    give_back();
    return code.status();
  }
  internal::FunctionDescriptor function{
      .name = kReplicaActorClass, .language = v1::LANGUAGE_PYTHON, .code = *code};
  std::vector<internal::TaskArgument> args;
  args.push_back({EncodeCallArguments(launch.replica_spec, /*as_str=*/false), std::nullopt});
  absl::StatusOr<ActorId> actor = internal::CreateActorByName(
      function, options, std::move(args), ReplicaTarget(launch.replica_id).type_name);
  if (!actor.ok()) {
    give_back();
    return absl::Status(actor.status().code(),
                        absl::StrCat("cannot make the actor of replica ", launch.replica_id, ": ",
                                     actor.status().message()));
  }
  {
    absl::MutexLock lock(&mu_);
    actors_.insert_or_assign(launch.replica_id, Known{*actor, /*ours=*/true});
  }
  state.resources = options.resources.ToString();
  state.options = options;
  state.waiting_for_actor = true;
  state.next_pending = options_.clock->Now() + options_.pending_interval;
  int pid = 0;
  for (const char* method : {"initialize", "check_health"}) {
    // initialize is told the replica's id (its actor's name: what get_replica_context shows).
    const bool initialize = std::string_view(method) == "initialize";
    std::vector<internal::TaskArgument> arguments;
    arguments.push_back(
        {EncodeCallArguments(
             initialize ? std::optional<std::string>(launch.replica_id) : std::nullopt,
             /*as_str=*/true),
         std::nullopt});
    ObjectRefBase ref = internal::SubmitActorTask(*actor, method, std::move(arguments));
    absl::StatusOr<internal::SerializedValue> value =
        ref.early_error().ok() ? Await(ref, absl::InfiniteFuture(), &state, nullptr)
                               : absl::StatusOr<internal::SerializedValue>(ref.early_error());
    state.waiting_for_actor = false;
    if (value.ok()) {
      if (initialize) pid = PidOf(*value);
      continue;
    }
    IgnoreStatus(internal::KillActor(*actor),
                 "a replica that did not start is ended; one "
                 "that is gone already needs nothing");
    Forget(launch.replica_id);
    give_back();
    // The user's constructor (or check_health) raised: its text, as the controller shows it.
    if (KindIs(value.status(), api::ErrorKind::kTaskError)) {
      return absl::FailedPreconditionError(
          absl::StrCat("replica ", launch.replica_id, " ", method, ": ", value.status().message()));
    }
    return CallError(value.status(), ReplicaTarget(launch.replica_id).what, method);
  }
  ReplicaAddress address = AddressOf(launch.replica_id, *actor);
  address.pid = pid;
  return address;
}

// --- Find, Kill -------------------------------------------------------------------------------

ReplicaAddress ActorReplicaRuntime::AddressOf(const std::string& replica_id,
                                              const ActorId& actor) const {
  ReplicaAddress address;
  address.actor_id = actor.value();
  bool ours = false;
  {
    absl::MutexLock lock(&mu_);
    auto known = actors_.find(replica_id);
    ours = known != actors_.end() && known->second.ours;
  }
  // A replica a previous process made has no owner left to name: callers find it by name.
  if (ours) address.owner_address = internal::OwnerAddressOfThisProcess();
  if (options_.actor_record) {
    absl::StatusOr<v1::ActorInfo> record = options_.actor_record(replica_id);
    if (record.ok()) address.node_id = record->node_id();
  }
  return address;
}

std::optional<ActorId> ActorReplicaRuntime::KnownActor(const std::string& name) const {
  absl::MutexLock lock(&mu_);
  auto known = actors_.find(name);
  if (known == actors_.end()) return std::nullopt;
  return known->second.actor;
}

ActorReplicaRuntime::Target ActorReplicaRuntime::ReplicaTarget(const std::string& replica_id) {
  return Target{.name = replica_id,
                .type_name = PythonTypeName(kReplicaActorClass),
                .what = absl::StrCat("replica ", replica_id)};
}

ActorReplicaRuntime::Target ActorReplicaRuntime::ProxyTarget(const std::string& node_id) {
  return Target{.name = ProxyActorName(node_id),
                .type_name = PythonTypeName(kProxyActorClass),
                .what = absl::StrCat("the proxy of node ", node_id)};
}

absl::StatusOr<ActorId> ActorReplicaRuntime::ActorOf(const Target& target) {
  if (std::optional<ActorId> known = KnownActor(target.name)) return *known;
  absl::StatusOr<ActorId> found =
      internal::FindNamedActor(target.name, target.type_name.c_str(), kServeNamespace);
  if (found.ok()) {
    absl::MutexLock lock(&mu_);
    actors_.try_emplace(target.name, Known{*found, /*ours=*/false});
  }
  return found;
}

void ActorReplicaRuntime::Forget(const std::string& name) {
  absl::MutexLock lock(&mu_);
  actors_.erase(name);
}

void ActorReplicaRuntime::Find(const std::string& replica_id,
                               std::function<void(absl::StatusOr<ReplicaAddress>)> done) {
  Post([this, replica_id, done = std::move(done)] {
    if (stopping()) return done(Stopped());
    absl::StatusOr<ActorId> actor = ActorOf(ReplicaTarget(replica_id));
    if (!actor.ok()) return done(actor.status());
    done(AddressOf(replica_id, *actor));
  });
}

void ActorReplicaRuntime::KillNamed(const Target& target) {
  absl::StatusOr<ActorId> actor = ActorOf(target);
  if (actor.ok()) {
    IgnoreStatus(internal::KillActor(*actor), "an actor that is gone already is killed");
  }
  Forget(target.name);
}

std::optional<std::string> ActorReplicaRuntime::DeathOf(const std::string& replica_id) {
  if (!options_.actor_record) return std::nullopt;
  absl::StatusOr<v1::ActorInfo> record = options_.actor_record(replica_id);
  if (absl::IsNotFound(record.status())) {
    return absl::StrCat("replica ", replica_id, ": no live actor holds its name");
  }
  if (record.ok() && record->state() == v1::ACTOR_STATE_DEAD) {
    return absl::StrCat("replica ", replica_id, ": its actor died: ", record->death_cause());
  }
  return std::nullopt;  // alive, restarting, or the head cannot say now
}

void ActorReplicaRuntime::Kill(const std::string& replica_id) {
  Post([this, replica_id] {
    KillNamed(ReplicaTarget(replica_id));
    // Its placement group or its slice, when it had one (made by this process or a previous
    // one): RemovePlacementGroup releases a slice of the name too.
    IgnoreStatus(RemovePlacementGroup(GroupOf(replica_id)),
                 "a replica without bundles or a slice has no group; a head that cannot be "
                 "reached keeps a detached group until a later Kill");
  });
}

// --- Calls ------------------------------------------------------------------------------------

void ActorReplicaRuntime::Call(const std::string& replica_id, const std::string& method,
                               std::optional<std::string> argument, absl::Duration timeout,
                               std::function<void(absl::StatusOr<std::string>)> done) {
  std::string encoded = EncodeCallArguments(argument, /*as_str=*/false);
  Post([this, replica_id, method, encoded = std::move(encoded), timeout,
        done = std::move(done)]() mutable {
    done(RunCall(ReplicaTarget(replica_id), method, std::move(encoded), timeout));
  });
}

absl::StatusOr<std::string> ActorReplicaRuntime::RunCall(const Target& target,
                                                         const std::string& method,
                                                         std::string encoded_arguments,
                                                         absl::Duration timeout) {
  if (stopping()) return Stopped();
  absl::StatusOr<ActorId> actor = ActorOf(target);
  if (!actor.ok()) return CallError(actor.status(), target.what, method);
  std::vector<internal::TaskArgument> args;
  args.push_back({std::move(encoded_arguments), std::nullopt});
  ObjectRefBase ref = internal::SubmitActorTask(*actor, method, std::move(args));
  const absl::Time deadline = timeout == absl::InfiniteDuration() ? absl::InfiniteFuture()
                                                                  : options_.clock->Now() + timeout;
  absl::StatusOr<internal::SerializedValue> value =
      ref.early_error().ok() ? Await(ref, deadline, nullptr, nullptr)
                             : absl::StatusOr<internal::SerializedValue>(ref.early_error());
  if (!value.ok()) {
    if (absl::IsDeadlineExceeded(value.status()) && options_.clock->Now() >= deadline) {
      IgnoreStatus(internal::CancelTask(ref, /*force=*/false, /*recursive=*/true),
                   "a call that finished meanwhile needs no cancel");
      return absl::DeadlineExceededError(absl::StrCat(target.what, " did not answer ", method,
                                                      " within ", absl::FormatDuration(timeout)));
    }
    absl::Status error = CallError(value.status(), target.what, method);
    if (absl::IsUnavailable(error)) Forget(target.name);  // found again by name next time
    return error;
  }
  absl::StatusOr<std::string> result = DecodeResult(value->view());
  if (!result.ok()) {
    return absl::InternalError(absl::StrCat(
        target.what, " ", method, " answered what cannot be read: ", result.status().message()));
  }
  return result;
}

// --- Streams ----------------------------------------------------------------------------------

std::unique_ptr<ReplicaStream> ActorReplicaRuntime::CallStreaming(
    const std::string& replica_id, const std::string& method, std::string argument,
    std::function<void(std::string item)> on_item, std::function<void(absl::Status end)> on_end) {
  auto state = std::make_shared<StreamState>();
  if (method == kHttpMethod) {
    state->request_id = RequestIdOfFrame(argument);
    auto http = std::make_shared<HttpCall>();
    http->replica_id = replica_id;
    http->state = state;
    http->on_item = std::move(on_item);
    http->on_end = std::move(on_end);
    StartHttp(std::move(http), std::move(argument));
    return std::make_unique<Stream>(this, replica_id, std::move(state));
  }
  Post([this, replica_id, method, argument = std::move(argument), state,
        on_item = std::move(on_item), on_end = std::move(on_end)]() mutable {
    on_end(RunStream(replica_id, method, EncodeCallArguments(argument, /*as_str=*/false), state,
                     on_item));
  });
  return std::make_unique<Stream>(this, replica_id, std::move(state));
}

void ActorReplicaRuntime::StartHttp(std::shared_ptr<HttpCall> http, std::string frame) {
  std::optional<ActorId> known = KnownActor(http->replica_id);
  if (!known.has_value() || stopping()) {
    // A lookup by name may wait for the head: not on the caller's thread.
    Post([this, http, frame = std::move(frame)]() mutable {
      if (stopping()) return http->on_end(Stopped());
      absl::StatusOr<ActorId> actor = ActorOf(ReplicaTarget(http->replica_id));
      if (!actor.ok())
        return http->on_end(CallError(actor.status(), http->replica_id, kHttpMethod));
      SubmitHttpFirst(http, *actor, std::move(frame));
    });
    return;
  }
  SubmitHttpFirst(http, *known, std::move(frame));
}

void ActorReplicaRuntime::SubmitHttpFirst(const std::shared_ptr<HttpCall>& http,
                                          const ActorId& actor, std::string frame) {
  std::vector<internal::TaskArgument> args;
  args.push_back({EncodeCallArguments(frame, /*as_str=*/false), std::nullopt});
  ObjectRefBase first = internal::SubmitActorTask(actor, kHttpFirstMethod, std::move(args));
  if (!first.early_error().ok()) {
    const absl::Status error = CallError(first.early_error(), http->replica_id, kHttpMethod);
    Post([http, error] { http->on_end(error); });
    return;
  }
  bool cancelled = false;
  {
    absl::MutexLock lock(&http->state->mu);
    http->state->submitted = first;
    cancelled = http->state->cancelled;
  }
  // A Cancel that came before the call was known could not cancel it: it is done here.
  if (cancelled) Post([this, http] { CancelSubmitted(http->replica_id, *http->state); });
  // The answer goes to the proxy from the thread that brings it (the proxy only hands it to its
  // loop), unless it is here before WhenReady returns: callbacks never run inside
  // CallStreaming, so that one goes through the pool.
  http->watching.store(true);
  const absl::Status watched = internal::WhenReady(first, [this, http, first] {
    if (http->watching.load()) {
      Post([this, http, first] { FinishHttpFirst(http, first, /*may_block=*/true); });
    } else {
      FinishHttpFirst(http, first, /*may_block=*/false);
    }
  });
  http->watching.store(false);
  if (!watched.ok())
    Post([this, http, first] { FinishHttpFirst(http, first, /*may_block=*/true); });
}

void ActorReplicaRuntime::FinishHttpFirst(const std::shared_ptr<HttpCall>& http,
                                          const ObjectRefBase& first, bool may_block) {
  StreamState& state = *http->state;
  const std::function<bool()> cancelled = [&state] {
    absl::MutexLock lock(&state.mu);
    return state.cancelled;
  };
  absl::StatusOr<internal::SerializedValue> value =
      may_block ? Await(first, absl::InfiniteFuture(), nullptr, cancelled)
                : internal::GetValue(first, absl::ZeroDuration());
  if (!value.ok()) {
    absl::Status error = CallError(value.status(), http->replica_id, kHttpMethod);
    if (absl::IsUnavailable(error)) Forget(http->replica_id);  // found again by name next time
    return http->on_end(std::move(error));
  }
  absl::StatusOr<std::string> item = DecodeResult(value->view());
  if (!item.ok()) {
    return http->on_end(absl::InternalError(
        absl::StrCat("replica ", http->replica_id, " ", kHttpMethod,
                     " answered what cannot be read: ", item.status().message())));
  }
  std::string rest = RestOfResponse(*item);
  if (rest.empty()) {
    http->on_item(*std::move(item));
    return http->on_end(absl::OkStatus());
  }
  // A stream: its items may wait for a slow client, on a pool thread.
  auto stream = [this, http, item = *std::move(item), rest = std::move(rest)]() mutable {
    http->on_item(std::move(item));
    http->on_end(RunStream(http->replica_id, kHttpRestMethod,
                           EncodeCallArguments(rest, /*as_str=*/true), http->state, http->on_item));
  };
  if (may_block) {
    stream();
  } else {
    Post(std::move(stream));
  }
}

absl::Status ActorReplicaRuntime::RunStream(const std::string& replica_id,
                                            const std::string& method,
                                            std::string encoded_arguments,
                                            const std::shared_ptr<StreamState>& state,
                                            const std::function<void(std::string)>& on_item) {
  if (stopping()) return Stopped();
  const Target target = ReplicaTarget(replica_id);
  absl::StatusOr<ActorId> actor = ActorOf(target);
  if (!actor.ok()) return CallError(actor.status(), target.what, method);
  std::vector<internal::TaskArgument> args;
  args.push_back({std::move(encoded_arguments), std::nullopt});
  internal::ActorCallOptions call;
  call.streaming = true;
  bool cancelled = false;
  {
    absl::MutexLock lock(&state->mu);
    cancelled = state->cancelled;
  }
  if (cancelled) return absl::CancelledError("the stream was cancelled before it started");
  ObjectRefBase generator = internal::SubmitActorTask(*actor, method, std::move(args), call);
  if (!generator.early_error().ok()) {
    return CallError(generator.early_error(), target.what, method);
  }
  {
    absl::MutexLock lock(&state->mu);
    state->submitted = generator;
    cancelled = state->cancelled;
  }
  // A Cancel that came before the generator was known could not cancel it: it is done here.
  if (cancelled) CancelSubmitted(replica_id, *state);
  int64_t next = 0;
  absl::Status end = ReadItems(generator, replica_id, method, *state, on_item, next);
  internal::ReleaseGenerator(generator, next);
  return end;
}

absl::Status ActorReplicaRuntime::ReadItems(const ObjectRefBase& generator,
                                            const std::string& replica_id,
                                            const std::string& method, StreamState& state,
                                            const std::function<void(std::string)>& on_item,
                                            int64_t& next) {
  const std::function<bool()> cancelled = [&state] {
    absl::MutexLock lock(&state.mu);
    return state.cancelled;
  };
  const absl::Status cancel = absl::CancelledError(
      absl::StrCat("the stream of replica ", replica_id, " ", method, " was cancelled"));
  while (true) {
    if (stopping()) return Stopped();
    if (cancelled()) return cancel;
    absl::StatusOr<std::optional<ObjectRefBase>> item =
        internal::GeneratorNext(generator, next, options_.poll_slice);
    if (!item.ok()) {
      if (absl::IsDeadlineExceeded(item.status())) continue;
      return CallError(item.status(), ReplicaTarget(replica_id).what, method);
    }
    if (!item->has_value()) return absl::OkStatus();  // the generator ended
    // The item is here (its value, or the task's failure after the last one).
    absl::StatusOr<internal::SerializedValue> value =
        Await(**item, absl::InfiniteFuture(), nullptr, cancelled);
    ++next;
    if (!value.ok()) {
      return absl::IsCancelled(value.status())
                 ? cancel
                 : CallError(value.status(), ReplicaTarget(replica_id).what, method);
    }
    absl::StatusOr<std::string> bytes = DecodeResult(value->view());
    if (!bytes.ok()) {
      return absl::InternalError(
          absl::StrCat("replica ", replica_id, " ", method,
                       " yielded what cannot be read: ", bytes.status().message()));
    }
    on_item(*std::move(bytes));
  }
}

void ActorReplicaRuntime::CancelStream(const std::string& replica_id,
                                       const std::shared_ptr<StreamState>& state) {
  {
    absl::MutexLock lock(&state->mu);
    if (state->cancelled) return;
    state->cancelled = true;
    // Not submitted yet: the stream's job cancels it once it is.
    if (!state->submitted.has_value()) return;
  }
  // Off the caller's thread (the proxy's loop): cancelling calls the runtime and the replica.
  Post([this, replica_id, state] { CancelSubmitted(replica_id, *state); });
}

void ActorReplicaRuntime::CancelSubmitted(const std::string& replica_id, StreamState& state) {
  std::optional<ObjectRefBase> submitted;
  {
    absl::MutexLock lock(&state.mu);
    submitted = state.submitted;
  }
  if (submitted.has_value()) {
    IgnoreStatus(internal::CancelTask(*submitted, /*force=*/false, /*recursive=*/true),
                 "a task that ended meanwhile needs no cancel");
  }
  // The runtime does not interrupt a running async actor call: the replica cancels the
  // request's coroutine itself.
  if (!state.request_id.empty()) {
    IgnoreStatus(
        RunCall(ReplicaTarget(replica_id), kCancelMethod,
                EncodeCallArguments(state.request_id, /*as_str=*/true), kCancelCallTimeout),
        "best effort: a request that ended meanwhile has nothing to cancel, and a "
        "dead replica runs nothing");
  }
}

// --- Proxies --------------------------------------------------------------------------------

void ActorReplicaRuntime::StartProxy(const ProxyLaunch& launch,
                                     std::function<void(absl::StatusOr<std::string>)> done) {
  Post([this, launch, done = std::move(done)] { done(StartProxyActor(launch)); });
}

absl::StatusOr<std::string> ActorReplicaRuntime::StartProxyActor(const ProxyLaunch& launch) {
  if (stopping()) return Stopped();
  const Target target = ProxyTarget(launch.node_id);
  if (launch.replace) KillNamed(target);
  // A previous controller's proxy is adopted (unless it is being replaced).
  absl::StatusOr<ActorId> actor =
      launch.replace ? absl::StatusOr<ActorId>(absl::NotFoundError("replaced")) : ActorOf(target);
  if (absl::IsNotFound(actor.status())) actor = CreateProxyActor(launch, target);
  if (!actor.ok()) return CallError(actor.status(), target.what, "start");
  absl::StatusOr<std::string> address =
      RunCall(target, kProxyReadyMethod, EncodeCallArguments(std::nullopt, /*as_str=*/false),
              options_.proxy_ready_timeout);
  // One that cannot answer in time is stuck: it is ended, and made again by the next start.
  if (absl::IsDeadlineExceeded(address.status())) KillNamed(target);
  return address;
}

absl::StatusOr<ActorId> ActorReplicaRuntime::CreateProxyActor(const ProxyLaunch& launch,
                                                              const Target& target) {
  TESSERA_ASSIGN_OR_RETURN(ObjectRefBase code, ClassCode(kProxyActorModule, kProxyActorClass));
  ActorOptions options = ProxyActorOptions(launch);
  options.name = target.name;
  internal::FunctionDescriptor function{
      .name = kProxyActorClass, .language = v1::LANGUAGE_PYTHON, .code = code};
  std::vector<internal::TaskArgument> args;
  args.push_back({EncodeCallArguments(ProxyOptionsJson(launch), /*as_str=*/true), std::nullopt});
  absl::StatusOr<ActorId> actor =
      internal::CreateActorByName(function, options, std::move(args), target.type_name);
  // Another start made it meanwhile: that one is the node's proxy.
  if (absl::IsAlreadyExists(actor.status())) return ActorOf(target);
  if (!actor.ok()) return actor.status();
  absl::MutexLock lock(&mu_);
  actors_.insert_or_assign(target.name, Known{*actor, /*ours=*/true});
  return actor;
}

void ActorReplicaRuntime::FindProxy(const std::string& node_id,
                                    std::function<void(absl::StatusOr<std::string>)> done) {
  Post([this, node_id, done = std::move(done)] {
    if (stopping()) return done(Stopped());
    const Target target = ProxyTarget(node_id);
    // NotFound (no proxy lives there) is told apart from a proxy that does not answer.
    absl::StatusOr<ActorId> actor = ActorOf(target);
    if (!actor.ok()) return done(actor.status());
    done(RunCall(target, kProxyReadyMethod, EncodeCallArguments(std::nullopt, /*as_str=*/false),
                 options_.proxy_ready_timeout));
  });
}

void ActorReplicaRuntime::CallProxy(const std::string& node_id, const std::string& method,
                                    absl::Duration timeout,
                                    std::function<void(absl::StatusOr<std::string>)> done) {
  Post([this, node_id, method, timeout, done = std::move(done)] {
    done(RunCall(ProxyTarget(node_id), method, EncodeCallArguments(std::nullopt, /*as_str=*/false),
                 timeout));
  });
}

void ActorReplicaRuntime::KillProxy(const std::string& node_id) {
  Post([this, node_id] { KillNamed(ProxyTarget(node_id)); });
}

}  // namespace tessera::serve
