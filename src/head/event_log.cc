#include "head/event_log.h"

#include <algorithm>
#include <utility>

namespace tessera {

void EventLog::Record(std::string message, std::string kind) {
  Add(std::move(kind), std::move(message), /*notice=*/true);
}

void EventLog::RecordChange(std::string message, std::string kind) {
  Add(std::move(kind), std::move(message), /*notice=*/false);
}

void EventLog::Add(std::string kind, std::string message, bool notice) {
  absl::MutexLock lock(&mu_);
  events_.push_back(
      HeadEvent{++last_seq_, clock_->Now(), std::move(kind), std::move(message), notice});
  while (events_.size() > max_events_) events_.pop_front();
}

std::vector<std::string> EventLog::List() const {
  absl::MutexLock lock(&mu_);
  std::vector<std::string> messages;
  messages.reserve(events_.size());
  for (const HeadEvent& event : events_) {
    if (event.notice) messages.push_back(event.message);
  }
  return messages;
}

std::vector<HeadEvent> EventLog::Since(int64_t after, size_t limit, int64_t* next) const {
  absl::MutexLock lock(&mu_);
  auto first = std::upper_bound(events_.begin(), events_.end(), after,
                                [](int64_t seq, const HeadEvent& e) { return seq < e.seq; });
  std::vector<HeadEvent> out;
  for (auto it = first; it != events_.end() && out.size() < limit; ++it) out.push_back(*it);
  if (next != nullptr) *next = out.empty() ? std::min(after, last_seq_) : out.back().seq;
  return out;
}

}  // namespace tessera
