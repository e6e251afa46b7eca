#include "api/object_table.h"

#include <optional>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"

namespace tessera::api {

void ObjectTable::AddPending(const ObjectId& id) {
  absl::MutexLock lock(&mu_);
  entries_[id];
}

ObjectTable::Holds ObjectTable::HoldsFor(const absl::StatusOr<std::string>& value) const {
  if (!contained_ || !value.ok()) return {};
  return contained_(*value);
}

void ObjectTable::AddValue(const ObjectId& id, std::string value) {
  Holds holds = HoldsFor(value);
  absl::MutexLock lock(&mu_);
  Entry& entry = entries_[id];
  entry.done = true;
  entry.value = std::move(value);
  entry.holds = std::move(holds);
}

bool ObjectTable::Complete(const ObjectId& id, absl::StatusOr<std::string> value) {
  std::vector<ReadyCallback> callbacks;
  absl::StatusOr<std::string> copy;
  bool on_drop = false;
  // Let go after the lock when the value is not taken (a result for an entry done or gone:
  // what it lent this process is given back).
  Holds holds = HoldsFor(value);
  {
    absl::MutexLock lock(&mu_);
    auto it = entries_.find(id);
    if (it == entries_.end()) {
      if (on_drop_ && value.ok()) on_drop = true;
    } else if (it->second.done) {
      return false;
    } else {
      it->second.done = true;
      it->second.value = std::move(value);
      it->second.holds = std::move(holds);
      callbacks.swap(it->second.callbacks);
      if (!callbacks.empty()) copy = it->second.value;
      completions_.fetch_add(1, std::memory_order_release);
      if (waiters_ > 0) changed_.SignalAll();
    }
  }
  // Nobody wants it any more: a stored result is deleted at once.
  if (on_drop) on_drop_(id, *value);
  for (ReadyCallback& callback : callbacks) callback(copy);
  return true;
}

std::optional<ObjectTable::Erased> ObjectTable::EraseIfUnreferenced(
    absl::flat_hash_map<ObjectId, Entry>::iterator it) {
  Entry& entry = it->second;
  if (entry.local > 0 || !entry.borrowers.empty()) return std::nullopt;
  Erased erased;
  erased.id = it->first;
  erased.callbacks.swap(entry.callbacks);
  erased.holds.swap(entry.holds);
  if (on_drop_ && entry.done && entry.value.ok()) erased.dropped = std::move(*entry.value);
  entries_.erase(it);
  return erased;
}

void ObjectTable::Finish(std::optional<Erased> erased) {
  if (!erased.has_value()) return;
  if (erased->dropped.has_value()) on_drop_(erased->id, *erased->dropped);
  // Someone waits on it only through a ref, so no callback can be left; answer any anyway.
  for (ReadyCallback& callback : erased->callbacks) {
    callback(absl::NotFoundError(absl::StrCat("object ", erased->id.Hex(), " was released")));
  }
  // erased->holds go last, with it: the objects its value referred to may go now too.
}

bool ObjectTable::AddLocal(const ObjectId& id) {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(id);
  if (it == entries_.end()) return false;
  ++it->second.local;
  return true;
}

void ObjectTable::Release(const ObjectId& id) {
  std::optional<Erased> erased;
  {
    absl::MutexLock lock(&mu_);
    auto it = entries_.find(id);
    if (it == entries_.end()) return;
    --it->second.local;
    erased = EraseIfUnreferenced(it);
  }
  Finish(std::move(erased));
}

bool ObjectTable::UpdateBorrows(const ObjectId& id, const std::string& borrower, int64_t delta) {
  std::optional<Erased> erased;
  {
    absl::MutexLock lock(&mu_);
    auto it = entries_.find(id);
    if (it == entries_.end()) return false;
    auto& borrowers = it->second.borrowers;
    const bool had = !borrowers.empty();
    const int64_t count = (borrowers[borrower] += delta);
    if (count <= 0) borrowers.erase(borrower);
    if (had != !borrowers.empty()) had ? --borrowed_ : ++borrowed_;
    if (delta < 0) erased = EraseIfUnreferenced(it);
  }
  Finish(std::move(erased));
  return true;
}

size_t ObjectTable::BorrowedCount() const {
  absl::MutexLock lock(&mu_);
  return borrowed_;
}

std::vector<std::string> ObjectTable::AllBorrowers() const {
  absl::flat_hash_set<std::string> all;
  absl::MutexLock lock(&mu_);
  if (borrowed_ == 0) return {};  // the common case: no walk over every entry
  for (const auto& [id, entry] : entries_) {
    for (const auto& [borrower, count] : entry.borrowers) all.insert(borrower);
  }
  return {all.begin(), all.end()};
}

void ObjectTable::DropBorrower(const std::string& borrower) {
  std::vector<Erased> erased;
  {
    absl::MutexLock lock(&mu_);
    for (auto it = entries_.begin(); it != entries_.end();) {
      auto next = std::next(it);
      if (it->second.borrowers.erase(borrower) > 0) {
        if (it->second.borrowers.empty()) --borrowed_;
        if (auto gone = EraseIfUnreferenced(it); gone.has_value()) {
          erased.push_back(*std::move(gone));
        }
      }
      it = next;
    }
  }
  for (Erased& one : erased) Finish(std::move(one));
}

std::vector<std::pair<std::string, int64_t>> ObjectTable::Borrowers(const ObjectId& id) const {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(id);
  if (it == entries_.end()) return {};
  return {it->second.borrowers.begin(), it->second.borrowers.end()};
}

bool ObjectTable::IsDone(const ObjectId& id) const {
  auto it = entries_.find(id);
  return it == entries_.end() || it->second.done;
}

void ObjectTable::SpinUntilDone(const ObjectId& id, absl::Time deadline) {
  if (deadline < absl::Now() + spin_.limit()) return;
  uint64_t seen = completions_.load(std::memory_order_acquire);
  {
    absl::MutexLock lock(&mu_);
    if (IsDone(id)) return;
  }
  spin_.Spin([&] {
    const uint64_t now = completions_.load(std::memory_order_acquire);
    if (now == seen) return false;
    seen = now;
    absl::MutexLock lock(&mu_);
    return IsDone(id);
  });
}

absl::StatusOr<std::string> ObjectTable::Get(const ObjectId& id, absl::Time deadline) {
  SpinUntilDone(id, deadline);
  absl::MutexLock lock(&mu_);
  ++waiters_;
  while (!IsDone(id)) {
    if (changed_.WaitWithDeadline(&mu_, deadline) && !IsDone(id)) {
      --waiters_;
      return absl::DeadlineExceededError(
          absl::StrCat("object ", id.Hex(), " is not ready yet (timed out)"));
    }
  }
  --waiters_;
  auto it = entries_.find(id);
  if (it == entries_.end()) {
    return absl::NotFoundError(absl::StrCat("object ", id.Hex(), " is not held by this process"));
  }
  return it->second.value;
}

bool ObjectTable::IsFailed(const ObjectId& id) const {
  auto it = entries_.find(id);
  return it != entries_.end() && it->second.done && !it->second.value.ok();
}

absl::Status ObjectTable::Failure(const ObjectId& id) const {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(id);
  if (it == entries_.end() || !it->second.done) return absl::OkStatus();
  return it->second.value.status();
}

std::vector<bool> ObjectTable::Wait(const std::vector<ObjectId>& ids, int num, absl::Time deadline,
                                    bool stop_at_failure) {
  if (ids.size() == 1 && num >= 1) SpinUntilDone(ids[0], deadline);
  absl::MutexLock lock(&mu_);
  ++waiters_;
  std::vector<bool> ready(ids.size(), false);
  while (true) {
    int count = 0;
    bool failed = false;
    for (size_t i = 0; i < ids.size(); ++i) {
      ready[i] = IsDone(ids[i]);
      count += ready[i] ? 1 : 0;
      failed = failed || (stop_at_failure && ready[i] && IsFailed(ids[i]));
    }
    if (count >= num || count == static_cast<int>(ids.size()) || failed) break;
    if (changed_.WaitWithDeadline(&mu_, deadline)) {
      for (size_t i = 0; i < ids.size(); ++i) ready[i] = IsDone(ids[i]);
      break;
    }
  }
  --waiters_;
  return ready;
}

void ObjectTable::OnReady(const ObjectId& id, ReadyCallback callback) {
  absl::StatusOr<std::string> value;
  {
    absl::MutexLock lock(&mu_);
    auto it = entries_.find(id);
    if (it == entries_.end()) {
      value =
          absl::NotFoundError(absl::StrCat("object ", id.Hex(), " is not held by this process"));
    } else if (!it->second.done) {
      it->second.callbacks.push_back(std::move(callback));
      return;
    } else {
      value = it->second.value;
    }
  }
  callback(value);
}

void ObjectTable::FailAllPending(const absl::Status& status) {
  std::vector<ObjectId> pending;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [id, entry] : entries_) {
      if (!entry.done) pending.push_back(id);
    }
  }
  for (const ObjectId& id : pending) Complete(id, status);
}

size_t ObjectTable::size() const {
  absl::MutexLock lock(&mu_);
  return entries_.size();
}

}  // namespace tessera::api
