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

}  // namespace tessera
