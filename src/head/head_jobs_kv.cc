// HeadService, jobs and KV: the job table (records from `tessera run`; failed, as presumed, when
// their node is declared dead, until the job's real end is recorded; all running jobs and the
// newest ended ones are kept, listed in pages in the order they were first recorded) and the
// key-value table, both kept in the StateStore.
#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/string_util.h"
#include "head/head_service.h"
#include "head/head_service_internal.h"
#include "head/request_limits.h"
#include "rpc/status_conversion.h"

namespace tessera {

using head_internal::Invalid;
using head_internal::InvalidText;

namespace {
constexpr std::string_view kJobsListing = "jobs";
}  // namespace

int HeadService::FailJobsOn(const std::string& node, const std::string& reason) {
  std::vector<std::string> failed;
  for (auto& [job_id, entry] : jobs_) {
    v1::JobInfo& job = entry.info;
    if (job.node_id() != node || job.state() != "RUNNING") continue;
    // Presumed: a silent node may still run the job to its end, which its recorder then reports.
    job.set_state("FAILED");
    job.set_failure_presumed(true);
    job.set_exit_reason(absl::StrCat("node ", node, " was declared dead: ", reason));
    job.set_end_time_ms(absl::ToUnixMillis(clock_->Now()));
    StorePut(kJobsTable, job_id, job.SerializeAsString());
    failed.push_back(job_id);
  }
  // Forgetting erases from jobs_: only after the walk over it.
  for (const std::string& job_id : failed) ended_jobs_.push_back(job_id);
  ForgetOldEndedJobs();
  return static_cast<int>(failed.size());
}

void HeadService::JobEnded(const std::string& job_id) {
  ended_jobs_.push_back(job_id);
  ForgetOldEndedJobs();
}

void HeadService::ForgetOldEndedJobs() {
  while (ended_jobs_.size() > options_.max_ended_jobs) {
    const std::string job_id = std::move(ended_jobs_.front());
    ended_jobs_.pop_front();
    auto it = jobs_.find(job_id);
    if (it == jobs_.end()) continue;
    jobs_in_order_.erase(it->second.order);
    jobs_.erase(it);
    StoreDelete(kJobsTable, job_id);
  }
}

grpc::Status HeadService::RecordJob(grpc::ServerContext*, const v1::RecordJobRequest* request,
                                    v1::JobInfo* response) {
  if (absl::Status limits = request_limits::Check(*request); !limits.ok()) return Invalid(limits);
  const v1::JobInfo& job = request->job();
  if (job.job_id().empty()) return InvalidText("job.job_id: is empty");
  const std::string& state = job.state();
  if (!state.empty() && state != "RUNNING" && state != "SUCCEEDED" && state != "FAILED") {
    return InvalidText(absl::StrCat("job.state: ", Quote(state),
                                    " is not RUNNING, SUCCEEDED or FAILED"));
  }
  absl::MutexLock lock(&mu_);
  auto [it, created] = jobs_.try_emplace(job.job_id());
  v1::JobInfo& stored = it->second.info;
  const bool was_running = !created && stored.state() == "RUNNING";
  if (created) {
    it->second.order = next_job_order_++;
    jobs_in_order_.emplace(it->second.order, job.job_id());
    stored = job;
    stored.clear_failure_presumed();  // only the head presumes
    if (stored.state().empty()) stored.set_state("RUNNING");
    if (stored.start_time_ms() == 0) stored.set_start_time_ms(absl::ToUnixMillis(clock_->Now()));
  } else {
    // An update: fields given replace the stored ones. A job that ended stays as it ended (state,
    // exit reason, end time), except a failure the head only presumed: the job's real end, heard
    // by its recorder from the worker, replaces it.
    const bool real_end_over_presumed =
        stored.failure_presumed() && (state == "SUCCEEDED" || state == "FAILED");
    if (real_end_over_presumed) {
      RecordEvent(absl::StrCat("job ", stored.job_id(), " ended ", state,
                               " after all; it had been failed as ", stored.exit_reason()));
      stored.set_state(state);
      stored.set_exit_reason(job.exit_reason());
      stored.set_end_time_ms(job.end_time_ms());  // 0: now, below
      stored.clear_failure_presumed();
    }
    const bool running = stored.state() == "RUNNING";
    if (job.argv_size() > 0) *stored.mutable_argv() = job.argv();
    if (!job.node_id().empty()) stored.set_node_id(job.node_id());
    if (!job.worker_id().empty()) stored.set_worker_id(job.worker_id());
    if (job.start_time_ms() != 0) stored.set_start_time_ms(job.start_time_ms());
    if (running) {
      if (!state.empty()) stored.set_state(state);
      if (!job.exit_reason().empty()) stored.set_exit_reason(job.exit_reason());
      if (job.end_time_ms() != 0) stored.set_end_time_ms(job.end_time_ms());
    }
  }
  const bool ended = stored.state() != "RUNNING";
  if (ended && stored.end_time_ms() == 0) {
    stored.set_end_time_ms(absl::ToUnixMillis(clock_->Now()));
  }
  StorePut(kJobsTable, stored.job_id(), stored.SerializeAsString());
  *response = stored;  // before retention may forget it (max_ended_jobs 0)
  if (ended && (created || was_running)) JobEnded(job.job_id());
  return grpc::Status::OK;
}

grpc::Status HeadService::ListJobs(grpc::ServerContext*, const v1::ListRequest* request,
                                   v1::ListJobsResponse* response) {
  if (absl::Status limits = request_limits::Check(*request); !limits.ok()) return Invalid(limits);
  auto page = head_internal::ParsePageRequest(*request, kJobsListing, options_.max_page_size);
  if (!page.ok()) return Invalid(page.status());
  int64_t after = 0;
  if (!page->after.empty() && (!absl::SimpleAtoi(page->after, &after) || after < 0)) {
    return InvalidText(absl::StrCat("page_token: ", Quote(request->page_token()),
                                    " is not a page token of the ", ToAbsl(kJobsListing), " listing"));
  }
  absl::MutexLock lock(&mu_);
  head_internal::PageFiller filler(page->size, options_.max_page_bytes);
  std::optional<std::string> resume = head_internal::AppendPage(
      jobs_in_order_.upper_bound(after), jobs_in_order_.end(), filler, response->mutable_jobs(),
      [](const auto& entry) { return absl::StrCat(entry.first); },
      [&](const auto& entry, v1::JobInfo* out) { *out = jobs_.at(entry.second).info; });
  if (resume.has_value()) {
    response->set_next_page_token(head_internal::PageToken(kJobsListing, *resume));
  }
  return grpc::Status::OK;
}

grpc::Status HeadService::KvPut(grpc::ServerContext*, const v1::KvPutRequest* request,
                                v1::KvPutResponse* response) {
  if (absl::Status limits = request_limits::Check(*request); !limits.ok()) return Invalid(limits);
  if (request->key().empty()) return InvalidText("key: is empty");
  // Under the head's mutex so check-then-write is one step.
  absl::MutexLock lock(&mu_);
  auto existing = options_.store->Get(kKvTable, request->key());
  if (!existing.ok()) return rpc::ToGrpcStatus(existing.status());
  bool exists = existing->has_value();
  if (exists && !request->overwrite()) {
    response->set_added(false);
    return grpc::Status::OK;
  }
  absl::Status put = options_.store->Put(kKvTable, request->key(), request->value());
  if (!put.ok()) return rpc::ToGrpcStatus(put);
  response->set_added(!exists);
  return grpc::Status::OK;
}

grpc::Status HeadService::KvGet(grpc::ServerContext*, const v1::KvGetRequest* request,
                                v1::KvGetResponse* response) {
  if (absl::Status limits = request_limits::Check(*request); !limits.ok()) return Invalid(limits);
  auto value = options_.store->Get(kKvTable, request->key());
  if (!value.ok()) return rpc::ToGrpcStatus(value.status());
  response->set_found(value->has_value());
  if (value->has_value()) response->set_value(**value);
  return grpc::Status::OK;
}

grpc::Status HeadService::KvDelete(grpc::ServerContext*, const v1::KvDeleteRequest* request,
                                   v1::KvDeleteResponse* response) {
  if (absl::Status limits = request_limits::Check(*request); !limits.ok()) return Invalid(limits);
  absl::MutexLock lock(&mu_);
  auto deleted = options_.store->Delete(kKvTable, request->key());
  if (!deleted.ok()) return rpc::ToGrpcStatus(deleted.status());
  response->set_deleted(*deleted);
  return grpc::Status::OK;
}

grpc::Status HeadService::KvList(grpc::ServerContext*, const v1::KvListRequest* request,
                                 v1::KvListResponse* response) {
  if (absl::Status limits = request_limits::Check(*request); !limits.ok()) return Invalid(limits);
  auto entries = options_.store->List(kKvTable, request->prefix());
  if (!entries.ok()) return rpc::ToGrpcStatus(entries.status());
  for (const auto& [key, value] : *entries) response->add_keys(key);
  return grpc::Status::OK;
}

}  // namespace tessera
