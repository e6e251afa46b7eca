#include "head/state_store.h"

namespace tessera {

absl::Status InMemoryStateStore::Put(std::string_view table, std::string_view key,
                                     std::string_view value) {
  absl::MutexLock lock(&mu_);
  auto t = tables_.find(table);
  if (t == tables_.end()) t = tables_.emplace(std::string(table), Table()).first;
  auto entry = t->second.find(key);
  if (entry == t->second.end()) {
    t->second.emplace(std::string(key), std::string(value));
  } else {
    entry->second.assign(value.data(), value.size());
  }
  return absl::OkStatus();
}

absl::StatusOr<std::optional<std::string>> InMemoryStateStore::Get(std::string_view table,
                                                                   std::string_view key) const {
  absl::MutexLock lock(&mu_);
  auto t = tables_.find(table);
  if (t == tables_.end()) return std::optional<std::string>();
  auto entry = t->second.find(key);
  if (entry == t->second.end()) return std::optional<std::string>();
  return std::optional<std::string>(entry->second);
}

absl::StatusOr<bool> InMemoryStateStore::Delete(std::string_view table, std::string_view key) {
  absl::MutexLock lock(&mu_);
  auto t = tables_.find(table);
  if (t == tables_.end()) return false;
  auto entry = t->second.find(key);
  if (entry == t->second.end()) return false;
  t->second.erase(entry);
  return true;
}

absl::StatusOr<std::vector<std::pair<std::string, std::string>>> InMemoryStateStore::List(
    std::string_view table, std::string_view prefix) const {
  absl::MutexLock lock(&mu_);
  std::vector<std::pair<std::string, std::string>> out;
  auto t = tables_.find(table);
  if (t == tables_.end()) return out;
  for (auto it = t->second.lower_bound(prefix);
       it != t->second.end() && std::string_view(it->first).substr(0, prefix.size()) == prefix;
       ++it) {
    out.emplace_back(it->first, it->second);
  }
  return out;
}

}  // namespace tessera
