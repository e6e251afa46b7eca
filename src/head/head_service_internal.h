// Helpers shared by the files that implement HeadService (head_*.cc): the gRPC error shapes of
// bad input and the request-id cache around a mutating call. Not for use outside src/head.
// Thread-safety: stateless functions.
#pragma once

#include <string>
#include <utility>

#include "absl/status/status.h"
#include "rpc/proto_convert.h"
#include "rpc/request_cache.h"
#include "scheduling/cluster_view.h"
#include "tessera/v1/head.grpc.pb.h"

namespace tessera::head_internal {

inline grpc::Status Invalid(const absl::Status& status) {
  return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, std::string(status.message()));
}

inline grpc::Status InvalidText(std::string message) {
  return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, std::move(message));
}

inline rpc::ExactAllocation Exact(const Allocation& allocation) {
  return rpc::ExactAllocation{allocation.resources, allocation.devices};
}

// Runs `call(response)` once per request id: a retried request gets the first answer again.
template <typename Response, typename Call>
grpc::Status RunOnce(rpc::RequestCache<std::pair<grpc::Status, Response>>& cache,
                     const std::string& request_id, Response* response, Call&& call) {
  std::pair<grpc::Status, Response> result = cache.Run(request_id, [&] {
    std::pair<grpc::Status, Response> r;
    r.first = call(&r.second);
    return r;
  });
  *response = result.second;
  return result.first;
}

}  // namespace tessera::head_internal
