// StoreWriter: the one way the head's tables write to the StateStore, and the head's view of
// whether the store keeps what it is given. No write is acknowledged that is not durable, and no
// write is dropped:
//
// - Write / Erase: a write a caller is answered on (a group created or removed, a job submitted
//   or recorded, a KV put). While the store is degraded it is refused at once; otherwise it is
//   made, and a failure degrades the store. Either way the answer is UNAVAILABLE ("state store
//   unavailable: <cause>; nothing was changed") and the caller must leave its table exactly as
//   it was: callers write first and change memory only once the write is made.
// - Put / Delete: a write the head makes on its own (a node's record, a reservation's state
//   after a two-phase round or a node's death, a job's progress). Never refused: while the store
//   is degraded, or when the write fails (which degrades it), the latest value of the key (or
//   its deletion) is kept pending and written when the store is back, so a head restarted after
//   that sees the truth.
//
// Health: degraded from the first failed write or ping until a ping succeeds and every pending
// write is made (CheckHealth, which the head runs about every second). Each change is a notice
// in the event stream ("head" kind) and a line in the head's log, and the metrics follow it. A
// store that never fails (InMemoryStateStore) never degrades.
//
// Thread-safety: one mutex, held across every write so that the writes of one key reach the
// store in the order they were made (a pending value never lands over a newer one); it is taken
// under any other head lock and takes only the EventLog's (a leaf) under it. Pings run without
// it. Cost: one store call per write; CheckHealth one ping, plus one call per pending key when
// the store comes back.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "head/event_log.h"
#include "head/state_store.h"
#include "metrics/metric_registry.h"

namespace tessera {

// How every refusal's message starts ("state store unavailable: <cause>; nothing was changed").
inline constexpr std::string_view kStoreUnavailable = "state store unavailable: ";

// The state store's series on the head's /metrics (docs/observability.md):
//   tessera_head_state_store_healthy              1 while writes reach the store, 0 degraded
//   tessera_head_state_store_pending_writes       the head's own writes kept for its return
//   tessera_head_state_store_failed_writes_total  writes the store failed to make
// Null pointers: not exported.
struct StateStoreMetrics {
  metrics::Gauge* healthy = nullptr;
  metrics::Gauge* pending = nullptr;
  metrics::Counter* failed_writes = nullptr;

  // Registers the three families in `registry` (which must outlive what uses the result).
  static absl::StatusOr<StateStoreMetrics> Register(metrics::MetricRegistry& registry);
};

// What ClusterStatus.state_store reports.
struct StateStoreHealth {
  bool degraded = false;
  std::string cause;    // the failure that degraded it (the latest one while it stays so)
  size_t pending = 0;   // the head's own writes kept for the store's return
  uint64_t failed = 0;  // writes the store failed to make since the head started
};

class StoreWriter {
 public:
  // Both must outlive the writer.
  StoreWriter(StateStore* store, EventLog* events, StateStoreMetrics metrics = {});

  // --- writes a caller is answered on ---
  // OK while the store is healthy; UNAVAILABLE ("state store unavailable: <cause>; nothing was
  // changed") while it is degraded. Callers refuse a change with it before making any.
  absl::Status Writable() const ABSL_LOCKS_EXCLUDED(mu_);
  // Makes the write, or answers UNAVAILABLE as above (refused at once while degraded).
  absl::Status Write(std::string_view table, std::string_view key, std::string_view value)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Whether the key was there; UNAVAILABLE as Write.
  absl::StatusOr<bool> Erase(std::string_view table, std::string_view key) ABSL_LOCKS_EXCLUDED(mu_);

  // --- writes the head makes on its own: kept pending while the store is degraded ---
  void Put(std::string_view table, std::string_view key, std::string_view value)
      ABSL_LOCKS_EXCLUDED(mu_);
  void Delete(std::string_view table, std::string_view key) ABSL_LOCKS_EXCLUDED(mu_);

  // --- health ---
  // Pings the store: a failure degrades it; success while degraded makes the pending writes
  // (oldest key first is not promised: each key's latest value) and, once none is left, marks
  // it healthy again. Blocks for the ping (up to the store's retry budget).
  void CheckHealth() ABSL_LOCKS_EXCLUDED(mu_);
  // CheckHealth when `interval` has passed since the last one (by `now`).
  void MaybeCheckHealth(absl::Time now, absl::Duration interval) ABSL_LOCKS_EXCLUDED(mu_);
  StateStoreHealth health() const ABSL_LOCKS_EXCLUDED(mu_);

  // For reads (restore, KV gets and listings).
  StateStore* store() const { return store_; }

 private:
  using Key = std::pair<std::string, std::string>;  // table, key
  // A failed store call: counted, and the store degraded (an event the first time).
  void Failed(std::string_view what, std::string_view table, std::string_view key,
              const absl::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Degrade(std::string cause) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status Refusal() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Keeps the head's own write (nullopt: a deletion) for the store's return.
  void Keep(std::string_view table, std::string_view key, std::optional<std::string> value)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void UpdateGauges() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  StateStore* const store_;
  EventLog* const events_;
  const StateStoreMetrics metrics_;
  mutable absl::Mutex mu_;
  bool degraded_ ABSL_GUARDED_BY(mu_) = false;
  std::string cause_ ABSL_GUARDED_BY(mu_);
  uint64_t failed_ ABSL_GUARDED_BY(mu_) = 0;
  // Empty while healthy.
  std::map<Key, std::optional<std::string>> pending_ ABSL_GUARDED_BY(mu_);
  absl::Time last_check_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  bool checking_ ABSL_GUARDED_BY(mu_) = false;  // one CheckHealth at a time
};

// A StateStore whose writes are the head's own (StoreWriter::Put and Delete: they never fail,
// and are kept while the store is degraded); reads go to the writer's store. For a table kept
// by a part that writes the store itself (the actor directory). Thread-safe, as the writer.
class WriterBackedStore final : public StateStore {
 public:
  explicit WriterBackedStore(StoreWriter* writer) : writer_(writer) {}
  absl::Status Put(std::string_view table, std::string_view key, std::string_view value) override {
    writer_->Put(table, key, value);
    return absl::OkStatus();
  }
  absl::StatusOr<std::optional<std::string>> Get(std::string_view table,
                                                 std::string_view key) const override {
    return writer_->store()->Get(table, key);
  }
  // True: whether it was there is not known while the deletion may be pending.
  absl::StatusOr<bool> Delete(std::string_view table, std::string_view key) override {
    writer_->Delete(table, key);
    return true;
  }
  absl::StatusOr<std::vector<std::pair<std::string, std::string>>> List(
      std::string_view table, std::string_view prefix = "") const override {
    return writer_->store()->List(table, prefix);
  }

 private:
  StoreWriter* const writer_;
};

}  // namespace tessera
