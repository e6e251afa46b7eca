#include "node/head_link.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/log_line.h"
#include "node/agent_proto.h"
#include "rpc/channel.h"
#include "rpc/retry.h"
#include "wire/proto_convert.h"

namespace tessera {

HeadLink::HeadLink(HeadLinkOptions options, AgentState* state, KillWorkers kill_workers)
    : options_(std::move(options)),
      state_(state),
      kill_workers_(std::move(kill_workers)),
      stubs_(StubsAt(options_.head_address)),
      address_(options_.head_address),
      interval_(options_.initial_heartbeat) {}

std::shared_ptr<const HeadLink::HeadStubs> HeadLink::StubsAt(const std::string& address) const {
  const std::shared_ptr<grpc::Channel> channel = rpc::MakeChannel(address, options_.token);
  auto stubs = std::make_shared<HeadStubs>();
  stubs->nodes = v1::HeadNodes::NewStub(channel);
  stubs->actors = v1::HeadActors::NewStub(channel);
  return stubs;
}

std::shared_ptr<const HeadLink::HeadStubs> HeadLink::CurrentStubs(std::string* address) const {
  absl::MutexLock lock(&mu_);
  if (address != nullptr) *address = address_;
  return stubs_;
}

bool HeadLink::LookForTheHead() {
  std::string current;
  CurrentStubs(&current);
  std::string next;
  if (options_.find_head) {
    const std::string published = options_.find_head();
    if (!published.empty() && published != current) next = published;
  }
  if (next.empty() && !options_.head_fallbacks.empty()) {
    // Round the given addresses: the primary, then each fallback.
    std::vector<std::string> all = {options_.head_address};
    all.insert(all.end(), options_.head_fallbacks.begin(), options_.head_fallbacks.end());
    const auto at = std::find(all.begin(), all.end(), current);
    next = at == all.end() || at + 1 == all.end() ? all.front() : *(at + 1);
    if (next == current) next.clear();
  }
  if (next.empty()) return false;
  LogLine(absl::StrCat("node agent ", state_->node_id().value(), ": the head does not answer at ",
                       current, "; trying ", next));
  std::shared_ptr<const HeadStubs> stubs = StubsAt(next);
  absl::MutexLock lock(&mu_);
  stubs_ = std::move(stubs);
  address_ = next;
  return true;
}

HeadLink::~HeadLink() { Stop(); }

absl::Status HeadLink::Start(std::string agent_address) {
  agent_address_ = std::move(agent_address);
  absl::Status first = Register(options_.retry_budget);
  if (absl::IsAlreadyExists(first)) {
    absl::MutexLock lock(&mu_);
    refusal_ = first;
    return first;
  }
  thread_ = std::thread([this] { Loop(); });
  return first;
}

void HeadLink::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

bool HeadLink::registered() const {
  absl::MutexLock lock(&mu_);
  return registered_;
}

int64_t HeadLink::registrations() const {
  absl::MutexLock lock(&mu_);
  return registrations_;
}

absl::Status HeadLink::refusal() const {
  absl::MutexLock lock(&mu_);
  return refusal_;
}

namespace {

void HeldBundleToProto(const HeldBundleState& bundle, v1::HeldBundle* proto) {
  BundleToProto(bundle.record, proto);
  proto->set_generation(bundle.generation);
}

}  // namespace

void HeadLink::ReleaseUnheld(const google::protobuf::RepeatedPtrField<v1::HeldBundle>& bundles,
                             const char* why) {
  std::vector<WorkerId> to_kill;
  for (const v1::HeldBundle& bundle : bundles) {
    auto killed = state_->ReleaseBundleIfGeneration(
        BundleKey{bundle.placement_group(), bundle.bundle_index()}, bundle.generation());
    // Not held any more, or prepared again since the report the head judged: nothing to do.
    if (!killed.ok()) continue;
    to_kill.insert(to_kill.end(), killed->begin(), killed->end());
    LogLine(absl::StrCat("node agent ", state_->node_id().value(), ": released bundle ",
                         bundle.bundle_index(), " of ", bundle.placement_group(), " (", why, ")"));
  }
  if (!to_kill.empty()) kill_workers_(to_kill);
}

absl::Status HeadLink::Register(absl::Duration budget) {
  v1::RegisterNodeRequest request;
  wire::NodeToProto(state_->spec(), agent_address_, options_.incarnation, request.mutable_node());
  request.mutable_node()->set_http_address(options_.http_address);
  for (const LeaseRecord& lease : state_->Leases()) LeaseToProto(lease, request.add_leases());
  for (const HeldBundleState& bundle : state_->BundleStates()) {
    HeldBundleToProto(bundle, request.add_bundles());
  }
  v1::RegisterNodeResponse response;
  const rpc::RetryOptions retry = Retry(budget);
  std::string address;
  const std::shared_ptr<const HeadStubs> stubs = CurrentStubs(&address);
  absl::Status status = rpc::RetryUnary(retry, &v1::HeadNodes::Stub::RegisterNode,
                                        stubs->nodes.get(), request, &response);
  if (absl::IsAlreadyExists(status)) {
    // Another live agent holds this node id: final, and said in one line.
    return absl::AlreadyExistsError(
        absl::StrCat("the head at ", address, " refused this agent: ", status.message()));
  }
  if (!status.ok()) return status;

  // Bundles of groups the head does not know (it restarted, or the group is gone).
  ReleaseUnheld(response.release(), "unknown to the head");

  absl::MutexLock lock(&mu_);
  bundles_epoch_seen_ = response.bundles_epoch();
  if (response.heartbeat_interval_ms() > 0) {
    interval_ = absl::Milliseconds(response.heartbeat_interval_ms());
  }
  registered_ = true;
  ++registrations_;
  return absl::OkStatus();
}

rpc::RetryOptions HeadLink::Retry(absl::Duration budget) const {
  rpc::RetryOptions retry;
  retry.attempt_timeout = options_.call_timeout;
  retry.total_budget = budget;
  return retry;
}

absl::Status HeadLink::Heartbeat() {
  v1::HeartbeatRequest request;
  request.set_node_id(state_->node_id().value());
  request.set_incarnation(options_.incarnation);
  {
    // Read before the bundles: the report is then at least as new as the epoch says.
    absl::MutexLock lock(&mu_);
    request.set_bundles_epoch_seen(bundles_epoch_seen_);
  }
  for (const LeaseRecord& lease : state_->Leases()) LeaseToProto(lease, request.add_leases());
  for (const HeldBundleState& bundle : state_->BundleStates()) {
    HeldBundleToProto(bundle, request.add_bundles());
  }
  request.set_workers(state_->running_workers());
  if (options_.device_samples) {
    for (v1::DeviceSample& sample : options_.device_samples()) {
      *request.add_device_samples() = std::move(sample);
    }
  }
  if (options_.usage) {
    if (std::optional<v1::NodeUsage> usage = options_.usage(); usage.has_value()) {
      *request.mutable_usage() = *std::move(usage);
    }
  }
  v1::HeartbeatResponse response;
  // One interval's worth of retries: the next heartbeat is the next retry.
  const rpc::RetryOptions retry = Retry(options_.call_timeout);
  const std::shared_ptr<const HeadStubs> stubs = CurrentStubs();
  absl::Status status = rpc::RetryUnary(retry, &v1::HeadNodes::Stub::Heartbeat, stubs->nodes.get(),
                                        request, &response);
  if (!status.ok()) return status;
  if (!response.known()) {
    return absl::NotFoundError("the head does not know this node");
  }
  ReleaseUnheld(response.release(), "the head does not hold it");
  if (options_.on_gone_drivers && response.gone_drivers_size() > 0) {
    options_.on_gone_drivers(
        std::vector<std::string>(response.gone_drivers().begin(), response.gone_drivers().end()));
  }
  absl::MutexLock lock(&mu_);
  bundles_epoch_seen_ = std::max(bundles_epoch_seen_, response.bundles_epoch());
  return absl::OkStatus();
}

void HeadLink::Loop() {
  constexpr absl::Duration kFirstRetry = absl::Milliseconds(50);
  absl::Duration retry_wait = kFirstRetry;
  while (true) {
    bool registered;
    {
      absl::MutexLock lock(&mu_);
      if (stop_) return;
      registered = registered_;
    }
    bool again_now = false;
    absl::Duration wait;
    {
      absl::MutexLock lock(&mu_);
      wait = interval_;
    }
    if (!registered) {
      absl::Status status = Register(options_.call_timeout);
      if (absl::IsAlreadyExists(status)) {
        // This node id went to another live agent while this one was away: stop for good.
        LogLine(absl::StrCat("node agent ", state_->node_id().value(), ": ", status.message()));
        {
          absl::MutexLock lock(&mu_);
          refusal_ = status;
        }
        if (options_.on_refused) options_.on_refused(status);
        return;
      }
      if (status.ok()) {
        retry_wait = kFirstRetry;
      } else {
        std::string address;
        CurrentStubs(&address);
        LogLine(absl::StrCat("node agent ", state_->node_id().value(),
                             ": cannot register with the head at ", address, ": ",
                             status.message()));
        // The head may have moved (restarted on another port, or at another of its addresses,
        // leaving the old one to whoever binds it: a peer that fails the handshake is never
        // sent anything): the next attempt goes there.
        if (absl::IsUnavailable(status) || absl::IsDeadlineExceeded(status) ||
            absl::IsUnauthenticated(status)) {
          LookForTheHead();
        }
        // A head that is coming up is found soon; one that stays away is asked less often.
        const absl::Duration cap = wait;
        wait = std::min(retry_wait, cap);
        retry_wait = std::min(retry_wait * 2, cap);
      }
    } else {
      absl::Status status = Heartbeat();
      if (!status.ok()) {
        // The head restarted (known=false) or cannot be reached: register again; a head that
        // forgot this node is told at once, an unreachable one when it answers again.
        absl::MutexLock lock(&mu_);
        registered_ = false;
        again_now = absl::IsNotFound(status);
      }
    }
    if (registered) SendActorWorkerExits();
    absl::MutexLock lock(&mu_);
    if (again_now) continue;
    // Woken early by a worker exit to report (told at once rather than a heartbeat later).
    auto stop_or_exits = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return stop_ || new_actor_exits_;
    };
    mu_.AwaitWithTimeout(absl::Condition(&stop_or_exits), wait);
  }
}

void HeadLink::ReportActorWorkerExit(std::string actor_id, std::string worker_id,
                                     std::string cause) {
  // Bounded: an agent cut off from its head for long forgets the oldest (their records then
  // wait for the head to find the node dead, which ends them too).
  constexpr size_t kMaxPendingExits = 4096;
  v1::ActorWorkerExitedRequest exit;
  exit.set_actor_id(std::move(actor_id));
  exit.set_worker_id(std::move(worker_id));
  exit.set_cause(std::move(cause));
  absl::MutexLock lock(&mu_);
  if (actor_exits_.size() >= kMaxPendingExits) actor_exits_.erase(actor_exits_.begin());
  actor_exits_.push_back(std::move(exit));
  new_actor_exits_ = true;
}

void HeadLink::SendActorWorkerExits() {
  std::vector<v1::ActorWorkerExitedRequest> exits;
  {
    absl::MutexLock lock(&mu_);
    exits.swap(actor_exits_);
    new_actor_exits_ = false;
  }
  if (exits.empty()) return;
  const rpc::RetryOptions retry = Retry(options_.call_timeout);
  std::vector<v1::ActorWorkerExitedRequest> unsent;
  for (v1::ActorWorkerExitedRequest& exit : exits) {
    if (!unsent.empty()) {  // the head could not be reached: the rest wait for the next round
      unsent.push_back(std::move(exit));
      continue;
    }
    v1::ActorInfo actor;
    const absl::Status told = rpc::RetryUnary(retry, &v1::HeadActors::Stub::ActorWorkerExited,
                                              CurrentStubs()->actors.get(), exit, &actor);
    // Only an unreachable head is asked again; any answer (an unknown actor too) is final.
    if (absl::IsUnavailable(told) || absl::IsDeadlineExceeded(told)) {
      unsent.push_back(std::move(exit));
    }
  }
  absl::MutexLock lock(&mu_);
  actor_exits_.insert(actor_exits_.begin(), std::make_move_iterator(unsent.begin()),
                      std::make_move_iterator(unsent.end()));
}

absl::StatusOr<v1::PickNodeResponse> HeadLink::PickNode(const v1::ResourceRequest& request,
                                                        const std::vector<std::string>& exclude) {
  v1::PickNodeRequest pick;
  *pick.mutable_request() = request;
  for (const std::string& id : exclude) pick.add_exclude_node_ids(id);
  v1::PickNodeResponse response;
  const rpc::RetryOptions retry = Retry(options_.retry_budget);
  const std::shared_ptr<const HeadStubs> stubs = CurrentStubs();
  absl::Status status =
      rpc::RetryUnary(retry, &v1::HeadNodes::Stub::PickNode, stubs->nodes.get(), pick, &response);
  if (!status.ok()) return status;
  return response;
}

}  // namespace tessera
