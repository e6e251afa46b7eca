// HeadService, slice groups: what sets them apart from placement groups — whole TPU slices (or
// hosts of one NVLink domain) chosen by the DomainGroupScheduler, never re-placed (a dead host
// breaks the group), described as SliceGroupInfo, and the catalog of slices `tessera slice list`
// shows. Their commit and release are the shared reservation machinery.
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
#include "head/head_service.h"
#include "head/head_service_internal.h"
#include "head/request_limits.h"

namespace tessera {

using head_internal::Invalid;
using head_internal::InvalidText;
using head_internal::RunOnce;

namespace {

// Chips in a topology "4x4" / "2x2x2"; 0 when it is not one.
int64_t TopologyChips(const std::string& topology) {
  if (topology.empty()) return 0;
  int64_t chips = 1;
  size_t start = 0;
  while (start <= topology.size()) {
    size_t end = topology.find('x', start);
    if (end == std::string::npos) end = topology.size();
    std::string part = topology.substr(start, end - start);
    if (part.empty() || part.size() > 6) return 0;
    for (char c : part) {
      if (c < '0' || c > '9') return 0;
    }
    chips *= std::stoll(part);
    start = end + 1;
  }
  return chips;
}

}  // namespace

void HeadService::FillSliceInfo(const SliceEntry& slice, v1::SliceGroupInfo* info) const {
  info->Clear();
  info->set_id(slice.id);
  info->set_name(slice.name);
  info->set_state(ReservationStateName(slice.kind, slice.phase));
  info->set_alternative(slice.alternative);
  info->set_owner(slice.owner);
  for (const std::string& domain : slice.domains) info->add_domains(domain);
  for (const DomainBundle& bundle : slice.bundles) {
    v1::SliceHost* host = info->add_hosts();
    host->set_domain(bundle.domain);
    host->set_node_id(bundle.node.value());
    host->set_worker(bundle.worker);
    rpc::AllocationToProto(bundle.allocation, host->mutable_allocation());
  }
  info->set_explanation(slice.ShownExplanation());
}

void HeadService::ApplySliceResult(SliceEntry& slice, const DomainGroupResult& result) {
  if (result.status == ScheduleStatus::kPlaced) {
    slice.scheduled = result.id;
    slice.alternative = static_cast<int>(result.alternative);
    slice.domains = result.domains;
    slice.bundles = result.bundles;
    slice.phase = ReservationPhase::kCommitting;
    slice.explanation.clear();
    return;
  }
  slice.phase = result.status == ScheduleStatus::kPending ? ReservationPhase::kPending
                                                          : ReservationPhase::kInfeasible;
  slice.explanation = result.explanation;
}

void HeadService::TryPlaceSlice(SliceEntry& slice) {
  auto result = slices_scheduler_.ReserveSlices(slice.parsed);
  if (!result.ok()) {
    slice.phase = ReservationPhase::kInfeasible;
    slice.explanation = std::string(result.status().message());
    return;
  }
  ApplySliceResult(slice, *result);
}

grpc::Status HeadService::ReserveSlices(grpc::ServerContext*,
                                        const v1::ReserveSlicesRequest* request,
                                        v1::SliceGroupInfo* response) {
  // Before the request-id cache and any lock: an oversized request costs nothing.
  if (absl::Status limits = request_limits::Check(*request); !limits.ok()) return Invalid(limits);
  return RunOnce(reserve_cache_, request->request_id(), response,
                 [&](v1::SliceGroupInfo* out) { return DoReserveSlices(*request, out); });
}

grpc::Status HeadService::DoReserveSlices(const v1::ReserveSlicesRequest& request,
                                          v1::SliceGroupInfo* response) {
  auto parsed = rpc::DomainGroupRequestFromProto(request);
  if (!parsed.ok()) return Invalid(parsed.status());
  std::string name;
  {
    absl::MutexLock lock(&mu_);
    std::string id;
    grpc::Status claimed = ClaimName(request.name(), "slices", &next_slice_, &id, &name);
    if (!claimed.ok()) return claimed;
    SliceEntry entry;
    entry.id = id;
    entry.name = name;
    entry.owner = request.owner();
    NoteDriverAlive(entry.owner);
    entry.request = request;
    entry.parsed = *std::move(parsed);
    entry.parsed.name = name;
    // The scheduler refuses shapes it does not know; that is bad input and changes nothing.
    auto result = slices_scheduler_.ReserveSlices(entry.parsed);
    if (!result.ok()) return Invalid(result.status());
    ApplySliceResult(entry, *result);
    SliceEntry& slice = slices_.emplace(name, std::move(entry)).first->second;
    Persist(slice);
    if (slice.phase != ReservationPhase::kCommitting) {
      FillSliceInfo(slice, response);
      return grpc::Status::OK;
    }
  }
  SyncAndDescribe(ReservationKind::kSliceGroup, name, [&](const Reservation* slice) {
    if (slice == nullptr) {
      response->set_name(name);
      response->set_state("RELEASED");
      return;
    }
    FillSliceInfo(static_cast<const SliceEntry&>(*slice), response);
  });
  return grpc::Status::OK;
}

grpc::Status HeadService::ReleaseSlices(grpc::ServerContext*,
                                        const v1::ReleaseSlicesRequest* request,
                                        v1::ReleaseSlicesResponse* response) {
  if (absl::Status limits = request_limits::Check(*request); !limits.ok()) return Invalid(limits);
  return RunOnce(release_cache_, request->request_id(), response,
                 [&](v1::ReleaseSlicesResponse* out) { return DoReleaseSlices(*request, out); });
}

grpc::Status HeadService::DoReleaseSlices(const v1::ReleaseSlicesRequest& request,
                                          v1::ReleaseSlicesResponse* response) {
  const std::string& name = request.name();
  if (name.empty()) return InvalidText("name: is empty");
  std::vector<NodeWork> work;
  {
    absl::MutexLock lock(&mu_);
    Reservation* slice = WaitUntilIdle(ReservationKind::kSliceGroup, name);
    if (slice == nullptr) {
      return grpc::Status(grpc::StatusCode::NOT_FOUND, absl::StrCat("no slice group named ", name));
    }
    slice->busy = true;
    work = CancelAllWork(*slice);
  }
  CancelBundles(name, work);
  absl::MutexLock lock(&mu_);
  SliceEntry& slice = slices_.at(name);
  for (const DomainBundle& bundle : slice.bundles) {
    v1::SliceHost* host = response->add_released();
    host->set_domain(bundle.domain);
    host->set_node_id(bundle.node.value());
    host->set_worker(bundle.worker);
    rpc::AllocationToProto(bundle.allocation, host->mutable_allocation());
  }
  Erase(slice);
  return grpc::Status::OK;
}

std::map<std::string, v1::ListSlicesResponse::Slice> HeadService::SliceCatalog() const {
  struct Catalog {
    std::string accelerator_type;
    std::string topology;
    std::set<std::string> workers;
    std::set<std::string> alive_workers;
    int64_t tpu_per_host = 0;
  };
  std::map<std::string, Catalog> slices;
  for (const auto& [id, node] : nodes_) {
    const auto& labels = node.description.labels();
    auto name = labels.find(std::string(labels::kTpuSliceName));
    if (name == labels.end() || name->second.empty()) continue;
    Catalog& c = slices[name->second];
    if (auto t = labels.find(std::string(labels::kAcceleratorType)); t != labels.end()) {
      c.accelerator_type = t->second;
    }
    if (auto t = labels.find(std::string(labels::kTpuTopology)); t != labels.end()) c.topology = t->second;
    std::string worker;
    if (auto w = labels.find(std::string(labels::kTpuWorkerId)); w != labels.end()) worker = w->second;
    c.workers.insert(worker);
    if (node.health == NodeHealth::kAlive) c.alive_workers.insert(worker);
    auto tpu = node.description.resources().raw().find("TPU");
    if (tpu != node.description.resources().raw().end()) {
      c.tpu_per_host = std::max(c.tpu_per_host, tpu->second / Quantity::kScale);
    }
  }
  std::map<std::string, std::string> holders;
  for (const auto& [name, slice] : slices_) {
    for (const std::string& domain : slice.domains) holders[domain] = name;
  }
  std::map<std::string, v1::ListSlicesResponse::Slice> catalog;
  for (const auto& [name, c] : slices) {
    v1::ListSlicesResponse::Slice* out = &catalog[name];
    out->set_name(name);
    out->set_accelerator_type(c.accelerator_type);
    out->set_topology(c.topology);
    int64_t chips = TopologyChips(c.topology);
    int64_t hosts = (chips > 0 && c.tpu_per_host > 0)
                        ? std::max<int64_t>(1, chips / c.tpu_per_host)
                        : static_cast<int64_t>(c.workers.size());
    out->set_hosts(static_cast<int>(hosts));
    out->set_hosts_alive(static_cast<int>(c.alive_workers.size()));
    out->set_intact(static_cast<int64_t>(c.alive_workers.size()) >= hosts);
    if (auto h = holders.find(name); h != holders.end()) out->set_held_by(h->second);
  }
  return catalog;
}

void HeadService::FillSlices(v1::ListSlicesResponse* response) const {
  for (auto& [name, slice] : SliceCatalog()) *response->add_slices() = std::move(slice);
  for (const auto& [name, slice] : slices_) FillSliceInfo(slice, response->add_groups());
}

grpc::Status HeadService::ListSlices(grpc::ServerContext*, const v1::ListRequest* request,
                                     v1::ListSlicesResponse* response) {
  // One listing of two tables: the slice groups by name, then the slices by name. The token's
  // key says which: "g/<group>" or "s/<slice>". Groups come first so that a caller looking for
  // its group finds it on the first page while there are fewer groups than a page holds.
  constexpr std::string_view kListing = "slices";
  if (absl::Status limits = request_limits::Check(*request); !limits.ok()) return Invalid(limits);
  auto page = head_internal::ParsePageRequest(*request, kListing, options_.max_page_size);
  if (!page.ok()) return Invalid(page.status());
  const std::string& after = page->after;
  const bool in_slices = absl::StartsWith(after, "s/");
  if (!after.empty() && !in_slices && !absl::StartsWith(after, "g/")) {
    return InvalidText(absl::StrCat("page_token: ", Quote(request->page_token()),
                                    " is not a page token of the slices listing"));
  }
  const std::string after_key = after.empty() ? "" : after.substr(2);
  absl::MutexLock lock(&mu_);
  head_internal::PageFiller filler(page->size, options_.max_page_bytes);
  if (!in_slices) {
    std::optional<std::string> resume = head_internal::AppendPage(
        slices_.upper_bound(after_key), slices_.end(), filler, response->mutable_groups(),
        [](const auto& entry) { return entry.first; },
        [&](const auto& entry, v1::SliceGroupInfo* out) { FillSliceInfo(entry.second, out); });
    if (resume.has_value()) {
      response->set_next_page_token(head_internal::PageToken(kListing, "g/" + *resume));
      return grpc::Status::OK;
    }
  }
  std::map<std::string, v1::ListSlicesResponse::Slice> catalog = SliceCatalog();
  std::optional<std::string> resume = head_internal::AppendPage(
      catalog.upper_bound(in_slices ? after_key : ""), catalog.end(), filler,
      response->mutable_slices(), [](const auto& entry) { return entry.first; },
      [](const auto& entry, v1::ListSlicesResponse::Slice* out) { *out = entry.second; });
  if (resume.has_value()) {
    response->set_next_page_token(head_internal::PageToken(kListing, "s/" + *resume));
  }
  return grpc::Status::OK;
}

}  // namespace tessera
