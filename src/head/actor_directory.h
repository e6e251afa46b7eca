// ActorDirectory: the head's table of named actors — which live actor holds a name in a
// namespace, where its process serves calls, which driver owns it — kept in the StateStore
// (table "actors", keyed by actor id) so a head restarted on Redis still knows them. The gRPC
// front (head_actors.cc) converts to and from v1::ActorInfo; the directory holds C++ records.
//
// Lifetimes (what Ray users rely on): a name is held by one live actor per namespace and is free
// again the moment that actor is dead; an actor that is not detached dies with its owner driver
// (OwnerGone), while a detached one outlives it with no owner (nobody restarts it from then on:
// its worker's exit, told by its node agent, ends it: WorkerExited); an actor on a node declared
// dead is RESTARTING, its name kept, until its owner starts it again or reports it dead (one
// with no owner is dead at once: NodeDead). Dead records are kept for listing, the newest
// max_dead of them.
//
// Thread-safety: one mutex of its own; never calls out while holding it except to the
// StateStore. Cost: Register/Died/Get O(log n); OwnerGone/NodeDead O(actors of that owner/node);
// List O(page).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/clock.h"
#include "head/state_store.h"
#include "vocabulary/ids.h"

namespace tessera {

inline constexpr std::string_view kActorsTable = "actors";

enum class ActorState { kPending, kAlive, kRestarting, kDead };

struct ActorRecord {
  // The protocol's text (ActorInfo.actor_id), which the gRPC front reads and writes; the
  // directory keys its tables by it as an ActorId.
  std::string actor_id;
  std::string name;  // never empty in the directory
  std::string name_space;
  std::string class_name;
  std::string owner;  // the driver that owns it; "" for a detached actor whose creator has gone
  bool detached = false;
  ActorState state = ActorState::kPending;
  std::string address;    // while alive
  std::string node_id;    // while alive
  std::string worker_id;  // while alive: the node agent's id of its process
  int restarts = 0;
  bool calls_in_order = false;  // runs one call at a time (ActorInfo.calls_in_order)
  std::string handle_metadata;  // ActorInfo.handle_metadata, as registered
  std::string death_cause;      // when dead
  absl::Time changed;           // when the head last changed it (orders the dead for retention)
};

struct ActorDirectoryOptions {
  StateStore* store = nullptr;  // required; must outlive the directory
  Clock* clock = nullptr;       // required
  size_t max_dead = 1000;       // dead records kept for listing
};

class ActorDirectory {
 public:
  explicit ActorDirectory(ActorDirectoryOptions options);

  // Creates the record of a new actor (InvalidArgument for an empty actor id or name, or a
  // state other than pending/alive; AlreadyExists naming the live actor that holds the name in
  // its namespace), or updates the one with that actor id: state, address, node and restarts
  // (owner, name and class never change; FailedPrecondition for a dead actor or a change of
  // name). Returns the record as stored.
  absl::StatusOr<ActorRecord> Register(const ActorRecord& actor) ABSL_LOCKS_EXCLUDED(mu_);
  // Marks the actor dead with `cause` and frees its name; NotFound for an unknown id. Dying
  // again keeps the first cause.
  absl::StatusOr<ActorRecord> Died(const std::string& actor_id, const std::string& cause)
      ABSL_LOCKS_EXCLUDED(mu_);
  // The live (not dead) actor holding `name` in `name_space`; NotFound otherwise.
  absl::StatusOr<ActorRecord> Get(const std::string& name, const std::string& name_space) const
      ABSL_LOCKS_EXCLUDED(mu_);
  // Up to `limit` records with actor id > `after`, by actor id; *more says whether others follow.
  std::vector<ActorRecord> List(const std::string& after, size_t limit, bool* more) const
      ABSL_LOCKS_EXCLUDED(mu_);

  // The driver `owner` exited or fell silent: its actors that are not dead die with `cause`, but
  // its detached ones live on with no owner. Returns the names of those that died.
  std::vector<std::string> OwnerGone(const std::string& owner, const std::string& cause)
      ABSL_LOCKS_EXCLUDED(mu_);
  // The node was declared dead: every actor alive there is restarting (its owner's to restart or
  // end), or dead with `cause` when detached. Returns their names.
  std::vector<std::string> NodeDead(const std::string& node_id, const std::string& cause)
      ABSL_LOCKS_EXCLUDED(mu_);

  // The node agent says worker `worker_id`, which hosted actor `actor_id`, exited with `cause`:
  // when the actor has no owner (a detached actor whose creator has gone) and that worker is its
  // process, the actor is dead with `cause`; otherwise nothing changes (its owner restarts it or
  // reports it). Returns the record; NotFound for an unknown id.
  absl::StatusOr<ActorRecord> WorkerExited(const std::string& actor_id,
                                           const std::string& worker_id, const std::string& cause)
      ABSL_LOCKS_EXCLUDED(mu_);

  // The drivers that own actors not dead, each once (after Restore, the head gives each a full
  // driver timeout to call again, as it does the owners of reservations).
  std::vector<std::string> LiveOwners() const ABSL_LOCKS_EXCLUDED(mu_);

  // Reads back what a previous head stored. Call once, before serving. DataLoss naming the key
  // when a record cannot be read; the store's error when the table cannot be listed.
  absl::Status Restore() ABSL_LOCKS_EXCLUDED(mu_);

  // Writes that failed since the last call, as one-line descriptions (the head reports them as
  // events); the directory's own state stays as it was changed.
  std::vector<std::string> TakeStoreFailures() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  ActorDirectoryOptions options_;
  mutable absl::Mutex mu_;
  std::map<ActorId, ActorRecord> actors_ ABSL_GUARDED_BY(mu_);  // by actor id
  // (namespace, name) -> actor id of the live holder.
  std::map<std::pair<std::string, std::string>, ActorId> names_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> store_failures_ ABSL_GUARDED_BY(mu_);
  // Indexes of actors_ for OwnerGone, NodeDead and retention: (owner, actor id) of the actors
  // not dead that have an owner; (node id, actor id) of the alive; (changed, actor id) of the dead.
  std::set<std::pair<std::string, ActorId>> by_owner_ ABSL_GUARDED_BY(mu_);
  std::set<std::pair<std::string, ActorId>> by_node_ ABSL_GUARDED_BY(mu_);
  std::set<std::pair<absl::Time, ActorId>> dead_ ABSL_GUARDED_BY(mu_);

  // Every change of a record goes through Store (replace or add, re-index, write to the
  // store); Index/Unindex keep names_ and the sets above in step with one record.
  void Store(ActorRecord record) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Index(const ActorRecord& record) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Unindex(const ActorRecord& record) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Persist(const ActorRecord& record) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Stores a dead copy of `actor` (cause, now), forgets the oldest dead beyond max_dead and
  // returns the copy.
  ActorRecord MarkDead(const ActorRecord& actor, const std::string& cause)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ForgetOldDead() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
};

}  // namespace tessera
