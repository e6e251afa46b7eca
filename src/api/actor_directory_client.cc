// ActorDirectoryClient (actor_directory_client.h): synchronous Create/Get, and one sender thread
// draining a FIFO of changes; Flush waits for the count sent to reach the count queued.
#include "api/actor_directory_client.h"

#include <cstdio>
#include <utility>

#include "rpc/retry.h"

namespace tessera::api {
namespace {

rpc::RetryOptions Retries() {
  rpc::RetryOptions options;
  options.attempt_timeout = absl::Seconds(2);
  options.total_budget = absl::Seconds(5);
  return options;
}

}  // namespace

ActorDirectoryClient::ActorDirectoryClient(v1::HeadActors::Stub* head)
    : head_(head), retry_(Retries()) {
  thread_ = std::thread([this] { Run(); });
}

ActorDirectoryClient::~ActorDirectoryClient() { Stop(); }

absl::StatusOr<v1::ActorInfo> ActorDirectoryClient::Create(const v1::ActorInfo& actor) {
  v1::RegisterActorRequest request;
  *request.mutable_actor() = actor;
  v1::ActorInfo response;
  absl::Status created =
      rpc::RetryUnary(retry_, &v1::HeadActors::Stub::RegisterActor, head_, request, &response);
  if (absl::IsAlreadyExists(created)) {
    // An attempt that timed out may have registered it: then the holder is this very actor.
    auto holder = Get(actor.name(), actor.namespace_());
    if (holder.ok() && holder->actor_id() == actor.actor_id()) return *holder;
  }
  if (!created.ok()) return created;
  return response;
}

absl::StatusOr<v1::ActorInfo> ActorDirectoryClient::Get(const std::string& name,
                                                        const std::string& name_space) {
  v1::GetActorRequest request;
  request.set_name(name);
  request.set_namespace_(name_space);
  v1::ActorInfo response;
  absl::Status got =
      rpc::RetryUnary(retry_, &v1::HeadActors::Stub::GetActor, head_, request, &response);
  if (!got.ok()) return got;
  return response;
}

void ActorDirectoryClient::Update(v1::ActorInfo actor) {
  Change change;
  *change.update.mutable_actor() = std::move(actor);
  Enqueue(std::move(change));
}

void ActorDirectoryClient::Died(std::string actor_id, std::string cause) {
  Change change;
  change.died = true;
  change.death.set_actor_id(std::move(actor_id));
  change.death.set_death_cause(std::move(cause));
  Enqueue(std::move(change));
}

void ActorDirectoryClient::Enqueue(Change change) {
  absl::MutexLock lock(&mu_);
  if (stopping_) return;
  queue_.push_back(std::move(change));
  ++queued_;
}

void ActorDirectoryClient::Flush() {
  absl::MutexLock lock(&mu_);
  const uint64_t target = queued_;
  auto done = [&]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return sent_ >= target; };
  mu_.Await(absl::Condition(&done));
}

void ActorDirectoryClient::Send(const Change& change) const {
  v1::ActorInfo response;
  absl::Status sent = change.died ? rpc::RetryUnary(retry_, &v1::HeadActors::Stub::ActorDied, head_,
                                                    change.death, &response)
                                  : rpc::RetryUnary(retry_, &v1::HeadActors::Stub::RegisterActor,
                                                    head_, change.update, &response);
  // Dead at the head already (its node or owner died first): nothing left to tell.
  if (sent.ok() || absl::IsFailedPrecondition(sent)) return;
  const std::string& id = change.died ? change.death.actor_id() : change.update.actor().actor_id();
  std::fprintf(stderr, "tessera: could not tell the head about actor %s: %s\n", id.c_str(),
               std::string(sent.message()).c_str());
}

void ActorDirectoryClient::Run() {
  while (true) {
    Change change;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [&]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return stopping_ || !queue_.empty(); };
      mu_.Await(absl::Condition(&ready));
      if (queue_.empty()) return;  // stopping, and everything sent
      change = std::move(queue_.front());
      queue_.pop_front();
    }
    Send(change);
    absl::MutexLock lock(&mu_);
    ++sent_;
  }
}

void ActorDirectoryClient::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

}  // namespace tessera::api
