// HeadService::PickNode: which node should take a lease. The head only advises: a request inside
// a reservation goes to the agent holding the bundle (that agent decides); any other request is
// the task scheduler's choice over the view, excluded nodes left out.
#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/string_util.h"
#include "head/head_service.h"
#include "head/head_service_internal.h"
#include "head/request_limits.h"

namespace tessera {

using head_internal::Invalid;
using head_internal::InvalidText;

grpc::Status HeadService::PickNode(grpc::ServerContext*, const v1::PickNodeRequest* request,
                                   v1::PickNodeResponse* response) {
  if (absl::Status limits = request_limits::Check(*request); !limits.ok()) return Invalid(limits);
  auto parsed = rpc::ResourceRequestFromProto(request->request());
  if (!parsed.ok()) return Invalid(parsed.status());
  std::set<std::string> excluded(request->exclude_node_ids().begin(),
                                 request->exclude_node_ids().end());
  absl::MutexLock lock(&mu_);
  auto answer = [&](const std::string& node) {
    response->set_node_id(node);
    response->set_address(nodes_.at(node).description.address());
    response->set_status("placed");
  };
  if (parsed->target.has_value()) {
    // A request inside a group goes to the agent holding the bundle; that agent decides.
    const rpc::BundleTarget& target = *parsed->target;
    std::vector<std::string> holders;
    std::vector<ResourceSet> shapes;  // what each bundle reserves, by index
    if (auto g = groups_.find(target.placement_group); g != groups_.end()) {
      for (const auto& hold : g->second.confirmed) holders.push_back(hold ? hold->node : "");
      shapes = OptionsInOrder(g->second.spec)[g->second.option]->bundles;
      // A group still waiting for room has its bundles, just none held yet.
      holders.resize(std::max(holders.size(), shapes.size()));
    } else if (auto s = slices_.find(target.placement_group); s != slices_.end()) {
      if (s->second.phase != ReservationPhase::kHeld &&
          s->second.phase != ReservationPhase::kDegraded) {
        // Its hosts (and so its bundles) are known once it is reserved.
        response->set_status("pending");
        response->set_explanation(absl::StrCat("slice group ", target.placement_group,
                                               " is not reserved yet"));
        return grpc::Status::OK;
      }
      for (const DomainBundle& b : s->second.bundles) {
        holders.push_back(b.node.value());
        shapes.push_back(b.allocation.resources);
      }
    } else {
      response->set_status("infeasible");
      response->set_explanation(
          absl::StrCat("no placement group or slice group named ", target.placement_group));
      return grpc::Status::OK;
    }
    if (target.bundle_index >= static_cast<int>(holders.size())) {
      response->set_status("infeasible");
      response->set_explanation(absl::StrCat(target.placement_group, " has ", holders.size(),
                                             " bundles; there is no bundle ",
                                             target.bundle_index));
      return grpc::Status::OK;
    }
    // A demand no targeted bundle could ever hold is infeasible, wherever the bundles are.
    bool could_hold = false;
    for (int i = 0; i < static_cast<int>(shapes.size()); ++i) {
      if (target.bundle_index >= 0 && i != target.bundle_index) continue;
      could_hold = could_hold || shapes[i].Contains(parsed->request.resources);
    }
    if (!shapes.empty() && !could_hold) {
      response->set_status("infeasible");
      response->set_explanation(
          target.bundle_index >= 0
              ? absl::StrCat("bundle ", target.bundle_index, " of ", target.placement_group,
                             " reserves ", shapes[target.bundle_index].ToString(),
                             "; it can never hold ", parsed->request.resources.ToString())
              : absl::StrCat("no bundle of ", target.placement_group, " can ever hold ",
                             parsed->request.resources.ToString(),
                             " (a request never spans bundles)"));
      return grpc::Status::OK;
    }
    for (int i = 0; i < static_cast<int>(holders.size()); ++i) {
      if (target.bundle_index >= 0 && i != target.bundle_index) continue;
      const std::string& node = holders[i];
      if (node.empty() || excluded.count(node) != 0 || ClientFor(node) == nullptr) continue;
      answer(node);
      return grpc::Status::OK;
    }
    response->set_status("pending");
    response->set_explanation(
        target.bundle_index >= 0
            ? absl::StrCat("bundle ", target.bundle_index, " of ", target.placement_group,
                           " is not held on a live node that was not tried yet")
            : absl::StrCat("no bundle of ", target.placement_group,
                           " is held on a live node that was not tried yet"));
    return grpc::Status::OK;
  }
  // Excluded nodes take no part in this decision; the head only advises (the agent that takes
  // the lease reports it in its next heartbeat, which mirrors it here).
  SchedulingRequest decision = parsed->request;
  for (const std::string& id : excluded) decision.excluded_nodes.push_back(NodeId(id));
  auto result = tasks_.Advise(decision);
  if (!result.ok()) return Invalid(result.status());
  if (result->status == ScheduleStatus::kPlaced) {
    answer(result->placement->node.value());
    return grpc::Status::OK;
  }
  response->set_status(absl::AsciiStrToLower(ToAbsl(ScheduleStatusName(result->status))));
  response->set_explanation(result->explanation);
  return grpc::Status::OK;
}

}  // namespace tessera
