// ClusterController, slice groups: what sets them apart from placement groups — whole TPU slices
// (or hosts of one NVLink domain) chosen by the engine, never re-placed (a dead host breaks the
// group), described as SliceGroupInfo, and the catalog of slices `tessera slice list` shows. Their
// commit and release are the shared reservation machinery.
#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/string_util.h"
#include "hardware/node_label_keys.h"
#include "head/cluster_controller.h"

namespace tessera {

namespace {

// One host of a slice group as the protocol says it.
void SliceHostToProto(const DomainBundle& bundle, v1::SliceHost* host) {
  host->set_domain(bundle.domain);
  host->set_node_id(bundle.node.value());
  host->set_worker(bundle.worker);
  wire::AllocationToProto(bundle.allocation, host->mutable_allocation());
}

}  // namespace

void ClusterController::DescribeSlice(const SliceEntry& slice, v1::SliceGroupInfo* info) const {
  const ReservationRecord& record = Record(slice);
  info->Clear();
  info->set_id(slice.id);
  info->set_name(slice.name);
  info->set_state(SliceGroupStateOf(slice.phase));
  info->set_alternative(static_cast<int>(record.choice));
  info->set_owner(slice.owner);
  for (const std::string& domain : record.domains) info->add_domains(domain);
  if (const std::vector<DomainBundle>* hosts = state_.reservations.SliceHosts(slice.name)) {
    for (const DomainBundle& bundle : *hosts) SliceHostToProto(bundle, info->add_hosts());
  }
  info->set_explanation(slice.ShownExplanation());
}

absl::Status ClusterController::ReserveSlices(const v1::ReserveSlicesRequest& request,
                                              DomainGroupRequest parsed,
                                              v1::SliceGroupInfo* response) {
  std::string name;
  {
    absl::MutexLock lock(&mu_);
    // A degraded store refuses at once: nothing is placed.
    if (absl::Status writable = options_.writer->Writable(); !writable.ok()) return writable;
    const int64_t counter_before = next_slice_;
    std::string id;
    if (absl::Status claimed = ClaimName(request.name(), "slices", &next_slice_, &id, &name);
        !claimed.ok()) {
      return claimed;
    }
    parsed.name = name;
    // The engine refuses shapes it does not know; that is bad input and changes nothing.
    absl::StatusOr<ReservationOutcome> outcome =
        state_.reservations.ReserveSlices(std::move(parsed));
    if (!outcome.ok()) return absl::InvalidArgumentError(outcome.status().message());
    SliceEntry entry;
    entry.id = id;
    entry.name = name;
    entry.owner = request.owner();
    entry.request = request;
    SliceEntry& slice = slices_.emplace(name, std::move(entry)).first->second;
    ApplyPlacement(slice, *outcome);
    // Durable before anyone hears of it, the agents included.
    if (absl::Status written = PersistCreated(slice, &next_slice_, counter_before); !written.ok()) {
      return written;
    }
    options_.drivers->NoteAlive(slice.owner, options_.clock->Now());
    options_.events->RecordChange(
        absl::StrCat("slice group ", name, " requested",
                     slice.owner.empty() ? "" : absl::StrCat(" by ", slice.owner)),
        "reservation");
    if (slice.phase != ReservationPhase::kCommitting) {
      DescribeSlice(slice, response);
      return absl::OkStatus();
    }
  }
  SyncAndDescribe(ReservationKind::kSliceGroup, name,
                  [&](const Reservation* slice) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
                    if (slice == nullptr) {
                      response->set_name(name);
                      response->set_state(v1::SLICE_GROUP_STATE_RELEASED);
                      return;
                    }
                    DescribeSlice(static_cast<const SliceEntry&>(*slice), response);
                  });
  return absl::OkStatus();
}

absl::Status ClusterController::ReleaseSlices(const std::string& name,
                                              v1::ReleaseSlicesResponse* response,
                                              bool acknowledged) {
  return Remove(ReservationKind::kSliceGroup, name, acknowledged,
                [&](Reservation& reservation) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
                  if (const std::vector<DomainBundle>* hosts =
                          state_.reservations.SliceHosts(reservation.name)) {
                    for (const DomainBundle& bundle : *hosts)
                      SliceHostToProto(bundle, response->add_released());
                  }
                });
}

absl::Status ClusterController::WaitSliceGroup(const std::string& name, absl::Duration timeout,
                                               v1::SliceGroupInfo* response) {
  absl::MutexLock lock(&mu_);
  const Reservation* slice =
      AwaitSettled(ReservationKind::kSliceGroup, name, timeout, [](ReservationPhase phase) {
        return phase == ReservationPhase::kHeld || phase == ReservationPhase::kInfeasible;
      });
  if (slice == nullptr) return absl::NotFoundError(absl::StrCat("no slice group named ", name));
  DescribeSlice(static_cast<const SliceEntry&>(*slice), response);
  return absl::OkStatus();
}

std::map<std::string, v1::ListSlicesResponse::Slice> ClusterController::SliceCatalog() const {
  struct Catalog {
    std::string accelerator_type;
    std::string topology;
    std::set<std::string> workers;
    std::set<std::string> alive_workers;
    int64_t tpu_per_host = 0;
    int64_t chips = 0;  // of the slice type its hosts' labels name, read when they joined
  };
  std::map<std::string, Catalog> slices;
  for (const auto& [id, node] : nodes_.nodes()) {
    const auto& labels = node.description.labels();
    auto name = labels.find(std::string(labels::kTpuSliceName));
    if (name == labels.end() || name->second.empty()) continue;
    Catalog& c = slices[name->second];
    if (auto t = labels.find(std::string(labels::kAcceleratorType)); t != labels.end()) {
      c.accelerator_type = t->second;
    }
    if (auto t = labels.find(std::string(labels::kTpuTopology)); t != labels.end())
      c.topology = t->second;
    std::string worker;
    if (auto w = labels.find(std::string(labels::kTpuWorkerId)); w != labels.end())
      worker = w->second;
    c.workers.insert(worker);
    if (node.health == NodeRegistry::Health::kAlive) c.alive_workers.insert(worker);
    if (std::optional<NodeIndex> index = state_.view.Find(NodeId(id)); index.has_value()) {
      const std::optional<TpuSliceType>& type = state_.view.node(*index).fabric.tpu_slice;
      if (type.has_value()) c.chips = type->topology.chips();
    }
    auto tpu = node.description.resources().raw().find("TPU");
    if (tpu != node.description.resources().raw().end()) {
      c.tpu_per_host = std::max(c.tpu_per_host, tpu->second / Quantity::kScale);
    }
  }
  std::map<std::string, std::string> holders;
  for (const auto& [name, slice] : slices_) {
    for (const std::string& domain : Record(slice).domains) holders[domain] = name;
  }
  std::map<std::string, v1::ListSlicesResponse::Slice> catalog;
  for (const auto& [name, c] : slices) {
    v1::ListSlicesResponse::Slice* out = &catalog[name];
    out->set_name(name);
    out->set_accelerator_type(c.accelerator_type);
    out->set_topology(c.topology);
    const int64_t hosts = (c.chips > 0 && c.tpu_per_host > 0)
                              ? std::max<int64_t>(1, c.chips / c.tpu_per_host)
                              : static_cast<int64_t>(c.workers.size());
    out->set_hosts(static_cast<int>(hosts));
    out->set_hosts_alive(static_cast<int>(c.alive_workers.size()));
    out->set_intact(static_cast<int64_t>(c.alive_workers.size()) >= hosts);
    if (auto h = holders.find(name); h != holders.end()) out->set_held_by(h->second);
  }
  return catalog;
}

}  // namespace tessera
