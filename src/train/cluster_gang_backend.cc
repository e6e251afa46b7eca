#include "train/cluster_gang_backend.h"

#include <algorithm>
#include <atomic>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/ignore_status.h"
#include "base/status_macros.h"
#include "base/string_util.h"
#include "hardware/node_label_keys.h"
#include "rpc/state_names.h"
#include "wire/proto_convert.h"

namespace tessera::train {
namespace {

using client::Retry;

// The host of "host:port" / "[v6]:port".
std::string HostOf(const std::string& address) {
  if (!address.empty() && address[0] == '[') {
    const size_t close = address.find(']');
    return close == std::string::npos ? address : address.substr(1, close - 1);
  }
  const size_t colon = address.rfind(':');
  return colon == std::string::npos ? address : address.substr(0, colon);
}

bool Stopped(const std::function<bool()>& stopped) { return stopped && stopped(); }

// `name` is a slice group's or a placement group's, as the backend reserved it.
void ReleaseNamed(ClusterHead& head, const std::string& name, bool slice_group) {
  IgnoreStatus(slice_group ? head.ReleaseSlices(SliceGroupName(name))
                           : head.RemovePlacementGroup(PlacementGroupName(name)),
               "best effort (over gRPC, retried already): NotFound means gone, and nothing else "
               "is left to try");
}

// Where a reservation that did not come through was left: still waiting for room, or refused.
enum class NotReservedCase { kStillWaiting, kRefused };

// Why a reservation that did not come through did not, once it is given back; `state` is the
// word of the state the head left it in.
absl::Status NotReserved(NotReservedCase left, std::string_view state,
                         const std::string& explanation, absl::Duration timeout,
                         const std::function<bool()>& stopped, const char* what) {
  if (Stopped(stopped))
    return absl::CancelledError(absl::StrCat("stopped while waiting for ", what));
  if (left == NotReservedCase::kStillWaiting) {
    return absl::DeadlineExceededError(
        absl::StrCat("no room within ", absl::FormatDuration(timeout), ": ", explanation));
  }
  return absl::ResourceExhaustedError(absl::StrCat(what, " ", ToAbsl(state), ": ", explanation));
}

class GrpcRankWatch final : public RankWatch {
 public:
  GrpcRankWatch(std::unique_ptr<grpc::ClientContext> context, v1::NodeAgent::Stub* stub,
                StartedRank rank, std::function<void(bool, const std::string&)> output,
                std::function<void(RankEnd)> ended)
      : context_(std::move(context)) {
    thread_ = std::thread(
        [this, stub, rank = std::move(rank), output = std::move(output), ended = std::move(ended)] {
          v1::WatchWorkerRequest request;
          request.set_worker_id(rank.worker_id);
          auto stream = stub->WatchWorker(context_.get(), request);
          v1::WorkerEvent event;
          std::optional<v1::WorkerExit> exit;
          while (stream->Read(&event)) {
            if (event.has_stdout()) output(false, event.stdout());
            if (event.has_stderr()) output(true, event.stderr());
            if (event.has_exit()) exit = event.exit();
          }
          const grpc::Status finished = stream->Finish();
          if (exit.has_value()) {
            ended(*exit);
          } else if (cancelled_.load()) {
            ended(absl::CancelledError("the watch was ended"));
          } else {
            ended(client::FromGrpc(finished, absl::StrCat("the node agent of ", rank.node_id,
                                                          " at ", rank.agent_address)));
          }
        });
  }
  ~GrpcRankWatch() override {
    Cancel();
    thread_.join();
  }
  void Cancel() override {
    cancelled_.store(true);
    context_->TryCancel();
  }

 private:
  std::unique_ptr<grpc::ClientContext> context_;
  std::atomic<bool> cancelled_{false};
  std::thread thread_;
};

}  // namespace

ClusterGangBackend::ClusterGangBackend(std::unique_ptr<ClusterHead> head,
                                       std::shared_ptr<client::ClusterClient> agents,
                                       bool ranks_outlive_the_head)
    : head_(std::move(head)),
      agents_(std::move(agents)),
      ranks_outlive_the_head_(ranks_outlive_the_head) {}

absl::Status ClusterGangBackend::RefreshNodes() {
  TESSERA_ASSIGN_OR_RETURN(std::vector<HeadNode> nodes, head_->Nodes());
  absl::MutexLock lock(&mu_);
  nodes_.clear();
  for (const HeadNode& node : nodes) {
    NodeEntry entry;
    entry.address = node.description.address();
    entry.host = HostOf(entry.address);
    auto type = node.description.labels().find(std::string(labels::kAcceleratorType));
    if (type != node.description.labels().end()) entry.accelerator_type = type->second;
    nodes_[node.description.node_id()] = std::move(entry);
  }
  return absl::OkStatus();
}

absl::StatusOr<ClusterGangBackend::NodeEntry> ClusterGangBackend::Node(const std::string& node_id) {
  {
    absl::MutexLock lock(&mu_);
    auto it = nodes_.find(node_id);
    if (it != nodes_.end()) return it->second;
  }
  TESSERA_RETURN_IF_ERROR(RefreshNodes());
  absl::MutexLock lock(&mu_);
  auto it = nodes_.find(node_id);
  if (it == nodes_.end())
    return absl::NotFoundError(absl::StrCat("the head knows no node ", node_id));
  return it->second;
}

v1::NodeAgent::Stub* ClusterGangBackend::Agent(const std::string& address) {
  absl::MutexLock lock(&mu_);
  return &agents_->agent(address);
}

absl::Status ClusterGangBackend::FillSlot(const std::string& node_id,
                                          const v1::Allocation& allocation, GangSlot* slot) {
  TESSERA_ASSIGN_OR_RETURN(NodeEntry node, Node(node_id));
  slot->node_id = node_id;
  slot->host = node.host;
  slot->accelerator_type = node.accelerator_type;
  for (const v1::DeviceGrant& grant : allocation.devices()) {
    if (grant.instances().empty()) continue;
    slot->device_resource = grant.resource();
    slot->device_ids.assign(grant.instances().begin(), grant.instances().end());
    std::sort(slot->device_ids.begin(), slot->device_ids.end());
    break;
  }
  return absl::OkStatus();
}

absl::StatusOr<GangReservation> ClusterGangBackend::Reserve(const std::string& name,
                                                            const v1::GangPlacement& placement,
                                                            GangSize size, absl::Duration timeout,
                                                            const std::function<bool()>& stopped) {
  TESSERA_RETURN_IF_ERROR(RefreshNodes());
  // Largest first: a size that does not fit now is given back at once and the next smaller one
  // tried; the smallest waits for room.
  absl::Status last = absl::ResourceExhaustedError("no size was tried");
  for (int n = size.max; n >= size.min; --n) {
    const absl::Duration wait = n == size.min ? timeout : absl::ZeroDuration();
    auto reserved = placement.slices().empty()
                        ? ReservePlacementGroup(name, placement, n, wait, stopped, nullptr)
                        : ReserveSlices(name, placement, n, wait, stopped);
    if (reserved.ok() || absl::IsCancelled(reserved.status()) || n == size.min) return reserved;
    last = reserved.status();
  }
  return last;
}

absl::StatusOr<bool> ClusterGangBackend::RoomToGrow(const v1::GangPlacement& placement, int extra,
                                                    const GangReservation& current) {
  if (extra < 1) return false;
  const std::string probe = ProbeReservationName(current.name);
  absl::StatusOr<GangReservation> reserved;
  if (!placement.slices().empty()) {
    reserved = ReserveSlices(probe, placement, extra, absl::ZeroDuration(), nullptr);
  } else {
    // A node-per-bundle gang grows onto nodes it does not use yet; a packed one anywhere.
    std::set<std::string> used;
    for (const GangSlot& slot : current.slots) used.insert(slot.node_id);
    const bool spread =
        placement.max_nodes() > 0 || placement.strategy() == v1::PLACEMENT_STRATEGY_STRICT_SPREAD;
    const bool packed = placement.strategy() == v1::PLACEMENT_STRATEGY_STRICT_PACK;
    v1::LabelSelector selector;
    if (spread || packed) {
      // Strict pack wins when both hold: its bundles must share the nodes already in use.
      v1::LabelSelectorConstraint* on_nodes = selector.add_label_constraints();
      on_nodes->set_label_key(std::string(labels::kNodeId));
      on_nodes->set_operator_(packed ? v1::LABEL_OPERATOR_IN : v1::LABEL_OPERATOR_NOT_IN);
      for (const std::string& node : used) on_nodes->add_label_values(node);
    }
    reserved = ReservePlacementGroup(probe, placement, extra, absl::ZeroDuration(), nullptr,
                                     spread || packed ? &selector : nullptr);
  }
  if (!reserved.ok()) {
    if (absl::IsResourceExhausted(reserved.status()) ||
        absl::IsDeadlineExceeded(reserved.status())) {
      return false;
    }
    return reserved.status();
  }
  Release(*reserved);
  return true;
}

absl::StatusOr<GangReservation> ClusterGangBackend::ReserveSlices(
    const std::string& name, const v1::GangPlacement& placement, int slices, absl::Duration timeout,
    const std::function<bool()>& stopped) {
  v1::ReserveSlicesRequest request;
  request.set_request_id(client::NewRequestId("gang-slices"));
  request.set_name(name);
  *request.mutable_alternatives() = placement.slices();
  // An elastic range asks its first shape with `slices` slices; fixed gangs keep every fallback.
  if (placement.min_slices() > 0) {
    request.mutable_alternatives()->DeleteSubrange(1, request.alternatives_size() - 1);
    request.mutable_alternatives(0)->set_num_slices(slices);
  }
  TESSERA_ASSIGN_OR_RETURN(v1::SliceGroupInfo info,
                           head_->ReserveSlicesAndWait(request, timeout, stopped));
  if (info.state() != v1::SLICE_GROUP_STATE_RESERVED) {
    ReleaseNamed(*head_, name, /*slice_group=*/true);
    return NotReserved(info.state() == v1::SLICE_GROUP_STATE_PENDING
                           ? NotReservedCase::kStillWaiting
                           : NotReservedCase::kRefused,
                       rpc::SliceGroupStateName(info.state()), info.explanation(), timeout, stopped,
                       "slice reservation");
  }
  GangReservation reservation;
  reservation.name = name;
  reservation.slice_group = true;
  const v1::SliceAlternative& chosen =
      request.alternatives(std::clamp(info.alternative(), 0, request.alternatives_size() - 1));
  reservation.members = std::max(1, chosen.num_slices());
  const bool per_chip = chosen.bundle_per_chip();
  reservation.explanation =
      absl::StrCat(chosen.nvlink_hosts() > 0 ? "NVLink domain" : "slice",
                   info.domains_size() > 1 ? "s " : " ", absl::StrJoin(info.domains(), ", "));
  std::map<std::string, std::vector<int>> node_bundles;
  for (int i = 0; i < info.hosts_size(); ++i) node_bundles[info.hosts(i).node_id()].push_back(i);
  for (int i = 0; i < info.hosts_size(); ++i) {
    const v1::SliceHost& host = info.hosts(i);
    GangSlot slot;
    slot.bundle_index = i;
    if (absl::Status s = FillSlot(host.node_id(), host.allocation(), &slot); !s.ok()) {
      ReleaseNamed(*head_, name, /*slice_group=*/true);
      return s;
    }
    if (chosen.nvlink_hosts() == 0) {
      slot.slice = host.domain();
      slot.tpu_worker_id = host.worker();
    }
    reservation.slots.push_back(slot);
    reservation.slot_resources.push_back(host.allocation().resources());
    // Per chip: each rank sees its own chip (TPU_VISIBLE_CHIPS and the per-process bounds);
    // otherwise the node-union mask of §2.4.
    reservation.visible_bundles.push_back(per_chip ? std::vector<int>{}
                                                   : node_bundles[host.node_id()]);
  }
  return reservation;
}

absl::StatusOr<GangReservation> ClusterGangBackend::ReservePlacementGroup(
    const std::string& name, const v1::GangPlacement& placement, int bundles,
    absl::Duration timeout, const std::function<bool()>& stopped,
    const v1::LabelSelector* only_on) {
  const bool per_node = placement.max_nodes() > 0;
  const int share = per_node ? std::max(1, placement.nproc_per_node()) : 1;
  const v1::Resources& bundle_resources =
      per_node ? placement.resources_per_node() : placement.resources_per_worker();
  v1::CreatePlacementGroupRequest request;
  request.set_request_id(client::NewRequestId("gang-pg"));
  request.set_name(name);
  request.set_strategy(per_node ? v1::PLACEMENT_STRATEGY_STRICT_SPREAD
                       : placement.strategy() == v1::PLACEMENT_STRATEGY_UNSPECIFIED
                           ? v1::PLACEMENT_STRATEGY_PACK
                           : placement.strategy());
  auto fill = [&](v1::BundleOptionSpec* option, const v1::LabelSelector* selector) {
    for (int b = 0; b < bundles; ++b) {
      v1::BundleSpec* bundle = option->add_bundles();
      *bundle->mutable_resources() = bundle_resources;
      if (selector != nullptr) *bundle->mutable_label_selector() = *selector;
      // Constraints are ANDed: appending them keeps the gang's own selector in force.
      if (only_on != nullptr) bundle->mutable_label_selector()->MergeFrom(*only_on);
    }
  };
  fill(request.mutable_primary(),
       placement.label_selectors().empty() ? nullptr : &placement.label_selectors(0));
  for (int i = 1; i < placement.label_selectors_size(); ++i) {
    fill(request.add_fallbacks(), &placement.label_selectors(i));
  }
  TESSERA_ASSIGN_OR_RETURN(v1::PlacementGroupInfo info,
                           head_->CreatePlacementGroupAndWait(request, timeout, stopped));
  if (info.state() != v1::PLACEMENT_GROUP_STATE_CREATED) {
    ReleaseNamed(*head_, name, /*slice_group=*/false);
    const bool waiting = info.state() == v1::PLACEMENT_GROUP_STATE_PENDING ||
                         info.state() == v1::PLACEMENT_GROUP_STATE_RESCHEDULING;
    return NotReserved(waiting ? NotReservedCase::kStillWaiting : NotReservedCase::kRefused,
                       rpc::PlacementGroupStateName(info.state()), info.explanation(), timeout,
                       stopped, "placement group");
  }
  GangReservation reservation;
  reservation.name = name;
  reservation.members = bundles;
  std::map<std::string, std::vector<int>> node_bundles;
  for (const v1::BundleLocation& b : info.bundles()) node_bundles[b.node_id()].push_back(b.index());
  // The share of one rank of a per-node bundle: every amount divided by nproc_per_node.
  v1::Resources rank_resources = bundle_resources;
  for (auto& [resource, raw] : *rank_resources.mutable_raw()) raw /= share;
  for (const v1::BundleLocation& b : info.bundles()) {
    GangSlot whole;
    whole.bundle_index = b.index();
    if (absl::Status s = FillSlot(b.node_id(), b.allocation(), &whole); !s.ok()) {
      ReleaseNamed(*head_, name, /*slice_group=*/false);
      return s;
    }
    const size_t per_rank = whole.device_ids.size() / static_cast<size_t>(share);
    for (int k = 0; k < share; ++k) {
      GangSlot slot = whole;
      if (per_rank > 0) {
        slot.device_ids.assign(whole.device_ids.begin() + k * per_rank,
                               whole.device_ids.begin() + (k + 1) * per_rank);
      } else if (share > 1) {
        slot.device_ids.clear();
      }
      reservation.slots.push_back(slot);
      reservation.slot_resources.push_back(per_node ? rank_resources : b.allocation().resources());
      reservation.visible_bundles.push_back(node_bundles[b.node_id()]);
    }
  }
  return reservation;
}

void ClusterGangBackend::Release(const GangReservation& reservation) {
  ReleaseNamed(*head_, reservation.name, reservation.slice_group);
}

absl::StatusOr<NodePort> ClusterGangBackend::FreePort(const GangSlot& slot) {
  TESSERA_ASSIGN_OR_RETURN(NodeEntry node, Node(slot.node_id));
  v1::NodeAgent::Stub* agent = Agent(node.address);
  v1::FindFreePortRequest request;
  v1::FindFreePortResponse response;
  TESSERA_RETURN_IF_ERROR(agents_->Call(
      absl::StrCat("the node agent of ", slot.node_id, " at ", node.address), Retry::kSafe,
      [&](grpc::ClientContext* ctx) { return agent->FindFreePort(ctx, request, &response); }));
  return NodePort{response.port(), response.interface()};
}

absl::Status ClusterGangBackend::PrepareWorkingDir(const GangSlot& slot, const JobId& job_id,
                                                   const std::string& archive) {
  TESSERA_ASSIGN_OR_RETURN(NodeEntry node, Node(slot.node_id));
  v1::NodeAgent::Stub* agent = Agent(node.address);
  v1::PrepareWorkingDirRequest request;
  request.set_job_id(job_id.value());
  request.set_archive(archive);
  v1::PrepareWorkingDirResponse response;
  return agents_->Call(
      absl::StrCat("the node agent of ", slot.node_id, " at ", node.address), Retry::kSafe,
      [&](grpc::ClientContext* ctx) { return agent->PrepareWorkingDir(ctx, request, &response); });
}

absl::StatusOr<StartedRank> ClusterGangBackend::StartRank(const RankLaunch& launch) {
  TESSERA_ASSIGN_OR_RETURN(NodeEntry node, Node(launch.slot.node_id));
  v1::NodeAgent::Stub* agent = Agent(node.address);
  v1::LeaseRequest request;
  request.set_request_id(client::NewRequestId("rank"));
  request.set_job_id(launch.job_id.value());
  v1::ResourceRequest& demand = *request.mutable_request();
  *demand.mutable_resources() = launch.resources;
  demand.set_placement_group(launch.reservation);
  demand.set_bundle_index(launch.slot.bundle_index);
  v1::WorkerSpec& worker = *request.mutable_worker();
  for (const std::string& arg : launch.argv) worker.add_argv(arg);
  worker.mutable_env()->insert(launch.env.begin(), launch.env.end());
  worker.set_cwd(launch.cwd);
  for (int b : launch.visible_bundles) worker.add_visible_bundles(b);
  worker.set_stop_when_unwatched(!ranks_outlive_the_head_);
  worker.set_hang_timeout_ms(absl::ToInt64Milliseconds(launch.hang_timeout));
  if (launch.working_dir_job.has_value()) {
    worker.set_working_dir_job(launch.working_dir_job->value());
  }
  worker.set_stdin_pipe(launch.stdin_pipe);
  const std::string peer =
      absl::StrCat("the node agent of ", launch.slot.node_id, " at ", node.address);
  // The bundle was just committed on this agent; a lease into it is granted here at once. A
  // pending answer (the previous attempt's lease still ending) is asked again, briefly.
  const absl::Time until = absl::Now() + absl::Seconds(10);
  while (true) {
    v1::LeaseReply reply;
    TESSERA_RETURN_IF_ERROR(agents_->Call(peer, Retry::kSafe, [&](grpc::ClientContext* ctx) {
      return agent->RequestLease(ctx, request, &reply);
    }));
    if (reply.has_granted()) {
      StartedRank started;
      started.rank = launch.rank;
      started.node_id = launch.slot.node_id;
      started.agent_address = node.address;
      started.worker_id = reply.granted().worker_id();
      started.pid = reply.granted().pid();
      started.isolation_env = {reply.granted().isolation_env().begin(),
                               reply.granted().isolation_env().end()};
      return started;
    }
    if (reply.status() == v1::PICK_STATUS_INFEASIBLE || reply.has_spillback() ||
        absl::Now() >= until) {
      return absl::ResourceExhaustedError(
          absl::StrCat("bundle ", launch.slot.bundle_index, " of ", launch.reservation, " on node ",
                       launch.slot.node_id, " did not take the rank: ",
                       reply.has_spillback() ? "it is held elsewhere" : reply.explanation()));
    }
    absl::SleepFor(absl::Milliseconds(20));
    request.set_request_id(client::NewRequestId("rank"));
  }
}

std::unique_ptr<RankWatch> ClusterGangBackend::WatchRank(
    const StartedRank& rank, std::function<void(bool, const std::string&)> output,
    std::function<void(RankEnd)> ended) {
  return std::make_unique<GrpcRankWatch>(agents_->StreamContext(), Agent(rank.agent_address), rank,
                                         std::move(output), std::move(ended));
}

absl::Status ClusterGangBackend::SignalRank(const StartedRank& rank, int signal) {
  v1::NodeAgent::Stub* agent = Agent(rank.agent_address);
  v1::KillWorkerRequest request;
  request.set_worker_id(rank.worker_id);
  request.set_signal(signal);
  v1::KillWorkerResponse response;
  return agents_->Call(
      absl::StrCat("the node agent of ", rank.node_id, " at ", rank.agent_address), Retry::kSafe,
      [&](grpc::ClientContext* ctx) { return agent->KillWorker(ctx, request, &response); });
}

absl::StatusOr<size_t> ClusterGangBackend::WriteStdin(const StartedRank& rank,
                                                      const std::string& data, bool close) {
  v1::NodeAgent::Stub* agent = Agent(rank.agent_address);
  v1::WriteWorkerStdinRequest request;
  request.set_worker_id(rank.worker_id);
  request.set_data(data);
  request.set_close(close);
  v1::WriteWorkerStdinResponse response;
  TESSERA_RETURN_IF_ERROR(agents_->Call(
      absl::StrCat("the node agent of ", rank.node_id, " at ", rank.agent_address), Retry::kNever,
      [&](grpc::ClientContext* ctx) { return agent->WriteWorkerStdin(ctx, request, &response); }));
  return static_cast<size_t>(response.written());
}

absl::StatusOr<std::set<std::string>> ClusterGangBackend::DeadNodes(
    const std::set<std::string>& nodes) {
  TESSERA_ASSIGN_OR_RETURN(std::vector<HeadNode> listed, head_->Nodes());
  std::set<std::string> dead = nodes;
  for (const HeadNode& node : listed) {
    if (node.alive) dead.erase(node.description.node_id());
  }
  return dead;
}

}  // namespace tessera::train
