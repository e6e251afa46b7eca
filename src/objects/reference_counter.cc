#include "objects/reference_counter.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace tessera {

ReferenceCounter::ReferenceCounter(ZeroCallback on_zero) : on_zero_(std::move(on_zero)) {}

absl::Status ReferenceCounter::NotKnown(const ObjectId& id) const {
  return absl::NotFoundError(
      absl::StrCat("object ", id.Hex(), " has no references here (never added, or already freed)"));
}

absl::Status ReferenceCounter::AddOwnedObject(const ObjectId& id, OwnedObjectOptions options) {
  absl::MutexLock lock(&mu_);
  if (entries_.contains(id)) {
    return absl::AlreadyExistsError(absl::StrCat("object ", id.Hex(), " is already counted"));
  }
  for (const ObjectId& inner : options.contained) {
    if (!entries_.contains(inner)) return NotKnown(inner);
  }
  for (const ObjectId& inner : options.contained) entries_.find(inner)->second.contained += 1;
  Entry& entry = entries_[id];
  entry.owned = true;
  entry.local = 1;
  entry.inner = std::move(options.contained);
  return absl::OkStatus();
}

absl::Status ReferenceCounter::AddBorrowedObject(const ObjectId& id, const OwnerAddress& owner) {
  absl::MutexLock lock(&mu_);
  auto [it, inserted] = entries_.try_emplace(id);
  if (inserted) it->second.owner = owner;
  it->second.local += 1;
  return absl::OkStatus();
}

absl::Status ReferenceCounter::AddContainedReferences(const ObjectId& outer,
                                                      absl::Span<const ObjectId> inner) {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(outer);
  if (it == entries_.end()) return NotKnown(outer);
  for (const ObjectId& id : inner) {
    if (id == outer) {
      return absl::InvalidArgumentError(
          absl::StrCat("object ", id.Hex(), " cannot contain a reference to itself"));
    }
    if (!entries_.contains(id)) return NotKnown(id);
  }
  for (const ObjectId& id : inner) entries_.find(id)->second.contained += 1;
  it->second.inner.insert(it->second.inner.end(), inner.begin(), inner.end());
  return absl::OkStatus();
}

absl::Status ReferenceCounter::AddLocalReference(const ObjectId& id) {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(id);
  if (it == entries_.end()) return NotKnown(id);
  it->second.local += 1;
  return absl::OkStatus();
}

absl::Status ReferenceCounter::RemoveLocalReference(const ObjectId& id) {
  Freed freed;
  {
    absl::MutexLock lock(&mu_);
    auto it = entries_.find(id);
    if (it == entries_.end()) return NotKnown(id);
    if (it->second.local == 0) {
      return absl::FailedPreconditionError(
          absl::StrCat("object ", id.Hex(), " has no local reference to remove"));
    }
    it->second.local -= 1;
    MaybeFreeLocked(id, freed);
  }
  Notify(freed);
  return absl::OkStatus();
}

absl::Status ReferenceCounter::AddSubmittedTaskReferences(absl::Span<const ObjectId> ids) {
  absl::MutexLock lock(&mu_);
  for (const ObjectId& id : ids) {
    if (!entries_.contains(id)) return NotKnown(id);
  }
  for (const ObjectId& id : ids) entries_.find(id)->second.submitted += 1;
  return absl::OkStatus();
}

absl::Status ReferenceCounter::RemoveSubmittedTaskReferences(absl::Span<const ObjectId> ids) {
  Freed freed;
  {
    absl::MutexLock lock(&mu_);
    // Check the whole list first (an id may repeat) so a bad list changes nothing.
    absl::flat_hash_map<ObjectId, int64_t> wanted;
    for (const ObjectId& id : ids) wanted[id] += 1;
    for (const auto& [id, n] : wanted) {
      auto it = entries_.find(id);
      if (it == entries_.end()) return NotKnown(id);
      if (it->second.submitted < n) {
        return absl::FailedPreconditionError(absl::StrCat(
            "object ", id.Hex(), " has ", it->second.submitted, " submitted-task references, ",
            n, " to remove"));
      }
    }
    for (const auto& [id, n] : wanted) entries_.find(id)->second.submitted -= n;
    for (const auto& [id, n] : wanted) MaybeFreeLocked(id, freed);
  }
  Notify(freed);
  return absl::OkStatus();
}

absl::Status ReferenceCounter::AddBorrower(const ObjectId& id, const BorrowerId& borrower) {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(id);
  if (it == entries_.end()) return NotKnown(id);
  it->second.borrowers.insert(borrower);
  return absl::OkStatus();
}

absl::Status ReferenceCounter::RemoveBorrower(const ObjectId& id, const BorrowerId& borrower) {
  Freed freed;
  {
    absl::MutexLock lock(&mu_);
    auto it = entries_.find(id);
    if (it == entries_.end()) return NotKnown(id);
    if (it->second.borrowers.erase(borrower) == 0) {
      return absl::FailedPreconditionError(absl::StrCat("object ", id.Hex(), " is not borrowed by ",
                                                        borrower.value()));
    }
    MaybeFreeLocked(id, freed);
  }
  Notify(freed);
  return absl::OkStatus();
}

void ReferenceCounter::RemoveBorrowerEverywhere(const BorrowerId& borrower) {
  Freed freed;
  {
    absl::MutexLock lock(&mu_);
    std::vector<ObjectId> touched;
    for (auto& [id, entry] : entries_) {
      if (entry.borrowers.erase(borrower) > 0) touched.push_back(id);
    }
    for (const ObjectId& id : touched) MaybeFreeLocked(id, freed);
  }
  Notify(freed);
}

bool ReferenceCounter::Has(const ObjectId& id) const {
  absl::MutexLock lock(&mu_);
  return entries_.contains(id);
}

absl::StatusOr<ReferenceCounts> ReferenceCounter::Counts(const ObjectId& id) const {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(id);
  if (it == entries_.end()) return NotKnown(id);
  const Entry& e = it->second;
  return ReferenceCounts{e.owned, e.local, e.submitted, static_cast<int64_t>(e.borrowers.size()),
                         e.contained};
}

size_t ReferenceCounter::size() const {
  absl::MutexLock lock(&mu_);
  return entries_.size();
}

void ReferenceCounter::MaybeFreeLocked(const ObjectId& first, Freed& freed) {
  // Iterative: freeing an outer object may free its inner ones, and so on down.
  std::vector<ObjectId> pending = {first};
  while (!pending.empty()) {
    const ObjectId id = pending.back();
    pending.pop_back();
    auto it = entries_.find(id);
    if (it == entries_.end()) continue;
    const Entry& e = it->second;
    if (e.local > 0 || e.submitted > 0 || e.contained > 0 || !e.borrowers.empty()) continue;
    freed.push_back(ZeroReferences{id, e.owned, e.owner});
    std::vector<ObjectId> inner = std::move(it->second.inner);
    entries_.erase(it);
    for (const ObjectId& in : inner) {
      auto child = entries_.find(in);
      if (child == entries_.end()) continue;  // cannot happen: contained keeps it alive
      child->second.contained -= 1;
      pending.push_back(in);
    }
  }
}

void ReferenceCounter::Notify(const Freed& freed) {
  for (const ZeroReferences& z : freed) on_zero_(z);
}

}  // namespace tessera
