#include "rpc/status_conversion.h"

#include <string>

namespace tessera::rpc {

namespace {
constexpr int kLastCanonicalCode = 16;  // UNAUTHENTICATED in both enumerations
}  // namespace

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  int code = static_cast<int>(status.code());
  if (code < 0 || code > kLastCanonicalCode) code = static_cast<int>(grpc::StatusCode::UNKNOWN);
  return grpc::Status(static_cast<grpc::StatusCode>(code), std::string(status.message()));
}

bool IsPeerAuthenticationFailure(const grpc::Status& status) {
  return status.error_code() == grpc::StatusCode::UNAVAILABLE &&
         status.error_message().find("Ssl handshake failed") != std::string::npos;
}

absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  if (IsPeerAuthenticationFailure(status)) {
    return absl::UnauthenticatedError(
        "the peer did not prove it holds the cluster token, so nothing was sent to it (" +
        status.error_message() + ")");
  }
  int code = static_cast<int>(status.error_code());
  if (code < 0 || code > kLastCanonicalCode) code = static_cast<int>(absl::StatusCode::kUnknown);
  return absl::Status(static_cast<absl::StatusCode>(code), status.error_message());
}

}  // namespace tessera::rpc
