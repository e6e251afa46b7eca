#include "train/gang_controller.h"

#include <signal.h>

#include <map>
#include <set>
#include <thread>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/ignore_status.h"
#include "rpc/state_names.h"
#include "train/stored_job.h"
#include "wire/proto_convert.h"

namespace tessera::train {
namespace {

int64_t ToMs(absl::Duration d) { return absl::ToInt64Milliseconds(d); }

// Members: whole slices, nodes or workers; min 0 in the spec means a fixed size.
GangSize PlacementSize(const v1::GangPlacement& p) {
  GangSize size;
  if (!p.slices().empty()) {
    size.max = std::max(1, p.slices(0).num_slices());
    size.min = p.min_slices() > 0 ? p.min_slices() : size.max;
  } else if (p.max_nodes() > 0) {
    size.max = p.max_nodes();
    size.min = p.min_nodes() > 0 ? p.min_nodes() : size.max;
  } else {
    size.max = std::max(1, p.max_workers());
    size.min = p.min_workers() > 0 ? p.min_workers() : size.max;
  }
  size.min = std::min(size.min, size.max);
  return size;
}

std::string MemberWord(const v1::GangPlacement& p, int n) {
  const char* word = !p.slices().empty() ? "slice" : (p.max_nodes() > 0 ? "node" : "worker");
  return absl::StrCat(n, " ", word, n == 1 ? "" : "s");
}

std::string PlacementWords(const v1::GangPlacement& p) {
  if (!p.slices().empty()) {
    const v1::SliceAlternative& s = p.slices(0);
    if (s.nvlink_hosts() > 0) return absl::StrCat(s.nvlink_hosts(), " hosts of one NVLink domain");
    // Checked with the spec (ValidateJobSpec): "TPU-V6E 4x4".
    absl::StatusOr<SliceShape> shape = wire::SliceShapeFromProto(s.shape());
    const std::string kind =
        shape.ok() ? absl::StrCat(shape->accelerator_type, " ", shape->topology.ToString())
                   : std::string("TPU");
    return absl::StrCat(std::max(1, s.num_slices()), " intact ", kind, " slice",
                        s.num_slices() > 1 ? "s" : "");
  }
  if (p.max_nodes() > 0) {
    return absl::StrCat(p.max_nodes(), " nodes x ", p.nproc_per_node(), " ranks");
  }
  return absl::StrCat(p.max_workers(), " workers");
}

// Every rank at once: one thread per rank for its lease.
std::vector<absl::StatusOr<StartedRank>> StartEveryRank(GangBackend& backend,
                                                        const std::vector<RankLaunch>& launches) {
  const int world = static_cast<int>(launches.size());
  std::vector<absl::StatusOr<StartedRank>> started(world, absl::UnknownError("not started"));
  std::vector<std::thread> starters;
  starters.reserve(world);
  for (int r = 0; r < world; ++r) {
    starters.emplace_back([&, r] { started[r] = backend.StartRank(launches[r]); });
  }
  for (std::thread& t : starters) t.join();
  return started;
}

}  // namespace

std::string DescribeRankEnd(int rank, const GangSlot& slot, const RankEnd& end) {
  const std::string where =
      absl::StrCat("rank ", rank, " on node ", slot.node_id, " (", slot.host, ")");
  if (!end.ok()) return absl::StrCat(where, " lost contact: ", end.status().message());
  const v1::WorkerExit& exit = *end;
  std::string reason = exit.reason();
  if (reason.empty()) {
    reason = exit.out_of_memory() ? "out of memory"
             : exit.signal() != 0 ? absl::StrCat("killed by signal ", exit.signal())
                                  : absl::StrCat("exited with code ", exit.exit_code());
  }
  if (absl::StartsWith(reason, "killed") || absl::StartsWith(reason, "out of memory")) {
    return absl::StrCat(where, " was ", reason);
  }
  return absl::StrCat(where, " ", reason);
}

int ExitCodeOf(const RankEnd& end) {
  if (!end.ok()) return 1;
  if (end->signal() != 0) return 128 + end->signal();
  if (end->out_of_memory()) return 128 + SIGKILL;
  return end->exit_code();
}

GangController::GangController(GangControllerOptions options)
    : options_(std::move(options)),
      clock_(*options_.clock),
      submitted_(options_.submitted == absl::InfinitePast() ? clock_.Now() : options_.submitted) {
  absl::MutexLock lock(&mu_);
  status_.set_job_id(options_.job_id.value());
  status_.set_name(options_.spec.name());
  status_.set_state(v1::GANG_JOB_STATE_PENDING);
  status_.set_max_restarts(options_.spec.max_restarts());
  *status_.mutable_argv() = options_.spec.argv();
  status_.set_attached(options_.attached);
  status_.set_submit_time_ms(absl::ToUnixMillis(submitted_));
  if (options_.log != nullptr) status_.set_log_dir(options_.log->dir());
  if (options_.resume.has_value()) {
    status_ = options_.resume->status();
    attempt_ = options_.resume->attempt();
  }
}

v1::StoredTrainJob GangController::record() const {
  absl::MutexLock lock(&mu_);
  v1::StoredTrainJob record;
  *record.mutable_spec() = options_.spec;
  *record.mutable_status() = status_;
  record.set_attempt(attempt_);
  if (running_.has_value()) *record.mutable_running() = *running_;
  return record;
}

v1::JobStatus GangController::status() const {
  absl::MutexLock lock(&mu_);
  return status_;
}

void GangController::Stop(std::string reason) {
  absl::MutexLock lock(&mu_);
  if (ended_ || stop_reason_.has_value()) return;
  stop_reason_ = std::move(reason);
}

absl::StatusOr<size_t> GangController::WriteStdin(const std::string& data, bool close) {
  std::optional<StartedRank> rank;
  {
    absl::MutexLock lock(&mu_);
    if (!options_.spec.forward_stdin()) {
      return absl::FailedPreconditionError("the job does not forward stdin");
    }
    if (ended_) return absl::FailedPreconditionError("the job has ended");
    rank = stdin_rank_;
  }
  if (!rank.has_value()) return absl::UnavailableError("no rank 0 runs now");
  return options_.backend->WriteStdin(*rank, data, close);
}

bool GangController::stopping() const {
  absl::MutexLock lock(&mu_);
  return stop_reason_.has_value();
}

absl::Duration GangController::stop_grace() const {
  return options_.spec.stop_grace_ms() > 0 ? absl::Milliseconds(options_.spec.stop_grace_ms())
                                           : absl::Seconds(5);
}

void GangController::Publish() {
  if (!options_.on_change) return;
  options_.on_change(status());
}

void GangController::SetState(v1::GangJobState state, const std::string& message) {
  {
    absl::MutexLock lock(&mu_);
    EnterPhaseLocked(state, message);
    status_.set_state(state);
    status_.set_message(message);
  }
  Publish();
}

void GangController::EnterPhaseLocked(v1::GangJobState state, const std::string& message) {
  constexpr int kMaxPhases = 256;
  const int64_t now_ms = absl::ToUnixMillis(clock_.Now());
  auto* phases = status_.mutable_phases();
  if (!phases->empty()) {
    v1::JobPhase& last = *phases->rbegin();
    if (last.state() == state && last.attempt() == attempt_) return;  // still in it
    last.set_end_time_ms(now_ms);
  }
  v1::JobPhase* phase = phases->Add();
  phase->set_state(state);
  phase->set_message(message);
  phase->set_attempt(attempt_);
  phase->set_start_time_ms(now_ms);
  if (phases->size() > kMaxPhases) phases->DeleteSubrange(0, phases->size() - kMaxPhases);
}

void GangController::KeepPastRanksLocked() {
  constexpr int kMaxPastRanks = 4096;
  const int64_t now_ms = absl::ToUnixMillis(clock_.Now());
  auto* past = status_.mutable_past_ranks();
  for (v1::RankStatus& rank : *status_.mutable_ranks()) {
    if (rank.end_time_ms() == 0) rank.set_end_time_ms(now_ms);
    rank.clear_isolation_env();  // what a past rank saw is in its log
    *past->Add() = std::move(rank);
  }
  status_.clear_ranks();
  if (past->size() > kMaxPastRanks) past->DeleteSubrange(0, past->size() - kMaxPastRanks);
}

void EndRankStatus(v1::RankStatus& rank, v1::RankState state, const std::string& reason,
                   absl::Time now) {
  rank.set_state(state);
  rank.set_exit_reason(reason);
  if (rank.end_time_ms() == 0) rank.set_end_time_ms(absl::ToUnixMillis(now));
}

v1::JobStatus GangController::Run() {
  Publish();
  JobLog* log = options_.log;
  int attempt = 0;
  v1::GangJobState final_state = v1::GANG_JOB_STATE_UNSPECIFIED;
  std::string final_message;
  int exit_code = 0;
  std::optional<AttemptResult> adopted;
  if (options_.resume.has_value()) adopted = ResumeStoredJob(attempt);
  while (true) {
    AttemptResult result =
        adopted.has_value() ? *std::exchange(adopted, std::nullopt) : RunAttempt(attempt);
    if (result.end == AttemptEnd::kSucceeded) {
      final_state = v1::GANG_JOB_STATE_SUCCEEDED;
      final_message = "every rank exited with code 0";
      exit_code = 0;
      break;
    }
    if (result.end == AttemptEnd::kResized) {
      {
        absl::MutexLock lock(&mu_);
        status_.set_membership_changes(status_.membership_changes() + 1);
      }
      SetState(v1::GANG_JOB_STATE_RESTARTING, result.message);
      ++attempt;
      continue;
    }
    if (result.end == AttemptEnd::kNotPlaced) {
      final_state = v1::GANG_JOB_STATE_FAILED;
      final_message = result.message;
      exit_code = 1;
      break;
    }
    // A rank failed, or the job was asked to stop (a stop wins over a restart).
    if (stopping()) {
      final_state = v1::GANG_JOB_STATE_STOPPED;
      absl::MutexLock lock(&mu_);
      final_message = stop_reason_.value_or("stopped");
      exit_code = 128 + SIGTERM;
      break;
    }
    int restarts = 0;
    {
      absl::MutexLock lock(&mu_);
      restarts = status_.restart_count();
    }
    const int budget = options_.spec.max_restarts();
    if (restarts < budget) {
      {
        absl::MutexLock lock(&mu_);
        status_.set_restart_count(restarts + 1);
      }
      const std::string note = absl::StrCat(result.message, "; restarting the gang (restart ",
                                            restarts + 1, " of ", budget, ")");
      if (log != nullptr) log->Note(note);
      SetState(v1::GANG_JOB_STATE_RESTARTING, note);
      ++attempt;
      continue;
    }
    final_state = v1::GANG_JOB_STATE_FAILED;
    final_message = absl::StrCat(result.message, "; ", restarts, " of ", budget, " restarts used");
    exit_code = result.exit_code;
    break;
  }
  EndJob(final_state, final_message, exit_code);
  Publish();
  return status();
}

std::optional<GangController::AttemptResult> GangController::ResumeStoredJob(int& attempt) {
  JobLog* log = options_.log;
  const v1::StoredTrainJob& stored = *options_.resume;
  attempt = stored.attempt();
  // What the attempt the last head was reserving, starting or ending may still hold goes back
  // (the agents end any rank left in it).
  auto release_attempt = [&] {
    GangReservation held;
    held.name = AttemptReservationName(options_.job_id, attempt);
    held.slice_group = !options_.spec.placement().slices().empty();
    options_.backend->Release(held);
  };
  bool all_succeeded = stored.status().ranks_size() > 0;
  for (const v1::RankStatus& rank : stored.status().ranks()) {
    all_succeeded = all_succeeded && rank.state() == v1::RANK_STATE_SUCCEEDED;
  }
  if (stored.has_running()) return AdoptAttempt(stored.running());
  if (all_succeeded) {
    // The last head went as the attempt ended well, before the job's end was recorded.
    release_attempt();
    return AttemptResult{AttemptEnd::kSucceeded, "", 0};
  }
  release_attempt();
  if (log != nullptr) {
    log->Note(absl::StrCat("the head restarted while attempt ", attempt + 1,
                           " was starting; starting it again"));
  }
  ++attempt;
  return std::nullopt;
}

void GangController::EndJob(v1::GangJobState final_state, const std::string& final_message,
                            int exit_code) {
  {
    absl::MutexLock lock(&mu_);
    EnterPhaseLocked(final_state, final_message);
    status_.mutable_phases()->rbegin()->set_end_time_ms(
        status_.phases().rbegin()->start_time_ms());  // an end state lasts no time
    status_.set_state(final_state);
    status_.set_message(final_message);
    status_.set_exit_code(exit_code);
    status_.set_end_time_ms(absl::ToUnixMillis(clock_.Now()));
    ended_ = true;
  }
  if (options_.log != nullptr) {
    options_.log->Note(
        absl::StrCat("job ", options_.job_id.value(), " ",
                     absl::AsciiStrToLower(std::string(rpc::GangJobStateName(final_state))), ": ",
                     final_message));
  }
}

GangController::AttemptResult GangController::RunAttempt(int attempt) {
  JobLog* log = options_.log;
  GangBackend& backend = *options_.backend;
  const v1::JobSpec& spec = options_.spec;
  const std::string what = PlacementWords(spec.placement());
  const bool first_start = BeginAttempt(attempt);
  SetState(attempt == 0 ? v1::GANG_JOB_STATE_PENDING : v1::GANG_JOB_STATE_RESTARTING,
           absl::StrCat("waiting for ", what));
  const absl::Duration timeout =
      spec.start_timeout_ms() > 0 ? absl::Milliseconds(spec.start_timeout_ms()) : absl::Seconds(60);
  const GangSize size = PlacementSize(spec.placement());
  auto reserved = backend.Reserve(AttemptReservationName(options_.job_id, attempt),
                                  spec.placement(), size, timeout, [this] { return stopping(); });
  if (!reserved.ok()) {
    if (absl::IsCancelled(reserved.status())) return {AttemptEnd::kStopped, "", 0};
    return {AttemptEnd::kNotPlaced,
            absl::StrCat("cannot place the gang (", what, "): ", reserved.status().message()), 1};
  }
  GangReservation& reservation = *reserved;
  if (stopping()) {
    backend.Release(reservation);
    return {AttemptEnd::kStopped, "", 0};
  }
  auto layout = AssignRanks(reservation.slots);
  if (!layout.ok()) {
    backend.Release(reservation);
    return {AttemptEnd::kNotPlaced, std::string(layout.status().message()), 1};
  }
  const int world = layout->world_size;
  const GangSlot& first = layout->slots[layout->ranks[0].slot];

  GangEnvOptions env_options = EnvOptions();
  auto fail_start = [&](const std::string& why) {
    backend.Release(reservation);
    return AttemptResult{AttemptEnd::kRankFailed, why, 1};
  };
  if (spec.torch_env()) {
    if (absl::Status s = ChooseRendezvous(*layout, env_options); !s.ok()) {
      return fail_start(std::string(s.message()));
    }
  }
  if (!spec.working_dir().empty()) {
    if (absl::Status s = ShipWorkingDir(*layout); !s.ok()) {
      return fail_start(std::string(s.message()));
    }
  }

  const std::vector<RankLaunch> launches = RankLaunches(*layout, reservation, env_options);
  ListStartingRanks(attempt, *layout, reservation, launches);
  SetState(v1::GANG_JOB_STATE_STARTING,
           absl::StrCat("starting ", world, " ranks on ", reservation.name));

  std::vector<absl::StatusOr<StartedRank>> started = StartEveryRank(backend, launches);
  std::vector<LiveRank> ranks(world);
  std::string start_error;
  for (int r = 0; r < world; ++r) {
    ranks[r].slot = launches[r].slot;
    if (started[r].ok()) {
      ranks[r].started = *started[r];
    } else {
      ranks[r].exited = true;
      if (start_error.empty()) {
        start_error = absl::StrCat("rank ", r, " could not start on node ",
                                   launches[r].slot.node_id, ": ", started[r].status().message());
      }
    }
  }
  if (!start_error.empty()) {
    AbandonStart(started, ranks);
    if (log != nullptr) log->Note(start_error);
    return fail_start(start_error);
  }
  MarkRanksRunning(ranks, first_start);
  if (log != nullptr) {
    log->Note(absl::StrCat("attempt ", attempt + 1, ": ", world, " ranks running on ",
                           reservation.name, reservation.explanation.empty() ? "" : " (",
                           reservation.explanation, reservation.explanation.empty() ? "" : ")",
                           spec.torch_env() ? absl::StrCat("; MASTER_ADDR=", first.host,
                                                           " MASTER_PORT=", env_options.master_port)
                                            : ""));
  }
  RecordRunning(reservation, ranks);
  SetState(v1::GANG_JOB_STATE_RUNNING,
           absl::StrCat(world, " ranks running on ", reservation.name,
                        size.min < size.max
                            ? absl::StrCat(" (", MemberWord(spec.placement(), reservation.members),
                                           " of ", size.min, "..", size.max, ")")
                            : ""));

  return Supervise(reservation, ranks, /*adopted=*/false);
}

bool GangController::BeginAttempt(int attempt) {
  // The first attempt to run (an adopted job that never ran may count from 1).
  bool first_start = attempt == 0;
  absl::MutexLock lock(&mu_);
  attempt_ = attempt;
  if (options_.resume.has_value()) first_start = status_.start_time_ms() == 0;
  return first_start;
}

GangEnvOptions GangController::EnvOptions() const {
  const v1::JobSpec& spec = options_.spec;
  GangEnvOptions env_options;
  env_options.run_id = options_.job_id.value();
  env_options.max_restarts = spec.max_restarts();
  env_options.user_env = {spec.env().begin(), spec.env().end()};
  absl::MutexLock lock(&mu_);
  env_options.restart_count = status_.restart_count();
  return env_options;
}

absl::Status GangController::ChooseRendezvous(GangLayout& layout, GangEnvOptions& env_options) {
  GangBackend& backend = *options_.backend;
  const GangSlot& first = layout.slots[layout.ranks[0].slot];
  auto master = backend.FreePort(first);
  if (!master.ok()) return master.status();
  auto jax = backend.FreePort(first);
  if (!jax.ok()) return jax.status();
  env_options.master_port = master->port;
  env_options.jax_coordinator_port = jax->port;
  // Each node's interface, for the collectives' own sockets (GLOO_SOCKET_IFNAME).
  std::map<std::string, std::string> interfaces = {{first.node_id, master->network_interface}};
  for (GangSlot& slot : layout.slots) {
    if (!interfaces.contains(slot.node_id)) {
      auto port = backend.FreePort(slot);
      interfaces[slot.node_id] = port.ok() ? port->network_interface : "";
    }
    slot.network_interface = interfaces[slot.node_id];
  }
  return absl::OkStatus();
}

absl::Status GangController::ShipWorkingDir(const GangLayout& layout) {
  std::set<std::string> prepared;
  for (const GangSlot& slot : layout.slots) {
    if (!prepared.insert(slot.node_id).second) continue;
    if (absl::Status s =
            options_.backend->PrepareWorkingDir(slot, options_.job_id, options_.spec.working_dir());
        !s.ok()) {
      return absl::Status(s.code(), absl::StrCat("cannot ship the working directory to node ",
                                                 slot.node_id, ": ", s.message()));
    }
  }
  return absl::OkStatus();
}

std::vector<RankLaunch> GangController::RankLaunches(const GangLayout& layout,
                                                     const GangReservation& reservation,
                                                     const GangEnvOptions& env_options) const {
  const v1::JobSpec& spec = options_.spec;
  const int world = layout.world_size;
  std::vector<RankLaunch> launches(world);
  for (int r = 0; r < world; ++r) {
    const RankPlace& place = layout.ranks[r];
    RankLaunch& launch = launches[r];
    launch.rank = r;
    launch.slot = layout.slots[place.slot];
    launch.reservation = reservation.name;
    launch.resources = reservation.slot_resources[place.slot];
    launch.visible_bundles = reservation.visible_bundles[place.slot];
    launch.argv.assign(spec.argv().begin(), spec.argv().end());
    launch.env = {spec.env().begin(), spec.env().end()};
    if (spec.torch_env()) {
      for (auto& [name, value] : RankEnvironment(layout, r, env_options)) launch.env[name] = value;
    }
    launch.env["TESSERA_JOB_ID"] = options_.job_id.value();
    launch.cwd = spec.cwd();
    if (!spec.working_dir().empty()) launch.working_dir_job = options_.job_id;
    launch.stdin_pipe = spec.forward_stdin() && r == 0;
    launch.hang_timeout = absl::Milliseconds(spec.hang_timeout_ms());
    launch.job_id = options_.job_id;
  }
  return launches;
}

void GangController::ListStartingRanks(int attempt, const GangLayout& layout,
                                       const GangReservation& reservation,
                                       const std::vector<RankLaunch>& launches) {
  const int world = layout.world_size;
  absl::MutexLock lock(&mu_);
  status_.set_world_size(world);
  status_.set_reservation(reservation.name);
  KeepPastRanksLocked();
  const int64_t now_ms = absl::ToUnixMillis(clock_.Now());
  for (int r = 0; r < world; ++r) {
    const RankPlace& place = layout.ranks[r];
    v1::RankStatus* rank = status_.add_ranks();
    rank->set_rank(r);
    rank->set_attempt(attempt);
    rank->set_start_time_ms(now_ms);
    rank->set_local_rank(place.local_rank);
    rank->set_node_rank(place.node_rank);
    rank->set_node_id(launches[r].slot.node_id);
    rank->set_host(launches[r].slot.host);
    rank->set_state(v1::RANK_STATE_STARTING);
  }
  events_.clear();
}

void GangController::AbandonStart(const std::vector<absl::StatusOr<StartedRank>>& started,
                                  const std::vector<LiveRank>& ranks) {
  const int world = static_cast<int>(ranks.size());
  {
    absl::MutexLock lock(&mu_);
    failed_at_ = clock_.Now();
    for (int r = 0; r < world; ++r) {
      EndRankStatus(*status_.mutable_ranks(r),
                    started[r].ok() ? v1::RANK_STATE_STOPPED : v1::RANK_STATE_FAILED,
                    started[r].ok() ? "" : std::string(started[r].status().message()),
                    clock_.Now());
    }
  }
  for (const LiveRank& rank : ranks) {
    if (!rank.exited) {
      IgnoreStatus(options_.backend->SignalRank(rank.started, SIGKILL),
                   "best effort: a rank out of reach is ended by the release of its bundle");
    }
  }
}

void GangController::MarkRanksRunning(const std::vector<LiveRank>& ranks, bool first_start) {
  const absl::Time running_at = clock_.Now();
  absl::MutexLock lock(&mu_);
  for (int r = 0; r < static_cast<int>(ranks.size()); ++r) {
    v1::RankStatus* rank = status_.mutable_ranks(r);
    rank->set_worker_id(ranks[r].started.worker_id);
    rank->set_pid(ranks[r].started.pid);
    rank->set_state(v1::RANK_STATE_RUNNING);
    rank->mutable_isolation_env()->insert(ranks[r].started.isolation_env.begin(),
                                          ranks[r].started.isolation_env.end());
  }
  if (options_.spec.forward_stdin()) stdin_rank_ = ranks[0].started;
  if (first_start) {
    status_.set_start_time_ms(absl::ToUnixMillis(running_at));
    status_.set_launch_ms(ToMs(running_at - submitted_));
  } else if (failed_at_.has_value()) {
    status_.set_last_restart_ms(ToMs(running_at - *failed_at_));
  }
}

void GangController::RecordRunning(const GangReservation& reservation,
                                   const std::vector<LiveRank>& ranks) {
  std::vector<StartedRank> started_ranks;
  std::vector<GangSlot> rank_slots;
  for (const LiveRank& rank : ranks) {
    started_ranks.push_back(rank.started);
    rank_slots.push_back(rank.slot);
  }
  absl::MutexLock lock(&mu_);
  running_ = ToStored(reservation, started_ranks, rank_slots);
}

GangController::AttemptResult GangController::AdoptAttempt(const v1::StoredAttempt& stored) {
  GangReservation reservation = ReservationOf(stored);
  std::vector<LiveRank> ranks(stored.ranks_size());
  {
    absl::MutexLock lock(&mu_);
    running_ = stored;
    for (int r = 0; r < stored.ranks_size(); ++r) {
      ranks[r].started = StartedRankOf(stored.ranks(r));
      ranks[r].slot = FromStored(stored.ranks(r).slot());
      // A rank that succeeded before the head went stays done; every other is watched again
      // (one that ended meanwhile reports its exit, or is lost: a rank failure either way).
      ranks[r].exited =
          r < status_.ranks_size() && status_.ranks(r).state() == v1::RANK_STATE_SUCCEEDED;
    }
    if (options_.spec.forward_stdin() && !ranks.empty()) stdin_rank_ = ranks[0].started;
  }
  // A probe for room to grow that the last head had in flight.
  GangReservation probe;
  probe.name = ProbeReservationName(reservation.name);
  probe.slice_group = reservation.slice_group;
  options_.backend->Release(probe);
  if (options_.log != nullptr) {
    options_.log->Note(absl::StrCat("the head restarted: watching the ", ranks.size(), " ranks on ",
                                    reservation.name, " again"));
  }
  return Supervise(reservation, ranks, /*adopted=*/true);
}

GangController::AttemptResult GangController::Supervise(GangReservation& reservation,
                                                        std::vector<LiveRank>& ranks,
                                                        bool adopted) {
  JobLog* log = options_.log;
  const v1::JobSpec& spec = options_.spec;
  const GangSize size = PlacementSize(spec.placement());
  const int world = static_cast<int>(ranks.size());
  // The timers start before the watches do, so they count from the moment the ranks are watched
  // (whoever sees a watch begin has not yet moved the clock past them).
  // Below its maximum, an elastic gang looks for room to grow this often.
  const bool can_grow = reservation.members < size.max;
  const absl::Duration check =
      spec.elastic_check_ms() > 0 ? absl::Milliseconds(spec.elastic_check_ms()) : absl::Seconds(10);
  absl::Time next_check = clock_.Now() + check;
  // A node that froze ends no watch; the head declares it dead, and the gang learns it here.
  constexpr absl::Duration kHealthCheck = absl::Seconds(1);
  absl::Time next_health = clock_.Now() + kHealthCheck;
  int succeeded = WatchRanks(ranks, adopted);

  // (Every rank of an adopted attempt may have succeeded before the head went.)
  AttemptResult result{AttemptEnd::kSucceeded, "", 0};
  std::set<std::string> gang_nodes;
  for (const LiveRank& rank : ranks) gang_nodes.insert(rank.slot.node_id);
  while (succeeded < world) {
    bool stop = false;
    std::optional<Event> event =
        AwaitEvent(can_grow ? std::min(next_check, next_health) : next_health, stop);
    if (!event.has_value() && !stop && clock_.Now() >= next_health) {
      next_health = clock_.Now() + kHealthCheck;
      event = RankOnDeadNode(ranks, gang_nodes);
      if (!event.has_value()) continue;
    }
    if (!event.has_value() && !stop) {
      if (!can_grow || clock_.Now() < next_check) continue;
      // Time to look for room.
      next_check = clock_.Now() + check;
      std::optional<std::string> why = RoomToGrowNote(reservation, size);
      if (!why.has_value()) continue;
      if (log != nullptr) log->Note(*why);
      StopRanks(ranks);
      result = {AttemptEnd::kResized, *why, 0};
      break;
    }
    if (!event.has_value()) {  // a stop request
      if (log != nullptr) log->Note("stopping the gang");
      StopRanks(ranks);
      result = {AttemptEnd::kStopped, "", 0};
      break;
    }
    std::optional<AttemptResult> ended = OnRankEnd(*event, ranks, succeeded);
    if (!ended.has_value()) continue;
    result = std::move(*ended);
    break;
  }
  EndAttempt(reservation, ranks);
  return result;
}

int GangController::WatchRanks(std::vector<LiveRank>& ranks, bool adopted) {
  JobLog* log = options_.log;
  GangBackend& backend = *options_.backend;
  int exited = 0;
  {
    absl::MutexLock lock(&mu_);
    events_.clear();
  }
  for (int r = 0; r < static_cast<int>(ranks.size()); ++r) {
    if (ranks[r].exited) {
      ++exited;
      continue;
    }
    if (log != nullptr) {
      if (adopted) {
        log->ResumeRank(r);
      } else {
        log->BeginRank(r);
      }
    }
    ranks[r].watch = backend.WatchRank(
        ranks[r].started,
        [log, r](bool is_stderr, const std::string& data) {
          if (log != nullptr) log->RankOutput(r, is_stderr, data);
        },
        [this, r](RankEnd end) {
          absl::MutexLock lock(&mu_);
          events_.push_back({r, std::move(end)});
        });
  }
  return exited;
}

std::optional<GangController::Event> GangController::AwaitEvent(absl::Time deadline, bool& stop) {
  absl::MutexLock lock(&mu_);
  auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !events_.empty() || stop_reason_.has_value();
  };
  clock_.AwaitWithDeadline(mu_, absl::Condition(&ready), deadline);
  if (!events_.empty()) {
    std::optional<Event> event = std::move(events_.front());
    events_.pop_front();
    return event;
  }
  stop = stop_reason_.has_value();
  return std::nullopt;
}

std::optional<GangController::Event> GangController::RankOnDeadNode(
    const std::vector<LiveRank>& ranks, const std::set<std::string>& gang_nodes) {
  // A rank on a node the head declared dead ends here as if its watch had lost contact.
  auto dead = options_.backend->DeadNodes(gang_nodes);
  std::optional<Event> event;
  for (int r = 0; dead.ok() && r < static_cast<int>(ranks.size()) && !event.has_value(); ++r) {
    if (!ranks[r].exited && dead->contains(ranks[r].slot.node_id)) {
      event = Event{r, absl::UnavailableError(absl::StrCat("the head declared node ",
                                                           ranks[r].slot.node_id, " dead"))};
    }
  }
  return event;
}

std::optional<std::string> GangController::RoomToGrowNote(const GangReservation& reservation,
                                                          const GangSize& size) {
  const v1::GangPlacement& placement = options_.spec.placement();
  auto room = options_.backend->RoomToGrow(placement, size.max - reservation.members, reservation);
  if (!room.ok() || !*room) return std::nullopt;
  return absl::StrCat("room for ", MemberWord(placement, size.max - reservation.members),
                      " more: restarting the gang with ", MemberWord(placement, size.max),
                      " (a membership change, not counted as a restart)");
}

std::optional<GangController::AttemptResult> GangController::OnRankEnd(const Event& event,
                                                                       std::vector<LiveRank>& ranks,
                                                                       int& succeeded) {
  JobLog* log = options_.log;
  LiveRank& rank = ranks[event.rank];
  rank.exited = true;
  if (log != nullptr) log->EndRank(event.rank);
  const bool clean = event.end.ok() && event.end->exit_code() == 0 && event.end->signal() == 0 &&
                     !event.end->out_of_memory();
  {
    absl::MutexLock lock(&mu_);
    EndRankStatus(*status_.mutable_ranks(event.rank),
                  clean ? v1::RANK_STATE_SUCCEEDED : v1::RANK_STATE_FAILED,
                  event.end.ok() ? event.end->reason() : std::string(event.end.status().message()),
                  clock_.Now());
  }
  if (clean) {
    if (++succeeded == static_cast<int>(ranks.size())) {
      return AttemptResult{AttemptEnd::kSucceeded, "", 0};
    }
    Publish();
    return std::nullopt;
  }
  {
    absl::MutexLock lock(&mu_);
    failed_at_ = clock_.Now();
  }
  const std::string why = DescribeRankEnd(event.rank, rank.slot, event.end);
  if (log != nullptr) log->Note(absl::StrCat(why, "; stopping the gang"));
  StopRanks(ranks);
  return AttemptResult{AttemptEnd::kRankFailed, why, ExitCodeOf(event.end)};
}

void GangController::EndAttempt(const GangReservation& reservation, std::vector<LiveRank>& ranks) {
  {
    absl::MutexLock lock(&mu_);
    stdin_rank_.reset();
  }
  for (LiveRank& rank : ranks) rank.watch.reset();
  {
    absl::MutexLock lock(&mu_);
    running_.reset();
  }
  // Recorded before the release: a head that goes between the two releases it again.
  Publish();
  options_.backend->Release(reservation);
}

void GangController::StopRanks(std::vector<LiveRank>& ranks) {
  GangBackend& backend = *options_.backend;
  auto drain = [&](absl::Time deadline) {
    while (true) {
      bool all = true;
      for (const LiveRank& rank : ranks) all = all && rank.exited;
      if (all) return;
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !events_.empty(); };
      if (!clock_.AwaitWithDeadline(mu_, absl::Condition(&ready), deadline)) return;
      while (!events_.empty()) {
        Event event = std::move(events_.front());
        events_.pop_front();
        ranks[event.rank].exited = true;
        EndRankStatus(
            *status_.mutable_ranks(event.rank), v1::RANK_STATE_STOPPED,
            event.end.ok() ? event.end->reason() : std::string(event.end.status().message()),
            clock_.Now());
      }
    }
  };
  for (const LiveRank& rank : ranks) {
    if (!rank.exited) {
      IgnoreStatus(backend.SignalRank(rank.started, SIGTERM),
                   "best effort: a rank out of reach is ended by the release of its bundle");
    }
  }
  drain(clock_.Now() + stop_grace());
  for (const LiveRank& rank : ranks) {
    if (!rank.exited) {
      IgnoreStatus(backend.SignalRank(rank.started, SIGKILL),
                   "best effort: a rank out of reach is ended by the release of its bundle");
    }
  }
  drain(clock_.Now() + absl::Seconds(5));
  // Ranks still not reported are on a node that cannot be reached: the release cancels their
  // bundles, and their agents (or the agents' deaths) end them.
  for (LiveRank& rank : ranks) {
    if (rank.watch != nullptr) rank.watch->Cancel();
  }
  for (int r = 0; r < static_cast<int>(ranks.size()); ++r) {
    if (options_.log != nullptr) options_.log->EndRank(r);
  }
}

}  // namespace tessera::train
