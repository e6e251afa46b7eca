#include "api/task_event_reporter.h"

#include <algorithm>
#include <utility>

#include "rpc/auth.h"

namespace tessera::api {

TaskEventReporter::TaskEventReporter(v1::Head::Stub* head, TaskEventReporterOptions options)
    : head_(head), options_(std::move(options)) {
  thread_ = std::thread([this] {
    while (!stop_.WaitForNotificationWithTimeout(options_.interval)) Flush();
  });
}

TaskEventReporter::~TaskEventReporter() { Stop(); }

void TaskEventReporter::Add(v1::TaskEvent event) {
  absl::MutexLock lock(&mu_);
  if (pending_.size() >= options_.max_pending) {
    ++dropped_;
    ++dropped_unreported_;
    return;
  }
  pending_.push_back(std::move(event));
}

void TaskEventReporter::Flush() {
  absl::MutexLock one_flush(&flush_mu_);
  std::vector<v1::TaskEvent> events;
  int64_t dropped = 0;
  {
    absl::MutexLock lock(&mu_);
    events.swap(pending_);
    dropped = dropped_unreported_;
    dropped_unreported_ = 0;
  }
  size_t sent = 0;
  while (sent < events.size() || dropped > 0) {
    const size_t count = std::min(kMaxEventsPerReport, events.size() - sent);
    v1::ReportTaskEventsRequest request;
    request.set_job_id(options_.job_id);
    request.set_dropped(dropped);
    for (size_t i = sent; i < sent + count; ++i) *request.add_events() = std::move(events[i]);
    v1::ReportTaskEventsResponse response;
    grpc::ClientContext context;
    rpc::ConfigureClientContext(&context, options_.token, absl::Seconds(5));
    if (!head_->ReportTaskEvents(&context, request, &response).ok()) {
      absl::MutexLock lock(&mu_);
      dropped_ += static_cast<int64_t>(count);
      dropped_unreported_ += static_cast<int64_t>(count) + dropped;
    }
    sent += count;
    dropped = 0;
  }
}

void TaskEventReporter::Stop() {
  if (!thread_.joinable()) return;
  stop_.Notify();
  thread_.join();
  Flush();
}

int64_t TaskEventReporter::dropped() const {
  absl::MutexLock lock(&mu_);
  return dropped_;
}

}  // namespace tessera::api
