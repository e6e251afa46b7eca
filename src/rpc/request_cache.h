// RequestCache: the response of each recent request id, so a retried mutating call (same
// request_id) is answered with the first response and never applied twice. A repeat that arrives
// while the first call is still running waits for it rather than running again. Bounded: the
// least recently used finished entries are forgotten past `capacity`.
#pragma once

#include <cstddef>
#include <list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/synchronization/mutex.h"

namespace tessera::rpc {

// Thread-safe (one mutex); `compute` runs outside it.
template <typename Response>
class RequestCache {
 public:
  explicit RequestCache(size_t capacity = 4096) : capacity_(capacity == 0 ? 1 : capacity) {}

  // The stored response for `id`; else runs `compute`, stores and returns its response. An empty
  // id is never deduplicated. Callers put the method in the id ("CreatePlacementGroup/<id>") when
  // ids of different methods could collide.
  Response Run(std::string_view id, absl::FunctionRef<Response()> compute) {
    if (id.empty()) return compute();
    std::string key(id);
    {
      absl::MutexLock lock(&mu_);
      while (true) {
        auto it = entries_.find(key);
        if (it == entries_.end()) {
          entries_[key];  // running
          break;
        }
        if (it->second.response.has_value()) {
          Touch(it->second, key);
          ++hits_;
          return *it->second.response;
        }
        // The first call with this id is still running: wait for it to finish.
        done_.Wait(&mu_);
      }
    }
    Response response = compute();
    absl::MutexLock lock(&mu_);
    Entry& entry = entries_[key];
    entry.response = response;
    lru_.push_front(key);
    entry.lru = lru_.begin();
    entry.in_lru = true;
    Evict();
    done_.SignalAll();
    return response;
  }

  std::optional<Response> Find(std::string_view id) const {
    absl::MutexLock lock(&mu_);
    auto it = entries_.find(std::string(id));
    if (it == entries_.end()) return std::nullopt;
    return it->second.response;
  }

  // Finished entries held now.
  size_t size() const {
    absl::MutexLock lock(&mu_);
    return lru_.size();
  }
  // Repeats answered from the cache so far.
  size_t hits() const {
    absl::MutexLock lock(&mu_);
    return hits_;
  }

 private:
  struct Entry {
    std::optional<Response> response;  // nullopt while the first call runs
    typename std::list<std::string>::iterator lru;
    bool in_lru = false;
  };

  void Touch(Entry& entry, const std::string& key) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!entry.in_lru) return;
    lru_.erase(entry.lru);
    lru_.push_front(key);
    entry.lru = lru_.begin();
  }

  void Evict() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    while (lru_.size() > capacity_) {
      entries_.erase(lru_.back());
      lru_.pop_back();
    }
  }

  const size_t capacity_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, Entry> entries_ ABSL_GUARDED_BY(mu_);
  std::list<std::string> lru_ ABSL_GUARDED_BY(mu_);  // finished ids, most recent first
  size_t hits_ ABSL_GUARDED_BY(mu_) = 0;
  absl::CondVar done_;  // signalled whenever a call finishes
};

}  // namespace tessera::rpc
