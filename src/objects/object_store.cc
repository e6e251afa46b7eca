#include "objects/object_store.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace tessera {
namespace {

// A size for people: "512 B", "30.0 KiB", "7.5 MiB", "1.0 GiB" (one decimal, rounded down).
std::string Mib(uint64_t bytes) {
  if (bytes < 1024) return absl::StrCat(bytes, " B");
  const char* unit = " KiB";
  uint64_t scale = 1024;
  if (bytes >= (uint64_t{1} << 30)) {
    unit = " GiB";
    scale = uint64_t{1} << 30;
  } else if (bytes >= (uint64_t{1} << 20)) {
    unit = " MiB";
    scale = uint64_t{1} << 20;
  }
  return absl::StrCat(bytes / scale, ".", (bytes % scale) * 10 / scale, unit);
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
    return absl::ResourceExhaustedError(
        absl::StrCat("object store full: object ", id.Hex(), " of ", Mib(data_size),
                     " can never fit: the object store holds ", Mib(allocator_.capacity()),
                     " in all (", Mib(allocator_.allocated_bytes()), " used)"));
  }
  if (entries_.contains(id)) {
    return absl::AlreadyExistsError(absl::StrCat("object ", id.Hex(), " already exists"));
  }
  if (!create_options.owner.empty() && dead_owners_.contains(create_options.owner)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "object ", id.Hex(), " not created: its owner ", create_options.owner, " died"));
  }
  TESSERA_ASSIGN_OR_RETURN(const uint64_t offset,
                           AllocateLocked(data_size, absl::StrCat("object ", id.Hex())));
  Entry& entry = entries_[id];
  entry.id = id;
  entry.location = ObjectLocation{offset, data_size, std::move(metadata)};
  entry.creator = client;
  entry.evictable = create_options.evictable;
  entry.owner = std::move(create_options.owner);
  entry.last_use = ++use_clock_;
  if (!entry.owner.empty()) owned_[entry.owner].insert(id);
  clients_[client].unsealed.insert(id);
  return entry.location;
}

absl::StatusOr<uint64_t> ObjectStore::AllocateLocked(uint64_t size, const std::string& what) {
  std::optional<uint64_t> offset = allocator_.Allocate(size);
  while (!offset.has_value() && !lru_.empty()) {
    // Evict the least recently used candidate and retry; its neighbours may merge into a fit.
    auto victim = entries_.find(lru_.front());
    evictions_ += 1;
    evicted_bytes_ += victim->second.location.data_size;
    FreeLocked(victim->second);
    offset = allocator_.Allocate(size);
  }
  spill_error_.clear();
  if (!offset.has_value() && !options_.spill_dir.empty() && options_.memory != nullptr) {
    // Spill only when it can make room: never every primary for a request that still fails.
    uint64_t spillable = 0;
    for (const auto& [id, entry] : entries_) {
      if (entry.sealed && !entry.evictable && !entry.deleted && !entry.spilled &&
          entry.total_pins == 0) {
        spillable += ArenaAllocator::RoundUp(entry.location.data_size);
      }
    }
    if (allocator_.free_bytes() + spillable >= ArenaAllocator::RoundUp(size)) {
      while (!offset.has_value() && SpillOneLocked()) offset = allocator_.Allocate(size);
    }
  }
  if (offset.has_value()) return *offset;
  uint64_t pinned = 0;
  for (const auto& [id, entry] : entries_) {
    if (!entry.spilled && (!entry.sealed || entry.total_pins > 0)) {
      pinned += entry.location.data_size;
    }
  }
  std::string spilling;
  if (options_.spill_dir.empty() || options_.memory == nullptr) {
    spilling = "spilling is off";
  } else if (!spill_error_.empty()) {
    spilling = absl::StrCat("spilling failed: ", spill_error_);
  } else {
    spilling = "nothing more can be spilled";
  }
  return absl::ResourceExhaustedError(absl::StrCat(
      "object store full: ", what, " needs ", Mib(size), "; capacity ", Mib(allocator_.capacity()),
      ", ", Mib(allocator_.allocated_bytes()), " used (", Mib(pinned),
      " pinned or being written), ", Mib(allocator_.free_bytes()), " free (largest free block ",
      Mib(allocator_.largest_free_block()), "); ", spilling));
}

std::string ObjectStore::SpillPath(const ObjectId& id) const {
  return absl::StrCat(options_.spill_dir, "/", id.Hex());
}

bool ObjectStore::SpillOneLocked() {
  if (options_.spill_dir.empty() || options_.memory == nullptr) return false;
  Entry* victim = nullptr;
  for (auto& [id, entry] : entries_) {
    if (!entry.sealed || entry.evictable || entry.deleted || entry.spilled ||
        entry.total_pins > 0) {
      continue;
    }
    if (victim == nullptr || entry.last_use < victim->last_use) victim = &entry;
  }
  if (victim == nullptr) return false;
  const std::string path = SpillPath(victim->id);
  unlink(path.c_str());
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) {
    spill_error_ = absl::StrCat("cannot create ", path, ": ", std::strerror(errno));
    return false;
  }
  const uint8_t* from = options_.memory + victim->location.offset;
  uint64_t left = victim->location.data_size;
  while (left > 0) {
    const ssize_t n = write(fd, from, std::min<uint64_t>(left, 1 << 30));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      spill_error_ = absl::StrCat("cannot write ", path, ": ", std::strerror(errno));
      close(fd);
      unlink(path.c_str());
      return false;
    }
    from += n;
    left -= static_cast<uint64_t>(n);
  }
  close(fd);
  allocator_.Free(victim->location.offset);
  victim->spilled = true;
  spills_ += 1;
  num_spilled_ += 1;
  spilled_bytes_ += victim->location.data_size;
  return true;
}

absl::Status ObjectStore::RestoreLocked(Entry& entry) {
  const ObjectId id = entry.id;
  const uint64_t size = entry.location.data_size;
  // Allocating may spill others (never this one: it is spilled) but does not touch `entry`.
  TESSERA_ASSIGN_OR_RETURN(
      const uint64_t offset,
      AllocateLocked(size, absl::StrCat("spilled object ", id.Hex(), " (read back)")));
  const std::string path = SpillPath(id);
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  uint8_t* to = options_.memory + offset;
  uint64_t left = size;
  std::string error;
  if (fd < 0) {
    error = absl::StrCat("cannot open ", path, ": ", std::strerror(errno));
  } else {
    while (left > 0) {
      const ssize_t n = read(fd, to, std::min<uint64_t>(left, 1 << 30));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        error = absl::StrCat("cannot read ", path, ": ",
                             n == 0 ? "file too short" : std::strerror(errno));
        break;
      }
      to += n;
      left -= static_cast<uint64_t>(n);
    }
    close(fd);
  }
  if (!error.empty()) {
    allocator_.Free(offset);
    return absl::DataLossError(absl::StrCat("spilled object ", id.Hex(), ": ", error));
  }
  unlink(path.c_str());
  Entry& restored = entries_.at(id);
  restored.location.offset = offset;
  restored.spilled = false;
  restores_ += 1;
  num_spilled_ -= 1;
  spilled_bytes_ -= size;
  return absl::OkStatus();
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
  if (!entry.owner.empty() && dead_owners_.contains(entry.owner)) {
    // Its owner died while it was being written: nobody will ever read it.
    const std::string owner = entry.owner;
    FreeLocked(entry);
    return absl::FailedPreconditionError(
        absl::StrCat("object ", id.Hex(), " dropped: its owner ", owner, " died"));
  }
  UpdateLruLocked(entry);
  return absl::OkStatus();
}

absl::Status ObjectStore::Abort(StoreClientId client, const ObjectId& id) {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(id);
  if (it == entries_.end()) {
    return absl::NotFoundError(
        absl::StrCat("cannot abort object ", id.Hex(), ": not in the store"));
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
  if (entry.spilled) TESSERA_RETURN_IF_ERROR(RestoreLocked(entry));
  entry.last_use = ++use_clock_;
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
    return absl::NotFoundError(
        absl::StrCat("cannot delete object ", id.Hex(), ": not in the store"));
  }
  Entry& entry = it->second;
  if (!entry.sealed) {
    return absl::FailedPreconditionError(
        absl::StrCat("object ", id.Hex(), " is not sealed; its creator aborts it instead"));
  }
  DeleteLocked(entry);
  return absl::OkStatus();
}

void ObjectStore::DeleteLocked(Entry& entry) {
  if (entry.total_pins == 0) {
    FreeLocked(entry);
  } else {
    entry.deleted = true;
    UpdateLruLocked(entry);
  }
}

absl::Status ObjectStore::DeclareOwner(StoreClientId client, const std::string& owner) {
  if (owner.empty()) return absl::InvalidArgumentError("an owner id must not be empty");
  absl::MutexLock lock(&mu_);
  ClientState& state = clients_[client];
  if (state.owner == owner) return absl::OkStatus();
  if (!state.owner.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("this connection already belongs to owner ", state.owner, ", not ", owner));
  }
  if (dead_owners_.contains(owner)) {
    return absl::FailedPreconditionError(absl::StrCat("owner ", owner, " died"));
  }
  state.owner = owner;
  owner_clients_[owner] += 1;
  return absl::OkStatus();
}

int64_t ObjectStore::OwnerDied(const std::string& owner) {
  absl::MutexLock lock(&mu_);
  return OwnerDiedLocked(owner);
}

int64_t ObjectStore::OwnerDiedLocked(const std::string& owner) {
  if (owner.empty()) return 0;
  if (dead_owners_.insert(owner).second) {
    dead_order_.push_back(owner);
    while (dead_order_.size() > options_.max_dead_owners) {
      dead_owners_.erase(dead_order_.front());
      dead_order_.pop_front();
    }
  }
  auto it = owned_.find(owner);
  if (it == owned_.end()) return 0;
  const std::vector<ObjectId> ids(it->second.begin(), it->second.end());
  int64_t deleted = 0;
  for (const ObjectId& id : ids) {
    auto entry = entries_.find(id);
    // Unsealed ones are dropped at their seal; deleted ones are already going.
    if (entry == entries_.end() || !entry->second.sealed || entry->second.deleted) continue;
    DeleteLocked(entry->second);
    deleted += 1;
  }
  return deleted;
}

void ObjectStore::DisconnectClient(StoreClientId client) {
  absl::MutexLock lock(&mu_);
  auto cit = clients_.find(client);
  if (cit == clients_.end()) return;
  ClientState state = std::move(cit->second);
  clients_.erase(cit);
  if (!state.owner.empty() && --owner_clients_[state.owner] == 0) {
    owner_clients_.erase(state.owner);
    OwnerDiedLocked(state.owner);  // its objects go below with the rest of its state
  }
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
    if (!entry.spilled && (!entry.sealed || entry.total_pins > 0)) {
      stats.pinned_bytes += entry.location.data_size;
    }
    if (entry.deleted) continue;
    stats.num_objects += 1;
    if (!entry.sealed) stats.num_unsealed += 1;
  }
  stats.num_evictable = lru_.size();
  stats.evictions = evictions_;
  stats.evicted_bytes = evicted_bytes_;
  stats.num_spilled = num_spilled_;
  stats.spilled_bytes = spilled_bytes_;
  stats.spills = spills_;
  stats.restores = restores_;
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
  if (entry.spilled) {
    unlink(SpillPath(entry.id).c_str());
    num_spilled_ -= 1;
    spilled_bytes_ -= entry.location.data_size;
  } else {
    allocator_.Free(entry.location.offset);
  }
  if (!entry.owner.empty()) {
    auto owned = owned_.find(entry.owner);
    if (owned != owned_.end()) {
      owned->second.erase(entry.id);
      if (owned->second.empty()) owned_.erase(owned);
    }
  }
  const ObjectId id = entry.id;  // entry dies with the erase below
  for (const auto& [client, count] : entry.pins) {
    auto cit = clients_.find(client);
    if (cit != clients_.end()) cit->second.pinned.erase(id);
  }
  entries_.erase(id);
}

}  // namespace tessera
