// Gangs from a program: N copies of a command started together as one gang on a reservation
// (whole TPU slices, N workers of a placement group, or N nodes of K processes each), with the
// torchrun environment, restarted as a group when one fails, optionally elastic. The gang is a
// job of the cluster: the head's controller runs it (the same as `tessera train`, docs/train.md),
// so it lives on if the program exits; the program follows it by id.
//
//   tessera::ResourceSet gpu = *tessera::ResourceSet::FromAmounts({{"CPU", 1}, {"GPU", 1}});
//   auto gang = tessera::StartGang({.name = "train",
//                                   .command = {"python3", "train.py"},
//                                   .workers = 4,
//                                   .resources_per_worker = gpu,
//                                   .strategy = tessera::PlacementStrategy::kSpread,
//                                   .max_restarts = 1});
//   absl::StatusOr<tessera::GangStatus> done = gang->Wait(absl::Minutes(10));
//   // done->state: GangState::kSucceeded, kFailed (done->message names the rank, host and cause)
//   // or kStopped, printed as `tessera job` shows it ("SUCCEEDED"); done->restart_count,
//   // done->ranks (node, host, pid of each rank); gang->id() (a JobId) names it to `tessera job`.
//
// Where, exactly one of: `slice` (whole slices of that shape: one rank per host, or per chip;
// .slice = *tessera::MakeSliceShape(tessera::TpuGeneration::kV6e, {{4, 4}})), `workers` (ranks
// of `resources_per_worker` in one placement group), `nodes` (`procs_per_node` ranks on each of
// N nodes). `min_*` makes the range elastic (start with what fits, shrink on a failure, grow
// when room returns). Bad options are a one-line InvalidArgument and start nothing.
//
// Thread-safe: a Gang is a value (its id); calls on copies may be made from any thread.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "labels/label_selector.h"
#include "resources/resource_set.h"
#include "tessera/actor.h"
#include "tessera/tessera.h"
#include "vocabulary/gang_state.h"
#include "vocabulary/ids.h"
#include "vocabulary/placement_strategy.h"
#include "vocabulary/slice_shape.h"
#include "vocabulary/task_options.h"

namespace tessera {

struct GangOptions {
  std::string name;
  std::vector<std::string> command;
  // Added to every rank's environment (after the driver's nothing: ranks do not inherit it).
  std::map<std::string, std::string> env;
  // The ranks' folder ("" this program's).
  std::string working_folder;

  // Whole slices of this shape (a generation and a topology: MakeSliceShape, or ParseSliceShape
  // from text); num_slices of them, min_slices..
  std::optional<SliceShape> slice;
  int num_slices = 1;
  int min_slices = 0;  // 0: fixed
  bool per_chip = false;
  // Workers of one placement group: each rank's bundle, spread by `strategy`.
  int workers = 0;
  int min_workers = 0;  // 0: fixed
  ResourceSet resources_per_worker = OneCpu();
  PlacementStrategy strategy = PlacementStrategy::kPack;
  // Nodes of procs_per_node ranks each (torchrun's --nnodes / --nproc-per-node).
  int nodes = 0;
  int min_nodes = 0;  // 0: fixed
  int procs_per_node = 1;
  std::optional<ResourceSet> resources_per_node;  // nullopt: CPU=<procs_per_node>
  // Label selectors of the bundles (workers and nodes): the first, then fallbacks.
  std::vector<LabelSelector> label_selectors;

  // Set torchrun's and Ray Train's variables (RANK, WORLD_SIZE, MASTER_ADDR, ...).
  bool torch_env = true;
  int max_restarts = 0;
  absl::Duration hang_timeout = absl::ZeroDuration();  // zero: never judged hung
  absl::Duration stop_grace = absl::Seconds(5);
  absl::Duration start_timeout = absl::Seconds(60);
  absl::Duration elastic_check = absl::Seconds(10);
};

struct GangRank {
  int rank = 0;
  int local_rank = 0;
  int node_rank = 0;
  std::string node_id;
  std::string host;
  std::string worker_id;
  int pid = 0;
  GangRankState state = GangRankState::kStarting;
  std::string exit_reason;
};

struct GangStatus {
  JobId id;
  std::string name;
  GangState state = GangState::kPending;
  std::string message;
  int restart_count = 0;
  int membership_changes = 0;
  int world_size = 0;
  int exit_code = 0;
  std::string log_dir;  // on the head's host
  std::vector<GangRank> ranks;
  bool ended() const {
    return state == GangState::kSucceeded || state == GangState::kFailed ||
           state == GangState::kStopped;
  }
};

// The word `tessera job` and the dashboard show for the state: "RUNNING", "SUCCEEDED", ...
std::ostream& operator<<(std::ostream& os, GangState state);
std::ostream& operator<<(std::ostream& os, GangRankState state);

class Gang {
 public:
  explicit Gang(JobId id) : id_(std::move(id)) {}
  const JobId& id() const { return id_; }

  absl::StatusOr<GangStatus> Status() const;
  // Until the gang ends; DeadlineExceeded (the gang goes on) when `timeout` passes first.
  absl::StatusOr<GangStatus> Wait(absl::Duration timeout) const;
  // Stops every rank and releases the reservation; the status once it has ended (STOPPED).
  absl::StatusOr<GangStatus> Stop() const;
  // The gang's merged log so far ("[rankN]: " lines and the controller's "tessera: " lines).
  absl::StatusOr<std::string> Logs() const;

 private:
  JobId id_;
};

// Submits the gang to the cluster Init connected to and returns at once (it may still wait for
// its reservation). FailedPrecondition before Init.
absl::StatusOr<Gang> StartGang(const GangOptions& options);

namespace internal {
// One member of an actor gang, type-erased: its actor and the call it runs.
struct ActorGangMember {
  std::function<absl::Status()> wait;  // blocks until the member's call has returned or failed
  std::function<absl::Status()> kill;  // ends the actor (its call then fails)
};
using StartActorGangMember =
    std::function<absl::StatusOr<ActorGangMember>(const ActorOptions& options)>;
absl::StatusOr<GangStatus> RunActorGang(const GangOptions& options, StartActorGangMember start);
}  // namespace internal

// Actor mode: one actor per rank, made by `factory` (registered with TESSERA_ACTOR) inside the
// gang's reservation with the rank's environment (RANK, WORLD_SIZE, MASTER_ADDR, ... as for
// StartGang; read it with getenv in the constructor or the method), each running
// `method(args...)` (registered with TESSERA_ACTOR_METHOD; not void). The gang succeeds when every
// rank's call has returned. When one fails, or its actor dies, every other actor of the gang is
// given stop_grace to end on its own, then killed; the reservation is taken again and every rank is
// made and run again with TORCHELASTIC_RESTART_COUNT one higher, up to max_restarts: an actor of a
// gang is never restarted alone (its own MaxRestarts is 0). Unlike StartGang, the controller runs
// here, in this program, which owns the actors; the call blocks until the gang ends. `command`,
// `working_folder` and `hang_timeout` do not apply.
//
//   class Trainer { public: int Train(int steps); };
//   std::unique_ptr<Trainer> MakeTrainer();          // TESSERA_ACTOR(MakeTrainer)
//   auto done = tessera::RunActorGang({.name = "t", .workers = 4, .max_restarts = 1},
//                                     MakeTrainer, &Trainer::Train, 100);
template <typename R, typename M, typename... Args>
absl::StatusOr<GangStatus> RunActorGang(const GangOptions& options, R (*factory)(), M method,
                                        Args... args) {
  internal::StartActorGangMember start =
      [=](const ActorOptions& actor_options) -> absl::StatusOr<internal::ActorGangMember> {
    auto handle = Actor(factory).Options(actor_options).Remote();
    if (!handle.status().ok()) return handle.status();
    auto ref = handle.Task(method).Remote(args...);
    internal::ActorGangMember member;
    member.wait = [ref] { return Get(ref, absl::InfiniteDuration()).status(); };
    member.kill = [handle] { return Kill(handle); };
    return member;
  };
  return internal::RunActorGang(options, std::move(start));
}

}  // namespace tessera
