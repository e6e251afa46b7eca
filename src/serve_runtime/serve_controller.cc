// The serve controller (serve_controller.h): checking a deploy, the goal's records, the control
// loop over the ReplicaRuntime, the replica sets and routes routers read, recovery.
#include "serve_runtime/serve_controller.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <utility>
#include <variant>

#include "absl/strings/str_cat.h"
#include "base/ignore_status.h"
#include "base/log_line.h"
#include "base/status_macros.h"
#include "base/string_util.h"
#include "head/store_writer.h"
#include "serve/application_state.h"
#include "wire/proto_convert.h"

namespace tessera::serve {

namespace {

using google::protobuf::FieldDescriptor;

// Ray's HTTPOptions defaults for start options a client left empty.
constexpr char kDefaultHttpHost[] = "127.0.0.1";
constexpr char kDefaultProxyLocation[] = "EveryNode";
constexpr double kDefaultKeepAliveTimeoutS = 90;

// A replica actor runs max(max_ongoing_requests + 100, 1000) calls at once. Requests above
// max_ongoing_requests are answered at once with a rejection, but each still takes a slot while
// it is answered, and the controller's calls (check_health, reconfigure_json,
// prepare_for_shutdown) and the routers' probes must never queue behind requests: 100 slots of
// headroom for those, and never fewer than the runtime's (and Ray's async actors') 1000.
constexpr int kControlCallHeadroom = 100;
constexpr int kMinReplicaConcurrency = 1000;

double UnixSeconds(absl::Time time) { return absl::ToDoubleSeconds(time - absl::UnixEpoch()); }

// `status` with its message prefixed by `where` (its code kept).
absl::Status Prefixed(std::string_view where, const absl::Status& status) {
  if (status.ok()) return status;
  return absl::Status(status.code(), absl::StrCat(ToAbsl(where), status.message()));
}

// InvalidArgument for the first double of `message` (nested messages and map values included)
// that is NaN or infinite: no rule of a target holds for them, and JSON cannot keep them.
absl::Status CheckFinite(const google::protobuf::Message& message, std::string_view path) {
  const google::protobuf::Reflection* reflection = message.GetReflection();
  std::vector<const FieldDescriptor*> fields;
  reflection->ListFields(message, &fields);
  for (const FieldDescriptor* field : fields) {
    const std::string name =
        path.empty() ? field->name() : absl::StrCat(ToAbsl(path), ".", field->name());
    const int count = field->is_repeated() ? reflection->FieldSize(message, field) : 1;
    for (int i = 0; i < count; ++i) {
      if (field->cpp_type() == FieldDescriptor::CPPTYPE_DOUBLE) {
        const double value = field->is_repeated() ? reflection->GetRepeatedDouble(message, field, i)
                                                  : reflection->GetDouble(message, field);
        if (!std::isfinite(value)) {
          return absl::InvalidArgumentError(
              absl::StrCat(name, " must be a finite number, got ", value));
        }
      } else if (field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
        TESSERA_RETURN_IF_ERROR(CheckFinite(field->is_repeated()
                                                ? reflection->GetRepeatedMessage(message, field, i)
                                                : reflection->GetMessage(message, field),
                                            name));
      }
    }
  }
  return absl::OkStatus();
}

// The user_config as the JSON text reconfigure_json gets: "null" for none, otherwise the
// client's JSON without its whitespace (keys keep their order), so that a config compares equal
// to itself however it was spaced.
absl::StatusOr<std::string> UserConfigText(const std::string& json_text) {
  if (json_text.empty()) return std::string("null");
  const nlohmann::ordered_json json =
      nlohmann::ordered_json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) {
    return absl::InvalidArgumentError("user_config_json must be JSON text");
  }
  return json.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

// reconfigure_json's argument: the whole replica config, so that a change of
// max_ongoing_requests or graceful_shutdown_wait_loop_s alone reaches the replica too.
std::string ReconfigureArgument(const ReplicaConfig& config) {
  nlohmann::ordered_json json;
  json["user_config"] = nlohmann::ordered_json::parse(config.user_config, nullptr,
                                                      /*allow_exceptions=*/false);
  if (json["user_config"].is_discarded()) json["user_config"] = nullptr;  // checked on deploy
  json["max_ongoing_requests"] = config.max_ongoing_requests;
  json["graceful_shutdown_wait_loop_s"] = config.graceful_shutdown_wait_loop_s;
  return json.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

// Fields whose zero is never valid (max_replicas, target_ongoing_requests, look_back_period_s,
// metrics_interval_s, aggregation_function) are unset at zero and take Ray's default; every
// other field means what it says (min_replicas 0 scales to zero, a delay of 0 is none).
AutoscalingConfig AutoscalingFromProto(const v1::ServeAutoscalingConfig& proto) {
  AutoscalingConfig config;
  config.min_replicas = proto.min_replicas();
  if (proto.has_initial_replicas()) config.initial_replicas = proto.initial_replicas();
  if (proto.max_replicas() != 0) config.max_replicas = proto.max_replicas();
  if (proto.target_ongoing_requests() != 0) {
    config.target_ongoing_requests = proto.target_ongoing_requests();
  }
  if (proto.look_back_period_s() != 0) config.look_back_period_s = proto.look_back_period_s();
  if (proto.metrics_interval_s() != 0) config.metrics_interval_s = proto.metrics_interval_s();
  if (proto.has_upscaling_factor()) config.upscaling_factor = proto.upscaling_factor();
  if (proto.has_downscaling_factor()) config.downscaling_factor = proto.downscaling_factor();
  config.upscale_delay_s = proto.upscale_delay_s();
  config.downscale_delay_s = proto.downscale_delay_s();
  if (proto.has_downscale_to_zero_delay_s()) {
    config.downscale_to_zero_delay_s = proto.downscale_to_zero_delay_s();
  }
  if (!proto.aggregation_function().empty()) {
    config.aggregation_function = proto.aggregation_function();
  }
  return config;
}

absl::Status CheckAmounts(std::string_view field,
                          const google::protobuf::Map<std::string, double>& amounts) {
  for (const auto& [name, amount] : amounts) {
    if (name.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(ToAbsl(field), ": a resource name is empty"));
    }
    if (amount < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(ToAbsl(field), ": ", name, " must be 0 or more, got ", amount));
    }
  }
  return absl::OkStatus();
}

// A slice per replica: a shape the protocol's numbers make (read back as the head reads a
// slice request's), amounts that can be reserved, and no other placement beside it.
absl::Status CheckSlice(const v1::ServeReplicaResources& resources) {
  TESSERA_RETURN_IF_ERROR(CheckAmounts("slice.per_host", resources.slice().per_host()));
  TESSERA_RETURN_IF_ERROR(
      wire::SliceShapeFromProto(resources.slice().shape(), "slice.shape").status());
  if (resources.placement_group_bundles_size() > 0 || resources.max_replicas_per_node() > 0) {
    return absl::InvalidArgumentError(
        "a slice per replica is not allowed with placement_group_bundles or "
        "max_replicas_per_node");
  }
  return absl::OkStatus();
}

// Ray's rules of ray_actor_options, placement_group_bundles, placement_group_strategy and
// max_replicas_per_node, and the slice per replica.
absl::Status CheckResources(const v1::ServeReplicaResources& resources) {
  TESSERA_RETURN_IF_ERROR(CheckAmounts("resources.amounts", resources.amounts()));
  for (int i = 0; i < resources.placement_group_bundles_size(); ++i) {
    TESSERA_RETURN_IF_ERROR(CheckAmounts(absl::StrCat("placement_group_bundles[", i, "]"),
                                         resources.placement_group_bundles(i).amounts()));
  }
  const std::string& strategy = resources.placement_group_strategy();
  if (!strategy.empty() && strategy != "PACK" && strategy != "SPREAD" &&
      strategy != "STRICT_PACK" && strategy != "STRICT_SPREAD") {
    return absl::InvalidArgumentError(absl::StrCat(
        "placement_group_strategy must be PACK, SPREAD, STRICT_PACK or STRICT_SPREAD, got ",
        Quote(strategy)));
  }
  const bool bundles = resources.placement_group_bundles_size() > 0;
  if (!strategy.empty() && !bundles) {
    return absl::InvalidArgumentError(
        "If `placement_group_strategy` is provided, `placement_group_bundles` must also be "
        "provided.");
  }
  const int per_node = resources.max_replicas_per_node();
  if (per_node < 0 || per_node > 100) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_replicas_per_node must be between 1 and 100, got ", per_node));
  }
  if (per_node > 0 && bundles) {
    return absl::InvalidArgumentError(
        "Setting max_replicas_per_node is not allowed when placement_group_bundles is provided.");
  }
  return resources.has_slice() ? CheckSlice(resources) : absl::OkStatus();
}

// A deployment's options as its machine's target. Fields whose zero is never valid
// (max_ongoing_requests, the health check's period and timeout, max_constructor_retry_count)
// take Ray's default at zero; max_queued_requests 0 is -1 (no limit).
absl::StatusOr<DeploymentTarget> BuildTarget(const v1::ServeDeploymentSpec& spec) {
  TESSERA_RETURN_IF_ERROR(CheckFinite(spec, ""));
  TESSERA_RETURN_IF_ERROR(CheckResources(spec.resources()));
  if (spec.max_queued_requests() < -1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "max_queued_requests must be -1 or at least 1, got ", spec.max_queued_requests()));
  }
  const DeploymentTarget defaults{};
  auto or_default = [](auto value, auto fallback) { return value == 0 ? fallback : value; };
  DeploymentTarget target;
  target.code_version = spec.code_version();
  TESSERA_ASSIGN_OR_RETURN(target.replica_config.user_config,
                           UserConfigText(spec.user_config_json()));
  target.replica_config.max_ongoing_requests =
      or_default(spec.max_ongoing_requests(), defaults.replica_config.max_ongoing_requests);
  target.replica_config.graceful_shutdown_wait_loop_s = spec.graceful_shutdown_wait_loop_s();
  target.graceful_shutdown_timeout_s = spec.graceful_shutdown_timeout_s();
  target.health_check_period_s =
      or_default(spec.health_check_period_s(), defaults.health_check_period_s);
  target.health_check_timeout_s =
      or_default(spec.health_check_timeout_s(), defaults.health_check_timeout_s);
  target.max_constructor_retry_count =
      or_default(spec.max_constructor_retry_count(), defaults.max_constructor_retry_count);
  target.num_replicas = spec.num_replicas();
  if (spec.has_autoscaling_config()) {
    target.autoscaling_config = AutoscalingFromProto(spec.autoscaling_config());
  } else if (spec.num_replicas() < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_replicas must be at least 1 without an autoscaling_config, got ",
                     spec.num_replicas()));
  }
  TESSERA_RETURN_IF_ERROR(target.Validate());
  return target;
}

// Every check of one application of a deploy that needs no other application.
absl::StatusOr<PlannedApplication> PlanApplication(const v1::ServeApplicationSpec& spec) {
  if (spec.name().empty()) {
    return absl::InvalidArgumentError("Application name must a non-empty string.");
  }
  const std::string where = absl::StrCat("application ", Quote(spec.name()), ": ");
  if (spec.has_route_prefix()) {
    TESSERA_RETURN_IF_ERROR(Prefixed(where, ValidateRoutePrefix(spec.route_prefix())));
  }
  if (spec.deployments_size() == 0) {
    return absl::InvalidArgumentError(absl::StrCat(where, "it has no deployments"));
  }
  PlannedApplication planned;
  planned.spec = spec;
  for (const v1::ServeDeploymentSpec& deployment : spec.deployments()) {
    if (deployment.name().empty()) {
      return absl::InvalidArgumentError(absl::StrCat(where, "a deployment's name is empty"));
    }
    absl::StatusOr<DeploymentTarget> target = BuildTarget(deployment);
    if (!target.ok()) {
      return Prefixed(absl::StrCat(where, "deployment ", Quote(deployment.name()), ": "),
                      target.status());
    }
    if (!planned.targets.emplace(deployment.name(), *std::move(target)).second) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, "deployment names must be unique: ", Quote(deployment.name()), " is given twice"));
    }
  }
  if (!planned.targets.contains(spec.ingress_deployment())) {
    return absl::InvalidArgumentError(absl::StrCat(where, "the ingress deployment ",
                                                   Quote(spec.ingress_deployment()),
                                                   " is not one of its deployments"));
  }
  return planned;
}

absl::StatusOr<std::vector<PlannedApplication>> PlanApplications(
    const v1::DeployServeApplicationsRequest& request) {
  std::vector<PlannedApplication> plan;
  std::set<std::string> names;
  for (const v1::ServeApplicationSpec& spec : request.applications()) {
    TESSERA_ASSIGN_OR_RETURN(PlannedApplication planned, PlanApplication(spec));
    if (!names.insert(spec.name()).second) {
      return absl::InvalidArgumentError(absl::StrCat(
          "application names must be unique: ", Quote(spec.name()), " is given twice"));
    }
    plan.push_back(std::move(planned));
  }
  return plan;
}

absl::Status ValidateStartOptions(const v1::ServeStartOptions& start) {
  TESSERA_RETURN_IF_ERROR(Prefixed("start options: ", CheckFinite(start, "")));
  if (start.http_port() < 0 || start.http_port() > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(
        "start options: http_port must be between 0 and 65535, got ", start.http_port()));
  }
  if (start.request_timeout_s() < 0 || start.keep_alive_timeout_s() < 0) {
    return absl::InvalidArgumentError(
        "start options: request_timeout_s and keep_alive_timeout_s must be 0 or more");
  }
  const std::string& location = start.proxy_location();
  if (!location.empty() && location != "EveryNode" && location != "HeadOnly" &&
      location != "Disabled") {
    return absl::InvalidArgumentError(
        absl::StrCat("start options: proxy_location must be EveryNode, HeadOnly or Disabled, got ",
                     Quote(location)));
  }
  return absl::OkStatus();
}

v1::ServeStartOptions FilledStartOptions(v1::ServeStartOptions start) {
  if (start.http_host().empty()) start.set_http_host(kDefaultHttpHost);
  if (start.proxy_location().empty()) start.set_proxy_location(kDefaultProxyLocation);
  if (start.keep_alive_timeout_s() == 0) start.set_keep_alive_timeout_s(kDefaultKeepAliveTimeoutS);
  return start;
}

absl::Status StartMismatch(std::string_view field, const std::string& running,
                           const std::string& requested) {
  return absl::FailedPreconditionError(absl::StrCat(
      "Serve is running with ", ToAbsl(field), " ", running, " and this deploy asks for ",
      requested, ": start options cannot change without serve.shutdown()"));
}

// As Ray compares HTTP options: only those the request gives (not empty, not 0). The Python
// environment (python_executable, python_path) is the deploying client's and is not compared:
// replicas keep the one Serve started with.
absl::Status CheckStartOptionsMatch(const v1::ServeStartOptions& running,
                                    const v1::ServeStartOptions& requested) {
  auto text = [](const std::string& value) { return Quote(value); };
  auto number = [](double value) { return absl::StrCat(value); };
  if (!requested.http_host().empty() && requested.http_host() != running.http_host()) {
    return StartMismatch("http_host", text(running.http_host()), text(requested.http_host()));
  }
  if (requested.http_port() != 0 && requested.http_port() != running.http_port()) {
    return StartMismatch("http_port", number(running.http_port()), number(requested.http_port()));
  }
  if (!requested.root_path().empty() && requested.root_path() != running.root_path()) {
    return StartMismatch("root_path", text(running.root_path()), text(requested.root_path()));
  }
  if (requested.request_timeout_s() != 0 &&
      requested.request_timeout_s() != running.request_timeout_s()) {
    return StartMismatch("request_timeout_s", number(running.request_timeout_s()),
                         number(requested.request_timeout_s()));
  }
  if (requested.keep_alive_timeout_s() != 0 &&
      requested.keep_alive_timeout_s() != running.keep_alive_timeout_s()) {
    return StartMismatch("keep_alive_timeout_s", number(running.keep_alive_timeout_s()),
                         number(requested.keep_alive_timeout_s()));
  }
  if (!requested.proxy_location().empty() &&
      requested.proxy_location() != running.proxy_location()) {
    return StartMismatch("proxy_location", text(running.proxy_location()),
                         text(requested.proxy_location()));
  }
  return absl::OkStatus();
}

const v1::ServeDeploymentSpec* SpecOf(const v1::ServeApplicationSpec& spec,
                                      std::string_view deployment) {
  for (const v1::ServeDeploymentSpec& one : spec.deployments()) {
    if (one.name() == deployment) return &one;
  }
  return nullptr;
}

std::string ReplicaIdOf(const ReplicaAction& action) {
  return std::visit([](const auto& one) { return one.replica_id; }, action);
}

bool SameRoutes(const std::vector<RouteEntry>& a, const std::vector<RouteEntry>& b) {
  return std::equal(
      a.begin(), a.end(), b.begin(), b.end(), [](const RouteEntry& x, const RouteEntry& y) {
        return x.route_prefix == y.route_prefix && x.application == y.application &&
               x.ingress_deployment == y.ingress_deployment && x.takes_http == y.takes_http &&
               x.request_timeout_s == y.request_timeout_s;
      });
}

uint64_t InitialVersion(Clock* clock) {
  return static_cast<uint64_t>(std::max<int64_t>(absl::ToUnixMicros(clock->Now()), 0));
}

}  // namespace

bool ServeController::PublishedReplica::operator==(const PublishedReplica& other) const {
  return replica_id == other.replica_id && address.actor_id == other.address.actor_id &&
         address.owner_address == other.address.owner_address &&
         address.node_id == other.address.node_id &&
         max_ongoing_requests == other.max_ongoing_requests && model_ids == other.model_ids;
}

ServeController::ServeController(StateStore* store, Clock* clock, ReplicaRuntime* runtime,
                                 ServeControllerOptions options)
    : store_(store),
      clock_(clock),
      runtime_(runtime),
      options_(std::move(options)),
      anchor_(std::make_shared<Anchor>()),
      last_version_(InitialVersion(clock)) {
  anchor_->Attach(this);
  if (options_.proxies.runtime != nullptr) {
    ProxyManagerOptions proxies = options_.proxies;
    proxies.clock = clock;
    absl::StatusOr<std::unique_ptr<ProxyManager>> made = ProxyManager::Create(std::move(proxies));
    if (made.ok()) {
      node_proxies_ = *std::move(made);
    } else {
      LogLine(absl::StrCat("serve controller: no proxies on the nodes: ", made.status().message()));
    }
  }
  // A route table from the start, so a proxy's first GetRoutes is answered at once.
  absl::MutexLock lock(&mu_);
  RefreshRoutesLocked();
}

ServeController::~ServeController() {
  Stop();
  // Waits for a metrics collection in progress, which takes mu_ (not held here).
  registrations_.clear();
  replica_metrics_.reset();
  anchor_->Detach();
}

// ---------------------------------------------------------------------------------------------
// Life.

absl::Status ServeController::RegisterMetrics() {
  if (options_.registry == nullptr || !registrations_.empty()) return absl::OkStatus();
  metrics::MetricRegistry& registry = *options_.registry;
  std::vector<metrics::CallbackRegistration> registrations;
  TESSERA_ASSIGN_OR_RETURN(
      metrics::CallbackRegistration healthy,
      registry.AddCallbackGauge(
          {.name = std::string(kReplicaHealthyMetric),
           .help = "Whether each replica of a deployment passes its health checks (1) or not (0).",
           .label_names = {"deployment", "replica", "application"}},
          [this](metrics::SampleSink& sink) {
            ForEachDeploymentMetrics([&](const std::string& app, const std::string& deployment,
                                         const DeploymentMetrics& metrics) {
              for (const ReplicaHealth& replica : metrics.replica_healthy) {
                IgnoreStatus(
                    sink.Emit({deployment, replica.replica_id, app}, replica.healthy ? 1 : 0),
                    "three label values, UTF-8 as the names were checked to be");
              }
            });
          }));
  registrations.push_back(std::move(healthy));
  TESSERA_ASSIGN_OR_RETURN(
      metrics::CallbackRegistration starts,
      registry.AddCallbackCounter(
          {.name = std::string(kReplicaStartsMetric),
           .help = "Replicas of a deployment started, including those replacing failed ones.",
           .label_names = {"deployment", "application"}},
          [this](metrics::SampleSink& sink) {
            ForEachDeploymentMetrics([&](const std::string& app, const std::string& deployment,
                                         const DeploymentMetrics& metrics) {
              IgnoreStatus(
                  sink.Emit({deployment, app}, static_cast<double>(metrics.replica_starts)),
                  "two label values, UTF-8 as the names were checked to be");
            });
          }));
  registrations.push_back(std::move(starts));
  TESSERA_ASSIGN_OR_RETURN(
      metrics::CallbackRegistration states,
      registry.AddCallbackGauge(
          {.name = std::string(kReplicaStatesMetric),
           .help = "Replicas of a deployment by state (STARTING, RUNNING, STOPPING, ...).",
           .label_names = {"deployment", "application", "state"}},
          [this](metrics::SampleSink& sink) {
            ForEachDeploymentMetrics([&](const std::string& app, const std::string& deployment,
                                         const DeploymentMetrics& metrics) {
              for (const auto& [state, count] : metrics.replica_states) {
                IgnoreStatus(sink.Emit({deployment, app, state}, count),
                             "three label values, UTF-8 as the names were checked to be");
              }
            });
          }));
  registrations.push_back(std::move(states));
  TESSERA_ASSIGN_OR_RETURN(
      metrics::CallbackRegistration loops,
      registry.AddCallbackGauge({.name = std::string(kControlLoopsMetric),
                                 .help = "Control loops the serve controller has run."},
                                [this](metrics::SampleSink& sink) {
                                  uint64_t loops = 0;
                                  {
                                    absl::MutexLock lock(&mu_);
                                    loops = control_loops_;
                                  }
                                  IgnoreStatus(sink.Emit({}, static_cast<double>(loops)),
                                               "no labels: it cannot fail");
                                }));
  registrations.push_back(std::move(loops));
  TESSERA_RETURN_IF_ERROR(RegisterAutoscalingMetrics(registry, registrations));
  TESSERA_ASSIGN_OR_RETURN(replica_metrics_, ReplicaMetricsCollector::Create(
                                                 {.runtime = runtime_, .registry = &registry}));
  registrations_ = std::move(registrations);
  return absl::OkStatus();
}

absl::Status ServeController::RegisterAutoscalingMetrics(
    metrics::MetricRegistry& registry, std::vector<metrics::CallbackRegistration>& registrations) {
  struct AutoscalingGauge {
    std::string_view name;
    std::string_view help;
    double (*value)(const DeploymentMetrics&);
  };
  const AutoscalingGauge gauges[] = {
      {kAutoscalingTargetReplicasMetric, "The replica count autoscaling set as the target.",
       [](const DeploymentMetrics& m) {
         return static_cast<double>(m.autoscaling_target_replicas);
       }},
      {kAutoscalingDesiredReplicasMetric,
       "The replica count the autoscaling policy last wished for, before delays and bounds.",
       [](const DeploymentMetrics& m) {
         return static_cast<double>(m.autoscaling_desired_replicas);
       }},
      {kAutoscalingTotalRequestsMetric,
       "The ongoing requests autoscaling last saw for the deployment (queued and running).",
       [](const DeploymentMetrics& m) { return m.autoscaling_total_requests; }},
      {kAutoscalingTargetOngoingRequestsMetric,
       "The autoscaling config's target_ongoing_requests per replica.",
       [](const DeploymentMetrics& m) { return m.autoscaling_target_ongoing_requests; }},
  };
  for (const AutoscalingGauge& gauge : gauges) {
    TESSERA_ASSIGN_OR_RETURN(
        metrics::CallbackRegistration registration,
        registry.AddCallbackGauge(
            {.name = std::string(gauge.name),
             .help = std::string(gauge.help),
             .label_names = {"deployment", "application"}},
            [this, value = gauge.value](metrics::SampleSink& sink) {
              ForEachDeploymentMetrics([&](const std::string& app, const std::string& deployment,
                                           const DeploymentMetrics& metrics) {
                if (!metrics.autoscaling) return;
                IgnoreStatus(sink.Emit({deployment, app}, value(metrics)),
                             "two label values, UTF-8 as the names were checked to be");
              });
            }));
    registrations.push_back(std::move(registration));
  }
  return absl::OkStatus();
}

void ServeController::ForEachDeploymentMetrics(
    const std::function<void(const std::string& app, const std::string& deployment,
                             const DeploymentMetrics& metrics)>& each) const {
  absl::MutexLock lock(&mu_);
  for (const auto& [app_name, app] : applications_) {
    for (const auto& [name, deployment] : app.deployments) {
      each(app_name, name, deployment.machine->Metrics());
    }
  }
}

absl::Status ServeController::Start() {
  TESSERA_RETURN_IF_ERROR(RegisterMetrics());
  if (!loop_.joinable()) loop_ = std::thread([this] { Loop(); });
  return absl::OkStatus();
}

void ServeController::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (loop_.joinable()) loop_.join();
}

void ServeController::Loop() {
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      clock_->AwaitWithDeadline(mu_, absl::Condition(&stopping_),
                                clock_->Now() + options_.control_loop_period);
      if (stopping_) return;
    }
    RunControlLoopOnce();
  }
}

void ServeController::RunControlLoopOnce() {
  std::vector<Work> work;
  std::vector<std::string> running;
  bool collect_metrics = false;
  std::optional<v1::ServeStartOptions> serving;
  std::set<std::string> replica_nodes;
  std::vector<ReplicaKey> check_deaths;
  {
    absl::MutexLock lock(&mu_);
    ++control_loops_;
    work = TickLocked();
    RetryErasesLocked();
    // Persisted before the actions are carried out: a replica exists only once its record
    // does, so a restarted controller finds every replica it started.
    AfterChangeLocked();
    const absl::Time now = clock_->Now();
    const bool check_now = now >= next_death_check_;
    std::vector<ReplicaKey> running_keys;
    if (replica_metrics_ != nullptr || check_now) running_keys = RunningReplicaKeysLocked();
    if (replica_metrics_ != nullptr) {
      for (const ReplicaKey& key : running_keys) running.push_back(key.replica_id);
      if (now >= next_metrics_collection_) {
        collect_metrics = true;
        next_metrics_collection_ = now + options_.metrics_collect_period;
      }
    }
    if (node_proxies_ != nullptr) {
      if (started_) serving = start_;
      replica_nodes = ReplicaNodesLocked();
    }
    if (check_now) {
      next_death_check_ = now + options_.death_check_period;
      check_deaths = std::move(running_keys);
    }
  }
  for (const Work& item : work) Carry(item);
  CheckDeaths(check_deaths);
  if (replica_metrics_ != nullptr) {
    // A replica that stopped running loses its series at once; the calls wait for the period.
    replica_metrics_->Keep(running);
    if (collect_metrics) replica_metrics_->Collect();
  }
  if (node_proxies_ != nullptr) node_proxies_->Update(serving, replica_nodes);
  NotifyServeState();
}

std::vector<ServeController::ReplicaKey> ServeController::RunningReplicaKeysLocked() const {
  std::vector<ReplicaKey> keys;
  for (const auto& [app_name, app] : applications_) {
    for (const auto& [name, deployment] : app.deployments) {
      for (const RunningReplica& replica : deployment.machine->RunningReplicas()) {
        keys.push_back(ReplicaKey{app_name, name, replica.replica_id});
      }
    }
  }
  return keys;
}

void ServeController::CheckDeaths(const std::vector<ReplicaKey>& running) {
  std::vector<std::pair<ReplicaKey, std::string>> dead;
  for (const ReplicaKey& key : running) {
    if (std::optional<std::string> cause = runtime_->DeathOf(key.replica_id)) {
      dead.emplace_back(key, *std::move(cause));
    }
  }
  if (dead.empty()) return;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [key, cause] : dead) {
      DeploymentStateMachine* machine = MachineLocked(key);
      if (machine != nullptr) DiedLocked(*machine, key.replica_id, absl::UnavailableError(cause));
    }
    AfterChangeLocked();
  }
  NotifyServeState();
}

void ServeController::NotifyServeState() {
  if (!options_.on_serve_state) return;
  absl::MutexLock notify(&notify_mu_);
  std::optional<v1::ServeStartOptions> state;
  {
    absl::MutexLock lock(&mu_);
    if (serve_generation_ == notified_generation_) return;
    notified_generation_ = serve_generation_;
    if (started_) state = start_;
  }
  options_.on_serve_state(state);
}

// ---------------------------------------------------------------------------------------------
// Deploy, Delete, Shutdown.

absl::Status ServeController::Deploy(const v1::DeployServeApplicationsRequest& request) {
  TESSERA_RETURN_IF_ERROR(ValidateStartOptions(request.start()));
  TESSERA_ASSIGN_OR_RETURN(std::vector<PlannedApplication> plan, PlanApplications(request));
  {
    absl::MutexLock lock(&mu_);
    TESSERA_RETURN_IF_ERROR(CheckDeployableLocked(request, plan));
    const double now_s = UnixSeconds(clock_->Now());
    TESSERA_RETURN_IF_ERROR(WriteAllLocked(DeployWritesLocked(request, plan, now_s)));
    ApplyDeployLocked(request, std::move(plan), now_s);
    AfterChangeLocked();
  }
  NotifyServeState();
  return absl::OkStatus();
}

absl::Status ServeController::CheckDeployableLocked(
    const v1::DeployServeApplicationsRequest& request,
    const std::vector<PlannedApplication>& plan) const {
  if (shutting_down_) {
    return absl::FailedPreconditionError(
        "Serve is shutting down: deploy again once serve.status() shows it stopped");
  }
  if (started_) TESSERA_RETURN_IF_ERROR(CheckStartOptionsMatch(start_, request.start()));
  std::set<std::string> named;
  for (const PlannedApplication& planned : plan) named.insert(planned.spec.name());
  // Prefixes are checked against the applications the request leaves as they are (those
  // replace_all deletes give theirs up), then against one another.
  std::vector<ApplicationRoute> others;
  for (const auto& [name, app] : applications_) {
    if (named.contains(name)) continue;
    others.push_back(ApplicationRoute{
        name, app.spec.has_route_prefix() ? std::optional(app.spec.route_prefix()) : std::nullopt,
        app.deleting || request.replace_all()});
  }
  for (const PlannedApplication& planned : plan) {
    const v1::ServeApplicationSpec& spec = planned.spec;
    std::optional<std::string> prefix;
    if (spec.has_route_prefix()) prefix = spec.route_prefix();
    TESSERA_RETURN_IF_ERROR(CheckRoutePrefix(spec.name(), prefix, others));
    others.push_back(ApplicationRoute{spec.name(), prefix, false});
  }
  return absl::OkStatus();
}

std::vector<std::pair<std::string, std::string>> ServeController::DeployWritesLocked(
    const v1::DeployServeApplicationsRequest& request, const std::vector<PlannedApplication>& plan,
    double now_s) const {
  std::vector<std::pair<std::string, std::string>> writes;
  if (!started_) {
    writes.emplace_back(std::string(kStartKey),
                        EncodeStart({FilledStartOptions(request.start()), false}));
  }
  std::set<std::string> named;
  for (const PlannedApplication& planned : plan) {
    named.insert(planned.spec.name());
    writes.emplace_back(ApplicationKey(planned.spec.name()),
                        EncodeApplication({planned.spec, now_s, false}));
  }
  if (request.replace_all()) {
    std::set<std::string> others;
    for (const auto& [name, app] : applications_) {
      if (!named.contains(name)) others.insert(name);
    }
    for (auto& write : DeletionWritesLocked(others)) writes.push_back(std::move(write));
  }
  return writes;
}

void ServeController::ApplyDeployLocked(const v1::DeployServeApplicationsRequest& request,
                                        std::vector<PlannedApplication> plan, double now_s) {
  if (!started_) {
    started_ = true;
    start_ = FilledStartOptions(request.start());
    ++serve_generation_;
  }
  std::set<std::string> named;
  for (PlannedApplication& planned : plan) {
    const std::string name = planned.spec.name();
    named.insert(name);
    Application& app = applications_[name];
    app.spec = std::move(planned.spec);
    app.last_deployed_time_s = now_s;
    app.deleting = false;
    ApplyTargetsLocked(app, planned.targets);
  }
  if (!request.replace_all()) return;
  for (auto& [name, app] : applications_) {
    if (!named.contains(name)) DeleteApplicationLocked(app);
  }
}

void ServeController::ApplyTargetsLocked(Application& app,
                                         const std::map<std::string, DeploymentTarget>& targets) {
  for (const auto& [name, target] : targets) {
    Deployment& deployment = app.deployments[name];
    if (deployment.machine == nullptr) {
      NewMachineLocked(app.spec.name(), name, SeedFor(app.spec.name(), name), deployment);
    }
    // The same target again changes nothing: an unchanged deployment is not redeployed.
    IgnoreStatus(deployment.machine->SetTarget(target),
                 "every target passed DeploymentTarget::Validate in PlanApplication");
  }
  for (auto& [name, deployment] : app.deployments) {
    if (!targets.contains(name)) deployment.machine->Delete();
  }
}

void ServeController::DeleteApplicationLocked(Application& app) {
  app.deleting = true;
  for (auto& [name, deployment] : app.deployments) deployment.machine->Delete();
}

void ServeController::NewMachineLocked(const std::string& app, const std::string& name,
                                       uint64_t seed, Deployment& deployment) {
  deployment.replica_id_seed = seed;
  deployment.machine = std::make_unique<DeploymentStateMachine>(DeploymentStateOptions{
      .app_name = app, .deployment_name = name, .clock = clock_, .replica_id_seed = seed});
}

uint64_t ServeController::SeedFor(std::string_view app, std::string_view deployment) const {
  uint64_t hash = 1469598103934665603ull;  // FNV-1a: the same in every process
  for (std::string_view part : {app, std::string_view("#"), deployment}) {
    for (const char c : part) {
      hash ^= static_cast<unsigned char>(c);
      hash *= 1099511628211ull;
    }
  }
  // The time keeps a deployment made again under the same names from drawing the ids its
  // predecessor's replicas had.
  return hash ^ options_.seed ^ static_cast<uint64_t>(absl::ToUnixNanos(clock_->Now()));
}

std::vector<std::pair<std::string, std::string>> ServeController::DeletionWritesLocked(
    const std::set<std::string>& names) const {
  std::vector<std::pair<std::string, std::string>> writes;
  for (const std::string& name : names) {
    auto it = applications_.find(name);
    if (it == applications_.end() || it->second.deleting) continue;
    writes.emplace_back(ApplicationKey(name),
                        EncodeApplication({it->second.spec, it->second.last_deployed_time_s,
                                           /*deleting=*/true}));
  }
  return writes;
}

absl::Status ServeController::Delete(const std::vector<std::string>& names) {
  for (const std::string& name : names) {
    if (name.empty()) {
      return absl::InvalidArgumentError("the names of applications to delete must not be empty");
    }
  }
  const std::set<std::string> unique(names.begin(), names.end());
  {
    absl::MutexLock lock(&mu_);
    TESSERA_RETURN_IF_ERROR(WriteAllLocked(DeletionWritesLocked(unique)));
    for (const std::string& name : unique) {
      if (auto it = applications_.find(name); it != applications_.end()) {
        DeleteApplicationLocked(it->second);
      }
    }
    AfterChangeLocked();
  }
  NotifyServeState();
  return absl::OkStatus();
}

absl::Status ServeController::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    if (!started_ || shutting_down_) return absl::OkStatus();
    std::set<std::string> all;
    for (const auto& [name, app] : applications_) all.insert(name);
    std::vector<std::pair<std::string, std::string>> writes = DeletionWritesLocked(all);
    writes.emplace_back(std::string(kStartKey), EncodeStart({start_, /*shutting_down=*/true}));
    TESSERA_RETURN_IF_ERROR(WriteAllLocked(writes));
    shutting_down_ = true;
    for (auto& [name, app] : applications_) DeleteApplicationLocked(app);
    AfterChangeLocked();
  }
  NotifyServeState();
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------------------------
// After each change.

void ServeController::AfterChangeLocked() {
  CollectDeletedLocked();
  PersistDeploymentsLocked();
  FinishShutdownLocked();
  RefreshReplicaSetsLocked();
  RefreshRoutesLocked();
}

void ServeController::CollectDeletedLocked() {
  for (auto app = applications_.begin(); app != applications_.end();) {
    auto& deployments = app->second.deployments;
    for (auto it = deployments.begin(); it != deployments.end();) {
      if (!it->second.machine->Deleted()) {
        ++it;
        continue;
      }
      EraseLocked(DeploymentKey(app->first, it->first));
      it = deployments.erase(it);
    }
    if (app->second.deleting && deployments.empty()) {
      EraseLocked(ApplicationKey(app->first));
      app = applications_.erase(app);
    } else {
      ++app;
    }
  }
}

void ServeController::PersistDeploymentsLocked() {
  for (auto& [app_name, app] : applications_) {
    for (auto& [name, deployment] : app.deployments) {
      const uint64_t generation = deployment.machine->records_generation();
      if (deployment.persisted_generation == generation) continue;
      const std::string key = DeploymentKey(app_name, name);
      const absl::Status put =
          store_->Put(kServeTable, key,
                      EncodeDeployment({app_name, name, deployment.replica_id_seed,
                                        deployment.machine->Records()}));
      NoteStoreLocked(put, "write", key);
      if (!put.ok()) continue;  // written at a later change or loop
      deployment.persisted_generation = generation;
      pending_erases_.erase(key);
    }
  }
}

void ServeController::FinishShutdownLocked() {
  if (!shutting_down_ || !applications_.empty()) return;
  started_ = false;
  shutting_down_ = false;
  start_.Clear();
  proxies_.clear();
  ++serve_generation_;
  EraseLocked(std::string(kStartKey));
}

void ServeController::RefreshReplicaSetsLocked() {
  for (auto& [app_name, app] : applications_) {
    for (auto& [name, deployment] : app.deployments) {
      std::vector<PublishedReplica> replicas;
      for (const RunningReplica& running : deployment.machine->RunningReplicas()) {
        auto address = addresses_.find(running.replica_id);
        if (address == addresses_.end()) continue;  // recovered, not found yet: unreachable
        PublishedReplica replica{
            running.replica_id, address->second, running.max_ongoing_requests, {}};
        if (replica.address.node_id.empty()) replica.address.node_id = running.node_id;
        if (auto ids = model_ids_.find(running.replica_id); ids != model_ids_.end()) {
          replica.model_ids = ids->second;
        }
        replicas.push_back(std::move(replica));
      }
      if (deployment.replica_set_version != 0 && replicas == deployment.replica_set) continue;
      deployment.replica_set = std::move(replicas);
      deployment.replica_set_version = NextVersionLocked();
    }
  }
}

void ServeController::RefreshRoutesLocked() {
  std::vector<RouteEntry> routes;
  if (started_) {
    for (const auto& [name, app] : applications_) {
      if (app.deleting || !app.spec.has_route_prefix()) continue;
      routes.push_back(RouteEntry{app.spec.route_prefix(), name, app.spec.ingress_deployment(),
                                  app.spec.ingress_takes_http(), start_.request_timeout_s()});
    }
  }
  if (route_version_ != 0 && SameRoutes(routes, routes_)) return;
  routes_ = std::move(routes);
  route_version_ = NextVersionLocked();
}

// ---------------------------------------------------------------------------------------------
// The store.

absl::Status ServeController::WriteAllLocked(
    const std::vector<std::pair<std::string, std::string>>& writes) {
  std::vector<std::pair<std::string, std::optional<std::string>>> undo;
  for (const auto& [key, value] : writes) {
    absl::StatusOr<std::optional<std::string>> old = store_->Get(kServeTable, key);
    const absl::Status put = old.ok() ? store_->Put(kServeTable, key, value) : old.status();
    NoteStoreLocked(put, "write", key);
    if (!put.ok()) {
      for (auto it = undo.rbegin(); it != undo.rend(); ++it) {
        if (it->second.has_value()) {
          IgnoreStatus(store_->Put(kServeTable, it->first, *it->second),
                       "undoing a refused change on a store that failed already: a record left "
                       "is a goal the client was told failed, which it may deploy again");
        } else {
          IgnoreStatus(store_->Delete(kServeTable, it->first),
                       "undoing a refused change on a store that failed already: a record left "
                       "is a goal the client was told failed, which it may deploy again");
        }
      }
      return absl::UnavailableError(
          absl::StrCat(ToAbsl(kStoreUnavailable), put.message(), "; nothing was changed"));
    }
    pending_erases_.erase(key);  // a newer value than the removal that waited
    undo.emplace_back(key, *std::move(old));
  }
  return absl::OkStatus();
}

void ServeController::EraseLocked(const std::string& key) {
  const absl::StatusOr<bool> erased = store_->Delete(kServeTable, key);
  NoteStoreLocked(erased.status(), "remove", key);
  if (erased.ok()) {
    pending_erases_.erase(key);
  } else {
    pending_erases_.insert(key);
  }
}

void ServeController::RetryErasesLocked() {
  const std::set<std::string> keys = pending_erases_;
  for (const std::string& key : keys) EraseLocked(key);
}

void ServeController::NoteStoreLocked(const absl::Status& status, std::string_view what,
                                      std::string_view key) {
  if (status.ok()) {
    if (store_failing_) LogLine("serve controller: the state store takes writes again");
    store_failing_ = false;
    return;
  }
  if (!store_failing_) {
    LogLine(absl::StrCat("serve controller: could not ", ToAbsl(what), " ", Quote(key),
                         " in the state store (retried at each control loop): ", status.message()));
  }
  store_failing_ = true;
}

// ---------------------------------------------------------------------------------------------
// Lookups and answers.

DeploymentStateMachine* ServeController::MachineLocked(const ReplicaKey& key) {
  auto app = applications_.find(key.application);
  if (app == applications_.end()) return nullptr;
  auto deployment = app->second.deployments.find(key.deployment);
  return deployment == app->second.deployments.end() ? nullptr : deployment->second.machine.get();
}

const ServeController::Deployment* ServeController::FindRoutedLocked(std::string_view application,
                                                                     std::string_view deployment,
                                                                     std::string* resolved) const {
  auto app = applications_.find(application);
  if (app == applications_.end()) return nullptr;
  const std::string name =
      deployment.empty() ? app->second.spec.ingress_deployment() : std::string(deployment);
  if (!app->second.deleting && SpecOf(app->second.spec, name) == nullptr) return nullptr;
  auto it = app->second.deployments.find(name);
  if (it == app->second.deployments.end()) return nullptr;
  if (resolved != nullptr) *resolved = name;
  return &it->second;
}

void ServeController::FillReplicaLocked(const ReplicaDetails& replica,
                                        v1::ServeReplicaDetails* out) const {
  out->set_replica_id(replica.replica_id);
  out->set_state(std::string(Name(replica.state)));
  out->set_node_id(replica.node_id);
  out->set_state_since_s(UnixSeconds(replica.state_since));
  out->set_message(replica.pending_explanation);
  auto address = addresses_.find(replica.replica_id);
  if (address == addresses_.end()) return;
  out->set_actor_id(address->second.actor_id);
  out->set_pid(address->second.pid);
  if (out->node_id().empty()) out->set_node_id(address->second.node_id);
}

v1::ServeStatus ServeController::Status() const {
  std::vector<v1::ServeProxyStatus> node_proxies;
  if (node_proxies_ != nullptr) node_proxies = node_proxies_->Statuses();
  v1::ServeStatus status;
  absl::MutexLock lock(&mu_);
  if (!started_) return status;
  status.set_started(true);
  // target_capacity is not set by any call yet: every deployment runs at its full count.
  status.set_target_capacity(100);
  for (const auto& [node_id, proxy] : proxies_) *status.add_proxies() = proxy;
  for (v1::ServeProxyStatus& proxy : node_proxies) *status.add_proxies() = std::move(proxy);
  for (const auto& [name, app] : applications_) {
    FillApplicationStatusLocked(app, status.add_applications());
  }
  return status;
}

void ServeController::FillApplicationStatusLocked(const Application& app,
                                                  v1::ServeApplicationStatus* out) const {
  out->set_name(app.spec.name());
  std::vector<DeploymentStatusInfo> infos;
  for (const auto& [name, deployment] : app.deployments) {
    // A deployment that left the spec is not the application's any more, while it stops.
    if (!app.deleting && SpecOf(app.spec, name) == nullptr) continue;
    DeploymentStatusInfo info = deployment.machine->Status();
    v1::ServeDeploymentStatus* entry = out->add_deployments();
    entry->set_name(name);
    entry->set_status(std::string(Name(info.status)));
    entry->set_status_trigger(std::string(Name(info.status_trigger)));
    entry->set_message(info.message);
    for (const auto& [state, count] : info.replica_states) {
      (*entry->mutable_replica_states())[state] = count;
    }
    entry->set_target_num_replicas(deployment.machine->target_num_replicas());
    for (const ReplicaDetails& replica : deployment.machine->Replicas()) {
      FillReplicaLocked(replica, entry->add_replicas());
    }
    infos.push_back(std::move(info));
  }
  const ApplicationStatusInfo status = ApplicationStatusFromDeployments(infos, app.deleting);
  out->set_status(std::string(Name(status.status)));
  out->set_message(status.message);
  out->set_last_deployed_time_s(app.last_deployed_time_s);
  if (app.spec.has_route_prefix()) out->set_route_prefix(app.spec.route_prefix());
  out->set_ingress_deployment(app.spec.ingress_deployment());
}

std::set<std::string> ServeController::ReplicaNodesLocked() const {
  std::set<std::string> nodes;
  for (const auto& [app_name, app] : applications_) {
    for (const auto& [name, deployment] : app.deployments) {
      const DeploymentRecords records = deployment.machine->Records();
      for (const ReplicaRecord& replica : records.replicas) {
        if (!replica.stopping && !replica.node_id.empty()) nodes.insert(replica.node_id);
      }
    }
  }
  return nodes;
}

std::optional<v1::ServeStartOptions> ServeController::start_options() const {
  absl::MutexLock lock(&mu_);
  if (!started_) return std::nullopt;
  return start_;
}

void ServeController::SetProxyStatus(const std::string& node_id, ProxyStatus status,
                                     const std::string& address) {
  absl::MutexLock lock(&mu_);
  v1::ServeProxyStatus& proxy = proxies_[node_id];
  proxy.set_node_id(node_id);
  proxy.set_status(std::string(Name(status)));
  proxy.set_address(address);
}

void ServeController::RemoveProxy(const std::string& node_id) {
  absl::MutexLock lock(&mu_);
  proxies_.erase(node_id);
}

void ServeController::SetMultiplexedModelIds(const std::string& replica_id,
                                             std::vector<std::string> model_ids) {
  absl::MutexLock lock(&mu_);
  if (!addresses_.contains(replica_id)) return;
  std::sort(model_ids.begin(), model_ids.end());
  model_ids_[replica_id] = std::move(model_ids);
  RefreshReplicaSetsLocked();
}

absl::StatusOr<v1::GetServeReplicasResponse> ServeController::GetReplicas(
    const std::string& application, const std::string& deployment, uint64_t known_version,
    absl::Duration wait) {
  absl::MutexLock lock(&mu_);
  auto changed = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const Deployment* found = FindRoutedLocked(application, deployment, nullptr);
    return stopping_ || found == nullptr || found->replica_set_version != known_version;
  };
  clock_->AwaitWithDeadline(mu_, absl::Condition(&changed), clock_->Now() + wait);
  if (!applications_.contains(application)) {
    return absl::NotFoundError(
        absl::StrCat("Application ", Quote(application), " does not exist."));
  }
  const v1::ServeApplicationSpec& spec = applications_.find(application)->second.spec;
  std::string resolved;
  const Deployment* found = FindRoutedLocked(application, deployment, &resolved);
  if (found == nullptr) {
    const std::string& name = deployment.empty() ? spec.ingress_deployment() : deployment;
    return absl::NotFoundError(absl::StrCat(
        "Deployment ", Quote(name), " does not exist in application ", Quote(application), "."));
  }
  v1::GetServeReplicasResponse response;
  response.set_deployment(resolved);
  response.set_version(found->replica_set_version);
  for (const PublishedReplica& replica : found->replica_set) {
    v1::ServeReplica* out = response.add_replicas();
    out->set_replica_id(replica.replica_id);
    out->set_actor_id(replica.address.actor_id);
    out->set_owner_address(replica.address.owner_address);
    out->set_node_id(replica.address.node_id);
    out->set_max_ongoing_requests(replica.max_ongoing_requests);
    for (const std::string& id : replica.model_ids) out->add_multiplexed_model_ids(id);
  }
  const v1::ServeDeploymentSpec* deployment_spec = SpecOf(spec, resolved);
  const int max_queued = deployment_spec == nullptr ? 0 : deployment_spec->max_queued_requests();
  response.set_max_queued_requests(max_queued == 0 ? -1 : max_queued);
  return response;
}

absl::StatusOr<RouteTable> ServeController::GetRoutes(uint64_t known_version, absl::Duration wait) {
  absl::MutexLock lock(&mu_);
  auto changed = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return stopping_ || route_version_ != known_version;
  };
  clock_->AwaitWithDeadline(mu_, absl::Condition(&changed), clock_->Now() + wait);
  return RouteTable{route_version_, routes_};
}

void ServeController::Report(const v1::ServeAutoscalingSample& sample) {
  absl::MutexLock lock(&mu_);
  const Deployment* deployment =
      FindRoutedLocked(sample.application(), sample.deployment(), nullptr);
  if (deployment == nullptr) return;  // a late report of a deployment that is gone
  // Requests queued at the caller count as ongoing: they are what a cold start scales up for.
  IgnoreStatus(
      deployment->machine->RecordAutoscalingSample(
          sample.source(), clock_->Now(), sample.ongoing_requests() + sample.queued_requests()),
      "a malformed sample (no source, a negative or NaN count) is dropped; the service "
      "refuses one before it gets here");
}

// ---------------------------------------------------------------------------------------------
// The control loop's actions.

std::vector<ServeController::Work> ServeController::TickLocked() {
  std::vector<Work> work;
  for (auto& [app_name, app] : applications_) {
    for (auto& [name, deployment] : app.deployments) {
      for (ReplicaAction& action : deployment.machine->Tick()) {
        Work item{ReplicaKey{app_name, name, ReplicaIdOf(action)}, std::move(action), std::nullopt};
        if (std::holds_alternative<StartReplica>(item.action)) {
          ReplicaLaunch launch;
          launch.replica_id = item.key.replica_id;
          launch.application = app_name;
          launch.deployment = name;
          // Only a deployment of the spec starts replicas (one being deleted stops them).
          if (const v1::ServeDeploymentSpec* spec = SpecOf(app.spec, name); spec != nullptr) {
            launch.replica_spec = spec->replica_spec();
            launch.resources = spec->resources();
          }
          const int max_ongoing = std::get<StartReplica>(item.action).config.max_ongoing_requests;
          launch.max_concurrency =
              std::max(max_ongoing + kControlCallHeadroom, kMinReplicaConcurrency);
          item.launch = std::move(launch);
        }
        work.push_back(std::move(item));
      }
    }
  }
  return work;
}

void ServeController::Carry(const Work& work) {
  const ReplicaKey& key = work.key;
  if (std::holds_alternative<StartReplica>(work.action)) {
    CarryStart(key, *work.launch);
  } else if (const auto* check = std::get_if<CheckHealth>(&work.action)) {
    CarryCheck(key, *check);
  } else if (const auto* reconfigure = std::get_if<Reconfigure>(&work.action)) {
    CarryReconfigure(key, *reconfigure);
  } else if (const auto* stop = std::get_if<StopReplica>(&work.action)) {
    CarryStop(key, *stop);
  } else {  // ForceKill
    runtime_->Kill(key.replica_id);
    OnStopped(key);
  }
}

void ServeController::CarryStart(const ReplicaKey& key, const ReplicaLaunch& launch) {
  std::shared_ptr<Anchor> anchor = anchor_;
  runtime_->Start(
      launch,
      [anchor, key](const std::string& explanation) {
        anchor->Run([&](ServeController& controller) { controller.OnPending(key, explanation); });
      },
      [anchor, key](absl::StatusOr<ReplicaAddress> address) {
        anchor->Run([&](ServeController& controller) { controller.OnStartDone(key, address); });
      });
}

void ServeController::CarryCheck(const ReplicaKey& key, const CheckHealth& check) {
  std::shared_ptr<Anchor> anchor = anchor_;
  const absl::Duration timeout = std::max(check.deadline - clock_->Now(), absl::ZeroDuration());
  runtime_->Call(key.replica_id, "check_health", std::nullopt, timeout,
                 [anchor, key, number = check.check](absl::StatusOr<std::string> result) {
                   anchor->Run([&](ServeController& controller) {
                     controller.OnHealthChecked(key, number, result.status());
                   });
                 });
}

void ServeController::CarryReconfigure(const ReplicaKey& key, const Reconfigure& reconfigure) {
  std::shared_ptr<Anchor> anchor = anchor_;
  // No deadline, as Ray has none: a user's reconfigure may load a model for minutes; the
  // replica shows UPDATING meanwhile.
  runtime_->Call(key.replica_id, kReconfigureMethod, ReconfigureArgument(reconfigure.config),
                 absl::InfiniteDuration(), [anchor, key](absl::StatusOr<std::string> result) {
                   anchor->Run([&](ServeController& controller) {
                     controller.OnReconfigured(key, result.status());
                   });
                 });
}

void ServeController::CarryStop(const ReplicaKey& key, const StopReplica& stop) {
  std::shared_ptr<Anchor> anchor = anchor_;
  const absl::Duration timeout =
      std::max(stop.graceful_deadline - clock_->Now(), absl::ZeroDuration());
  // The drain ends one way or the other (done, failed, past its deadline); the process is
  // ended then, since a replica actor does not exit by itself.
  runtime_->Call(key.replica_id, "prepare_for_shutdown", std::nullopt, timeout,
                 [anchor, key](absl::StatusOr<std::string>) {
                   anchor->Run([&](ServeController& controller) {
                     controller.runtime_->Kill(key.replica_id);
                     controller.OnStopped(key);
                   });
                 });
}

void ServeController::CarryFind(const ReplicaKey& key) {
  std::shared_ptr<Anchor> anchor = anchor_;
  runtime_->Find(key.replica_id, [anchor, key](absl::StatusOr<ReplicaAddress> address) {
    anchor->Run([&](ServeController& controller) { controller.OnFound(key, address); });
  });
}

// ---------------------------------------------------------------------------------------------
// The runtime's answers.

void ServeController::OnPending(const ReplicaKey& key, const std::string& explanation) {
  absl::MutexLock lock(&mu_);
  if (DeploymentStateMachine* machine = MachineLocked(key); machine != nullptr) {
    machine->OnReplicaPending(key.replica_id, explanation);
  }
}

void ServeController::OnStartDone(const ReplicaKey& key,
                                  const absl::StatusOr<ReplicaAddress>& address) {
  bool unwanted = false;
  {
    absl::MutexLock lock(&mu_);
    DeploymentStateMachine* machine = MachineLocked(key);
    if (!address.ok()) {
      if (machine != nullptr) {
        machine->OnReplicaStartFailed(key.replica_id, ToStd(address.status().message()));
      }
    } else if (machine != nullptr && machine->OnReplicaStarted(key.replica_id, address->node_id)) {
      addresses_[key.replica_id] = *address;
    } else {
      // Stopped (or its deployment deleted) while it started: the kill sent then may have
      // found no actor yet, so this one is ended now.
      unwanted = true;
    }
    AfterChangeLocked();
  }
  if (unwanted) runtime_->Kill(key.replica_id);
  NotifyServeState();
}

bool ServeController::DiedLocked(DeploymentStateMachine& machine, const std::string& replica_id,
                                 const absl::Status& status) {
  if (!absl::IsUnavailable(status)) return false;
  machine.OnReplicaDied(replica_id, ToStd(status.message()));
  ForgetReplicaLocked(replica_id);
  return true;
}

void ServeController::ForgetReplicaLocked(const std::string& replica_id) {
  addresses_.erase(replica_id);
  model_ids_.erase(replica_id);
}

void ServeController::OnHealthChecked(const ReplicaKey& key, uint64_t check,
                                      const absl::Status& status) {
  bool find = false;
  {
    absl::MutexLock lock(&mu_);
    DeploymentStateMachine* machine = MachineLocked(key);
    if (machine != nullptr && !DiedLocked(*machine, key.replica_id, status)) {
      machine->OnHealthCheckResult(key.replica_id, check, status.ok(), ToStd(status.message()));
      // A recovered replica whose lookup failed answers its checks but cannot be routed to
      // until its address is known: it is looked up again at each check that passes.
      find = status.ok() && !addresses_.contains(key.replica_id);
    }
    AfterChangeLocked();
  }
  if (find) CarryFind(key);
  NotifyServeState();
}

void ServeController::OnReconfigured(const ReplicaKey& key, const absl::Status& status) {
  {
    absl::MutexLock lock(&mu_);
    DeploymentStateMachine* machine = MachineLocked(key);
    if (machine != nullptr && !DiedLocked(*machine, key.replica_id, status)) {
      machine->OnReconfigured(key.replica_id, status.ok(), ToStd(status.message()));
    }
    AfterChangeLocked();
  }
  NotifyServeState();
}

void ServeController::OnStopped(const ReplicaKey& key) {
  {
    absl::MutexLock lock(&mu_);
    if (DeploymentStateMachine* machine = MachineLocked(key); machine != nullptr) {
      machine->OnReplicaStopped(key.replica_id);
    }
    ForgetReplicaLocked(key.replica_id);
    AfterChangeLocked();
  }
  NotifyServeState();
}

void ServeController::OnFound(const ReplicaKey& key,
                              const absl::StatusOr<ReplicaAddress>& address) {
  {
    absl::MutexLock lock(&mu_);
    DeploymentStateMachine* machine = MachineLocked(key);
    if (machine == nullptr) return;
    if (address.ok()) {
      // Still RECOVERING: it runs (and is published) once its first health check passes.
      const DeploymentRecords records = machine->Records();
      for (const ReplicaRecord& replica : records.replicas) {
        if (replica.replica_id == key.replica_id) addresses_[key.replica_id] = *address;
      }
    } else if (absl::IsNotFound(address.status())) {
      machine->OnReplicaDied(key.replica_id,
                             absl::StrCat("its actor is gone: ", address.status().message()));
      ForgetReplicaLocked(key.replica_id);
    } else {
      // The health checks decide: one that fails gives the replica up, each that passes
      // looks it up again.
      LogLine(absl::StrCat("serve controller: could not look up replica ", key.replica_id, ": ",
                           address.status().message()));
    }
    AfterChangeLocked();
  }
  NotifyServeState();
}

// ---------------------------------------------------------------------------------------------
// Recovery.

absl::Status ServeController::Recover() {
  TESSERA_ASSIGN_OR_RETURN(auto entries, store_->List(kServeTable));
  ServeRecords records = DecodeServeRecords(entries);
  for (const absl::Status& error : records.errors) {
    LogLine(absl::StrCat("serve controller: skipped a record: ", error.message()));
  }
  std::vector<ReplicaKey> to_find;
  {
    absl::MutexLock lock(&mu_);
    RestoreStartLocked(records.start,
                       !records.applications.empty() || !records.deployments.empty());
    std::map<std::string, PlannedApplication> goals;
    for (StoredApplication& stored : records.applications) {
      absl::StatusOr<PlannedApplication> planned = PlanApplication(stored.spec);
      if (!planned.ok()) {
        LogLine(
            absl::StrCat("serve controller: skipped application ", Quote(stored.spec.name()),
                         ", whose recorded spec is no longer valid: ", planned.status().message()));
        continue;
      }
      Application& app = applications_[stored.spec.name()];
      app.spec = std::move(stored.spec);
      app.last_deployed_time_s = stored.last_deployed_time_s;
      app.deleting = stored.deleting;
      goals.emplace(app.spec.name(), *std::move(planned));
    }
    for (StoredDeployment& stored : records.deployments) {
      RestoreDeploymentLocked(std::move(stored), to_find);
    }
    ReconcileRecoveredLocked(goals);
    AfterChangeLocked();
  }
  for (const ReplicaKey& key : to_find) CarryFind(key);
  NotifyServeState();
  return absl::OkStatus();
}

void ServeController::RestoreStartLocked(const std::optional<StoredStart>& start,
                                         bool have_records) {
  if (start.has_value()) {
    start_ = FilledStartOptions(start->options);
    shutting_down_ = start->shutting_down;
  } else if (have_records) {
    LogLine("serve controller: Serve's start record is missing; it runs with default options");
    start_ = FilledStartOptions(v1::ServeStartOptions());
  } else {
    return;
  }
  started_ = true;
  ++serve_generation_;
}

void ServeController::RestoreDeploymentLocked(StoredDeployment stored,
                                              std::vector<ReplicaKey>& to_find) {
  const std::string where = absl::StrCat("deployment ", Quote(stored.deployment),
                                         " of application ", Quote(stored.application));
  Application& app = applications_[stored.application];
  if (app.spec.name().empty()) {
    // Its application's record is gone: its replicas are stopped and it is forgotten.
    LogLine(absl::StrCat("serve controller: ", where, " has no application record; deleting it"));
    app.spec.set_name(stored.application);
    app.deleting = true;
  }
  Deployment& deployment = app.deployments[stored.deployment];
  NewMachineLocked(stored.application, stored.deployment, stored.replica_id_seed, deployment);
  if (absl::Status recovered = deployment.machine->Recover(stored.records); !recovered.ok()) {
    LogLine(absl::StrCat("serve controller: skipped the records of ", where, ": ",
                         recovered.message()));
    app.deployments.erase(stored.deployment);
    return;
  }
  // What the store holds is these records.
  deployment.persisted_generation = deployment.machine->records_generation();
  for (const ReplicaRecord& replica : stored.records.replicas) {
    to_find.push_back(ReplicaKey{stored.application, stored.deployment, replica.replica_id});
  }
}

void ServeController::ReconcileRecoveredLocked(
    const std::map<std::string, PlannedApplication>& goals) {
  // Each application's record is its goal (it is written first at every deploy): the machines
  // are brought to it, which changes nothing where the records already agree.
  for (auto& [name, app] : applications_) {
    auto goal = goals.find(name);
    if (app.deleting || shutting_down_ || goal == goals.end()) {
      DeleteApplicationLocked(app);
    } else {
      ApplyTargetsLocked(app, goal->second.targets);
    }
  }
}

}  // namespace tessera::serve
