// GangController: the supervisor of one job (docs/train.md). It reserves the gang's placement
// whole, assigns ranks (gang_layout.h), starts every rank at once with the torchrun environment,
// merges their output into the job's log, and watches them. A rank that exits non-zero, is
// killed, hangs (its agent's hang timeout) or loses its node stops the whole gang (SIGTERM, then
// SIGKILL after the grace period); the reservation is released and taken again (possibly on
// other hosts, or another intact slice) and every rank restarts with TORCHELASTIC_RESTART_COUNT
// one higher, up to max_restarts. An elastic gang (a range of workers, nodes or slices) starts
// with as many members as fit, shrinks when a restart finds fewer, and grows when room returns
// (a membership change: ranks restart, the restart count does not). Stop() ends it from outside
// (job stop, the client's Ctrl-C, an attached client gone). A controller made with `resume` (a head
// restarted on its state store) adopts the job where the last head left it: the ranks of a running
// attempt are watched again (never restarted) and their output goes on into the log; an attempt
// that was still being reserved or started is released and started again (not counted as a
// restart).
//
// Thread-safe: Run() on one thread; Stop() and status() from any.
#pragma once

#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/clock.h"
#include "tessera/v1/jobs.pb.h"
#include "tessera/v1/train_state.pb.h"
#include "train/gang_backend.h"
#include "train/job_log.h"
#include "vocabulary/ids.h"

namespace tessera::train {

struct GangControllerOptions {
  JobId job_id;
  v1::JobSpec spec;
  GangBackend* backend = nullptr;  // not owned
  JobLog* log = nullptr;           // not owned
  // When the job was submitted; InfinitePast: when the controller is made, on its clock.
  absl::Time submitted = absl::InfinitePast();
  bool attached = false;
  // Called with the job's status after every change (without the controller's lock held).
  std::function<void(const v1::JobStatus&)> on_change;
  // The record a previous head kept of this job (record()): the job is adopted, not started.
  std::optional<v1::StoredTrainJob> resume;
  // Every time the controller reads or waits for: its phases' and ranks' times, the health and
  // elastic checks, the stop grace. Tests pass a FakeClock and move it by hand.
  Clock* clock = Clock::Real();
};

class GangController {
 public:
  explicit GangController(GangControllerOptions options);

  // Runs the job to its end and returns its final status.
  v1::JobStatus Run();
  // Asks the job to stop: the gang is stopped and released, the job ends STOPPED with `reason`.
  // No effect once it has ended.
  void Stop(std::string reason);
  // Input for rank 0's stdin (a forward_stdin job): the bytes taken (the rest did not fit now).
  // Unavailable while no rank 0 runs (the gang is starting or restarting): ask again.
  absl::StatusOr<size_t> WriteStdin(const std::string& data, bool close);
  v1::JobStatus status() const;
  // What a head restarted on the same state store needs to adopt the job: its spec, status, the
  // attempt's number and, while its ranks run, where they run.
  v1::StoredTrainJob record() const;

 private:
  enum class AttemptEnd { kSucceeded, kRankFailed, kStopped, kNotPlaced, kResized };
  struct AttemptResult {
    AttemptEnd end = AttemptEnd::kNotPlaced;
    std::string message;  // one line: what ended it
    int exit_code = 1;
  };
  struct Event {
    int rank = 0;
    RankEnd end;
  };
  struct LiveRank {
    StartedRank started;
    GangSlot slot;
    std::unique_ptr<RankWatch> watch;
    bool exited = false;
  };

  // A job a previous head ran (options_.resume) picks up where it was left: the result of the
  // attempt that was running (adopted and supervised to its end), or none when `attempt` (set
  // here) is to be started.
  std::optional<AttemptResult> ResumeStoredJob(int& attempt);
  // The job ends in `final_state`: its last phase, status and log say so.
  void EndJob(v1::GangJobState final_state, const std::string& final_message, int exit_code);

  AttemptResult RunAttempt(int attempt);
  // `attempt` becomes the job's current one: whether it is the first to run.
  bool BeginAttempt(int attempt);
  // The torchrun variables' options that hold for every rank of the attempt.
  GangEnvOptions EnvOptions() const;
  // The rendezvous ports, free on rank 0's node (MASTER_PORT, the JAX coordinator's), into
  // `env_options`, and each slot's network interface into `layout`.
  absl::Status ChooseRendezvous(GangLayout& layout, GangEnvOptions& env_options);
  // Unpacks the job's working directory on every node of the layout, once per node.
  absl::Status ShipWorkingDir(const GangLayout& layout);
  std::vector<RankLaunch> RankLaunches(const GangLayout& layout, const GangReservation& reservation,
                                       const GangEnvOptions& env_options) const;
  // The attempt's ranks are listed STARTING in the status (the last attempt's become past ranks).
  void ListStartingRanks(int attempt, const GangLayout& layout, const GangReservation& reservation,
                         const std::vector<RankLaunch>& launches);
  // A rank could not start: every rank's end is noted and the ranks that did start are killed.
  void AbandonStart(const std::vector<absl::StatusOr<StartedRank>>& started,
                    const std::vector<LiveRank>& ranks);
  // Every rank runs: the status lists their workers, and the launch or restart time is noted.
  void MarkRanksRunning(const std::vector<LiveRank>& ranks, bool first_start);
  // What record() keeps of the attempt while its ranks run.
  void RecordRunning(const GangReservation& reservation, const std::vector<LiveRank>& ranks);

  // Watches `ranks` (every rank of the attempt on `reservation`) until the attempt ends, then
  // releases the reservation. Ranks already `exited` are not watched; `adopted`: the ranks were
  // started by a previous head and their output already logged is skipped.
  AttemptResult Supervise(GangReservation& reservation, std::vector<LiveRank>& ranks, bool adopted);
  // Starts the watch of every rank not `exited` (output to the job's log, its end to events_):
  // the number of ranks not watched, which have succeeded already.
  int WatchRanks(std::vector<LiveRank>& ranks, bool adopted);
  // Waits until `deadline` for a rank's end (returned) or a stop request (`stop` set).
  std::optional<Event> AwaitEvent(absl::Time deadline, bool& stop);
  // The end of the first rank still running on a node the head has declared dead, if any.
  std::optional<Event> RankOnDeadNode(const std::vector<LiveRank>& ranks,
                                      const std::set<std::string>& gang_nodes);
  // When an elastic gang has room to grow now: the note that restarts it at its maximum.
  std::optional<std::string> RoomToGrowNote(const GangReservation& reservation,
                                            const GangSize& size);
  // A rank ended and its status says how: the attempt's result when that ends the attempt (the
  // last rank succeeded, or one failed and the gang is stopped), none while others run.
  std::optional<AttemptResult> OnRankEnd(const Event& event, std::vector<LiveRank>& ranks,
                                         int& succeeded);
  // The attempt is over: the stdin feed and the watches end, record() forgets the attempt, and
  // its reservation is released.
  void EndAttempt(const GangReservation& reservation, std::vector<LiveRank>& ranks);
  // The running attempt a previous head left (options_.resume), supervised to its end.
  AttemptResult AdoptAttempt(const v1::StoredAttempt& stored);
  // SIGTERM to every rank still running, SIGKILL to those left after the grace period; waits
  // for their exits (bounded) and ends the watches.
  void StopRanks(std::vector<LiveRank>& ranks);
  bool stopping() const;
  void SetState(v1::GangJobState state, const std::string& message);
  // The job enters `state` (a new phase unless it is in it already, in this attempt).
  void EnterPhaseLocked(v1::GangJobState state, const std::string& message)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The attempt's ranks move to past_ranks (a new attempt's ranks are about to be listed).
  void KeepPastRanksLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Publish();
  absl::Duration stop_grace() const;

  const GangControllerOptions options_;
  Clock& clock_;
  const absl::Time submitted_;

  mutable absl::Mutex mu_;
  v1::JobStatus status_ ABSL_GUARDED_BY(mu_);
  std::optional<std::string> stop_reason_ ABSL_GUARDED_BY(mu_);
  std::deque<Event> events_ ABSL_GUARDED_BY(mu_);
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
  // When the last rank failure was seen (a restart's time is measured from it).
  std::optional<absl::Time> failed_at_ ABSL_GUARDED_BY(mu_);
  // Rank 0 of the running attempt, while its stdin is fed (forward_stdin).
  std::optional<StartedRank> stdin_rank_ ABSL_GUARDED_BY(mu_);
  int attempt_ ABSL_GUARDED_BY(mu_) = 0;
  // The attempt whose ranks run, as record() keeps it.
  std::optional<v1::StoredAttempt> running_ ABSL_GUARDED_BY(mu_);
};

// "rank 2 on node v6e-0-w2 (127.0.0.1) was killed by signal 9 (SIGKILL)": how a rank ended, as
// the job's summary says it. Exit code of the job for it: the rank's code, 128 + its signal.
std::string DescribeRankEnd(int rank, const GangSlot& slot, const RankEnd& end);
// The rank ended in `state` with `reason`, at `now` (unless its end was already noted).
void EndRankStatus(v1::RankStatus& rank, v1::RankState state, const std::string& reason,
                   absl::Time now);
int ExitCodeOf(const RankEnd& end);

}  // namespace tessera::train
