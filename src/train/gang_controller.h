// GangController: the supervisor of one job (docs/train.md). It reserves the gang's placement
// whole, assigns ranks (gang_layout.h), starts every rank at once with the torchrun environment,
// merges their output into the job's log, and watches them. A rank that exits non-zero, is
// killed, hangs (its agent's hang timeout) or loses its node stops the whole gang (SIGTERM, then
// SIGKILL after the grace period); the reservation is released and taken again (possibly on
// other hosts, or another intact slice) and every rank restarts with TORCHELASTIC_RESTART_COUNT
// one higher, up to max_restarts. An elastic gang (a range of workers, nodes or slices) starts
// with as many members as fit, shrinks when a restart finds fewer, and grows when room returns
// (a membership change: ranks restart, the restart count does not). Stop() ends it from outside (job stop, the client's Ctrl-C, an
// attached client gone). A controller made with `resume` (a head restarted on its state store)
// adopts the job where the last head left it: the ranks of a running attempt are watched again
// (never restarted) and their output goes on into the log; an attempt that was still being
// reserved or started is released and started again (not counted as a restart).
//
// Thread-safe: Run() on one thread; Stop() and status() from any.
#pragma once

#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "tessera/v1/jobs.pb.h"
#include "tessera/v1/train_state.pb.h"
#include "train/gang_backend.h"
#include "train/job_log.h"

namespace tessera::train {

struct GangControllerOptions {
  std::string job_id;
  v1::JobSpec spec;
  GangBackend* backend = nullptr;  // not owned
  JobLog* log = nullptr;           // not owned
  absl::Time submitted = absl::Now();
  bool attached = false;
  // Called with the job's status after every change (without the controller's lock held).
  std::function<void(const v1::JobStatus&)> on_change;
  // The record a previous head kept of this job (record()): the job is adopted, not started.
  std::optional<v1::StoredTrainJob> resume;
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

  AttemptResult RunAttempt(int attempt);
  // Watches `ranks` (every rank of the attempt on `reservation`) until the attempt ends, then
  // releases the reservation. Ranks already `exited` are not watched; `adopted`: the ranks were
  // started by a previous head and their output already logged is skipped.
  AttemptResult Supervise(GangReservation& reservation, std::vector<LiveRank>& ranks,
                          bool adopted);
  // The running attempt a previous head left (options_.resume), supervised to its end.
  AttemptResult AdoptAttempt(const v1::StoredAttempt& stored);
  // SIGTERM to every rank still running, SIGKILL to those left after the grace period; waits
  // for their exits (bounded) and ends the watches.
  void StopRanks(std::vector<LiveRank>& ranks);
  bool stopping() const;
  void SetState(const std::string& state, const std::string& message);
  // The job enters `state` (a new phase unless it is in it already, in this attempt).
  void EnterPhaseLocked(const std::string& state, const std::string& message)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The attempt's ranks move to past_ranks (a new attempt's ranks are about to be listed).
  void KeepPastRanksLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Publish();
  absl::Duration stop_grace() const;

  const GangControllerOptions options_;

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
// The rank ended in `state` with `reason`, now (unless its end was already noted).
void EndRankStatus(v1::RankStatus& rank, const std::string& state, const std::string& reason);
int ExitCodeOf(const RankEnd& end);

}  // namespace tessera::train
