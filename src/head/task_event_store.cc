#include "head/task_event_store.h"

#include <algorithm>

#include "absl/strings/match.h"

namespace tessera {

std::string OutcomeClass(const std::string& outcome) {
  for (const char* word : {"ok", "error", "retried", "cancelled"}) {
    if (outcome == word || absl::StartsWith(outcome, std::string(word) + ":")) return word;
  }
  if (absl::StartsWith(outcome, "worker died")) return "worker_died";
  return "other";
}

void TaskEventStore::Report(const std::string& job_id, std::vector<v1::TaskEvent> events,
                            int64_t dropped) {
  absl::MutexLock lock(&mu_);
  auto [it, created] = jobs_.try_emplace(job_id);
  Job& job = it->second;
  if (created) {
    by_recency_.push_front(job_id);
  } else {
    by_recency_.splice(by_recency_.begin(), by_recency_, job.recency);
  }
  job.recency = by_recency_.begin();
  job.dropped += std::max<int64_t>(dropped, 0);
  for (v1::TaskEvent& event : events) {
    ++counts_[{event.kind(), OutcomeClass(event.outcome())}];
    job.events.push_back(std::move(event));
  }
  while (job.events.size() > options_.max_per_job) {
    job.events.pop_front();
    ++job.first_index;
    ++job.dropped;
  }
  while (jobs_.size() > options_.max_jobs) {
    jobs_.erase(by_recency_.back());
    by_recency_.pop_back();
  }
}

TaskEventPage TaskEventStore::Get(const std::string& job_id, int64_t after, size_t limit) const {
  absl::MutexLock lock(&mu_);
  TaskEventPage page;
  const std::string& wanted = job_id.empty() && !by_recency_.empty() ? by_recency_.front() : job_id;
  auto it = jobs_.find(wanted);
  if (it == jobs_.end()) return page;
  const Job& job = it->second;
  page.job_id = wanted;
  page.dropped = job.dropped;
  const int64_t end = job.first_index + static_cast<int64_t>(job.events.size());
  int64_t from = std::clamp<int64_t>(after, job.first_index, end);
  const int64_t to = std::min<int64_t>(end, from + static_cast<int64_t>(limit));
  for (int64_t i = from; i < to; ++i) page.events.push_back(job.events[i - job.first_index]);
  page.next = to;
  page.more = to < end;
  return page;
}

std::map<std::pair<std::string, std::string>, int64_t> TaskEventStore::Counts() const {
  absl::MutexLock lock(&mu_);
  return counts_;
}

}  // namespace tessera
