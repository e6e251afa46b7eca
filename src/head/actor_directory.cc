// ActorDirectory (actor_directory.h): records by actor id in one map, with four indexes kept in
// step by Index/Unindex — the live holder of each (namespace, name), the not-dead actors of each
// owner, the alive actors of each node, and the dead by when they died (retention). Each
// record is written to the StateStore (table "actors") as a v1::StoredActor whenever it changes;
// a write that fails is kept for TakeStoreFailures and the directory goes on from memory.
#include "head/actor_directory.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "base/string_util.h"
#include "head/actor_info_proto.h"
#include "tessera/v1/head_state.pb.h"

namespace tessera {
namespace {

std::string Describe(const ActorRecord& actor) {
  std::string text = absl::StrCat("actor ", actor.actor_id, " (class ", Quote(actor.class_name));
  if (actor.detached) absl::StrAppend(&text, ", detached");
  absl::StrAppend(&text, actor.owner.empty() ? ", no owner" : absl::StrCat(", owner ", actor.owner),
                  ")");
  return text;
}

std::string NameIn(const std::string& name, const std::string& name_space) {
  return absl::StrCat("name ", Quote(name), " in namespace ", Quote(name_space));
}

std::string Serialize(const ActorRecord& record) {
  v1::StoredActor stored;
  ActorRecordToProto(record, stored.mutable_actor());
  stored.set_changed_unix_micros(absl::ToUnixMicros(record.changed));
  return stored.SerializeAsString();
}

absl::Status Corrupt(const std::string& key, std::string_view why) {
  return absl::DataLossError(
      absl::StrCat("state store record ", ToAbsl(kActorsTable), "/", key, ": ", ToAbsl(why)));
}

absl::StatusOr<ActorRecord> Parse(const std::string& key, const std::string& value) {
  v1::StoredActor stored;
  if (!stored.ParseFromString(value)) return Corrupt(key, "not an actor record");
  absl::StatusOr<ActorRecord> record = ActorRecordFromProto(stored.actor());
  if (!record.ok()) return Corrupt(key, std::string(record.status().message()));
  if (record->actor_id != key) return Corrupt(key, "holds another actor");
  if (record->name.empty()) return Corrupt(key, "has no name");
  record->changed = absl::FromUnixMicros(stored.changed_unix_micros());
  return record;
}

}  // namespace

ActorDirectory::ActorDirectory(ActorDirectoryOptions options) : options_(std::move(options)) {}

void ActorDirectory::Index(const ActorRecord& record) {
  const ActorId id(record.actor_id);
  if (record.state == ActorState::kDead) {
    dead_.emplace(record.changed, id);
    return;
  }
  names_[{record.name_space, record.name}] = id;
  if (!record.owner.empty()) by_owner_.emplace(record.owner, id);
  if (record.state == ActorState::kAlive && !record.node_id.empty()) {
    by_node_.emplace(record.node_id, id);
  }
}

void ActorDirectory::Unindex(const ActorRecord& record) {
  const ActorId id(record.actor_id);
  if (record.state == ActorState::kDead) {
    dead_.erase({record.changed, id});
    return;
  }
  names_.erase({record.name_space, record.name});
  by_owner_.erase({record.owner, id});
  by_node_.erase({record.node_id, id});
}

void ActorDirectory::Persist(const ActorRecord& record) {
  if (absl::Status put = options_.store->Put(kActorsTable, record.actor_id, Serialize(record));
      !put.ok()) {
    store_failures_.push_back(absl::StrCat("the state store could not write ", ToAbsl(kActorsTable),
                                           "/", record.actor_id, ": ", put.message(),
                                           " (it may not survive a head restart)"));
  }
}

void ActorDirectory::Store(ActorRecord record) {
  const ActorId id(record.actor_id);
  auto it = actors_.find(id);
  if (it != actors_.end()) {
    Unindex(it->second);
    it->second = std::move(record);
  } else {
    it = actors_.emplace(id, std::move(record)).first;
  }
  Index(it->second);
  Persist(it->second);
}

ActorRecord ActorDirectory::MarkDead(const ActorRecord& actor, const std::string& cause) {
  ActorRecord dead = actor;
  dead.state = ActorState::kDead;
  dead.death_cause = cause;
  dead.address.clear();
  dead.node_id.clear();
  dead.worker_id.clear();
  dead.changed = options_.clock->Now();
  Store(dead);
  ForgetOldDead();
  return dead;
}

void ActorDirectory::ForgetOldDead() {
  while (dead_.size() > options_.max_dead) {
    const ActorId id = dead_.begin()->second;
    dead_.erase(dead_.begin());
    actors_.erase(id);
    if (absl::StatusOr<bool> deleted = options_.store->Delete(kActorsTable, id.value());
        !deleted.ok()) {
      store_failures_.push_back(absl::StrCat("the state store could not delete ",
                                             ToAbsl(kActorsTable), "/", id.value(), ": ",
                                             deleted.status().message()));
    }
  }
}

absl::StatusOr<ActorRecord> ActorDirectory::Register(const ActorRecord& actor) {
  if (actor.actor_id.empty()) return absl::InvalidArgumentError("actor_id: is empty");
  if (actor.name.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "actor ", actor.actor_id, ": name is empty (only named actors are registered)"));
  }
  if (actor.state == ActorState::kDead) {
    return absl::InvalidArgumentError(absl::StrCat(
        "actor ", actor.actor_id, ": cannot be registered as dead (report its death instead)"));
  }
  if (actor.restarts < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("actor ", actor.actor_id, ": restarts ", actor.restarts, " is negative"));
  }
  absl::MutexLock lock(&mu_);
  auto it = actors_.find(ActorId(actor.actor_id));
  if (it == actors_.end()) {
    if (actor.state != ActorState::kPending && actor.state != ActorState::kAlive) {
      return absl::InvalidArgumentError(absl::StrCat(
          "actor ", actor.actor_id, ": a new actor is registered as pending or alive"));
    }
    auto holder = names_.find({actor.name_space, actor.name});
    if (holder != names_.end()) {
      return absl::AlreadyExistsError(absl::StrCat(NameIn(actor.name, actor.name_space),
                                                   " is held by live ",
                                                   Describe(actors_.at(holder->second))));
    }
    ActorRecord record = actor;
    record.death_cause.clear();
    record.changed = options_.clock->Now();
    if (record.state != ActorState::kAlive) {
      record.address.clear();
      record.node_id.clear();
      record.worker_id.clear();
    }
    Store(record);
    return record;
  }
  const ActorRecord& known = it->second;
  if (known.state == ActorState::kDead) {
    return absl::FailedPreconditionError(
        absl::StrCat(Describe(known), " is dead (", known.death_cause, ")"));
  }
  if (known.name != actor.name || known.name_space != actor.name_space) {
    return absl::FailedPreconditionError(
        absl::StrCat(Describe(known), " is registered with ", NameIn(known.name, known.name_space),
                     "; its name cannot change to ", Quote(actor.name), " in namespace ",
                     Quote(actor.name_space)));
  }
  ActorRecord record = known;
  record.state = actor.state;
  record.restarts = actor.restarts;
  record.address = actor.state == ActorState::kAlive ? actor.address : "";
  record.node_id = actor.state == ActorState::kAlive ? actor.node_id : "";
  record.worker_id = actor.state == ActorState::kAlive ? actor.worker_id : "";
  record.changed = options_.clock->Now();
  Store(record);
  return record;
}

absl::StatusOr<ActorRecord> ActorDirectory::Died(const std::string& actor_id,
                                                 const std::string& cause) {
  absl::MutexLock lock(&mu_);
  auto it = actors_.find(ActorId(actor_id));
  if (it == actors_.end()) {
    return absl::NotFoundError(absl::StrCat("no actor ", actor_id, " is registered"));
  }
  if (it->second.state == ActorState::kDead) return it->second;
  return MarkDead(it->second, cause);
}

absl::StatusOr<ActorRecord> ActorDirectory::Get(const std::string& name,
                                                const std::string& name_space) const {
  absl::MutexLock lock(&mu_);
  auto it = names_.find({name_space, name});
  if (it == names_.end()) {
    return absl::NotFoundError(absl::StrCat("no live actor holds ", NameIn(name, name_space)));
  }
  return actors_.at(it->second);
}

std::vector<ActorRecord> ActorDirectory::List(const std::string& after, size_t limit,
                                              bool* more) const {
  absl::MutexLock lock(&mu_);
  std::vector<ActorRecord> page;
  auto it = actors_.upper_bound(ActorId(after));
  for (; it != actors_.end() && page.size() < limit; ++it) page.push_back(it->second);
  if (more != nullptr) *more = it != actors_.end();
  return page;
}

std::vector<std::string> ActorDirectory::OwnerGone(const std::string& owner,
                                                   const std::string& cause) {
  if (owner.empty()) return {};  // actors with no owner have none to lose
  absl::MutexLock lock(&mu_);
  std::vector<ActorId> ids;
  for (auto it = by_owner_.lower_bound({owner, ActorId()});
       it != by_owner_.end() && it->first == owner; ++it) {
    ids.push_back(it->second);
  }
  std::vector<std::string> names;
  for (const ActorId& id : ids) {
    const ActorRecord& actor = actors_.at(id);
    if (!actor.detached) {
      names.push_back(MarkDead(actor, cause).name);
      continue;
    }
    ActorRecord orphan = actor;
    orphan.owner.clear();
    orphan.changed = options_.clock->Now();
    Store(std::move(orphan));
  }
  return names;
}

absl::StatusOr<ActorRecord> ActorDirectory::WorkerExited(const std::string& actor_id,
                                                         const std::string& worker_id,
                                                         const std::string& cause) {
  absl::MutexLock lock(&mu_);
  auto it = actors_.find(ActorId(actor_id));
  if (it == actors_.end()) {
    return absl::NotFoundError(absl::StrCat("no actor ", actor_id, " is registered"));
  }
  const ActorRecord& actor = it->second;
  if (actor.state == ActorState::kDead || !actor.owner.empty()) return actor;
  // An earlier process of a restarted actor says nothing of the one serving now.
  if (!actor.worker_id.empty() && actor.worker_id != worker_id) return actor;
  return MarkDead(actor, cause);
}

std::vector<std::string> ActorDirectory::NodeDead(const std::string& node_id,
                                                  const std::string& cause) {
  if (node_id.empty()) return {};
  absl::MutexLock lock(&mu_);
  std::vector<ActorId> ids;
  for (auto it = by_node_.lower_bound({node_id, ActorId()});
       it != by_node_.end() && it->first == node_id; ++it) {
    ids.push_back(it->second);
  }
  std::vector<std::string> names;
  for (const ActorId& id : ids) {
    const ActorRecord& actor = actors_.at(id);
    names.push_back(actor.name);
    if (actor.owner.empty()) {
      MarkDead(actor, cause);  // a detached actor has no owner to start it again
      continue;
    }
    // Its owner starts it again (ALIVE elsewhere) or reports it dead (out of restarts); the
    // name stays its own meanwhile, as an actor being restarted keeps it. If the owner is gone
    // too, OwnerGone ends it.
    ActorRecord restarting = actor;
    restarting.state = ActorState::kRestarting;
    restarting.address.clear();
    restarting.node_id.clear();
    restarting.changed = options_.clock->Now();
    Store(std::move(restarting));
  }
  return names;
}

std::vector<std::string> ActorDirectory::LiveOwners() const {
  absl::MutexLock lock(&mu_);
  std::vector<std::string> owners;
  for (const auto& [owner, id] : by_owner_) {
    if (owners.empty() || owners.back() != owner) owners.push_back(owner);
  }
  return owners;
}

absl::Status ActorDirectory::Restore() {
  TESSERA_ASSIGN_OR_RETURN(auto entries, options_.store->List(kActorsTable));
  std::vector<ActorRecord> records;
  records.reserve(entries.size());
  for (const auto& [key, value] : entries) {
    TESSERA_ASSIGN_OR_RETURN(ActorRecord record, Parse(key, value));
    records.push_back(std::move(record));
  }
  absl::MutexLock lock(&mu_);
  for (ActorRecord& record : records) {
    const ActorId id(record.actor_id);
    auto known = actors_.find(id);
    if (known != actors_.end()) Unindex(known->second);  // a second Restore: read again
    if (record.state != ActorState::kDead) {
      auto holder = names_.find({record.name_space, record.name});
      if (holder != names_.end()) {
        return Corrupt(record.actor_id,
                       absl::StrCat(NameIn(record.name, record.name_space),
                                    " is also held by live actor ", holder->second.value()));
      }
    }
    Index(actors_.insert_or_assign(id, std::move(record)).first->second);
  }
  ForgetOldDead();
  return absl::OkStatus();
}

std::vector<std::string> ActorDirectory::TakeStoreFailures() {
  absl::MutexLock lock(&mu_);
  std::vector<std::string> failures;
  failures.swap(store_failures_);
  return failures;
}

}  // namespace tessera
