#include "train/job_manager.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <utility>
#include <vector>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "base/log_line.h"
#include "base/status_macros.h"
#include "rpc/message_json.h"
#include "rpc/status_conversion.h"
#include "train/job_changes.h"
#include "train/job_spec.h"

namespace tessera::train {
namespace {

bool Ended(v1::GangJobState state) {
  return state == v1::GANG_JOB_STATE_SUCCEEDED || state == v1::GANG_JOB_STATE_FAILED ||
         state == v1::GANG_JOB_STATE_STOPPED;
}

JobId NewJobId() {
  absl::BitGen gen;
  return JobId(absl::StrFormat("job-%08x", absl::Uniform<uint32_t>(gen)));
}

constexpr size_t kChunkBytes = 64 * 1024;

}  // namespace

JobManager::JobManager(JobManagerOptions options)
    : options_(std::move(options)), adopted_(options_.records == nullptr) {}

grpc::Status JobManager::Missing(const std::string& id) const {
  if (!adopted_.load()) {
    return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                        "the head is still adopting the jobs of the previous head");
  }
  return grpc::Status(grpc::StatusCode::NOT_FOUND, absl::StrCat("no job ", id));
}

JobManager::~JobManager() { Shutdown(); }

void JobManager::Shutdown() {
  std::vector<std::shared_ptr<Job>> jobs;
  {
    absl::MutexLock lock(&mu_);
    shut_down_ = true;
    for (auto& [id, job] : jobs_) jobs.push_back(job);
  }
  for (auto& job : jobs) {
    if (job->controller != nullptr) job->controller->Stop("the head shut down");
  }
  absl::MutexLock joining(&join_mu_);
  for (auto& job : jobs) {
    if (job->thread.joinable()) job->thread.join();
  }
}

std::shared_ptr<JobManager::Job> JobManager::Find(const std::string& id_or_name) {
  auto it = jobs_.find(JobId(id_or_name));
  if (it != jobs_.end()) return it->second;
  std::shared_ptr<Job> newest;
  for (auto& [id, job] : jobs_) {
    if (job->status.name() != id_or_name) continue;
    if (newest == nullptr || job->status.submit_time_ms() >= newest->status.submit_time_ms()) {
      newest = job;
    }
  }
  return newest;
}

void JobManager::WriteStatusFile(const Job& job, const v1::JobStatus& status) {
  // As `tessera job status --json` prints it: states in words (cli/job_client.h reads it back).
  std::string json = rpc::MessageJson(status).dump(
      -1, ' ', /*ensure_ascii=*/false, nlohmann::ordered_json::error_handler_t::replace);
  const std::string path = job.log->dir() + "/status.json";
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return;
  json.push_back('\n');
  const bool written = ::write(fd, json.data(), json.size()) == static_cast<ssize_t>(json.size());
  ::close(fd);
  if (written) std::rename(tmp.c_str(), path.c_str());
}

v1::JobStatus JobManager::StatusOf(const Job& job) {
  return job.controller != nullptr ? job.controller->status() : job.status;
}

void JobManager::SaveRecord(Job& job) {
  if (options_.records == nullptr || job.controller == nullptr) return;
  options_.records->Keep(job.id, job.controller->record().SerializeAsString());
}

void JobManager::Published(const std::shared_ptr<Job>& job, const v1::JobStatus& status) {
  v1::JobStatus before;
  {
    absl::MutexLock lock(&mu_);
    before = std::move(job->status);
    job->status = status;
    if (Ended(status.state())) job->ended = true;
  }
  if (options_.on_event) {
    for (const auto& [kind, message] : JobChanges(before, status)) options_.on_event(kind, message);
  }
  SaveRecord(*job);
  WriteStatusFile(*job, status);
}

grpc::Status JobManager::SubmitJob(grpc::ServerContext*, const v1::SubmitJobRequest* request,
                                   v1::JobStatus* response) {
  std::string cache_key;
  if (!request->request_id().empty()) {
    cache_key = absl::StrCat("SubmitJob/", request->request_id());
    // A submission the store refused is tried again under its id, not answered from the cache.
    absl::MutexLock lock(&mu_);
    if (auto it = refused_.find(request->request_id()); it != refused_.end()) {
      absl::StrAppend(&cache_key, "#refused-", it->second);
    }
  }
  // A store known to be down refuses at once, outside the cache (the same request tried again
  // once it is back runs), unless the cache has the answer.
  if (options_.records != nullptr) {
    if (absl::Status writable = options_.records->Writable(); !writable.ok()) {
      if (cache_key.empty() || !submit_cache_.Find(cache_key).has_value()) {
        return rpc::ToGrpcStatus(writable);
      }
    }
  }
  SubmitResult result = submit_cache_.Run(cache_key, [&] {
    SubmitResult r;
    r.status = DoSubmit(*request, &r.response, &r.refused_by_store);
    return r;
  });
  if (result.refused_by_store && !request->request_id().empty()) {
    absl::MutexLock lock(&mu_);
    if (refused_.size() >= kMaxRefusedIds) refused_.clear();  // a bound; ids are rarely reused
    ++refused_[request->request_id()];
  }
  *response = result.response;
  return result.status;
}

void JobManager::ReapEnded() {
  std::vector<std::shared_ptr<Job>> ended;
  std::vector<JobId> forgotten;
  {
    absl::MutexLock lock(&mu_);
    std::vector<std::shared_ptr<Job>> by_age;
    for (auto& [id, job] : jobs_) {
      if (job->ended) by_age.push_back(job);
    }
    std::sort(by_age.begin(), by_age.end(), [](const auto& a, const auto& b) {
      return a->status.end_time_ms() < b->status.end_time_ms();
    });
    for (size_t i = 0; i + kKeptEndedJobs < by_age.size(); ++i) {
      jobs_.erase(by_age[i]->id);
      forgotten.push_back(by_age[i]->id);
    }
    ended = std::move(by_age);
  }
  if (options_.records != nullptr) {
    for (const JobId& id : forgotten) options_.records->Forget(id);
  }
  // An ended job's thread has published its end and returns at once.
  absl::MutexLock joining(&join_mu_);
  for (auto& job : ended) {
    if (job->thread.joinable() && job->thread.get_id() != std::this_thread::get_id()) {
      job->thread.join();
    }
  }
}

grpc::Status JobManager::DoSubmit(const v1::SubmitJobRequest& request, v1::JobStatus* response,
                                  bool* refused_by_store) {
  if (absl::Status valid = ValidateJobSpec(request.spec()); !valid.ok()) {
    return rpc::ToGrpcStatus(valid);
  }
  ReapEnded();
  auto job = std::make_shared<Job>();
  {
    absl::MutexLock lock(&mu_);
    if (shut_down_) {
      return grpc::Status(grpc::StatusCode::UNAVAILABLE, "the head is shutting down");
    }
    do {
      job->id = NewJobId();
    } while (jobs_.contains(job->id));
  }
  auto log = JobLog::Create(absl::StrCat(options_.jobs_dir, "/", job->id.value()));
  if (!log.ok()) return rpc::ToGrpcStatus(log.status());
  job->log = *std::move(log);
  auto backend = options_.backends();
  if (!backend.ok()) return rpc::ToGrpcStatus(backend.status());
  job->backend = *std::move(backend);
  std::string command = absl::StrJoin(request.spec().argv(), " ");
  absl::StrReplaceAll({{"\n", "\\n"}}, &command);  // one line in the log
  job->log->Note(absl::StrCat("job ", job->id.value(), " submitted: ", command));
  GangControllerOptions controller;
  controller.job_id = job->id;
  controller.spec = request.spec();
  controller.attached = request.attached();
  controller.submitted = options_.clock->Now();
  if (absl::Status launched = Launch(job, std::move(controller), /*acknowledged=*/true);
      !launched.ok()) {
    *refused_by_store = true;
    return rpc::ToGrpcStatus(launched);
  }
  *response = job->status;
  return grpc::Status::OK;
}

absl::Status JobManager::Launch(const std::shared_ptr<Job>& job, GangControllerOptions controller,
                                bool acknowledged) {
  controller.backend = job->backend.get();
  controller.log = job->log.get();
  controller.clock = options_.clock;
  std::weak_ptr<Job> weak = job;
  controller.on_change = [this, weak](const v1::JobStatus& status) {
    if (auto j = weak.lock()) Published(j, status);
  };
  job->controller = std::make_unique<GangController>(std::move(controller));
  job->status = job->controller->status();
  if (acknowledged && options_.records != nullptr) {
    // Kept before anyone hears of it: a job the store did not take was never submitted, and
    // leaves nothing behind (its log folder included).
    if (absl::Status kept =
            options_.records->Put(job->id, job->controller->record().SerializeAsString());
        !kept.ok()) {
      job->log->Close();
      std::error_code ignored;
      std::filesystem::remove_all(job->log->dir(), ignored);
      return kept;
    }
  }
  {
    absl::MutexLock lock(&mu_);
    jobs_[job->id] = job;
  }
  if (!acknowledged) SaveRecord(*job);
  WriteStatusFile(*job, job->status);
  job->thread = std::thread([this, job] {
    v1::JobStatus final = job->controller->Run();
    job->log->Close();
    Published(job, final);
  });
  return absl::OkStatus();
}

absl::Status JobManager::Resume() {
  if (options_.records == nullptr) return absl::OkStatus();
  TESSERA_ASSIGN_OR_RETURN(auto records, options_.records->List());
  // Every record is read before any job is adopted: one that cannot be read stops the head.
  std::vector<v1::StoredTrainJob> jobs;
  for (const auto& [job_id, bytes] : records) {
    v1::StoredTrainJob& stored = jobs.emplace_back();
    if (!stored.ParseFromString(bytes) || stored.status().job_id() != job_id.value()) {
      return absl::DataLossError(absl::StrCat(std::string(kTrainJobsTable), "/", job_id.value(),
                                              ": not a training job's record"));
    }
  }
  for (v1::StoredTrainJob& stored : jobs) {
    auto job = std::make_shared<Job>();
    job->id = JobId(stored.status().job_id());
    job->status = stored.status();
    auto log = JobLog::Create(absl::StrCat(options_.jobs_dir, "/", job->id.value()));
    if (!log.ok()) {
      LogLine(absl::StrCat("tessera head: cannot adopt job ", job->id.value(), ": ",
                           log.status().message()));
      continue;
    }
    job->log = *std::move(log);
    if (Ended(stored.status().state())) {
      job->ended = true;
      job->log->Close();
      absl::MutexLock lock(&mu_);
      jobs_[job->id] = job;
      continue;
    }
    auto backend = options_.backends();
    if (!backend.ok()) {
      LogLine(absl::StrCat("tessera head: cannot adopt job ", job->id.value(), ": ",
                           backend.status().message()));
      continue;
    }
    job->backend = *std::move(backend);
    GangControllerOptions controller;
    controller.job_id = job->id;
    controller.spec = stored.spec();
    controller.attached = stored.status().attached();
    controller.submitted = absl::FromUnixMillis(stored.status().submit_time_ms());
    controller.resume = std::move(stored);
    // Its record is there already; what changes from now on is kept as it goes.
    if (absl::Status launched = Launch(job, std::move(controller), /*acknowledged=*/false);
        !launched.ok()) {
      LogLine(absl::StrCat("tessera head: cannot adopt job ", job->id.value(), ": ",
                           launched.message()));
    }
  }
  adopted_.store(true);
  return absl::OkStatus();
}

grpc::Status JobManager::GetJob(grpc::ServerContext*, const v1::GetJobRequest* request,
                                v1::JobStatus* response) {
  std::shared_ptr<Job> job;
  {
    absl::MutexLock lock(&mu_);
    job = Find(request->job_id());
  }
  if (job == nullptr) return Missing(request->job_id());
  *response = StatusOf(*job);
  return grpc::Status::OK;
}

grpc::Status JobManager::ListGangJobs(grpc::ServerContext*, const v1::ListRequest*,
                                      v1::JobList* response) {
  if (!adopted_.load()) return Missing("");
  std::vector<std::shared_ptr<Job>> jobs;
  {
    absl::MutexLock lock(&mu_);
    for (auto& [id, job] : jobs_) jobs.push_back(job);
  }
  for (auto& job : jobs) *response->add_jobs() = StatusOf(*job);
  return grpc::Status::OK;
}

grpc::Status JobManager::StopJob(grpc::ServerContext*, const v1::StopJobRequest* request,
                                 v1::JobStatus* response) {
  std::shared_ptr<Job> job;
  {
    absl::MutexLock lock(&mu_);
    job = Find(request->job_id());
  }
  if (job == nullptr) return Missing(request->job_id());
  if (job->controller == nullptr) {
    *response = job->status;
    return grpc::Status::OK;
  }
  job->controller->Stop(request->reason().empty() ? "stopped by request" : request->reason());
  {
    absl::MutexLock lock(&mu_);
    auto ended = [&job]() { return job->ended; };
    mu_.AwaitWithTimeout(absl::Condition(&ended), absl::Minutes(2));
  }
  *response = StatusOf(*job);
  return grpc::Status::OK;
}

grpc::Status JobManager::WriteJobStdin(grpc::ServerContext*,
                                       const v1::WriteJobStdinRequest* request,
                                       v1::WriteJobStdinResponse* response) {
  std::shared_ptr<Job> job;
  {
    absl::MutexLock lock(&mu_);
    job = Find(request->job_id());
  }
  if (job == nullptr) return Missing(request->job_id());
  if (job->controller == nullptr) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "the job has ended");
  }
  auto written = job->controller->WriteStdin(request->data(), request->close());
  if (!written.ok()) return rpc::ToGrpcStatus(written.status());
  response->set_written(*written);
  return grpc::Status::OK;
}

grpc::Status JobManager::StreamJobLogs(grpc::ServerContext* context,
                                       const v1::StreamJobLogsRequest* request,
                                       grpc::ServerWriter<v1::JobLogChunk>* writer) {
  std::shared_ptr<Job> job;
  {
    absl::MutexLock lock(&mu_);
    job = Find(request->job_id());
  }
  if (job == nullptr) return Missing(request->job_id());
  if (request->rank() < -1) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "rank: a rank, or -1 for every rank");
  }
  const bool watching_attached = request->attach() && StatusOf(*job).attached();
  auto job_ended = [&] {
    absl::MutexLock lock(&mu_);
    return job->ended;
  };
  // The reader is gone: an attached job's client died (or was killed), so the job stops.
  auto reader_gone = [&] {
    if (watching_attached && !job_ended() && job->controller != nullptr) {
      job->controller->Stop("its client went away");
    }
    return grpc::Status(grpc::StatusCode::CANCELLED, "the reader went away");
  };
  uint64_t offset = request->offset();
  const std::string rank_path =
      request->rank() >= 0 ? absl::StrCat(job->log->dir(), "/rank-", request->rank(), ".log") : "";
  while (true) {
    const bool ended_before_read = job_ended();
    bool sent = false;
    if (request->rank() < 0) {
      for (LogChunk& chunk : job->log->Read(offset, kChunkBytes)) {
        offset += chunk.data.size();
        v1::JobLogChunk out;
        out.set_data(std::move(chunk.data));
        out.set_is_stderr(chunk.is_stderr);
        if (!writer->Write(out)) return reader_gone();
        sent = true;
      }
    } else {
      const int fd = ::open(rank_path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
      if (fd >= 0) {
        std::string data(kChunkBytes, '\0');
        const ssize_t n = ::pread(fd, data.data(), data.size(), static_cast<off_t>(offset));
        ::close(fd);
        if (n > 0) {
          data.resize(static_cast<size_t>(n));
          offset += data.size();
          v1::JobLogChunk out;
          out.set_data(std::move(data));
          if (!writer->Write(out)) return reader_gone();
          sent = true;
        }
      }
    }
    if (sent) continue;
    if (ended_before_read || !request->follow()) {
      if (request->follow()) {
        v1::JobLogChunk last;
        *last.mutable_ended() = StatusOf(*job);
        writer->Write(last);
      }
      return grpc::Status::OK;
    }
    if (context->IsCancelled()) return reader_gone();
    if (request->rank() < 0) {
      job->log->AwaitGrowth(offset, absl::Now() + absl::Milliseconds(100));
    } else {
      absl::SleepFor(absl::Milliseconds(100));
    }
  }
}

}  // namespace tessera::train
