// JobManager: the tessera.v1.Jobs service, in the head's process. It owns the cluster's jobs:
// each SubmitJob gets an id, a log folder <jobs_dir>/<job-id>/ (job.log, rank-<R>.log,
// status.json) and a controller thread (GangController) that runs the job to its end, so a job
// survives its client. A job submitted attached (a foreground `tessera train`) is stopped when
// its client's log stream goes away without the job having ended (a killed client leaves no rank
// and no reservation behind).
//
// Thread-safe: one mutex guards the job table; each job's controller has its own.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "rpc/request_cache.h"
#include "tessera/v1/jobs.grpc.pb.h"
#include "train/gang_backend.h"
#include "train/gang_controller.h"
#include "train/job_log.h"

namespace tessera::train {

struct JobManagerOptions {
  std::string jobs_dir;  // <state>/jobs
  // A backend per job (each controller calls the cluster on its own connection).
  std::function<absl::StatusOr<std::unique_ptr<GangBackend>>()> backends;
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

  // Stops every running job (the head is shutting down) and waits for their controllers.
  void Shutdown();

 private:
  struct Job {
    std::string id;
    std::unique_ptr<GangBackend> backend;
    std::unique_ptr<JobLog> log;
    std::unique_ptr<GangController> controller;
    std::thread thread;
    v1::JobStatus status;  // the controller's last published status
    bool ended = false;
  };

  grpc::Status DoSubmit(const v1::SubmitJobRequest& request, v1::JobStatus* response);
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
  std::map<std::string, std::shared_ptr<Job>> jobs_ ABSL_GUARDED_BY(mu_);
  absl::Mutex join_mu_;  // one joiner of jobs' threads at a time (ReapEnded, Shutdown)
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
  using SubmitResult = std::pair<grpc::Status, v1::JobStatus>;
  rpc::RequestCache<SubmitResult> submit_cache_;
};

}  // namespace tessera::train
