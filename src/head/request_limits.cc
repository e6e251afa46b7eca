// The checks of request_limits.h: counts first (a huge repeated field is refused without
// walking it), then each element's sizes. Messages name the field and never echo an over-long
// value, so they stay one short line.
#include "head/request_limits.h"

#include <string>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "base/string_util.h"

namespace tessera::request_limits {
namespace {

// "<subject> <n> <things>; at most <max> are allowed", e.g. subject "placement group has".
absl::Status CheckAtMost(std::string_view subject, size_t n, std::string_view things, size_t max) {
  if (n <= max) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(ToAbsl(subject), " ", n, " ", ToAbsl(things),
                                                 "; at most ", max, " are allowed"));
}

absl::Status CheckChars(std::string_view field, std::string_view value, size_t max) {
  return CheckAtMost(absl::StrCat(ToAbsl(field), " has"), value.size(), "characters", max);
}

absl::Status CheckBytes(std::string_view field, std::string_view value, size_t max) {
  return CheckAtMost(absl::StrCat(ToAbsl(field), " has"), value.size(), "bytes", max);
}

absl::Status CheckName(std::string_view field, std::string_view value) {
  return CheckChars(field, value, kMaxNameLength);
}

absl::Status CheckResources(std::string_view field, const v1::Resources& resources) {
  TESSERA_RETURN_IF_ERROR(CheckAtMost(absl::StrCat(ToAbsl(field), " has"), resources.raw_size(),
                                      "resources", kMaxResourcesPerBundle));
  for (const auto& [name, amount] : resources.raw()) {
    TESSERA_RETURN_IF_ERROR(
        CheckChars(absl::StrCat(ToAbsl(field), ": a resource name"), name, kMaxResourceNameLength));
  }
  return absl::OkStatus();
}

absl::Status CheckSelector(std::string_view field, const v1::LabelSelector& selector) {
  TESSERA_RETURN_IF_ERROR(CheckAtMost(absl::StrCat(ToAbsl(field), " has"),
                                      selector.label_constraints_size(), "constraints",
                                      kMaxSelectorConstraints));
  for (int i = 0; i < selector.label_constraints_size(); ++i) {
    const v1::LabelSelectorConstraint& constraint = selector.label_constraints(i);
    const std::string where = absl::StrCat(ToAbsl(field), ".label_constraints[", i, "]");
    TESSERA_RETURN_IF_ERROR(
        CheckChars(where + ".label_key", constraint.label_key(), kMaxLabelKeyLength));
    TESSERA_RETURN_IF_ERROR(
        CheckAtMost(where + " has", constraint.label_values_size(), "values", kMaxSelectorValues));
    for (int j = 0; j < constraint.label_values_size(); ++j) {
      TESSERA_RETURN_IF_ERROR(CheckChars(absl::StrCat(where, ".label_values[", j, "]"),
                                         constraint.label_values(j), kMaxLabelValueLength));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckResourceRequest(std::string_view field, const v1::ResourceRequest& request) {
  TESSERA_RETURN_IF_ERROR(
      CheckResources(absl::StrCat(ToAbsl(field), ".resources"), request.resources()));
  TESSERA_RETURN_IF_ERROR(CheckAtMost(absl::StrCat(ToAbsl(field), " has"), request.fallbacks_size(),
                                      "fallbacks", kMaxLabelFallbacks));
  TESSERA_RETURN_IF_ERROR(
      CheckSelector(absl::StrCat(ToAbsl(field), ".label_selector"), request.label_selector()));
  for (int i = 0; i < request.fallbacks_size(); ++i) {
    TESSERA_RETURN_IF_ERROR(
        CheckSelector(absl::StrCat(ToAbsl(field), ".fallbacks[", i, "]"), request.fallbacks(i)));
  }
  TESSERA_RETURN_IF_ERROR(
      CheckName(absl::StrCat(ToAbsl(field), ".affinity_node_id"), request.affinity_node_id()));
  return CheckName(absl::StrCat(ToAbsl(field), ".placement_group"), request.placement_group());
}

// `subject` names the option in the count's message ("placement group", "placement group
// fallbacks[2]"), `field` its bundles' path ("primary", "fallbacks[2]").
absl::Status CheckBundleOption(std::string_view subject, std::string_view field,
                               const v1::BundleOptionSpec& option) {
  TESSERA_RETURN_IF_ERROR(CheckAtMost(absl::StrCat(ToAbsl(subject), " has"), option.bundles_size(),
                                      "bundles", kMaxBundlesPerPlacementGroup));
  for (int i = 0; i < option.bundles_size(); ++i) {
    const std::string where = absl::StrCat(ToAbsl(field), ".bundles[", i, "]");
    TESSERA_RETURN_IF_ERROR(CheckResources(where + ".resources", option.bundles(i).resources()));
    TESSERA_RETURN_IF_ERROR(
        CheckSelector(where + ".label_selector", option.bundles(i).label_selector()));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status Check(const v1::CreatePlacementGroupRequest& request) {
  TESSERA_RETURN_IF_ERROR(CheckName("request_id", request.request_id()));
  TESSERA_RETURN_IF_ERROR(CheckName("name", request.name()));
  TESSERA_RETURN_IF_ERROR(CheckName("owner", request.owner()));
  TESSERA_RETURN_IF_ERROR(CheckName("same_label", request.same_label()));
  TESSERA_RETURN_IF_ERROR(CheckAtMost("placement group has", request.fallbacks_size(), "fallbacks",
                                      kMaxPlacementGroupFallbacks));
  TESSERA_RETURN_IF_ERROR(CheckBundleOption("placement group", "primary", request.primary()));
  for (int i = 0; i < request.fallbacks_size(); ++i) {
    const std::string field = absl::StrCat("fallbacks[", i, "]");
    TESSERA_RETURN_IF_ERROR(
        CheckBundleOption("placement group " + field, field, request.fallbacks(i)));
  }
  return absl::OkStatus();
}

absl::Status Check(const v1::RemovePlacementGroupRequest& request) {
  TESSERA_RETURN_IF_ERROR(CheckName("request_id", request.request_id()));
  return CheckName("name", request.name());
}

absl::Status Check(const v1::WaitPlacementGroupRequest& request) {
  return CheckName("name", request.name());
}

absl::Status Check(const v1::ReserveSlicesRequest& request) {
  TESSERA_RETURN_IF_ERROR(CheckName("request_id", request.request_id()));
  TESSERA_RETURN_IF_ERROR(CheckName("name", request.name()));
  TESSERA_RETURN_IF_ERROR(CheckName("owner", request.owner()));
  TESSERA_RETURN_IF_ERROR(CheckAtMost("slice request has", request.alternatives_size(),
                                      "alternatives", kMaxSliceAlternatives));
  for (int i = 0; i < request.alternatives_size(); ++i) {
    const v1::SliceAlternative& alternative = request.alternatives(i);
    const std::string where = absl::StrCat("alternatives[", i, "]");
    // Negative counts are the parser's to refuse, with its own message.
    if (alternative.num_slices() > 0) {
      TESSERA_RETURN_IF_ERROR(CheckAtMost(where + " asks for", alternative.num_slices(), "slices",
                                          kMaxSlicesPerRequest));
    }
    if (alternative.nvlink_hosts() > 0) {
      TESSERA_RETURN_IF_ERROR(CheckAtMost(where + " asks for", alternative.nvlink_hosts(),
                                          "NVLink hosts", kMaxNvlinkHostsPerRequest));
    }
    TESSERA_RETURN_IF_ERROR(CheckAtMost(where + ".shape has", alternative.shape().dims_size(),
                                        "dims", kMaxTopologyDims));
    TESSERA_RETURN_IF_ERROR(CheckResources(where + ".per_host", alternative.per_host()));
    TESSERA_RETURN_IF_ERROR(CheckName(where + ".domain", alternative.domain()));
    TESSERA_RETURN_IF_ERROR(CheckSelector(where + ".label_selector", alternative.label_selector()));
  }
  return absl::OkStatus();
}

absl::Status Check(const v1::ReleaseSlicesRequest& request) {
  TESSERA_RETURN_IF_ERROR(CheckName("request_id", request.request_id()));
  return CheckName("name", request.name());
}

absl::Status Check(const v1::WaitSliceGroupRequest& request) {
  return CheckName("name", request.name());
}

absl::Status Check(const v1::PickNodeRequest& request) {
  TESSERA_RETURN_IF_ERROR(CheckAtMost("pick request has", request.exclude_node_ids_size(),
                                      "excluded nodes", kMaxExcludedNodes));
  for (int i = 0; i < request.exclude_node_ids_size(); ++i) {
    TESSERA_RETURN_IF_ERROR(
        CheckName(absl::StrCat("exclude_node_ids[", i, "]"), request.exclude_node_ids(i)));
  }
  return CheckResourceRequest("request", request.request());
}

absl::Status Check(const v1::ReportTaskEventsRequest& request) {
  TESSERA_RETURN_IF_ERROR(CheckName("job_id", request.job_id()));
  TESSERA_RETURN_IF_ERROR(
      CheckAtMost("report has", request.events_size(), "events", kMaxTaskEventsPerReport));
  for (int i = 0; i < request.events_size(); ++i) {
    const v1::TaskEvent& event = request.events(i);
    const std::string field = absl::StrCat("events[", i, "]");
    TESSERA_RETURN_IF_ERROR(CheckBytes(field + ".task_id", event.task_id(), kMaxTaskEventIdBytes));
    TESSERA_RETURN_IF_ERROR(
        CheckBytes(field + ".actor_id", event.actor_id(), kMaxTaskEventIdBytes));
    TESSERA_RETURN_IF_ERROR(CheckBytes(field + ".name", event.name(), kMaxTaskEventNameBytes));
    TESSERA_RETURN_IF_ERROR(CheckBytes(field + ".kind", event.kind(), kMaxTaskEventIdBytes));
    TESSERA_RETURN_IF_ERROR(CheckName(field + ".node_id", event.node_id()));
    TESSERA_RETURN_IF_ERROR(CheckName(field + ".worker_id", event.worker_id()));
    TESSERA_RETURN_IF_ERROR(
        CheckBytes(field + ".outcome", event.outcome(), kMaxTaskEventOutcomeBytes));
  }
  return absl::OkStatus();
}

absl::Status Check(const v1::GetTaskEventsRequest& request) {
  TESSERA_RETURN_IF_ERROR(CheckName("job_id", request.job_id()));
  if (request.after() < 0) return absl::InvalidArgumentError("after: is negative");
  return absl::OkStatus();
}

absl::Status Check(const v1::RecordJobRequest& request) {
  const v1::JobInfo& job = request.job();
  TESSERA_RETURN_IF_ERROR(CheckName("job.job_id", job.job_id()));
  TESSERA_RETURN_IF_ERROR(CheckName("job.node_id", job.node_id()));
  TESSERA_RETURN_IF_ERROR(CheckName("job.worker_id", job.worker_id()));
  TESSERA_RETURN_IF_ERROR(
      CheckAtMost("job.argv has", job.argv_size(), "entries", kMaxJobArgvEntries));
  size_t argv_bytes = 0;
  for (const std::string& arg : job.argv()) argv_bytes += arg.size();
  TESSERA_RETURN_IF_ERROR(CheckAtMost("job.argv has", argv_bytes, "bytes", kMaxJobArgvBytes));
  return CheckBytes("job.exit_reason", job.exit_reason(), kMaxExitReasonBytes);
}

absl::Status Check(const v1::KvPutRequest& request) {
  TESSERA_RETURN_IF_ERROR(CheckBytes("key", request.key(), kMaxKvKeyBytes));
  return CheckBytes("value", request.value(), kMaxKvValueBytes);
}

absl::Status Check(const v1::KvGetRequest& request) {
  return CheckBytes("key", request.key(), kMaxKvKeyBytes);
}

absl::Status Check(const v1::KvDeleteRequest& request) {
  return CheckBytes("key", request.key(), kMaxKvKeyBytes);
}

absl::Status Check(const v1::KvListRequest& request) {
  return CheckBytes("prefix", request.prefix(), kMaxKvKeyBytes);
}

absl::Status Check(const v1::KeepDriverAliveRequest& request) {
  return CheckName("driver_id", request.driver_id());
}

absl::Status Check(const v1::DriverExitedRequest& request) {
  return CheckName("driver_id", request.driver_id());
}

absl::Status Check(const v1::RegisterActorRequest& request) {
  const v1::ActorInfo& actor = request.actor();
  TESSERA_RETURN_IF_ERROR(CheckName("actor.actor_id", actor.actor_id()));
  TESSERA_RETURN_IF_ERROR(CheckName("actor.name", actor.name()));
  TESSERA_RETURN_IF_ERROR(CheckName("actor.namespace", actor.namespace_()));
  TESSERA_RETURN_IF_ERROR(CheckName("actor.owner", actor.owner()));
  TESSERA_RETURN_IF_ERROR(CheckName("actor.address", actor.address()));
  TESSERA_RETURN_IF_ERROR(CheckName("actor.node_id", actor.node_id()));
  TESSERA_RETURN_IF_ERROR(CheckName("actor.worker_id", actor.worker_id()));
  TESSERA_RETURN_IF_ERROR(
      CheckChars("actor.class_name", actor.class_name(), kMaxActorClassNameLength));
  TESSERA_RETURN_IF_ERROR(
      CheckBytes("actor.handle_metadata", actor.handle_metadata(), kMaxActorHandleMetadataBytes));
  return CheckBytes("actor.death_cause", actor.death_cause(), kMaxActorDeathCauseBytes);
}

absl::Status Check(const v1::ActorDiedRequest& request) {
  TESSERA_RETURN_IF_ERROR(CheckName("actor_id", request.actor_id()));
  return CheckBytes("death_cause", request.death_cause(), kMaxActorDeathCauseBytes);
}

absl::Status Check(const v1::ActorWorkerExitedRequest& request) {
  TESSERA_RETURN_IF_ERROR(CheckName("actor_id", request.actor_id()));
  TESSERA_RETURN_IF_ERROR(CheckName("worker_id", request.worker_id()));
  return CheckBytes("cause", request.cause(), kMaxActorDeathCauseBytes);
}

absl::Status Check(const v1::GetActorRequest& request) {
  TESSERA_RETURN_IF_ERROR(CheckName("name", request.name()));
  return CheckName("namespace", request.namespace_());
}

absl::Status Check(const v1::ListRequest& request) {
  return CheckBytes("page_token", request.page_token(), kMaxPageTokenBytes);
}

}  // namespace tessera::request_limits
