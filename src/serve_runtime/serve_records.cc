// The serve controller's records (serve_records.h): JSON with a format number, protocol messages
// inside as base64 of their bytes. Readers check every field's type, never throw, and say which
// field is wrong.
#include "serve_runtime/serve_records.h"

#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "base/string_util.h"

namespace tessera::serve {
namespace {

using Json = nlohmann::json;

// The records' format; a reader refuses another (a newer head's, say).
constexpr int kFormat = 1;

// ---------------------------------------------------------------------------------------------
// Writing.

std::string Dump(const Json& json) {
  // A text that is not UTF-8 (an error message a replica raised) is mended, not thrown on.
  return json.dump(-1, ' ', false, Json::error_handler_t::replace);
}

template <typename T>
Json OrNull(const std::optional<T>& value) {
  return value.has_value() ? Json(*value) : Json(nullptr);
}

std::string_view DirectionWord(TargetCapacityDirection direction) {
  switch (direction) {
    case TargetCapacityDirection::kUp: return "up";
    case TargetCapacityDirection::kDown: return "down";
    case TargetCapacityDirection::kUnset: break;
  }
  return "unset";
}

Json ReplicaConfigJson(const ReplicaConfig& config) {
  return Json{{"user_config", config.user_config},
              {"max_ongoing_requests", config.max_ongoing_requests},
              {"graceful_shutdown_wait_loop_s", config.graceful_shutdown_wait_loop_s}};
}

Json AutoscalingJson(const AutoscalingConfig& config) {
  return Json{{"min_replicas", config.min_replicas},
              {"initial_replicas", OrNull(config.initial_replicas)},
              {"max_replicas", config.max_replicas},
              {"target_ongoing_requests", config.target_ongoing_requests},
              {"metrics_interval_s", config.metrics_interval_s},
              {"look_back_period_s", config.look_back_period_s},
              {"smoothing_factor", config.smoothing_factor},
              {"upscale_smoothing_factor", OrNull(config.upscale_smoothing_factor)},
              {"downscale_smoothing_factor", OrNull(config.downscale_smoothing_factor)},
              {"upscaling_factor", OrNull(config.upscaling_factor)},
              {"downscaling_factor", OrNull(config.downscaling_factor)},
              {"upscale_delay_s", config.upscale_delay_s},
              {"downscale_delay_s", config.downscale_delay_s},
              {"downscale_to_zero_delay_s", OrNull(config.downscale_to_zero_delay_s)},
              {"aggregation_function", config.aggregation_function},
              {"policy_function", config.policy_function}};
}

Json TargetJson(const DeploymentTarget& target) {
  return Json{{"code_version", target.code_version},
              {"replica_config", ReplicaConfigJson(target.replica_config)},
              {"num_replicas", target.num_replicas},
              {"autoscaling_config", target.autoscaling_config.has_value()
                                         ? AutoscalingJson(*target.autoscaling_config)
                                         : Json(nullptr)},
              {"graceful_shutdown_timeout_s", target.graceful_shutdown_timeout_s},
              {"health_check_period_s", target.health_check_period_s},
              {"health_check_timeout_s", target.health_check_timeout_s},
              {"max_constructor_retry_count", target.max_constructor_retry_count},
              {"target_capacity",
               Json{{"percent", OrNull(target.target_capacity.percent)},
                    {"direction", std::string(DirectionWord(target.target_capacity.direction))}}}};
}

Json RecordsJson(const DeploymentRecords& records) {
  Json replicas = Json::array();
  for (const ReplicaRecord& replica : records.replicas) {
    replicas.push_back(Json{{"replica_id", replica.replica_id},
                            {"code_version", replica.code_version},
                            {"config", ReplicaConfigJson(replica.config)},
                            {"node_id", replica.node_id},
                            {"stopping", replica.stopping}});
  }
  return Json{{"target", TargetJson(records.target)},
              {"target_num_replicas", records.target_num_replicas},
              {"deleting", records.deleting},
              {"replica_ids_drawn", records.replica_ids_drawn},
              {"startup_failures", records.startup_failures},
              {"replica_has_started", records.replica_has_started},
              {"last_startup_error", records.last_startup_error},
              {"replicas", std::move(replicas)}};
}

// ---------------------------------------------------------------------------------------------
// Reading: each Read names the field it could not read ("<field> must be ...").

absl::Status Bad(std::string_view field, std::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(ToAbsl(field), " must be ", ToAbsl(what)));
}

// `status` of a field inside `object_field`: its message prefixed "<object_field>.".
absl::Status Within(std::string_view object_field, const absl::Status& status) {
  if (status.ok()) return status;
  return absl::InvalidArgumentError(absl::StrCat(ToAbsl(object_field), ".", status.message()));
}

const Json* Member(const Json& object, std::string_view field) {
  auto it = object.find(std::string(field));
  return it == object.end() ? nullptr : &*it;
}

absl::Status Read(const Json& object, std::string_view field, std::string* out) {
  const Json* value = Member(object, field);
  if (value == nullptr || !value->is_string()) return Bad(field, "a string");
  *out = value->get<std::string>();
  return absl::OkStatus();
}

absl::Status Read(const Json& object, std::string_view field, bool* out) {
  const Json* value = Member(object, field);
  if (value == nullptr || !value->is_boolean()) return Bad(field, "true or false");
  *out = value->get<bool>();
  return absl::OkStatus();
}

absl::Status Read(const Json& object, std::string_view field, double* out) {
  const Json* value = Member(object, field);
  if (value == nullptr || !value->is_number()) return Bad(field, "a number");
  *out = value->get<double>();
  return absl::OkStatus();
}

absl::Status Read(const Json& object, std::string_view field, int* out) {
  const Json* value = Member(object, field);
  if (value == nullptr || !value->is_number_integer()) return Bad(field, "an integer");
  const bool fits =
      value->is_number_unsigned()
          ? value->get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<int>::max())
          : value->get<int64_t>() >= std::numeric_limits<int>::min() &&
                value->get<int64_t>() <= std::numeric_limits<int>::max();
  if (!fits) return Bad(field, "a 32-bit integer");
  *out = static_cast<int>(value->get<int64_t>());
  return absl::OkStatus();
}

absl::Status Read(const Json& object, std::string_view field, uint64_t* out) {
  const Json* value = Member(object, field);
  if (value == nullptr || !value->is_number_unsigned()) return Bad(field, "a whole number >= 0");
  *out = value->get<uint64_t>();
  return absl::OkStatus();
}

// Absent or null: unset.
template <typename T>
absl::Status Read(const Json& object, std::string_view field, std::optional<T>* out) {
  const Json* value = Member(object, field);
  if (value == nullptr || value->is_null()) {
    out->reset();
    return absl::OkStatus();
  }
  T read{};
  TESSERA_RETURN_IF_ERROR(Read(object, field, &read));
  *out = std::move(read);
  return absl::OkStatus();
}

absl::StatusOr<const Json*> ReadObject(const Json& object, std::string_view field) {
  const Json* value = Member(object, field);
  if (value == nullptr || !value->is_object()) return Bad(field, "an object");
  return value;
}

// A protocol message kept as base64 of its bytes.
absl::Status ReadMessage(const Json& object, std::string_view field,
                         google::protobuf::Message* message) {
  std::string text;
  TESSERA_RETURN_IF_ERROR(Read(object, field, &text));
  std::string bytes;
  if (!absl::Base64Unescape(text, &bytes) || !message->ParseFromString(bytes)) {
    return Bad(field, absl::StrCat("a ", message->GetTypeName(), " in base64"));
  }
  return absl::OkStatus();
}

absl::StatusOr<ReplicaConfig> ReadReplicaConfig(const Json& json) {
  ReplicaConfig config;
  TESSERA_RETURN_IF_ERROR(Read(json, "user_config", &config.user_config));
  TESSERA_RETURN_IF_ERROR(Read(json, "max_ongoing_requests", &config.max_ongoing_requests));
  TESSERA_RETURN_IF_ERROR(
      Read(json, "graceful_shutdown_wait_loop_s", &config.graceful_shutdown_wait_loop_s));
  return config;
}

absl::StatusOr<AutoscalingConfig> ReadAutoscaling(const Json& json) {
  AutoscalingConfig c;
  const absl::Status reads[] = {
      Read(json, "min_replicas", &c.min_replicas),
      Read(json, "initial_replicas", &c.initial_replicas),
      Read(json, "max_replicas", &c.max_replicas),
      Read(json, "target_ongoing_requests", &c.target_ongoing_requests),
      Read(json, "metrics_interval_s", &c.metrics_interval_s),
      Read(json, "look_back_period_s", &c.look_back_period_s),
      Read(json, "smoothing_factor", &c.smoothing_factor),
      Read(json, "upscale_smoothing_factor", &c.upscale_smoothing_factor),
      Read(json, "downscale_smoothing_factor", &c.downscale_smoothing_factor),
      Read(json, "upscaling_factor", &c.upscaling_factor),
      Read(json, "downscaling_factor", &c.downscaling_factor),
      Read(json, "upscale_delay_s", &c.upscale_delay_s),
      Read(json, "downscale_delay_s", &c.downscale_delay_s),
      Read(json, "downscale_to_zero_delay_s", &c.downscale_to_zero_delay_s),
      Read(json, "aggregation_function", &c.aggregation_function),
      Read(json, "policy_function", &c.policy_function),
  };
  for (const absl::Status& status : reads) TESSERA_RETURN_IF_ERROR(status);
  return c;
}

absl::StatusOr<TargetCapacity> ReadTargetCapacity(const Json& json) {
  TargetCapacity capacity;
  TESSERA_RETURN_IF_ERROR(Read(json, "percent", &capacity.percent));
  std::string direction;
  TESSERA_RETURN_IF_ERROR(Read(json, "direction", &direction));
  if (direction == "up") {
    capacity.direction = TargetCapacityDirection::kUp;
  } else if (direction == "down") {
    capacity.direction = TargetCapacityDirection::kDown;
  } else if (direction != "unset") {
    return Bad("direction", "up, down or unset");
  }
  return capacity;
}

absl::StatusOr<DeploymentTarget> ReadTarget(const Json& json) {
  DeploymentTarget target;
  TESSERA_RETURN_IF_ERROR(Read(json, "code_version", &target.code_version));
  TESSERA_ASSIGN_OR_RETURN(const Json* config, ReadObject(json, "replica_config"));
  auto replica_config = ReadReplicaConfig(*config);
  TESSERA_RETURN_IF_ERROR(Within("replica_config", replica_config.status()));
  target.replica_config = *std::move(replica_config);
  TESSERA_RETURN_IF_ERROR(Read(json, "num_replicas", &target.num_replicas));
  if (const Json* autoscaling = Member(json, "autoscaling_config");
      autoscaling != nullptr && !autoscaling->is_null()) {
    if (!autoscaling->is_object()) return Bad("autoscaling_config", "an object or null");
    auto config = ReadAutoscaling(*autoscaling);
    TESSERA_RETURN_IF_ERROR(Within("autoscaling_config", config.status()));
    target.autoscaling_config = *std::move(config);
  }
  TESSERA_RETURN_IF_ERROR(
      Read(json, "graceful_shutdown_timeout_s", &target.graceful_shutdown_timeout_s));
  TESSERA_RETURN_IF_ERROR(Read(json, "health_check_period_s", &target.health_check_period_s));
  TESSERA_RETURN_IF_ERROR(Read(json, "health_check_timeout_s", &target.health_check_timeout_s));
  TESSERA_RETURN_IF_ERROR(
      Read(json, "max_constructor_retry_count", &target.max_constructor_retry_count));
  TESSERA_ASSIGN_OR_RETURN(const Json* capacity_json, ReadObject(json, "target_capacity"));
  auto capacity = ReadTargetCapacity(*capacity_json);
  TESSERA_RETURN_IF_ERROR(Within("target_capacity", capacity.status()));
  target.target_capacity = *capacity;
  return target;
}

absl::StatusOr<ReplicaRecord> ReadReplica(const Json& json) {
  if (!json.is_object()) return Bad("each replica", "an object");
  ReplicaRecord replica;
  TESSERA_RETURN_IF_ERROR(Read(json, "replica_id", &replica.replica_id));
  TESSERA_RETURN_IF_ERROR(Read(json, "code_version", &replica.code_version));
  TESSERA_ASSIGN_OR_RETURN(const Json* config_json, ReadObject(json, "config"));
  auto config = ReadReplicaConfig(*config_json);
  TESSERA_RETURN_IF_ERROR(Within("config", config.status()));
  replica.config = *std::move(config);
  TESSERA_RETURN_IF_ERROR(Read(json, "node_id", &replica.node_id));
  TESSERA_RETURN_IF_ERROR(Read(json, "stopping", &replica.stopping));
  return replica;
}

absl::StatusOr<DeploymentRecords> ReadRecords(const Json& json) {
  DeploymentRecords records;
  TESSERA_ASSIGN_OR_RETURN(const Json* target_json, ReadObject(json, "target"));
  auto target = ReadTarget(*target_json);
  TESSERA_RETURN_IF_ERROR(Within("target", target.status()));
  records.target = *std::move(target);
  TESSERA_RETURN_IF_ERROR(Read(json, "target_num_replicas", &records.target_num_replicas));
  TESSERA_RETURN_IF_ERROR(Read(json, "deleting", &records.deleting));
  TESSERA_RETURN_IF_ERROR(Read(json, "replica_ids_drawn", &records.replica_ids_drawn));
  TESSERA_RETURN_IF_ERROR(Read(json, "startup_failures", &records.startup_failures));
  TESSERA_RETURN_IF_ERROR(Read(json, "replica_has_started", &records.replica_has_started));
  TESSERA_RETURN_IF_ERROR(Read(json, "last_startup_error", &records.last_startup_error));
  const Json* replicas = Member(json, "replicas");
  if (replicas == nullptr || !replicas->is_array()) return Bad("replicas", "an array");
  for (const Json& replica_json : *replicas) {
    auto replica = ReadReplica(replica_json);
    TESSERA_RETURN_IF_ERROR(Within("replicas", replica.status()));
    records.replicas.push_back(*std::move(replica));
  }
  return records;
}

// The one-line error of a record that cannot be read.
absl::Status Corrupt(std::string_view key, std::string_view what) {
  return absl::DataLossError(absl::StrCat("state store table ", ToAbsl(kServeTable), ", key ",
                                          Quote(key), ": ", ToAbsl(what)));
}

// The record's JSON object, once its format is known.
absl::StatusOr<Json> ParseRecord(std::string_view key, std::string_view value) {
  Json json = Json::parse(value.begin(), value.end(), nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded() || !json.is_object()) return Corrupt(key, "not a JSON object");
  int format = 0;
  if (!Read(json, "format", &format).ok() || format != kFormat) {
    return Corrupt(key, absl::StrCat("format is not ", kFormat, " (written by another version?)"));
  }
  return json;
}

Json NewRecord() { return Json{{"format", kFormat}}; }

}  // namespace

std::string ApplicationKey(std::string_view application) {
  return absl::StrCat(ToAbsl(kApplicationKeyPrefix), ToAbsl(application));
}

std::string DeploymentKey(std::string_view application, std::string_view deployment) {
  return absl::StrCat(ToAbsl(kDeploymentKeyPrefix), application.size(), ":", ToAbsl(application),
                      "/", ToAbsl(deployment));
}

std::string EncodeStart(const StoredStart& start) {
  Json json = NewRecord();
  json["options"] = absl::Base64Escape(start.options.SerializeAsString());
  json["shutting_down"] = start.shutting_down;
  return Dump(json);
}

std::string EncodeApplication(const StoredApplication& application) {
  Json json = NewRecord();
  json["name"] = application.spec.name();
  json["spec"] = absl::Base64Escape(application.spec.SerializeAsString());
  json["last_deployed_time_s"] = application.last_deployed_time_s;
  json["deleting"] = application.deleting;
  return Dump(json);
}

std::string EncodeDeployment(const StoredDeployment& deployment) {
  Json json = NewRecord();
  json["application"] = deployment.application;
  json["deployment"] = deployment.deployment;
  json["replica_id_seed"] = deployment.replica_id_seed;
  json["records"] = RecordsJson(deployment.records);
  return Dump(json);
}

absl::StatusOr<StoredStart> DecodeStart(std::string_view key, std::string_view value) {
  if (key != kStartKey) return Corrupt(key, "is not the start record's key");
  TESSERA_ASSIGN_OR_RETURN(Json json, ParseRecord(key, value));
  StoredStart start;
  absl::Status read = ReadMessage(json, "options", &start.options);
  if (read.ok()) read = Read(json, "shutting_down", &start.shutting_down);
  if (!read.ok()) return Corrupt(key, ToStd(read.message()));
  return start;
}

absl::StatusOr<StoredApplication> DecodeApplication(std::string_view key, std::string_view value) {
  TESSERA_ASSIGN_OR_RETURN(Json json, ParseRecord(key, value));
  StoredApplication application;
  absl::Status read = ReadMessage(json, "spec", &application.spec);
  if (read.ok()) read = Read(json, "last_deployed_time_s", &application.last_deployed_time_s);
  if (read.ok()) read = Read(json, "deleting", &application.deleting);
  if (!read.ok()) return Corrupt(key, ToStd(read.message()));
  if (key != ApplicationKey(application.spec.name())) {
    return Corrupt(key, absl::StrCat("holds application ", Quote(application.spec.name())));
  }
  return application;
}

absl::StatusOr<StoredDeployment> DecodeDeployment(std::string_view key, std::string_view value) {
  TESSERA_ASSIGN_OR_RETURN(Json json, ParseRecord(key, value));
  StoredDeployment deployment;
  absl::Status read = Read(json, "application", &deployment.application);
  if (read.ok()) read = Read(json, "deployment", &deployment.deployment);
  if (read.ok()) read = Read(json, "replica_id_seed", &deployment.replica_id_seed);
  if (read.ok()) {
    absl::StatusOr<const Json*> records_json = ReadObject(json, "records");
    read = records_json.status();
    if (read.ok()) {
      auto records = ReadRecords(**records_json);
      read = Within("records", records.status());
      if (read.ok()) deployment.records = *std::move(records);
    }
  }
  if (!read.ok()) return Corrupt(key, ToStd(read.message()));
  if (key != DeploymentKey(deployment.application, deployment.deployment)) {
    return Corrupt(key, absl::StrCat("holds deployment ", Quote(deployment.deployment),
                                     " of application ", Quote(deployment.application)));
  }
  return deployment;
}

ServeRecords DecodeServeRecords(const std::vector<std::pair<std::string, std::string>>& entries) {
  ServeRecords records;
  for (const auto& [key, value] : entries) {
    if (key == kStartKey) {
      auto start = DecodeStart(key, value);
      if (start.ok()) {
        records.start = *std::move(start);
      } else {
        records.errors.push_back(start.status());
      }
    } else if (absl::StartsWith(key, ToAbsl(kApplicationKeyPrefix))) {
      auto application = DecodeApplication(key, value);
      if (application.ok()) {
        records.applications.push_back(*std::move(application));
      } else {
        records.errors.push_back(application.status());
      }
    } else if (absl::StartsWith(key, ToAbsl(kDeploymentKeyPrefix))) {
      auto deployment = DecodeDeployment(key, value);
      if (deployment.ok()) {
        records.deployments.push_back(*std::move(deployment));
      } else {
        records.errors.push_back(deployment.status());
      }
    } else {
      records.errors.push_back(Corrupt(key, "is not a key the serve controller writes"));
    }
  }
  return records;
}

}  // namespace tessera::serve
