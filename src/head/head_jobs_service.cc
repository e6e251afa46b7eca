// HeadJobsService: the protocol's JobInfo converted to and from the JobTable's records (listed
// in pages in the order jobs were first recorded), the task runs drivers report (the
// TaskEventStore), and the head's event stream (the EventLog).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/string_util.h"
#include "head/head_service_internal.h"
#include "head/head_services.h"
#include "head/request_limits.h"
#include "rpc/status_conversion.h"

namespace tessera {

using head_internal::Invalid;
using head_internal::InvalidText;

namespace {

constexpr std::string_view kJobsListing = "jobs";

absl::StatusOr<JobReport> JobReportFromProto(const v1::JobInfo& info) {
  JobReport report;
  report.job_id = info.job_id();
  report.argv.assign(info.argv().begin(), info.argv().end());
  report.node_id = info.node_id();
  report.worker_id = info.worker_id();
  if (info.state() != v1::JOB_STATE_UNSPECIFIED) {
    report.state = JobStateFromProto(info.state());
    if (!report.state.has_value()) {
      return absl::InvalidArgumentError(absl::StrCat("job.state: ", static_cast<int>(info.state()),
                                                     " is not RUNNING, SUCCEEDED or FAILED"));
    }
  }
  report.exit_reason = info.exit_reason();
  report.start_time_ms = info.start_time_ms();
  report.end_time_ms = info.end_time_ms();
  return report;
}

}  // namespace

grpc::Status HeadJobsService::RecordJob(grpc::ServerContext*, const v1::RecordJobRequest* request,
                                        v1::JobInfo* response) {
  if (absl::Status limits = request_limits::Check(*request); !limits.ok()) return Invalid(limits);
  // Only the head presumes a failure: a recorder's failure_presumed is ignored.
  auto report = JobReportFromProto(request->job());
  if (!report.ok()) return Invalid(report.status());
  auto recorded = jobs_.Record(*report);
  if (!recorded.ok()) return rpc::ToGrpcStatus(recorded.status());
  JobRecordToProto(*recorded, response);
  return grpc::Status::OK;
}

grpc::Status HeadJobsService::ReportTaskEvents(grpc::ServerContext*,
                                               const v1::ReportTaskEventsRequest* request,
                                               v1::ReportTaskEventsResponse*) {
  if (absl::Status limits = request_limits::Check(*request); !limits.ok()) return Invalid(limits);
  if (request->job_id().empty()) return InvalidText("job_id: is empty");
  std::vector<v1::TaskEvent> events(request->events().begin(), request->events().end());
  task_events_.Report(request->job_id(), std::move(events), request->dropped());
  return grpc::Status::OK;
}

grpc::Status HeadJobsService::GetTaskEvents(grpc::ServerContext*,
                                            const v1::GetTaskEventsRequest* request,
                                            v1::GetTaskEventsResponse* response) {
  if (absl::Status limits = request_limits::Check(*request); !limits.ok()) return Invalid(limits);
  constexpr int kMaxEvents = 10000;
  const int limit =
      request->limit() <= 0 || request->limit() > kMaxEvents ? kMaxEvents : request->limit();
  TaskEventPage page = task_events_.Get(request->job_id(), request->after(), limit);
  if (page.job_id.empty()) {
    return grpc::Status(
        grpc::StatusCode::NOT_FOUND,
        request->job_id().empty()
            ? "no job has reported task runs to this head"
            : absl::StrCat("no task runs of job ", request->job_id(), " are known to this head"));
  }
  response->set_job_id(page.job_id);
  for (v1::TaskEvent& event : page.events) *response->add_events() = std::move(event);
  response->set_next(page.next);
  response->set_more(page.more);
  response->set_dropped(page.dropped);
  return grpc::Status::OK;
}

grpc::Status HeadJobsService::ListJobs(grpc::ServerContext*, const v1::ListRequest* request,
                                       v1::ListJobsResponse* response) {
  if (absl::Status limits = request_limits::Check(*request); !limits.ok()) return Invalid(limits);
  auto page = head_internal::ParsePageRequest(*request, kJobsListing, options_.max_page_size);
  if (!page.ok()) return Invalid(page.status());
  int64_t after = 0;
  if (!page->after.empty() && (!absl::SimpleAtoi(page->after, &after) || after < 0)) {
    return InvalidText(absl::StrCat("page_token: ", Quote(request->page_token()),
                                    " is not a page token of the ", ToAbsl(kJobsListing),
                                    " listing"));
  }
  bool more = false;
  std::vector<std::pair<int64_t, JobRecord>> jobs = jobs_.Page(after, page->size, &more);
  head_internal::PageFiller filler(page->size, options_.max_page_bytes);
  std::optional<std::string> resume = head_internal::AppendPage(
      jobs.begin(), jobs.end(), filler, response->mutable_jobs(),
      [](const auto& entry) { return absl::StrCat(entry.first); },
      [](const auto& entry, v1::JobInfo* out) { JobRecordToProto(entry.second, out); });
  // The table had more than this page asked for: the next page starts after the last one here.
  if (!resume.has_value() && more && !jobs.empty()) resume = absl::StrCat(jobs.back().first);
  if (resume.has_value()) {
    response->set_next_page_token(head_internal::PageToken(kJobsListing, *resume));
  }
  return grpc::Status::OK;
}

grpc::Status HeadJobsService::ListEvents(grpc::ServerContext*, const v1::ListEventsRequest* request,
                                         v1::ListEventsResponse* response) {
  constexpr int kMaxEvents = 1000;
  const int limit =
      request->limit() <= 0 || request->limit() > kMaxEvents ? kMaxEvents : request->limit();
  int64_t next = request->after();
  for (const HeadEvent& event : events_.Since(request->after(), limit, &next)) {
    v1::HeadEventInfo* info = response->add_events();
    info->set_seq(event.seq);
    info->set_time_ms(absl::ToUnixMillis(event.time));
    info->set_kind(event.kind);
    info->set_message(event.message);
    info->set_notice(event.notice);
  }
  response->set_next(next);
  return grpc::Status::OK;
}

}  // namespace tessera
