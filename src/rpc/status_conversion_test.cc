#include "rpc/status_conversion.h"

#include "gtest/gtest.h"

namespace tessera::rpc {
namespace {

TEST(StatusConversionTest, EveryCanonicalCodeKeepsNumberAndMessage) {
  for (int code = 1; code <= 16; ++code) {
    absl::Status status(static_cast<absl::StatusCode>(code), "message for code");
    grpc::Status grpc_status = ToGrpcStatus(status);
    EXPECT_EQ(static_cast<int>(grpc_status.error_code()), code);
    EXPECT_EQ(grpc_status.error_message(), "message for code");
    EXPECT_EQ(FromGrpcStatus(grpc_status), status);
  }
}

TEST(StatusConversionTest, OkStaysOk) {
  EXPECT_TRUE(ToGrpcStatus(absl::OkStatus()).ok());
  EXPECT_TRUE(FromGrpcStatus(grpc::Status::OK).ok());
}

TEST(StatusConversionTest, NamedCodesMatch) {
  EXPECT_EQ(ToGrpcStatus(absl::UnauthenticatedError("x")).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(FromGrpcStatus(grpc::Status(grpc::StatusCode::UNAVAILABLE, "down")),
            absl::UnavailableError("down"));
}

TEST(StatusConversionTest, OutOfRangeCodeBecomesUnknown) {
  grpc::Status odd(static_cast<grpc::StatusCode>(99), "odd");
  EXPECT_EQ(FromGrpcStatus(odd), absl::UnknownError("odd"));
}

}  // namespace
}  // namespace tessera::rpc
