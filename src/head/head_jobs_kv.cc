// HeadService, jobs and KV: the job table (records from `tessera run`, failed when their node
// dies) and the key-value table, both kept in the StateStore.
#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/string_util.h"
#include "head/head_service.h"
#include "head/head_service_internal.h"
#include "rpc/status_conversion.h"

namespace tessera {

using head_internal::Invalid;
using head_internal::InvalidText;

int HeadService::FailJobsOn(const std::string& node, const std::string& reason) {
  int failed_jobs = 0;
  for (auto& [job_id, job] : jobs_) {
    if (job.node_id() != node || job.state() != "RUNNING") continue;
    job.set_state("FAILED");
    job.set_exit_reason(absl::StrCat("node ", node, " died: ", reason));
    job.set_end_time_ms(absl::ToUnixMillis(clock_->Now()));
    (void)options_.store->Put(kJobsTable, job_id, job.SerializeAsString());
    ++failed_jobs;
  }
  return failed_jobs;
}

grpc::Status HeadService::RecordJob(grpc::ServerContext*, const v1::RecordJobRequest* request,
                                    v1::JobInfo* response) {
  const v1::JobInfo& job = request->job();
  if (job.job_id().empty()) return InvalidText("job.job_id: is empty");
  const std::string& state = job.state();
  if (!state.empty() && state != "RUNNING" && state != "SUCCEEDED" && state != "FAILED") {
    return InvalidText(absl::StrCat("job.state: ", Quote(state),
                                    " is not RUNNING, SUCCEEDED or FAILED"));
  }
  absl::MutexLock lock(&mu_);
  auto [it, created] = jobs_.try_emplace(job.job_id());
  v1::JobInfo& stored = it->second;
  if (created) {
    stored = job;
    if (stored.state().empty()) stored.set_state("RUNNING");
    if (stored.start_time_ms() == 0) stored.set_start_time_ms(absl::ToUnixMillis(clock_->Now()));
  } else {
    // An update: fields given replace the stored ones; a finished job stays finished.
    if (job.argv_size() > 0) *stored.mutable_argv() = job.argv();
    if (!job.node_id().empty()) stored.set_node_id(job.node_id());
    if (!job.worker_id().empty()) stored.set_worker_id(job.worker_id());
    if (!state.empty() && stored.state() == "RUNNING") stored.set_state(state);
    if (!job.exit_reason().empty()) stored.set_exit_reason(job.exit_reason());
    if (job.start_time_ms() != 0) stored.set_start_time_ms(job.start_time_ms());
    if (job.end_time_ms() != 0) stored.set_end_time_ms(job.end_time_ms());
  }
  if (stored.state() != "RUNNING" && stored.end_time_ms() == 0) {
    stored.set_end_time_ms(absl::ToUnixMillis(clock_->Now()));
  }
  (void)options_.store->Put(kJobsTable, stored.job_id(), stored.SerializeAsString());
  *response = stored;
  return grpc::Status::OK;
}

grpc::Status HeadService::ListJobs(grpc::ServerContext*, const v1::ListRequest*,
                                   v1::ListJobsResponse* response) {
  absl::MutexLock lock(&mu_);
  for (const auto& [id, job] : jobs_) *response->add_jobs() = job;
  return grpc::Status::OK;
}

grpc::Status HeadService::KvPut(grpc::ServerContext*, const v1::KvPutRequest* request,
                                v1::KvPutResponse* response) {
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
  auto value = options_.store->Get(kKvTable, request->key());
  if (!value.ok()) return rpc::ToGrpcStatus(value.status());
  response->set_found(value->has_value());
  if (value->has_value()) response->set_value(**value);
  return grpc::Status::OK;
}

grpc::Status HeadService::KvDelete(grpc::ServerContext*, const v1::KvDeleteRequest* request,
                                   v1::KvDeleteResponse* response) {
  absl::MutexLock lock(&mu_);
  auto deleted = options_.store->Delete(kKvTable, request->key());
  if (!deleted.ok()) return rpc::ToGrpcStatus(deleted.status());
  response->set_deleted(*deleted);
  return grpc::Status::OK;
}

grpc::Status HeadService::KvList(grpc::ServerContext*, const v1::KvListRequest* request,
                                 v1::KvListResponse* response) {
  auto entries = options_.store->List(kKvTable, request->prefix());
  if (!entries.ok()) return rpc::ToGrpcStatus(entries.status());
  for (const auto& [key, value] : *entries) response->add_keys(key);
  return grpc::Status::OK;
}

}  // namespace tessera
