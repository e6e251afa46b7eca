// JobManager: the tessera.v1.Jobs service, in the head's process. It owns the cluster's jobs:
// each SubmitJob gets an id, a log folder <jobs_dir>/<job-id>/ (job.log, rank-<R>.log,
// status.json) and a controller thread (GangController) that runs the job to its end, so a job
// survives its client. A job submitted attached (a foreground `tessera train`) is stopped when
// its client's log stream goes away without the job having ended (a killed client leaves no rank
// and no reservation behind).
// With a JobRecordStore (the head's state store on Redis), every job's record
// (train_state.proto) is kept there as it changes; Resume() on a restarted head adopts the jobs
// that were running (their ranks are watched again, not restarted) and lists the ended ones.
//
// Thread-safe: one mutex guards the job table; each job's controller has its own.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "base/clock.h"
#include "rpc/request_cache.h"
#include "tessera/v1/jobs.grpc.pb.h"
#include "train/gang_backend.h"
#include "train/gang_controller.h"
#include "train/job_log.h"
#include "train/job_record_store.h"
#include "vocabulary/ids.h"

namespace tessera::train {

struct JobManagerOptions {
  std::string jobs_dir;  // <state>/jobs
  // A backend per job (each controller calls the cluster on its own connection).
  std::function<absl::StatusOr<std::unique_ptr<GangBackend>>()> backends;
  // Where jobs' records are kept (not owned); null: nowhere, and jobs end with the head.
  JobRecordStore* records = nullptr;
  // Told of each change worth an event (kind "job" or "worker", one line; the head's event
  // stream): a job entering a state, a rank failing. May be empty; must not block.
  std::function<void(const std::string& kind, const std::string& message)> on_event;
  // The jobs' clock: submission times and every controller's timers (GangControllerOptions).
  Clock* clock = Clock::Real();
};

class JobManager final : public v1::Jobs::Service {
 public:
  explicit JobManager(JobManagerOptions options);
  ~JobManager() override;  // Shutdown()

  grpc::Status SubmitJob(grpc::ServerContext*, const v1::SubmitJobRequest* request,
                         v1::JobStatus* response) override;
  grpc::Status GetJob(grpc::ServerContext*, const v1::GetJobRequest* request,
                      v1::JobStatus* response) override;
  grpc::Status ListGangJobs(grpc::ServerContext*, const v1::ListRequest*,
                            v1::JobList* response) override;
  grpc::Status StopJob(grpc::ServerContext*, const v1::StopJobRequest* request,
                       v1::JobStatus* response) override;
  grpc::Status StreamJobLogs(grpc::ServerContext* context, const v1::StreamJobLogsRequest* request,
                             grpc::ServerWriter<v1::JobLogChunk>* writer) override;
  grpc::Status WriteJobStdin(grpc::ServerContext*, const v1::WriteJobStdinRequest* request,
                             v1::WriteJobStdinResponse* response) override;

  // Adopts the jobs in `records` (a head restarted on its state store): a running one gets a
  // controller that watches its ranks again, an ended one is listed. Call once, when the
  // backends can reach the head. Fails, adopting nothing, when the store cannot be read or
  // holds a record that is not one (DataLoss naming train_jobs/<id>); a job whose log folder or
  // connection cannot be made is skipped with a line on stderr.
  absl::Status Resume();

  // Stops every running job (the head is shutting down) and waits for their controllers.
  void Shutdown();

 private:
  struct Job {
    JobId id;
    std::unique_ptr<GangBackend> backend;
    std::unique_ptr<JobLog> log;
    std::unique_ptr<GangController> controller;  // null: an ended job a previous head ran
    std::thread thread;
    v1::JobStatus status;  // the controller's last published status
    bool ended = false;
  };

  // *refused_by_store: the store did not take the job's record (nothing was made).
  grpc::Status DoSubmit(const v1::SubmitJobRequest& request, v1::JobStatus* response,
                        bool* refused_by_store);
  // Makes the job's controller, records it, lists the job and starts its thread. With
  // `acknowledged` (a submission) the record is made durably first, and when the store does not
  // take it the job is not listed, its log folder is removed and the store's UNAVAILABLE is
  // returned; otherwise (an adopted job) it is kept as JobRecordStore::Keep.
  absl::Status Launch(const std::shared_ptr<Job>& job, GangControllerOptions controller,
                      bool acknowledged) ABSL_LOCKS_EXCLUDED(mu_);
  // NOT_FOUND, or UNAVAILABLE while Resume() has not adopted the stored jobs yet (ask again).
  grpc::Status Missing(const std::string& id) const;
  // The job's status now: its controller's, or the record of an ended job.
  static v1::JobStatus StatusOf(const Job& job);
  // Keeps the job's record in options_.records (when set; kept for later while the store is
  // down).
  void SaveRecord(Job& job);
  // Joins the threads of ended jobs and forgets the oldest ended ones past kKeptEndedJobs (their
  // logs and status files stay on disk, where the CLI reads them).
  void ReapEnded() ABSL_LOCKS_EXCLUDED(mu_);
  // The job by id, else the newest with that name; null when none.
  std::shared_ptr<Job> Find(const std::string& id_or_name) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Published(const std::shared_ptr<Job>& job, const v1::JobStatus& status);
  void WriteStatusFile(const Job& job, const v1::JobStatus& status);

  static constexpr size_t kKeptEndedJobs = 256;

  const JobManagerOptions options_;
  mutable absl::Mutex mu_;
  std::map<JobId, std::shared_ptr<Job>> jobs_ ABSL_GUARDED_BY(mu_);
  absl::Mutex join_mu_;  // one joiner of jobs' threads at a time (ReapEnded, Shutdown)
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
  // Whether the stored jobs were adopted (Resume() ran, or there is no store).
  std::atomic<bool> adopted_;
  struct SubmitResult {
    grpc::Status status;
    v1::JobStatus response;
    bool refused_by_store = false;
  };
  rpc::RequestCache<SubmitResult> submit_cache_;
  // Request ids a store refusal answered, and how often: the cache key of a retry moves on, so
  // it runs again instead of being answered with the refusal.
  std::map<std::string, int> refused_ ABSL_GUARDED_BY(mu_);
  static constexpr size_t kMaxRefusedIds = 4096;
};

}  // namespace tessera::train
