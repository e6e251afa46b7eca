#include "api/owner_service.h"

#include <optional>

#include "absl/strings/str_cat.h"
#include "api/driver_runtime.h"
#include "objects/object_location.h"
#include "rpc/status_conversion.h"
#include "worker/owner_fetch.h"

namespace tessera::api {

grpc::Status OwnerService::WorkerReady(grpc::ServerContext*, const v1::WorkerReadyRequest* request,
                                       v1::WorkerReadyReply* reply) {
  if (request->worker_id().empty() || request->address().empty()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "worker_id and address are required");
  }
  *reply = runtime_->leases().WorkerReady(*request);
  if (reply->accepted() && !reply->node_id().empty()) {
    reply->set_object_store_socket(runtime_->StoreSocketOf(reply->node_id()));
  }
  if (reply->accepted()) reply->set_owner_id(runtime_->driver_id());
  return grpc::Status::OK;
}

grpc::Status OwnerService::GetObject(grpc::ServerContext*, const v1::GetObjectRequest* request,
                                     v1::GetObjectReply* reply) {
  auto id = ObjectId::FromBinary(request->object_id());
  if (!id.ok()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        absl::StrCat("object_id: ", id.status().message()));
  }
  const absl::Time deadline =
      absl::Now() + absl::Milliseconds(std::max<int64_t>(0, request->wait_ms()));
  if (request->peek()) {
    // An id this owner no longer holds counts as done: reading it says why.
    if (runtime_->objects().Wait({*id}, 1, deadline)[0]) return grpc::Status::OK;
    return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                        absl::StrCat("object ", id->Hex(), " is not ready yet"));
  }
  absl::StatusOr<std::string> value = runtime_->objects().Get(*id, deadline);
  if (value.ok()) {
    std::optional<v1::StoredObject> where = DecodeStoredEnvelope(*value);
    if (!where.has_value()) {
      reply->set_value(*std::move(value));
      return grpc::Status::OK;
    }
    // A reader that could not reach the holder waits here for the head's verdict on its node.
    const absl::Status why = request->holder_unreachable()
                                 ? absl::UnavailableError("a reader could not pull it")
                                 : absl::OkStatus();
    absl::Status lost = runtime_->store().CheckLost(*id, *where, why, deadline);
    if (!lost.ok()) {
      reply->mutable_error()->set_kind("lost");
      reply->mutable_error()->set_message(std::string(lost.message()));
      return grpc::Status::OK;
    }
    *reply->mutable_stored() = *std::move(where);
    return grpc::Status::OK;
  }
  const absl::StatusCode code = value.status().code();
  if (code == absl::StatusCode::kNotFound || code == absl::StatusCode::kDeadlineExceeded) {
    return rpc::ToGrpcStatus(value.status());
  }
  // The task that makes it failed: that failure (its kind, exception and traceback) is the
  // object's value.
  *reply->mutable_failure() = worker::ObjectFailureOf(value.status());
  return grpc::Status::OK;
}

grpc::Status OwnerService::LocateActor(grpc::ServerContext*, const v1::LocateActorRequest* request,
                                       v1::LocateActorReply* reply) {
  absl::StatusOr<v1::LocateActorReply> found = runtime_->LocateOwnedActor(request->actor_id());
  if (!found.ok()) return rpc::ToGrpcStatus(found.status());
  *reply = *std::move(found);
  return grpc::Status::OK;
}

grpc::Status OwnerService::KillActor(grpc::ServerContext*, const v1::KillActorRequest* request,
                                     v1::KillActorReply*) {
  return rpc::ToGrpcStatus(runtime_->KillOwnedActor(request->actor_id()));
}

grpc::Status OwnerService::ReportGeneratorItem(grpc::ServerContext*,
                                               const v1::ReportGeneratorItemRequest* request,
                                               v1::ReportGeneratorItemReply*) {
  auto task = TaskId::FromBinary(request->task_id());
  if (!task.ok()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        absl::StrCat("task_id: ", task.status().message()));
  }
  return rpc::ToGrpcStatus(
      runtime_->generators().Report(*task, request->index(), request->value()));
}

grpc::Status OwnerService::UpdateBorrows(grpc::ServerContext*,
                                         const v1::UpdateBorrowsRequest* request,
                                         v1::UpdateBorrowsReply*) {
  std::vector<ObjectId> ids;
  ids.reserve(request->changes_size());
  for (const v1::BorrowChange& change : request->changes()) {
    auto id = ObjectId::FromBinary(change.object_id());
    if (!id.ok()) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          absl::StrCat("object_id: ", id.status().message()));
    }
    if (change.borrower().empty()) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "borrower is required");
    }
    ids.push_back(*id);
  }
  for (int i = 0; i < request->changes_size(); ++i) {
    const v1::BorrowChange& change = request->changes(i);
    // False for an id the table no longer holds: nothing is left to count.
    runtime_->objects().UpdateBorrows(ids[i], change.borrower(), change.delta());
  }
  return grpc::Status::OK;
}

}  // namespace tessera::api
