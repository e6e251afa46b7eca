#include "worker/owner_fetch.h"

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "rpc/auth.h"
#include "rpc/channel.h"
#include "rpc/status_conversion.h"

namespace tessera::worker {

v1::Owner::Stub& OwnerStubFor(const std::string& address, const std::string& token) {
  static absl::Mutex mu(absl::kConstInit);
  // By token too: a process may reach several clusters in turn (shutdown, then init on
  // another), and an address of one may come back in the next, under another identity.
  static auto* stubs ABSL_GUARDED_BY(mu) =
      new std::map<std::pair<std::string, std::string>, std::unique_ptr<v1::Owner::Stub>>();
  absl::MutexLock lock(&mu);
  std::unique_ptr<v1::Owner::Stub>& stub = (*stubs)[{address, token}];
  if (stub == nullptr) stub = v1::Owner::NewStub(rpc::MakeChannel(address, token));
  return *stub;
}

v1::ObjectFailure ObjectFailureOf(const absl::Status& status) {
  v1::ObjectFailure failure;
  failure.set_code(static_cast<int32_t>(status.code()));
  failure.set_message(std::string(status.message()));
  status.ForEachPayload([&failure](absl::string_view url, const absl::Cord& payload) {
    (*failure.mutable_payloads())[std::string(url)] = std::string(payload);
  });
  return failure;
}

absl::Status StatusOfObjectFailure(const v1::ObjectFailure& failure) {
  auto code = static_cast<absl::StatusCode>(failure.code());
  // An OK or out-of-range code from a confused owner still reads as a failure.
  if (failure.code() <= 0 ||
      failure.code() > static_cast<int32_t>(absl::StatusCode::kUnauthenticated)) {
    code = absl::StatusCode::kUnknown;
  }
  absl::Status status(code, failure.message());
  for (const auto& [url, payload] : failure.payloads()) status.SetPayload(url, absl::Cord(payload));
  return status;
}

absl::StatusOr<internal::SerializedValue> ReadFromOwner(v1::Owner::Stub& owner,
                                                        const ObjectRefData& ref,
                                                        NodeObjectStore* store,
                                                        absl::Duration timeout,
                                                        bool* owner_unreachable) {
  const bool forever = timeout == absl::InfiniteDuration();
  const absl::Time deadline = forever ? absl::InfiniteFuture() : absl::Now() + timeout;
  v1::GetObjectRequest request;
  request.set_object_id(ref.id.Binary());
  request.set_wait_ms(forever ? int64_t{24} * 3600 * 1000 : absl::ToInt64Milliseconds(timeout));
  // Asked once more when its holder cannot be reached: the owner then says whether it is lost.
  for (int round = 0; round < 2; ++round) {
    v1::GetObjectReply reply;
    grpc::ClientContext context;
    rpc::ConfigureClientContext(&context,
                                absl::Milliseconds(request.wait_ms()) + absl::Seconds(30));
    grpc::Status status = owner.GetObject(&context, request, &reply);
    if (!status.ok()) {
      if (owner_unreachable != nullptr) {
        *owner_unreachable = status.error_code() == grpc::StatusCode::UNAVAILABLE;
      }
      absl::Status s = rpc::FromGrpcStatus(status);
      return absl::Status(s.code(), absl::StrCat("object ", ref.id.Hex(), " from its owner at ",
                                                 ref.owner.address, ": ", s.message()));
    }
    if (reply.has_failure()) return StatusOfObjectFailure(reply.failure());
    if (reply.has_error()) {
      return absl::UnknownError(absl::StrCat(
          reply.error().type(), reply.error().type().empty() ? "" : ": ", reply.error().message()));
    }
    if (!reply.has_stored()) return internal::SerializedValue(std::move(*reply.mutable_value()));
    if (store == nullptr) {
      return absl::FailedPreconditionError(
          absl::StrCat("object ", ref.id.Hex(), " lies in node ", reply.stored().node_id(),
                       "'s object store and this process's node has none"));
    }
    auto value = store->Read(ref.id, reply.stored(), deadline);
    if (value.ok() || round == 1 || value.status().code() == absl::StatusCode::kNotFound) {
      return value;
    }
    request.set_holder_unreachable(true);
  }
  return absl::InternalError("unreachable");
}

bool IsDoneAtOwner(v1::Owner::Stub& owner, const ObjectRefData& ref, absl::Duration wait) {
  v1::GetObjectRequest request;
  request.set_object_id(ref.id.Binary());
  request.set_peek(true);
  request.set_wait_ms(absl::ToInt64Milliseconds(wait));
  v1::GetObjectReply reply;
  grpc::ClientContext context;
  rpc::ConfigureClientContext(&context, wait + absl::Seconds(10));
  const grpc::Status status = owner.GetObject(&context, request, &reply);
  return status.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED;
}

}  // namespace tessera::worker
