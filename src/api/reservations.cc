// include/tessera/placement_group.h: the options are checked here (nothing is sent when they are
// wrong), the head decides and reserves (client/reservation_calls.h), and a group or slice that did
// not come through is withdrawn before the error returns.
#include "api/reservations.h"

#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "base/ignore_status.h"
#include "base/status_macros.h"
#include "base/string_util.h"
#include "client/reservation_calls.h"
#include "resources/resource_set.h"
#include "rpc/state_names.h"
#include "scheduling/placement_group_spec.h"
#include "tessera/placement_group.h"
#include "wire/proto_convert.h"
#include "worker/worker_runtime.h"

namespace tessera {
namespace api {
namespace {

absl::Mutex cluster_mu(absl::kConstInit);
std::optional<client::ClusterClientOptions>* cluster ABSL_GUARDED_BY(cluster_mu) = nullptr;
std::string* owner ABSL_GUARDED_BY(cluster_mu) = nullptr;

absl::StatusOr<std::unique_ptr<client::ClusterClient>> Connect() {
  std::optional<client::ClusterClientOptions> options = ReservationCluster();
  if (!options.has_value()) {
    return absl::FailedPreconditionError("call tessera::Init before reserving");
  }
  return client::ClusterClient::Connect(*options);
}

// Why the head did not grant a reservation.
enum class Refusal { kInfeasible, kNotYet };

// The error for a reservation the head did not grant, after it was withdrawn; `state` is the word
// of the state it was left in.
absl::Status NotGranted(std::string_view what, const std::string& name, Refusal refusal,
                        std::string_view state, const std::string& explanation,
                        absl::Duration timeout) {
  const std::string why = explanation.empty() ? "" : absl::StrCat(": ", explanation);
  if (refusal == Refusal::kInfeasible) {
    return absl::ResourceExhaustedError(
        absl::StrCat(ToAbsl(what), " ", name, " can never be placed on this cluster", why));
  }
  return absl::DeadlineExceededError(absl::StrCat(ToAbsl(what), " ", name, " is still ",
                                                  ToAbsl(state), " after ",
                                                  absl::FormatDuration(timeout), why));
}

absl::Status CheckName(std::string_view what, const std::string& name) {
  if (Trim(name).empty()) {
    return absl::InvalidArgumentError(absl::StrCat(ToAbsl(what), ": a name is needed"));
  }
  return absl::OkStatus();
}

// The options are types already (tessera/placement_group.h): they become the spec as they are,
// and the spec's own check is the one the head makes again.
absl::StatusOr<v1::CreatePlacementGroupRequest> GroupRequest(const PlacementGroupOptions& options) {
  TESSERA_RETURN_IF_ERROR(CheckName("placement group", options.name.value()));
  PlacementGroupSpec spec;
  spec.name = options.name.value();
  spec.strategy = options.strategy;
  spec.primary = BundleOption{options.bundles, options.bundle_selectors};
  for (const PlacementGroupOptions::Alternative& fallback : options.fallbacks) {
    spec.fallbacks.push_back(BundleOption{fallback.bundles, fallback.bundle_selectors});
  }
  spec.same_label = options.same_label;
  if (absl::Status valid = ValidatePlacementGroupSpec(spec); !valid.ok()) {
    return absl::Status(valid.code(), absl::StrCat("placement group ", options.name.value(), ": ",
                                                   valid.message()));
  }
  v1::CreatePlacementGroupRequest request;
  wire::PlacementGroupSpecToProto(spec, &request);
  request.set_request_id(client::NewRequestId("pg"));
  if (!options.detached) request.set_owner(ReservationOwner());
  return request;
}

absl::StatusOr<v1::ReserveSlicesRequest> SliceRequest(const SliceOptions& options) {
  TESSERA_RETURN_IF_ERROR(CheckName("slice reservation", options.name.value()));
  auto prefix = [&](const absl::Status& status) {
    return absl::Status(status.code(), absl::StrCat("slice reservation ", options.name.value(),
                                                    ": ", status.message()));
  };
  v1::ReserveSlicesRequest request;
  request.set_request_id(client::NewRequestId("slice"));
  request.set_name(options.name.value());
  if (!options.detached) request.set_owner(ReservationOwner());
  auto primary =
      client::TpuSliceAlternative("shape", options.shape, options.num_slices, /*per_chip=*/false);
  if (!primary.ok()) return prefix(primary.status());
  *request.add_alternatives() = *std::move(primary);
  for (size_t i = 0; i < options.fallbacks.size(); ++i) {
    const SliceOptions::Alternative& alt = options.fallbacks[i];
    auto fallback = client::TpuSliceAlternative(absl::StrCat("fallback ", i + 1), alt.shape,
                                                alt.num_slices, /*per_chip=*/false);
    if (!fallback.ok()) return prefix(fallback.status());
    *request.add_alternatives() = *std::move(fallback);
  }
  if (!options.per_host.empty()) {
    for (v1::SliceAlternative& alt : *request.mutable_alternatives()) {
      wire::ResourcesToProto(options.per_host, alt.mutable_per_host());
    }
  }
  client::RestrictSliceAlternatives(request, options.slice, options.label_selector,
                                    options.sub_slice);
  return request;
}

}  // namespace

void RememberReservationCluster(const InitOptions& options, std::string driver_id) {
  client::ClusterClientOptions client;
  client.state_dir = options.state_dir;
  client.head_address = options.head_address;
  client.token_file = options.token_file;
  absl::MutexLock lock(&cluster_mu);
  delete cluster;
  cluster = new std::optional<client::ClusterClientOptions>(std::move(client));
  delete owner;
  owner = new std::string(std::move(driver_id));
}

void ForgetReservationCluster() {
  absl::MutexLock lock(&cluster_mu);
  delete cluster;
  cluster = nullptr;
  delete owner;
  owner = nullptr;
}

std::string ReservationOwner() {
  absl::MutexLock lock(&cluster_mu);
  return owner == nullptr ? "" : *owner;
}

std::optional<client::ClusterClientOptions> ReservationCluster() {
  {
    absl::MutexLock lock(&cluster_mu);
    if (cluster != nullptr) return *cluster;
  }
  // In a worker (no Init): the cluster of the worker's own node, so a task or actor can read
  // and manage placement groups as a driver does (what it creates has no owner: it lives until
  // removed).
  if (!worker::InWorkerMode()) return std::nullopt;
  absl::StatusOr<worker::NestedDriverEnv> env = worker::NestedDriverEnvironment();
  if (!env.ok()) return std::nullopt;
  client::ClusterClientOptions client;
  client.state_dir = env->state_dir;
  client.head_address = env->head_address;
  return client;
}

}  // namespace api

absl::Status SubmitPlacementGroup(const PlacementGroupOptions& options) {
  TESSERA_ASSIGN_OR_RETURN(v1::CreatePlacementGroupRequest request, api::GroupRequest(options));
  TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<client::ClusterClient> client, api::Connect());
  return client::SubmitPlacementGroup(*client, request).status();
}

absl::StatusOr<PlacementGroup> WaitPlacementGroup(const PlacementGroupOptions& options) {
  TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<client::ClusterClient> client, api::Connect());
  // A runtime shut down meanwhile stops the wait (the group is withdrawn below).
  auto shut_down = [] { return !api::ReservationCluster().has_value(); };
  absl::StatusOr<v1::PlacementGroupInfo> waited =
      client::WaitPlacementGroupPlaced(*client, options.name.value(), v1::PlacementGroupInfo(),
                                       options.timeout, shut_down, options.wait_while_infeasible);
  if (absl::IsNotFound(waited.status())) {
    return absl::NotFoundError(absl::StrCat("placement group ", options.name.value(),
                                            " was removed before it was created"));
  }
  TESSERA_ASSIGN_OR_RETURN(v1::PlacementGroupInfo info, std::move(waited));
  if (info.state() != v1::PLACEMENT_GROUP_STATE_CREATED) {
    IgnoreStatus(client::RemovePlacementGroupNamed(*client, options.name.value()),
                 "withdrawn: nothing is left");
    return api::NotGranted(
        "placement group", options.name.value(),
        info.state() == v1::PLACEMENT_GROUP_STATE_INFEASIBLE && !options.wait_while_infeasible
            ? api::Refusal::kInfeasible
            : api::Refusal::kNotYet,
        rpc::PlacementGroupStateName(info.state()), info.explanation(), options.timeout);
  }
  PlacementGroup group;
  group.name = PlacementGroupName(info.name());
  group.option = info.option();
  group.bundle_nodes.resize(info.bundles_size());
  for (const v1::BundleLocation& bundle : info.bundles()) {
    if (bundle.index() >= 0 && bundle.index() < info.bundles_size()) {
      group.bundle_nodes[bundle.index()] = bundle.node_id();
    }
  }
  return group;
}

absl::StatusOr<PlacementGroup> CreatePlacementGroup(const PlacementGroupOptions& options) {
  TESSERA_RETURN_IF_ERROR(SubmitPlacementGroup(options));
  return WaitPlacementGroup(options);
}

absl::Status RemovePlacementGroup(const PlacementGroupName& name) {
  TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<client::ClusterClient> client, api::Connect());
  absl::Status removed = client::RemovePlacementGroupNamed(*client, name.value()).status();
  // Not a placement group: a slice reservation (placed in as a group) of that name, if any.
  if (absl::IsNotFound(removed)) {
    removed = client::ReleaseSlicesNamed(*client, name.value()).status();
  }
  return absl::IsNotFound(removed) ? absl::OkStatus() : removed;  // gone already: nothing to do
}

absl::StatusOr<SliceReservation> ReserveSlices(const SliceOptions& options) {
  TESSERA_ASSIGN_OR_RETURN(v1::ReserveSlicesRequest request, api::SliceRequest(options));
  TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<client::ClusterClient> client, api::Connect());
  TESSERA_ASSIGN_OR_RETURN(v1::SliceGroupInfo info,
                           client::ReserveSlicesAndWait(*client, request, options.timeout));
  if (info.state() != v1::SLICE_GROUP_STATE_RESERVED) {
    IgnoreStatus(client::ReleaseSlicesNamed(*client, options.name.value()),
                 "withdrawn: nothing is left");
    return api::NotGranted(
        "slice reservation", options.name.value(),
        info.state() == v1::SLICE_GROUP_STATE_INFEASIBLE ? api::Refusal::kInfeasible
                                                         : api::Refusal::kNotYet,
        rpc::SliceGroupStateName(info.state()), info.explanation(), options.timeout);
  }
  SliceReservation reservation;
  reservation.name = SliceGroupName(info.name());
  reservation.alternative = info.alternative();
  reservation.slices.assign(info.domains().begin(), info.domains().end());
  for (const v1::SliceHost& host : info.hosts()) {
    reservation.hosts.push_back(SliceHost{host.node_id(), host.domain(), host.worker()});
  }
  return reservation;
}

absl::Status ReleaseSlices(const SliceGroupName& name) {
  TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<client::ClusterClient> client, api::Connect());
  absl::Status released = client::ReleaseSlicesNamed(*client, name.value()).status();
  return absl::IsNotFound(released) ? absl::OkStatus() : released;  // released already
}

}  // namespace tessera
