#include "objects/object_store.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace tessera {
namespace {

std::string Mib(uint64_t bytes) {
  return absl::StrCat(bytes / (1024 * 1024), ".", (bytes % (1024 * 1024)) * 10 / (1024 * 1024),
                      " MiB");
}

}  // namespace

ObjectStore::ObjectStore(ObjectStoreOptions options)
    : options_(options), allocator_(options.capacity_bytes) {}

absl::StatusOr<ObjectLocation> ObjectStore::Create(StoreClientId client, const ObjectId& id,
                                                   uint64_t data_size, std::string metadata,
                                                   CreateObjectOptions create_options) {
  if (metadata.size() > options_.max_metadata_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("object ", id.Hex(), ": metadata of ",
                                                   metadata.size(), " bytes exceeds the limit of ",
                                                   options_.max_metadata_bytes));
  }
  absl::MutexLock lock(&mu_);
  if (ArenaAllocator::RoundUp(data_size) > allocator_.capacity()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "object ", id.Hex(), " of ", data_size, " bytes can never fit: the object store holds ",
        allocator_.capacity(), " bytes in all"));
  }
  if (entries_.contains(id)) {
    return absl::AlreadyExistsError(absl::StrCat("object ", id.Hex(), " already exists"));
  }
  std::optional<uint64_t> offset = allocator_.Allocate(data_size);
  while (!offset.has_value() && !lru_.empty()) {
    // Evict the least recently used candidate and retry; its neighbours may merge into a fit.
    auto victim = entries_.find(lru_.front());
    evictions_ += 1;
    evicted_bytes_ += victim->second.location.data_size;
    FreeLocked(victim->second);
    offset = allocator_.Allocate(data_size);
  }
  if (!offset.has_value()) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "object store full: object ", id.Hex(), " needs ", Mib(data_size), ", ",
        Mib(allocator_.free_bytes()), " free of ", Mib(allocator_.capacity()),
        " (largest free block ", Mib(allocator_.largest_free_block()),
        "); the rest is pinned, unsealed or primary copies"));
  }
  Entry& entry = entries_[id];
  entry.id = id;
  entry.location = ObjectLocation{*offset, data_size, std::move(metadata)};
  entry.creator = client;
  entry.evictable = create_options.evictable;
  clients_[client].unsealed.insert(id);
  return entry.location;
}

absl::Status ObjectStore::Seal(StoreClientId client, const ObjectId& id) {
  absl::Status sealed = MarkSealed(client, id);
  if (sealed.ok() && options_.on_sealed) options_.on_sealed(id);
  return sealed;
}

absl::Status ObjectStore::MarkSealed(StoreClientId client, const ObjectId& id) {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(id);
  if (it == entries_.end()) {
    return absl::NotFoundError(absl::StrCat("cannot seal object ", id.Hex(), ": not in the store"));
  }
  Entry& entry = it->second;
  if (entry.sealed) {
    return absl::FailedPreconditionError(absl::StrCat("object ", id.Hex(), " is already sealed"));
  }
  if (entry.creator != client) {
    return absl::PermissionDeniedError(
        absl::StrCat("object ", id.Hex(), " can only be sealed by the client that created it"));
  }
  entry.sealed = true;
  clients_[client].unsealed.erase(id);
  UpdateLruLocked(entry);
  return absl::OkStatus();
}

absl::Status ObjectStore::Abort(StoreClientId client, const ObjectId& id) {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(id);
  if (it == entries_.end()) {
    return absl::NotFoundError(absl::StrCat("cannot abort object ", id.Hex(), ": not in the store"));
  }
  if (it->second.sealed) {
    return absl::FailedPreconditionError(
        absl::StrCat("object ", id.Hex(), " is sealed; delete it instead of aborting"));
  }
  if (it->second.creator != client) {
    return absl::PermissionDeniedError(
        absl::StrCat("object ", id.Hex(), " can only be aborted by the client that created it"));
  }
  clients_[client].unsealed.erase(id);
  FreeLocked(it->second);
  return absl::OkStatus();
}

absl::StatusOr<ObjectLocation> ObjectStore::Get(StoreClientId client, const ObjectId& id) {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(id);
  if (it == entries_.end() || it->second.deleted) {
    return absl::NotFoundError(absl::StrCat("object ", id.Hex(), " is not in the store"));
  }
  Entry& entry = it->second;
  if (!entry.sealed) {
    return absl::NotFoundError(absl::StrCat("object ", id.Hex(), " is not sealed yet"));
  }
  entry.pins[client] += 1;
  entry.total_pins += 1;
  clients_[client].pinned.insert(id);
  UpdateLruLocked(entry);
  return entry.location;
}

absl::Status ObjectStore::Release(StoreClientId client, const ObjectId& id) {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(id);
  if (it == entries_.end() || !it->second.pins.contains(client)) {
    return absl::FailedPreconditionError(
        absl::StrCat("object ", id.Hex(), " is not pinned by this client"));
  }
  UnpinLocked(it->second, client, 1);
  return absl::OkStatus();
}

absl::Status ObjectStore::Delete(const ObjectId& id) {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(id);
  if (it == entries_.end() || it->second.deleted) {
    return absl::NotFoundError(absl::StrCat("cannot delete object ", id.Hex(), ": not in the store"));
  }
  Entry& entry = it->second;
  if (!entry.sealed) {
    return absl::FailedPreconditionError(
        absl::StrCat("object ", id.Hex(), " is not sealed; its creator aborts it instead"));
  }
  if (entry.total_pins == 0) {
    FreeLocked(entry);
  } else {
    entry.deleted = true;
    UpdateLruLocked(entry);
  }
  return absl::OkStatus();
}

void ObjectStore::DisconnectClient(StoreClientId client) {
  absl::MutexLock lock(&mu_);
  auto cit = clients_.find(client);
  if (cit == clients_.end()) return;
  ClientState state = std::move(cit->second);
  clients_.erase(cit);
  for (const ObjectId& id : state.unsealed) {
    auto it = entries_.find(id);
    if (it != entries_.end()) FreeLocked(it->second);
  }
  for (const ObjectId& id : state.pinned) {
    auto it = entries_.find(id);
    if (it == entries_.end()) continue;
    auto pin = it->second.pins.find(client);
    if (pin != it->second.pins.end()) UnpinLocked(it->second, client, pin->second);
  }
}

bool ObjectStore::Contains(const ObjectId& id) const {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(id);
  return it != entries_.end() && it->second.sealed && !it->second.deleted;
}

ObjectStoreStats ObjectStore::Stats() const {
  absl::MutexLock lock(&mu_);
  ObjectStoreStats stats;
  stats.capacity_bytes = allocator_.capacity();
  stats.allocated_bytes = allocator_.allocated_bytes();
  for (const auto& [id, entry] : entries_) {
    if (!entry.sealed || entry.total_pins > 0) stats.pinned_bytes += entry.location.data_size;
    if (entry.deleted) continue;
    stats.num_objects += 1;
    if (!entry.sealed) stats.num_unsealed += 1;
  }
  stats.num_evictable = lru_.size();
  stats.evictions = evictions_;
  stats.evicted_bytes = evicted_bytes_;
  return stats;
}

void ObjectStore::UnpinLocked(Entry& entry, StoreClientId client, int64_t count) {
  auto pin = entry.pins.find(client);
  pin->second -= count;
  entry.total_pins -= count;
  if (pin->second == 0) {
    entry.pins.erase(pin);
    auto cit = clients_.find(client);
    if (cit != clients_.end()) cit->second.pinned.erase(entry.id);
  }
  if (entry.total_pins == 0 && entry.deleted) {
    FreeLocked(entry);
    return;
  }
  UpdateLruLocked(entry);
}

void ObjectStore::UpdateLruLocked(Entry& entry) {
  const bool candidate = entry.sealed && entry.evictable && !entry.deleted && entry.total_pins == 0;
  if (entry.in_lru) {
    lru_.erase(entry.lru);
    entry.in_lru = false;
  }
  if (candidate) {
    // Becoming a candidate counts as a use: it goes to the most recently used end.
    entry.lru = lru_.insert(lru_.end(), entry.id);
    entry.in_lru = true;
  }
}

void ObjectStore::FreeLocked(Entry& entry) {
  if (entry.in_lru) lru_.erase(entry.lru);
  allocator_.Free(entry.location.offset);
  const ObjectId id = entry.id;  // entry dies with the erase below
  for (const auto& [client, count] : entry.pins) {
    auto cit = clients_.find(client);
    if (cit != clients_.end()) cit->second.pinned.erase(id);
  }
  entries_.erase(id);
}

}  // namespace tessera
