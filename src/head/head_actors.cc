// HeadActorsService, the named actors: the five actor RPCs as a thin front on the ActorDirectory
// (actor_directory.h), which owns the records, their names and their persistence. This file only
// checks request limits, converts between v1::ActorInfo and ActorRecord, and maps the
// directory's absl::Status to gRPC. A registration that names an owner is also a sign of life
// from that driver (as a reservation's create is), so an owner that never calls
// KeepDriverAlive still times out and takes its actors with it.
// Threading: the directory and the driver table have their own locks; only RegisterActor takes
// the cluster lock (before the directory's), to check the actor's node alive.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "head/actor_info_proto.h"
#include "head/head_service_internal.h"
#include "head/head_services.h"
#include "head/request_limits.h"
#include "rpc/state_names.h"
#include "rpc/status_conversion.h"

namespace tessera {

using head_internal::Invalid;
using head_internal::InvalidText;

grpc::Status HeadActorsService::RegisterActor(grpc::ServerContext*,
                                              const v1::RegisterActorRequest* request,
                                              v1::ActorInfo* response) {
  if (absl::Status limits = request_limits::Check(*request); !limits.ok()) return Invalid(limits);
  absl::StatusOr<ActorRecord> actor = ActorRecordFromProto(request->actor());
  if (!actor.ok()) {
    return InvalidText(absl::StrCat("actor.", actor.status().message()));
  }
  absl::StatusOr<ActorRecord> stored;
  {
    // Under the cluster lock, so no node dies between the check and the record: an actor said
    // to be alive on a node the head has declared dead would stay so, as NodeDead has run.
    absl::MutexLock lock(controller_.mutex());
    if (actor->state == ActorState::kAlive && !controller_.nodes().IsAlive(actor->node_id)) {
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                          absl::StrCat("actor ", actor->actor_id, " cannot be alive on node ",
                                       actor->node_id, ": the head does not hold it alive"));
    }
    stored = actors_.Register(*actor);
  }
  parts_.ReportActorStoreFailures();
  if (!stored.ok()) return rpc::ToGrpcStatus(stored.status());
  drivers_.NoteAlive(stored->owner, clock_->Now());  // a sign of life from its owner
  ActorRecordToProto(*stored, response);
  RecordActorChange(*response);
  return grpc::Status::OK;
}

grpc::Status HeadActorsService::ActorDied(grpc::ServerContext*, const v1::ActorDiedRequest* request,
                                          v1::ActorInfo* response) {
  if (absl::Status limits = request_limits::Check(*request); !limits.ok()) return Invalid(limits);
  if (request->actor_id().empty()) return InvalidText("actor_id: is empty");
  absl::StatusOr<ActorRecord> dead = actors_.Died(request->actor_id(), request->death_cause());
  parts_.ReportActorStoreFailures();
  if (!dead.ok()) return rpc::ToGrpcStatus(dead.status());
  ActorRecordToProto(*dead, response);
  RecordActorChange(*response);
  return grpc::Status::OK;
}

grpc::Status HeadActorsService::ActorWorkerExited(grpc::ServerContext*,
                                                  const v1::ActorWorkerExitedRequest* request,
                                                  v1::ActorInfo* response) {
  if (absl::Status limits = request_limits::Check(*request); !limits.ok()) return Invalid(limits);
  if (request->actor_id().empty()) return InvalidText("actor_id: is empty");
  absl::StatusOr<ActorRecord> actor =
      actors_.WorkerExited(request->actor_id(), request->worker_id(), request->cause());
  parts_.ReportActorStoreFailures();
  if (!actor.ok()) return rpc::ToGrpcStatus(actor.status());
  ActorRecordToProto(*actor, response);
  if (response->state() == v1::ACTOR_STATE_DEAD) RecordActorChange(*response);
  return grpc::Status::OK;
}

void HeadActorsService::RecordActorChange(const v1::ActorInfo& actor) {
  std::string where;
  if (actor.state() == v1::ACTOR_STATE_ALIVE) {
    where = absl::StrCat(" on node ", actor.node_id());
  } else if (actor.state() == v1::ACTOR_STATE_DEAD && !actor.death_cause().empty()) {
    where = absl::StrCat(": ", actor.death_cause());
  }
  events_.RecordChange(absl::StrCat("actor ", actor.name(), " (", actor.class_name(), ") ",
                                    ToAbsl(rpc::ActorStateName(actor.state())), where),
                       "actor");
}

grpc::Status HeadActorsService::GetActor(grpc::ServerContext*, const v1::GetActorRequest* request,
                                         v1::ActorInfo* response) {
  if (absl::Status limits = request_limits::Check(*request); !limits.ok()) return Invalid(limits);
  if (request->name().empty()) return InvalidText("name: is empty");
  absl::StatusOr<ActorRecord> actor = actors_.Get(request->name(), request->namespace_());
  if (!actor.ok()) return rpc::ToGrpcStatus(actor.status());
  ActorRecordToProto(*actor, response);
  return grpc::Status::OK;
}

grpc::Status HeadActorsService::ListActors(grpc::ServerContext*, const v1::ListRequest* request,
                                           v1::ListActorsResponse* response) {
  // Pages by actor id: actors registered or forgotten meanwhile move no other across pages.
  constexpr std::string_view kListing = "actors";
  if (absl::Status limits = request_limits::Check(*request); !limits.ok()) return Invalid(limits);
  auto page = head_internal::ParsePageRequest(*request, kListing, options_.max_page_size);
  if (!page.ok()) return Invalid(page.status());
  bool more = false;
  const std::vector<ActorRecord> actors = actors_.List(page->after, page->size, &more);
  head_internal::PageFiller filler(page->size, options_.max_page_bytes);
  std::optional<std::string> resume = head_internal::AppendPage(
      actors.begin(), actors.end(), filler, response->mutable_actors(),
      [](const ActorRecord& actor) { return actor.actor_id; },
      [](const ActorRecord& actor, v1::ActorInfo* out) { ActorRecordToProto(actor, out); });
  // Every actor asked for fitted, yet others follow: the next page starts after the last.
  if (!resume.has_value() && more && !actors.empty()) resume = actors.back().actor_id;
  if (resume.has_value())
    response->set_next_page_token(head_internal::PageToken(kListing, *resume));
  return grpc::Status::OK;
}

}  // namespace tessera
