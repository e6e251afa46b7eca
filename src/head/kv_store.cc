#include "head/kv_store.h"

#include "base/status_macros.h"

namespace tessera {

absl::StatusOr<bool> KvStore::Put(const std::string& key, const std::string& value,
                                  bool overwrite) {
  if (key.empty()) return absl::InvalidArgumentError("key: is empty");
  absl::MutexLock lock(&mu_);
  TESSERA_ASSIGN_OR_RETURN(std::optional<std::string> existing, store_->Get(kKvTable, key));
  const bool exists = existing.has_value();
  if (exists && !overwrite) return false;
  TESSERA_RETURN_IF_ERROR(writer_->Write(kKvTable, key, value));
  return !exists;
}

absl::StatusOr<std::optional<std::string>> KvStore::Get(const std::string& key) const {
  return store_->Get(kKvTable, key);
}

absl::StatusOr<bool> KvStore::Delete(const std::string& key) {
  absl::MutexLock lock(&mu_);
  return writer_->Erase(kKvTable, key);
}

absl::StatusOr<std::vector<std::string>> KvStore::Keys(const std::string& prefix) const {
  TESSERA_ASSIGN_OR_RETURN(auto entries, store_->List(kKvTable, prefix));
  std::vector<std::string> keys;
  keys.reserve(entries.size());
  for (auto& [key, value] : entries) keys.push_back(std::move(key));
  return keys;
}

}  // namespace tessera
