#include "head/job_table.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "base/string_util.h"
#include "rpc/state_names.h"

namespace tessera {

namespace {

std::string Serialize(const JobRecord& job) {
  v1::JobInfo info;
  JobRecordToProto(job, &info);
  return info.SerializeAsString();
}

absl::StatusOr<JobRecord> Parse(const std::string& key, const std::string& value) {
  auto corrupt = [&](std::string_view why) {
    return absl::DataLossError(
        absl::StrCat("state store table ", ToAbsl(kJobsTable), ", key ", key, ": ", ToAbsl(why)));
  };
  v1::JobInfo info;
  if (!info.ParseFromString(value)) return corrupt("not a job record");
  if (info.job_id() != key) return corrupt("holds another job");
  JobRecord job;
  job.job_id = JobId(info.job_id());
  job.argv.assign(info.argv().begin(), info.argv().end());
  job.node_id = info.node_id();
  job.worker_id = info.worker_id();
  std::optional<JobState> state = JobStateFromProto(info.state());
  if (!state.has_value()) return corrupt("has no job state");
  job.state = *state;
  job.exit_reason = info.exit_reason();
  job.start_time_ms = info.start_time_ms();
  job.end_time_ms = info.end_time_ms();
  job.failure_presumed = info.failure_presumed();
  return job;
}

}  // namespace

v1::JobState JobStateToProto(JobState state) {
  switch (state) {
    case JobState::kRunning: return v1::JOB_STATE_RUNNING;
    case JobState::kSucceeded: return v1::JOB_STATE_SUCCEEDED;
    case JobState::kFailed: return v1::JOB_STATE_FAILED;
  }
  return v1::JOB_STATE_UNSPECIFIED;
}

std::optional<JobState> JobStateFromProto(v1::JobState state) {
  switch (state) {
    case v1::JOB_STATE_RUNNING: return JobState::kRunning;
    case v1::JOB_STATE_SUCCEEDED: return JobState::kSucceeded;
    case v1::JOB_STATE_FAILED: return JobState::kFailed;
    default: return std::nullopt;
  }
}

void JobRecordToProto(const JobRecord& job, v1::JobInfo* info) {
  info->set_job_id(job.job_id.value());
  for (const std::string& arg : job.argv) info->add_argv(arg);
  info->set_node_id(job.node_id);
  info->set_worker_id(job.worker_id);
  info->set_state(JobStateToProto(job.state));
  info->set_exit_reason(job.exit_reason);
  info->set_start_time_ms(job.start_time_ms);
  info->set_end_time_ms(job.end_time_ms);
  info->set_failure_presumed(job.failure_presumed);
}

void JobTable::Persist(const JobRecord& record) {
  options_.writer->Put(kJobsTable, record.job_id.value(), Serialize(record));
}

absl::StatusOr<JobRecord> JobTable::Record(const JobReport& report) {
  if (report.job_id.empty()) return absl::InvalidArgumentError("job.job_id: is empty");
  const JobId id(report.job_id);
  const int64_t now_ms = absl::ToUnixMillis(options_.clock->Now());
  absl::MutexLock lock(&mu_);
  auto found = jobs_.find(id);
  const bool created = found == jobs_.end();
  // The record as it will be, made durable before the table changes (a write the store does
  // not take changes nothing).
  JobRecord stored = created ? JobRecord() : found->second.record;
  const bool was_running = !created && stored.state == JobState::kRunning;
  std::string real_end_event;
  if (created) {
    stored.job_id = id;
    stored.argv = report.argv;
    stored.node_id = report.node_id;
    stored.worker_id = report.worker_id;
    stored.state = report.state.value_or(JobState::kRunning);
    stored.exit_reason = report.exit_reason;
    stored.start_time_ms = report.start_time_ms != 0 ? report.start_time_ms : now_ms;
    stored.end_time_ms = report.end_time_ms;
  } else {
    // An update: fields given replace the stored ones. A job that ended stays as it ended (state,
    // exit reason, end time), except a failure the head only presumed: the job's real end, heard
    // by its recorder from the worker, replaces it.
    const bool real_end_over_presumed =
        stored.failure_presumed && report.state.has_value() && *report.state != JobState::kRunning;
    if (real_end_over_presumed) {
      real_end_event = absl::StrCat("job ", stored.job_id.value(), " ended ",
                                    ToAbsl(rpc::JobStateName(JobStateToProto(*report.state))),
                                    " after all; it had been failed as ", stored.exit_reason);
      stored.state = *report.state;
      stored.exit_reason = report.exit_reason;
      stored.end_time_ms = report.end_time_ms;  // 0: now, below
      stored.failure_presumed = false;
    }
    const bool running = stored.state == JobState::kRunning;
    if (!report.argv.empty()) stored.argv = report.argv;
    if (!report.node_id.empty()) stored.node_id = report.node_id;
    if (!report.worker_id.empty()) stored.worker_id = report.worker_id;
    if (report.start_time_ms != 0) stored.start_time_ms = report.start_time_ms;
    if (running) {
      if (report.state.has_value()) stored.state = *report.state;
      if (!report.exit_reason.empty()) stored.exit_reason = report.exit_reason;
      if (report.end_time_ms != 0) stored.end_time_ms = report.end_time_ms;
    }
  }
  const bool ended = stored.state != JobState::kRunning;
  if (ended && stored.end_time_ms == 0) stored.end_time_ms = now_ms;
  TESSERA_RETURN_IF_ERROR(
      options_.writer->Write(kJobsTable, stored.job_id.value(), Serialize(stored)));
  if (created) {
    Entry& entry = jobs_[id];
    entry.order = next_order_++;
    in_order_.emplace(entry.order, id);
    entry.record = stored;
  } else {
    found->second.record = stored;
  }
  if (!real_end_event.empty()) options_.events->Record(std::move(real_end_event), "job");
  if (created) {
    options_.events->RecordChange(
        absl::StrCat("job ", stored.job_id.value(), " started",
                     stored.node_id.empty() ? "" : absl::StrCat(" on node ", stored.node_id),
                     stored.argv.empty() ? "" : absl::StrCat(": ", stored.argv.front())),
        "job");
  }
  if (ended && (created || was_running)) {
    options_.events->RecordChange(
        absl::StrCat("job ", stored.job_id.value(), " ",
                     ToAbsl(rpc::JobStateName(JobStateToProto(stored.state))),
                     stored.exit_reason.empty() ? "" : absl::StrCat(": ", stored.exit_reason)),
        "job");
    NoteEnded(id);  // may forget it (max_ended 0): `stored` is the answer
  }
  return stored;
}

int JobTable::FailJobsOn(const std::string& node, const std::string& reason) {
  const int64_t now_ms = absl::ToUnixMillis(options_.clock->Now());
  absl::MutexLock lock(&mu_);
  std::vector<JobId> failed;
  for (auto& [job_id, entry] : jobs_) {
    JobRecord& job = entry.record;
    if (job.node_id != node || job.state != JobState::kRunning) continue;
    // Presumed: a silent node may still run the job to its end, which its recorder then reports.
    job.state = JobState::kFailed;
    job.failure_presumed = true;
    job.exit_reason = absl::StrCat("node ", node, " was declared dead: ", reason);
    job.end_time_ms = now_ms;
    Persist(job);
    failed.push_back(job_id);
  }
  // Forgetting erases from jobs_: only after the walk over it.
  for (const JobId& job_id : failed) ended_.push_back(job_id);
  ForgetOldEnded();
  return static_cast<int>(failed.size());
}

void JobTable::NoteEnded(const JobId& job_id) {
  ended_.push_back(job_id);
  ForgetOldEnded();
}

void JobTable::ForgetOldEnded() {
  while (ended_.size() > options_.max_ended) {
    const JobId job_id = std::move(ended_.front());
    ended_.pop_front();
    auto it = jobs_.find(job_id);
    if (it == jobs_.end()) continue;
    in_order_.erase(it->second.order);
    jobs_.erase(it);
    options_.writer->Delete(kJobsTable, job_id.value());
  }
}

std::vector<std::pair<int64_t, JobRecord>> JobTable::Page(int64_t after, size_t limit,
                                                          bool* more) const {
  absl::MutexLock lock(&mu_);
  std::vector<std::pair<int64_t, JobRecord>> page;
  auto it = in_order_.upper_bound(after);
  for (; it != in_order_.end() && page.size() < limit; ++it) {
    page.emplace_back(it->first, jobs_.at(it->second).record);
  }
  *more = it != in_order_.end();
  return page;
}

absl::Status JobTable::Restore() {
  TESSERA_ASSIGN_OR_RETURN(auto records, options_.writer->store()->List(kJobsTable));
  std::vector<JobRecord> jobs;
  for (const auto& [key, value] : records) {
    TESSERA_ASSIGN_OR_RETURN(JobRecord job, Parse(key, value));
    jobs.push_back(std::move(job));
  }
  // The order jobs were first recorded in: their start times.
  std::stable_sort(jobs.begin(), jobs.end(), [](const JobRecord& a, const JobRecord& b) {
    return a.start_time_ms < b.start_time_ms;
  });
  absl::MutexLock lock(&mu_);
  std::vector<std::pair<int64_t, JobId>> ended;
  for (JobRecord& job : jobs) {
    const JobId id = job.job_id;
    if (job.state != JobState::kRunning) ended.emplace_back(job.end_time_ms, id);
    const int64_t order = next_order_++;
    in_order_[order] = id;
    jobs_[id] = Entry{std::move(job), order};
  }
  std::stable_sort(ended.begin(), ended.end());
  for (auto& [end, id] : ended) ended_.push_back(std::move(id));
  ForgetOldEnded();
  return absl::OkStatus();
}

}  // namespace tessera
