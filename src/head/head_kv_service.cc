// HeadKvService: the internal key-value table (the KvStore) behind a proto front.
#include <string>

#include "head/head_service_internal.h"
#include "head/head_services.h"
#include "head/request_limits.h"
#include "rpc/status_conversion.h"

namespace tessera {

using head_internal::Invalid;

grpc::Status HeadKvService::KvPut(grpc::ServerContext*, const v1::KvPutRequest* request,
                                  v1::KvPutResponse* response) {
  if (absl::Status limits = request_limits::Check(*request); !limits.ok()) return Invalid(limits);
  auto added = kv_.Put(request->key(), request->value(), request->overwrite());
  if (!added.ok()) return rpc::ToGrpcStatus(added.status());
  response->set_added(*added);
  return grpc::Status::OK;
}

grpc::Status HeadKvService::KvGet(grpc::ServerContext*, const v1::KvGetRequest* request,
                                  v1::KvGetResponse* response) {
  if (absl::Status limits = request_limits::Check(*request); !limits.ok()) return Invalid(limits);
  auto value = kv_.Get(request->key());
  if (!value.ok()) return rpc::ToGrpcStatus(value.status());
  response->set_found(value->has_value());
  if (value->has_value()) response->set_value(**value);
  return grpc::Status::OK;
}

grpc::Status HeadKvService::KvDelete(grpc::ServerContext*, const v1::KvDeleteRequest* request,
                                     v1::KvDeleteResponse* response) {
  if (absl::Status limits = request_limits::Check(*request); !limits.ok()) return Invalid(limits);
  auto deleted = kv_.Delete(request->key());
  if (!deleted.ok()) return rpc::ToGrpcStatus(deleted.status());
  response->set_deleted(*deleted);
  return grpc::Status::OK;
}

grpc::Status HeadKvService::KvList(grpc::ServerContext*, const v1::KvListRequest* request,
                                   v1::KvListResponse* response) {
  if (absl::Status limits = request_limits::Check(*request); !limits.ok()) return Invalid(limits);
  auto keys = kv_.Keys(request->prefix());
  if (!keys.ok()) return rpc::ToGrpcStatus(keys.status());
  for (const std::string& key : *keys) response->add_keys(key);
  return grpc::Status::OK;
}

}  // namespace tessera
