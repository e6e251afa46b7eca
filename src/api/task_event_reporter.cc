#include "api/task_event_reporter.h"

#include <algorithm>
#include <cstddef>
#include <iterator>
#include <utility>

#include "google/protobuf/arena.h"
#include "rpc/auth.h"

namespace tessera::api {

TaskEventReporter::TaskEventReporter(v1::HeadJobs::Stub* head, TaskEventReporterOptions options)
    : head_(head), options_(std::move(options)) {
  thread_ = std::thread([this] {
    while (!stop_.WaitForNotificationWithTimeout(options_.interval)) Flush();
  });
}

TaskEventReporter::~TaskEventReporter() { Stop(); }

void TaskEventReporter::Add(std::vector<TaskRun>& runs) {
  {
    absl::MutexLock lock(&mu_);
    const size_t room = options_.max_pending - std::min(options_.max_pending, pending_.size());
    const size_t kept = std::min(room, runs.size());
    const auto lost = static_cast<int64_t>(runs.size() - kept);
    dropped_ += lost;
    dropped_unreported_ += lost;
    pending_.insert(pending_.end(), std::make_move_iterator(runs.begin()),
                    std::make_move_iterator(runs.begin() + static_cast<ptrdiff_t>(kept)));
  }
  runs.clear();
}

void TaskEventReporter::Flush() {
  absl::MutexLock one_flush(&flush_mu_);
  std::vector<TaskRun>& events = sending_;
  int64_t dropped = 0;
  {
    absl::MutexLock lock(&mu_);
    events.swap(pending_);  // pending_ takes the last report's buffer: it rarely grows again
    dropped = dropped_unreported_;
    dropped_unreported_ = 0;
  }
  size_t sent = 0;
  while (sent < events.size() || dropped > 0) {
    const size_t count = std::min(kMaxEventsPerReport, events.size() - sent);
    // On an arena: one report's many small strings are freed at once.
    google::protobuf::Arena arena;
    auto* request = google::protobuf::Arena::Create<v1::ReportTaskEventsRequest>(&arena);
    request->set_job_id(options_.job_id);
    request->set_dropped(dropped);
    request->mutable_events()->Reserve(static_cast<int>(count));
    for (size_t i = sent; i < sent + count; ++i) ToTaskEvent(events[i], request->add_events());
    v1::ReportTaskEventsResponse response;
    grpc::ClientContext context;
    rpc::ConfigureClientContext(&context, absl::Seconds(5));
    if (!head_->ReportTaskEvents(&context, *request, &response).ok()) {
      absl::MutexLock lock(&mu_);
      dropped_ += static_cast<int64_t>(count);
      dropped_unreported_ += static_cast<int64_t>(count) + dropped;
    }
    sent += count;
    dropped = 0;
  }
  events.clear();
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
