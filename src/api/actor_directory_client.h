// ActorDirectoryClient: a driver's side of the head's actor directory (the RegisterActor,
// ActorDied and GetActor RPCs). Creating a named actor registers it at once, so a name another
// live actor holds fails the create; the changes of its process that follow (alive at an
// address, restarting, dead) are queued and sent in the order they happened on a thread of
// its own, so the submitter and the leases that report them never wait on the head. Kill waits
// for the queue (Flush), so the name is free when it returns. Sends are best effort: a call that
// still fails after retries is dropped, and one the head refuses because it already holds the
// actor dead (its node or owner died first) is as good as done.
//
// Threading: thread-safe; one thread of its own from construction until Stop. Cost: one RPC per
// change, retried on UNAVAILABLE for a few seconds (a head restarting).
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "rpc/retry.h"
#include "tessera/v1/head.grpc.pb.h"

namespace tessera::api {

class ActorDirectoryClient {
 public:
  // `head` must outlive this object.
  explicit ActorDirectoryClient(v1::HeadActors::Stub* head);
  ~ActorDirectoryClient();  // Stop()
  ActorDirectoryClient(const ActorDirectoryClient&) = delete;
  ActorDirectoryClient& operator=(const ActorDirectoryClient&) = delete;

  // Registers a new actor now (state PENDING or ALIVE): the head's answer, e.g. AlreadyExists
  // naming the live actor that holds the name. A retry that finds its own first attempt holding
  // the name succeeds.
  absl::StatusOr<v1::ActorInfo> Create(const v1::ActorInfo& actor);
  // The live actor holding `name` in `name_space` (NotFound when none).
  absl::StatusOr<v1::ActorInfo> Get(const std::string& name, const std::string& name_space);

  // Queued, sent in order: a registered actor's new state, address, node and restarts; its death.
  void Update(v1::ActorInfo actor);
  void Died(std::string actor_id, std::string cause);
  // Returns once everything queued before the call has been sent (or given up on).
  void Flush();
  // Sends what is queued, then ends the thread. Idempotent.
  void Stop();

 private:
  struct Change {
    bool died = false;
    v1::RegisterActorRequest update;
    v1::ActorDiedRequest death;
  };
  void Enqueue(Change change);
  void Send(const Change& change) const;
  void Run();

  v1::HeadActors::Stub* const head_;
  const rpc::RetryOptions retry_;  // the token, 2 s attempts within 5 s
  absl::Mutex mu_;
  std::deque<Change> queue_ ABSL_GUARDED_BY(mu_);
  uint64_t queued_ ABSL_GUARDED_BY(mu_) = 0;  // changes ever queued
  uint64_t sent_ ABSL_GUARDED_BY(mu_) = 0;    // of those, sent or given up on
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace tessera::api
