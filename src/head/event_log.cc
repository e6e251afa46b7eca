#include "head/event_log.h"

#include <utility>

namespace tessera {

void EventLog::Record(std::string event) {
  absl::MutexLock lock(&mu_);
  events_.push_back(std::move(event));
  while (events_.size() > max_events_) events_.pop_front();
}

std::vector<std::string> EventLog::List() const {
  absl::MutexLock lock(&mu_);
  return std::vector<std::string>(events_.begin(), events_.end());
}

}  // namespace tessera
