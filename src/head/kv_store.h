// KvStore: the head's internal key-value table, kept in the StateStore itself (table "kv"), so a
// head restarted on Redis has it at once. Writes go through the StoreWriter: while the store is
// degraded they are refused (UNAVAILABLE, nothing changed).
//
// Thread-safety: one mutex of its own, held across a put's check-then-write so it is one step.
// Cost: one or two store calls per operation; List O(matching keys).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "head/state_store.h"
#include "head/store_writer.h"

namespace tessera {

class KvStore {
 public:
  // `writer` must outlive the table.
  explicit KvStore(StoreWriter* writer) : writer_(writer), store_(writer->store()) {}

  // Whether the key was added (false: it existed; replaced only with `overwrite`).
  // InvalidArgument for an empty key; UNAVAILABLE when the store does not take the write; the
  // store's error when it cannot be read.
  absl::StatusOr<bool> Put(const std::string& key, const std::string& value, bool overwrite)
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<std::optional<std::string>> Get(const std::string& key) const;
  // Whether it was there.
  absl::StatusOr<bool> Delete(const std::string& key) ABSL_LOCKS_EXCLUDED(mu_);
  // The keys starting with `prefix`, ascending.
  absl::StatusOr<std::vector<std::string>> Keys(const std::string& prefix) const;

 private:
  StoreWriter* writer_;
  StateStore* store_;  // for reads
  absl::Mutex mu_;     // orders writes; reads go straight to the (thread-safe) store
};

}  // namespace tessera
