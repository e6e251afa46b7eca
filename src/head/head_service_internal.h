// Helpers shared by the files that implement the head's services (head_*.cc): the gRPC error
// shapes of bad input, the request-id cache around a mutating call, and paged listings. Not for
// use outside src/head.
// Thread-safety: stateless functions; a PageFiller belongs to one call.
#pragma once

#include <google/protobuf/repeated_field.h>

#include <algorithm>
#include <cstddef>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "base/string_util.h"
#include "head/store_writer.h"
#include "rpc/request_cache.h"
#include "scheduling/cluster_view.h"
#include "tessera/v1/head.grpc.pb.h"
#include "wire/proto_convert.h"

namespace tessera::head_internal {

inline grpc::Status Invalid(const absl::Status& status) {
  return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, std::string(status.message()));
}

inline grpc::Status InvalidText(std::string message) {
  return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, std::move(message));
}

// Runs `call(response)` once per request id: a retried request gets the first answer again.
template <typename Response, typename Call>
grpc::Status RunOnce(rpc::RequestCache<std::pair<grpc::Status, Response>>& cache,
                     const std::string& request_id, Response* response, Call&& call) {
  std::pair<grpc::Status, Response> result = cache.Run(request_id, [&] {
    std::pair<grpc::Status, Response> r;
    r.first = call(&r.second);
    return r;
  });
  *response = result.second;
  return result.first;
}

// The request ids of one mutating method that a state-store refusal answered (UNAVAILABLE,
// "state store unavailable: ...; nothing was changed"), and how often: RunDurably keys the
// request-id cache by the id and that count, so a refused request tried again with its id runs
// again, while one that was answered otherwise is answered so again. Bounded: past `capacity`
// ids the oldest is forgotten. Thread-safe (one mutex).
class StoreRefusals {
 public:
  explicit StoreRefusals(size_t capacity) : capacity_(capacity == 0 ? 1 : capacity) {}

  // The cache key for `id` now.
  std::string Key(const std::string& id) const ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    auto it = counts_.find(id);
    return it == counts_.end() ? id : absl::StrCat(id, "#refused-", it->second);
  }
  // `id` was answered by a refusal.
  void Refused(const std::string& id) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    auto [it, added] = counts_.try_emplace(id, 0);
    ++it->second;
    if (!added) return;
    order_.push_back(id);
    if (order_.size() > capacity_) {
      counts_.erase(order_.front());
      order_.pop_front();
    }
  }

 private:
  const size_t capacity_;
  mutable absl::Mutex mu_;
  std::map<std::string, int> counts_ ABSL_GUARDED_BY(mu_);
  std::deque<std::string> order_ ABSL_GUARDED_BY(mu_);  // ids in counts_, oldest first
};

// RunOnce for a call the state store must take (a reservation or its removal). While the store
// is degraded it is refused at once with UNAVAILABLE, outside the cache, unless the cache has
// answered the request already; a refusal by the store is never the answer a retry of the same
// request id gets once the store is back (StoreRefusals).
template <typename Response, typename Call>
grpc::Status RunDurably(const StoreWriter& writer, StoreRefusals& refusals,
                        rpc::RequestCache<std::pair<grpc::Status, Response>>& cache,
                        const std::string& request_id, Response* response, Call&& call) {
  const std::string key = request_id.empty() ? request_id : refusals.Key(request_id);
  if (absl::Status writable = writer.Writable(); !writable.ok()) {
    if (key.empty() || !cache.Find(key).has_value()) {
      return grpc::Status(grpc::StatusCode::UNAVAILABLE, std::string(writable.message()));
    }
  }
  grpc::Status status = RunOnce(cache, key, response, std::forward<Call>(call));
  if (!request_id.empty() && status.error_code() == grpc::StatusCode::UNAVAILABLE &&
      absl::StartsWith(status.error_message(), ToAbsl(kStoreUnavailable))) {
    refusals.Refused(request_id);
  }
  return status;
}

// --- paged listings ---
// A List* call pages through a table in the order of a key (names, ids, or the order jobs were
// recorded in). A page token is "<listing>:<last key of the previous page>", so a page resumes
// after that key however the table changed meanwhile: every entry present throughout the
// listing is returned exactly once, in key order.

// One page asked of a listing.
struct PageRequest {
  size_t size = 0;    // items at most, >= 1
  std::string after;  // "" from the start, else the key the next page starts after
};

// page_size 0 (none asked) or above `max_size` is max_size; negative is InvalidArgument, and so
// is a page token not made by this `listing` ("jobs", "placement-groups", ...).
inline absl::StatusOr<PageRequest> ParsePageRequest(const v1::ListRequest& request,
                                                    std::string_view listing, size_t max_size) {
  if (request.page_size() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("page_size: ", request.page_size(), " is negative"));
  }
  PageRequest page;
  page.size = request.page_size() == 0
                  ? max_size
                  : std::min(max_size, static_cast<size_t>(request.page_size()));
  if (page.size == 0) page.size = 1;
  const std::string& token = request.page_token();
  if (token.empty()) return page;
  const std::string prefix = absl::StrCat(ToAbsl(listing), ":");
  if (!absl::StartsWith(token, prefix) || token.size() == prefix.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "page_token: ", Quote(token), " is not a page token of the ", ToAbsl(listing), " listing"));
  }
  page.after = token.substr(prefix.size());
  return page;
}

inline std::string PageToken(std::string_view listing, std::string_view last_key) {
  return absl::StrCat(ToAbsl(listing), ":", ToAbsl(last_key));
}

// Counts what one page holds: at most `max_items` items, and no item that would take it past
// `max_bytes` (an item alone always fits, so every page makes progress).
class PageFiller {
 public:
  PageFiller(size_t max_items, size_t max_bytes) : max_items_(max_items), max_bytes_(max_bytes) {}

  // Appends one item filled by `fill(Item*)`; false (and nothing appended) when the page is full.
  template <typename Item, typename Fill>
  bool Append(google::protobuf::RepeatedPtrField<Item>* out, Fill&& fill) {
    if (items_ >= max_items_) return false;
    Item* item = out->Add();
    fill(item);
    const size_t bytes = item->ByteSizeLong();
    if (items_ > 0 && bytes_ + bytes > max_bytes_) {
      out->RemoveLast();
      items_ = max_items_;  // full: nothing smaller may jump the order
      return false;
    }
    ++items_;
    bytes_ += bytes;
    return true;
  }

 private:
  size_t max_items_;
  size_t max_bytes_;
  size_t items_ = 0;
  size_t bytes_ = 0;
};

// Appends the entries of [begin, end), in order, while the page has room: fill(entry, Item*)
// describes one, key(entry) is its key as a page token carries it. Returns nullopt when every
// entry fitted, else the key the next page resumes after: the last entry appended, or "" when
// the page was full before the first (then the next page starts at `begin`).
template <typename Iter, typename Item, typename Key, typename Fill>
std::optional<std::string> AppendPage(Iter begin, Iter end, PageFiller& page,
                                      google::protobuf::RepeatedPtrField<Item>* out, Key&& key,
                                      Fill&& fill) {
  std::string last;
  for (Iter it = begin; it != end; ++it) {
    if (!page.Append(out, [&](Item* item) { fill(*it, item); })) return last;
    last = key(*it);
  }
  return std::nullopt;
}

// Every page of a paged listing called in process (`call(request, page)`: a handler of one of
// the head's services), merged: the repeated fields appended, next_page_token cleared. For the
// head's own readers of its listings (the HTTP API, the Prometheus targets file).
template <typename Response, typename Call>
grpc::Status AllPages(Call call, Response* all) {
  v1::ListRequest request;
  while (true) {
    Response page;
    grpc::Status status = call(&request, &page);
    if (!status.ok()) return status;
    const std::string next = page.next_page_token();
    all->MergeFrom(page);
    if (next.empty()) break;
    request.set_page_token(next);
  }
  all->clear_next_page_token();
  return grpc::Status::OK;
}

}  // namespace tessera::head_internal
