#include "head/driver_table.h"

namespace tessera {

void DriverTable::NoteAlive(const std::string& driver, absl::Time now) {
  if (driver.empty()) return;
  absl::MutexLock lock(&mu_);
  last_heard_[driver] = now;
}

void DriverTable::Forget(const std::string& driver) {
  absl::MutexLock lock(&mu_);
  last_heard_.erase(driver);
}

std::vector<std::string> DriverTable::TakeExpired(absl::Time now) {
  absl::MutexLock lock(&mu_);
  std::vector<std::string> expired;
  for (auto it = last_heard_.begin(); it != last_heard_.end();) {
    if (now - it->second > timeout_) {
      expired.push_back(it->first);
      it = last_heard_.erase(it);
    } else {
      ++it;
    }
  }
  return expired;
}

void DriverTable::NoteGone(const std::string& driver, absl::Time now) {
  if (driver.empty()) return;
  absl::MutexLock lock(&mu_);
  gone_.emplace_back(driver, now);
  while (gone_.size() > kMaxGone) gone_.pop_front();
}

std::vector<std::string> DriverTable::RecentlyGone(absl::Time now) {
  absl::MutexLock lock(&mu_);
  while (!gone_.empty() && now - gone_.front().second > kGoneWindow) gone_.pop_front();
  std::vector<std::string> gone;
  gone.reserve(gone_.size());
  for (auto it = gone_.rbegin(); it != gone_.rend(); ++it) gone.push_back(it->first);
  return gone;
}

}  // namespace tessera
