// FailingStateStore (tests only): an in-memory StateStore that is down on demand, as a Redis
// server that was killed: while `fail` is set, writes, deletes and pings fail UNAVAILABLE with a
// message like the Redis store's (reads still answer).
#pragma once

#include <atomic>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "head/state_store.h"

namespace tessera {

class FailingStateStore : public InMemoryStateStore {
 public:
  absl::Status Put(std::string_view table, std::string_view key, std::string_view value) override {
    if (fail) return absl::UnavailableError("redis at unix:/x: HSET: connection refused");
    return InMemoryStateStore::Put(table, key, value);
  }
  absl::StatusOr<bool> Delete(std::string_view table, std::string_view key) override {
    if (fail) return absl::UnavailableError("redis at unix:/x: HDEL: connection refused");
    return InMemoryStateStore::Delete(table, key);
  }
  absl::Status Ping() const override {
    if (fail) return absl::UnavailableError("redis at unix:/x: PING: connection refused");
    return absl::OkStatus();
  }
  std::atomic<bool> fail = false;
};

}  // namespace tessera
