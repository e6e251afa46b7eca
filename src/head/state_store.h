// StateStore: where the head keeps its tables (nodes, placement groups, slice groups, jobs, KV):
// table + key -> bytes. InMemoryStateStore is the default and is lost with the process;
// RedisStateStore (redis_state_store.h) keeps them in Redis, so a head restart loses nothing
// (each manager reads its own table back: HeadService::Restore).
#pragma once

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

namespace tessera {

// Table names the head uses.
inline constexpr std::string_view kNodesTable = "nodes";
inline constexpr std::string_view kPlacementGroupsTable = "placement_groups";
inline constexpr std::string_view kSliceGroupsTable = "slice_groups";
inline constexpr std::string_view kJobsTable = "jobs";
inline constexpr std::string_view kKvTable = "kv";

// Implementations are thread-safe.
class StateStore {
 public:
  virtual ~StateStore() = default;
  // Creates or replaces.
  virtual absl::Status Put(std::string_view table, std::string_view key,
                           std::string_view value) = 0;
  // nullopt when absent.
  virtual absl::StatusOr<std::optional<std::string>> Get(std::string_view table,
                                                         std::string_view key) const = 0;
  // Whether the key was there.
  virtual absl::StatusOr<bool> Delete(std::string_view table, std::string_view key) = 0;
  // The entries of `table` whose key starts with `prefix`, ascending by key.
  virtual absl::StatusOr<std::vector<std::pair<std::string, std::string>>> List(
      std::string_view table, std::string_view prefix = "") const = 0;
  // Whether the store answers now (the head's health check, StoreWriter::CheckHealth); a store
  // that cannot fail answers OK.
  virtual absl::Status Ping() const { return absl::OkStatus(); }
};

// Thread-safe (one mutex). Never fails.
class InMemoryStateStore : public StateStore {
 public:
  absl::Status Put(std::string_view table, std::string_view key, std::string_view value) override;
  absl::StatusOr<std::optional<std::string>> Get(std::string_view table,
                                                 std::string_view key) const override;
  absl::StatusOr<bool> Delete(std::string_view table, std::string_view key) override;
  absl::StatusOr<std::vector<std::pair<std::string, std::string>>> List(
      std::string_view table, std::string_view prefix = "") const override;

 private:
  using Table = std::map<std::string, std::string, std::less<>>;
  mutable absl::Mutex mu_;
  std::map<std::string, Table, std::less<>> tables_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tessera
