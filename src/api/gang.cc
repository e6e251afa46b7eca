// include/tessera/gang.h: a gang is a job of the cluster's head (tessera.v1.Jobs), built from
// typed options here and checked there (train/job_spec.h) before anything is reserved.
#include "tessera/gang.h"

#include <signal.h>

#include <atomic>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "api/gang_request.h"
#include "api/reservations.h"
#include "base/ignore_status.h"
#include "base/status_macros.h"
#include "base/string_util.h"
#include "client/cluster_client.h"
#include "client/reservation_calls.h"
#include "labels/label_selector.h"
#include "resources/resource_set.h"
#include "rpc/state_names.h"
#include "tessera/v1/jobs.grpc.pb.h"
#include "train/cluster_gang_backend.h"
#include "train/gang_controller.h"
#include "train/grpc_cluster_head.h"
#include "train/job_spec.h"
#include "wire/proto_convert.h"

namespace tessera {
namespace {

absl::StatusOr<std::unique_ptr<client::ClusterClient>> Connect() {
  std::optional<client::ClusterClientOptions> options = api::ReservationCluster();
  if (!options.has_value()) return absl::FailedPreconditionError("call tessera::Init first");
  return client::ClusterClient::Connect(*options);
}

int64_t Ms(absl::Duration d) { return std::max<int64_t>(0, absl::ToInt64Milliseconds(d)); }

}  // namespace

absl::StatusOr<v1::SubmitJobRequest> api::GangRequest(const GangOptions& o) {
  v1::SubmitJobRequest request;
  request.set_request_id(client::NewRequestId("gang"));
  v1::JobSpec& spec = *request.mutable_spec();
  spec.set_name(o.name);
  for (const std::string& arg : o.command) spec.add_argv(arg);
  spec.mutable_env()->insert(o.env.begin(), o.env.end());
  std::error_code ec;
  spec.set_cwd(o.working_folder.empty() ? std::filesystem::current_path(ec).string()
                                        : o.working_folder);
  spec.set_torch_env(o.torch_env);
  spec.set_max_restarts(o.max_restarts);
  spec.set_hang_timeout_ms(Ms(o.hang_timeout));
  spec.set_stop_grace_ms(Ms(o.stop_grace));
  spec.set_start_timeout_ms(Ms(o.start_timeout));
  spec.set_elastic_check_ms(Ms(o.elastic_check));
  v1::GangPlacement& p = *spec.mutable_placement();
  const int kinds = (o.slice.has_value() ? 1 : 0) + (o.workers > 0 ? 1 : 0) + (o.nodes > 0 ? 1 : 0);
  if (kinds != 1) {
    return absl::InvalidArgumentError("gang: give exactly one of slice, workers or nodes");
  }
  if (o.slice.has_value()) {
    TESSERA_ASSIGN_OR_RETURN(
        *p.add_slices(),
        client::TpuSliceAlternative("gang: slice", *o.slice, o.num_slices, o.per_chip));
    if (o.min_slices > 0 && o.min_slices < o.num_slices) p.set_min_slices(o.min_slices);
  }
  if (o.workers > 0) {
    p.set_max_workers(o.workers);
    p.set_min_workers(o.min_workers > 0 ? o.min_workers : o.workers);
    wire::ResourcesToProto(o.resources_per_worker, p.mutable_resources_per_worker());
    p.set_strategy(wire::PlacementStrategyToProto(o.strategy));
  }
  if (o.nodes > 0) {
    p.set_max_nodes(o.nodes);
    p.set_min_nodes(o.min_nodes > 0 ? o.min_nodes : o.nodes);
    p.set_nproc_per_node(o.procs_per_node);
    // Unset: a CPU for each of the node's processes (a count below 1 is the job check's error).
    ResourceSet per_node;
    if (o.resources_per_node.has_value()) {
      per_node = *o.resources_per_node;
    } else if (o.procs_per_node > 0) {
      per_node.Set("CPU", Quantity::FromInt(o.procs_per_node));
    }
    wire::ResourcesToProto(per_node, p.mutable_resources_per_node());
  }
  for (const LabelSelector& selector : o.label_selectors) {
    wire::LabelSelectorToProto(selector, p.add_label_selectors());
  }
  return request;
}

namespace {

// The job's status as the API shows it; a state this build does not know (a newer head's) is a
// one-line InvalidArgument naming it.
absl::StatusOr<GangStatus> FromProto(const v1::JobStatus& s) {
  GangStatus out;
  out.id = JobId(s.job_id());
  out.name = s.name();
  TESSERA_ASSIGN_OR_RETURN(out.state, wire::GangStateFromProto(s.state(), "gang state"));
  out.message = s.message();
  out.restart_count = s.restart_count();
  out.membership_changes = s.membership_changes();
  out.world_size = s.world_size();
  out.exit_code = s.exit_code();
  out.log_dir = s.log_dir();
  for (int i = 0; i < s.ranks_size(); ++i) {
    const v1::RankStatus& r = s.ranks(i);
    TESSERA_ASSIGN_OR_RETURN(
        GangRankState state,
        wire::GangRankStateFromProto(r.state(), absl::StrCat("gang ranks[", i, "].state")));
    out.ranks.push_back({r.rank(), r.local_rank(), r.node_rank(), r.node_id(), r.host(),
                         r.worker_id(), r.pid(), state, r.exit_reason()});
  }
  return out;
}

// A rank of an actor gang is watched by waiting for its call; killing its actor ends the wait.
class ActorRankWatch final : public train::RankWatch {
 public:
  ActorRankWatch(internal::ActorGangMember member, std::function<void(train::RankEnd)> ended)
      : member_(std::move(member)) {
    thread_ = std::thread([this, ended = std::move(ended)] {
      const absl::Status status = member_.wait();
      if (cancelled_.load()) {
        ended(absl::CancelledError("the watch was ended"));
        return;
      }
      v1::WorkerExit exit;
      exit.set_exit_code(status.ok() ? 0 : 1);
      exit.set_reason(status.ok() ? "returned" : absl::StrCat("failed: ", status.message()));
      ended(exit);
    });
  }
  ~ActorRankWatch() override {
    Cancel();
    thread_.join();
  }
  void Cancel() override {
    if (!cancelled_.exchange(true)) {
      IgnoreStatus(member_.kill(), "an actor that is gone already has ended the wait as well");
    }
  }

 private:
  internal::ActorGangMember member_;
  std::atomic<bool> cancelled_{false};
  std::thread thread_;
};

// The cluster's reservations (ClusterGangBackend), with ranks that are actors of this program.
// Thread-safe: one mutex guards the members.
class ActorGangBackend final : public train::GangBackend {
 public:
  ActorGangBackend(std::unique_ptr<train::GangBackend> cluster,
                   internal::StartActorGangMember start)
      : cluster_(std::move(cluster)), start_(std::move(start)) {}
  // The last attempt's actors end with the gang.
  ~ActorGangBackend() override {
    absl::MutexLock lock(&mu_);
    for (auto& [id, member] : members_) {
      IgnoreStatus(member.kill(), "an actor that is gone already needs no kill");
    }
  }

  absl::StatusOr<train::GangReservation> Reserve(const std::string& name,
                                                 const v1::GangPlacement& placement,
                                                 train::GangSize size, absl::Duration timeout,
                                                 const std::function<bool()>& stopped) override {
    return cluster_->Reserve(name, placement, size, timeout, stopped);
  }
  absl::StatusOr<bool> RoomToGrow(const v1::GangPlacement& placement, int extra,
                                  const train::GangReservation& current) override {
    return cluster_->RoomToGrow(placement, extra, current);
  }
  void Release(const train::GangReservation& reservation) override {
    cluster_->Release(reservation);
  }
  absl::StatusOr<train::NodePort> FreePort(const train::GangSlot& slot) override {
    return cluster_->FreePort(slot);
  }
  absl::Status PrepareWorkingDir(const train::GangSlot&, const JobId&,
                                 const std::string&) override {
    return absl::InvalidArgumentError("an actor gang ships no working directory");
  }
  absl::StatusOr<std::set<std::string>> DeadNodes(const std::set<std::string>& nodes) override {
    return cluster_->DeadNodes(nodes);
  }
  absl::StatusOr<size_t> WriteStdin(const train::StartedRank&, const std::string&, bool) override {
    return absl::FailedPreconditionError("the actors of a gang read no stdin");
  }

  absl::StatusOr<train::StartedRank> StartRank(const train::RankLaunch& launch) override {
    auto resources = wire::ResourcesFromProto(launch.resources);
    if (!resources.ok()) return resources.status();
    ActorOptions options;
    options.resources = *std::move(resources);
    // A slice group is placed in as the placement group of its name.
    options.strategy =
        PlacementGroupScheduling{PlacementGroupName(launch.reservation), launch.slot.bundle_index};
    options.env = launch.env;
    options.max_restarts = 0;  // never alone: the gang restarts together
    auto member = start_(options);
    if (!member.ok()) return member.status();
    train::StartedRank started;
    started.rank = launch.rank;
    started.node_id = launch.slot.node_id;
    started.worker_id = absl::StrCat("actor-of-rank-", launch.rank);
    absl::MutexLock lock(&mu_);
    members_[started.worker_id] = *std::move(member);
    return started;
  }
  std::unique_ptr<train::RankWatch> WatchRank(const train::StartedRank& rank,
                                              std::function<void(bool, const std::string&)>,
                                              std::function<void(train::RankEnd)> ended) override {
    absl::MutexLock lock(&mu_);
    return std::make_unique<ActorRankWatch>(members_.at(rank.worker_id), std::move(ended));
  }
  // An actor has no graceful stop, so SIGTERM (the controller's request before its stop
  // grace) only waits: a rank that ends on its own meanwhile (its process died, its call
  // raised) is reported with its own cause, not as killed by the gang. SIGKILL ends the actor.
  absl::Status SignalRank(const train::StartedRank& rank, int signal) override {
    if (signal != SIGKILL) return absl::OkStatus();
    internal::ActorGangMember member;
    {
      absl::MutexLock lock(&mu_);
      auto it = members_.find(rank.worker_id);
      if (it == members_.end()) return absl::NotFoundError("no such rank");
      member = it->second;
    }
    return member.kill();
  }

 private:
  const std::unique_ptr<train::GangBackend> cluster_;
  const internal::StartActorGangMember start_;
  absl::Mutex mu_;
  std::map<std::string, internal::ActorGangMember> members_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

namespace internal {

absl::StatusOr<GangStatus> RunActorGang(const GangOptions& options, StartActorGangMember start) {
  GangOptions with_command = options;
  with_command.command = {"(actors)"};  // what the job says it runs; actors ignore it
  TESSERA_ASSIGN_OR_RETURN(v1::SubmitJobRequest request, api::GangRequest(with_command));
  TESSERA_RETURN_IF_ERROR(train::ValidateJobSpec(request.spec()));
  TESSERA_ASSIGN_OR_RETURN(std::shared_ptr<client::ClusterClient> client, Connect());
  // This program is no head: the head too is called over gRPC.
  ActorGangBackend backend(std::make_unique<train::ClusterGangBackend>(
                               std::make_unique<train::GrpcClusterHead>(client), client),
                           std::move(start));
  absl::BitGen gen;
  train::GangControllerOptions controller_options;
  // Qualified: tessera::internal declares a JobId() function of its own (api/foreign_calls.h).
  controller_options.job_id =
      tessera::JobId(absl::StrFormat("actors-%08x", absl::Uniform<uint32_t>(gen)));
  controller_options.spec = request.spec();
  controller_options.backend = &backend;
  train::GangController controller(std::move(controller_options));
  return FromProto(controller.Run());
}

}  // namespace internal

std::ostream& operator<<(std::ostream& os, GangState state) {
  return os << rpc::GangStateName(state);
}

std::ostream& operator<<(std::ostream& os, GangRankState state) {
  return os << rpc::GangRankStateName(state);
}

absl::StatusOr<Gang> StartGang(const GangOptions& options) {
  TESSERA_ASSIGN_OR_RETURN(v1::SubmitJobRequest request, api::GangRequest(options));
  TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<client::ClusterClient> client, Connect());
  v1::JobStatus status;
  TESSERA_RETURN_IF_ERROR(client->Call(
      client->HeadPeer(), client::Retry::kSafe,
      [&](grpc::ClientContext* ctx) { return client->jobs().SubmitJob(ctx, request, &status); }));
  return Gang(JobId(status.job_id()));
}

absl::StatusOr<GangStatus> Gang::Status() const {
  TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<client::ClusterClient> client, Connect());
  v1::GetJobRequest request;
  request.set_job_id(id_.value());
  v1::JobStatus status;
  TESSERA_RETURN_IF_ERROR(client->Call(
      client->HeadPeer(), client::Retry::kSafe,
      [&](grpc::ClientContext* ctx) { return client->jobs().GetJob(ctx, request, &status); }));
  return FromProto(status);
}

absl::StatusOr<GangStatus> Gang::Wait(absl::Duration timeout) const {
  const absl::Time until = absl::Now() + timeout;
  absl::Duration poll = absl::Milliseconds(20);
  while (true) {
    TESSERA_ASSIGN_OR_RETURN(GangStatus status, Status());
    if (status.ended()) return status;
    if (absl::Now() >= until) {
      return absl::DeadlineExceededError(absl::StrCat("gang ", id_.value(), " is still ",
                                                      ToAbsl(rpc::GangStateName(status.state)),
                                                      " after ", absl::FormatDuration(timeout)));
    }
    absl::SleepFor(std::min(poll, until - absl::Now()));
    poll = std::min(poll * 2, absl::Milliseconds(250));
  }
}

absl::StatusOr<GangStatus> Gang::Stop() const {
  TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<client::ClusterClient> client, Connect());
  v1::StopJobRequest request;
  request.set_job_id(id_.value());
  request.set_reason("stopped by its program");
  v1::JobStatus status;
  TESSERA_RETURN_IF_ERROR(
      client->Call(client->HeadPeer(), client::Retry::kSafe, [&](grpc::ClientContext* ctx) {
        ctx->set_deadline(absl::ToChronoTime(absl::Now() + absl::Minutes(3)));
        return client->jobs().StopJob(ctx, request, &status);
      }));
  return FromProto(status);
}

absl::StatusOr<std::string> Gang::Logs() const {
  TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<client::ClusterClient> client, Connect());
  v1::StreamJobLogsRequest request;
  request.set_job_id(id_.value());
  request.set_rank(-1);
  auto context = client->StreamContext();
  auto stream = client->jobs().StreamJobLogs(context.get(), request);
  std::string text;
  v1::JobLogChunk chunk;
  while (stream->Read(&chunk)) text += chunk.data();
  TESSERA_RETURN_IF_ERROR(client::FromGrpc(stream->Finish(), client->HeadPeer()));
  return text;
}

}  // namespace tessera
