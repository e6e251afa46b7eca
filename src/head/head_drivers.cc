// HeadService's drivers: the programs that own placement groups and slice groups. A reservation
// created with an owner lives as long as that driver keeps calling KeepDriverAlive (the C++ API
// does every second) and is released when the driver says it exited or falls silent for
// driver_timeout, the way the peers release a job's reservations with the job unless they were
// created detached. Reservations without an owner (the CLI's, and detached ones) live until
// removed.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "head/head_service.h"
#include "head/head_service_internal.h"
#include "head/request_limits.h"

namespace tessera {

using head_internal::Invalid;
using head_internal::InvalidText;

void HeadService::NoteDriverAlive(const std::string& driver) {
  if (!driver.empty()) drivers_[driver] = clock_->Now();
}

std::vector<std::string> HeadService::TakeExpiredDrivers(absl::Time now) {
  std::vector<std::string> expired;
  for (auto it = drivers_.begin(); it != drivers_.end();) {
    if (now - it->second > options_.driver_timeout) {
      expired.push_back(it->first);
      it = drivers_.erase(it);
    } else {
      ++it;
    }
  }
  return expired;
}

std::vector<std::string> HeadService::ReleaseOwnedBy(const std::string& driver,
                                                     const std::string& why) {
  std::vector<std::string> groups;
  std::vector<std::string> slices;
  {
    absl::MutexLock lock(&mu_);
    drivers_.erase(driver);
    for (const auto& [name, group] : groups_) {
      if (group.owner == driver) groups.push_back(name);
    }
    for (const auto& [name, slice] : slices_) {
      if (slice.owner == driver) slices.push_back(name);
    }
  }
  std::vector<std::string> released;
  for (const std::string& name : groups) {
    v1::RemovePlacementGroupRequest request;
    request.set_name(name);
    v1::RemovePlacementGroupResponse response;
    // NOT_FOUND: removed meanwhile by someone else, which is just as good.
    if (DoRemovePlacementGroup(request, &response).ok()) released.push_back(name);
  }
  for (const std::string& name : slices) {
    v1::ReleaseSlicesRequest request;
    request.set_name(name);
    v1::ReleaseSlicesResponse response;
    if (DoReleaseSlices(request, &response).ok()) released.push_back(name);
  }
  if (!released.empty()) {
    absl::MutexLock lock(&mu_);
    RecordEvent(absl::StrCat("driver ", driver, " ", why, ": released ",
                             absl::StrJoin(released, ", ")));
  }
  return released;
}

grpc::Status HeadService::KeepDriverAlive(grpc::ServerContext*,
                                          const v1::KeepDriverAliveRequest* request,
                                          v1::KeepDriverAliveResponse* response) {
  if (absl::Status limits = request_limits::Check(*request); !limits.ok()) return Invalid(limits);
  if (request->driver_id().empty()) return InvalidText("driver_id: is empty");
  absl::MutexLock lock(&mu_);
  NoteDriverAlive(request->driver_id());
  response->set_timeout_ms(absl::ToInt64Milliseconds(options_.driver_timeout));
  return grpc::Status::OK;
}

grpc::Status HeadService::DriverExited(grpc::ServerContext*,
                                       const v1::DriverExitedRequest* request,
                                       v1::DriverExitedResponse* response) {
  if (absl::Status limits = request_limits::Check(*request); !limits.ok()) return Invalid(limits);
  if (request->driver_id().empty()) return InvalidText("driver_id: is empty");
  for (const std::string& name : ReleaseOwnedBy(request->driver_id(), "exited")) {
    response->add_released(name);
  }
  return grpc::Status::OK;
}

}  // namespace tessera
