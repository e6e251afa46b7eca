// OwnerService: the Owner gRPC service a driver hosts (proto worker.proto): workers it leased
// say they are ready (and learn their node's store socket if their agent did not say), and
// workers fetch the values it owns (GetObject, waiting up to wait_ms): inline, where a large one
// is stored, or that it is lost (its node died); and other processes holding a handle of one of
// its actors ask where that actor runs (LocateActor), and an actor's process asks it to end the
// actor when another process killed it (KillActor); workers running its streaming generator
// tasks report each value yielded (ReportGeneratorItem).
//
// Threading: thread-safe; handlers run on gRPC's threads and only call thread-safe parts of the
// runtime.
#pragma once

#include "tessera/v1/worker.grpc.pb.h"

namespace tessera::api {

class DriverRuntime;

class OwnerService final : public v1::Owner::Service {
 public:
  explicit OwnerService(DriverRuntime* runtime) : runtime_(runtime) {}

  grpc::Status WorkerReady(grpc::ServerContext* context, const v1::WorkerReadyRequest* request,
                           v1::WorkerReadyReply* reply) override;
  grpc::Status GetObject(grpc::ServerContext* context, const v1::GetObjectRequest* request,
                         v1::GetObjectReply* reply) override;
  grpc::Status LocateActor(grpc::ServerContext* context, const v1::LocateActorRequest* request,
                           v1::LocateActorReply* reply) override;
  grpc::Status KillActor(grpc::ServerContext* context, const v1::KillActorRequest* request,
                         v1::KillActorReply* reply) override;
  grpc::Status UpdateBorrows(grpc::ServerContext* context, const v1::UpdateBorrowsRequest* request,
                             v1::UpdateBorrowsReply* reply) override;
  grpc::Status ReportGeneratorItem(grpc::ServerContext* context,
                                   const v1::ReportGeneratorItemRequest* request,
                                   v1::ReportGeneratorItemReply* reply) override;

 private:
  DriverRuntime* const runtime_;
};

}  // namespace tessera::api
