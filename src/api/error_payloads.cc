#include "api/error_payloads.h"

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"

namespace tessera::api {
namespace {

constexpr char kKindUrl[] = "tessera.dev/error-kind";
constexpr char kExceptionUrl[] = "tessera.dev/exception";
constexpr char kTracebackUrl[] = "tessera.dev/traceback";

std::optional<std::string> Payload(const absl::Status& status, const char* url) {
  auto payload = status.GetPayload(url);
  if (!payload.has_value()) return std::nullopt;
  return std::string(*payload);
}

}  // namespace

std::string_view ErrorKindWord(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kTaskError: return "TASK_ERROR";
    case ErrorKind::kWorkerCrashed: return "WORKER_CRASHED";
    case ErrorKind::kActorDied: return "ACTOR_DIED";
    case ErrorKind::kActorUnavailable: return "ACTOR_UNAVAILABLE";
    case ErrorKind::kTaskCancelled: return "TASK_CANCELLED";
    case ErrorKind::kTaskUnschedulable: return "TASK_UNSCHEDULABLE";
    case ErrorKind::kActorUnschedulable: return "ACTOR_UNSCHEDULABLE";
    case ErrorKind::kObjectLost: return "OBJECT_LOST";
    case ErrorKind::kOwnerDied: return "OWNER_DIED";
    case ErrorKind::kTaskPlacementGroupRemoved: return "TASK_PG_REMOVED";
    case ErrorKind::kActorPlacementGroupRemoved: return "ACTOR_PG_REMOVED";
    case ErrorKind::kObjectStoreFull: return "OBJECT_STORE_FULL";
  }
  return "SYSTEM";
}

absl::Status WithErrorKind(absl::Status status, ErrorKind kind) {
  if (status.ok()) return status;
  status.SetPayload(kKindUrl, absl::Cord(std::string(ErrorKindWord(kind))));
  return status;
}

std::optional<std::string> ErrorKindOf(const absl::Status& status) {
  return Payload(status, kKindUrl);
}

absl::Status OwnerDiedStatus(const std::string& object_hex, const std::string& owner_address,
                             const absl::Status& reached) {
  return WithErrorKind(
      absl::UnavailableError(
          absl::StrCat("object ", object_hex, " went with its owner, the process at ",
                       owner_address, ", which has exited (reaching it: ", reached.message(), ")")),
      ErrorKind::kOwnerDied);
}

absl::Status WithException(absl::Status status, std::string_view exception,
                           std::string_view traceback) {
  if (status.ok()) return status;
  if (!exception.empty()) status.SetPayload(kExceptionUrl, absl::Cord(std::string(exception)));
  if (!traceback.empty()) status.SetPayload(kTracebackUrl, absl::Cord(std::string(traceback)));
  return status;
}

std::optional<std::string> ExceptionOf(const absl::Status& status) {
  return Payload(status, kExceptionUrl);
}

std::optional<std::string> TracebackOf(const absl::Status& status) {
  return Payload(status, kTracebackUrl);
}

absl::Status WithContext(const absl::Status& status, std::string_view prefix) {
  if (status.ok()) return status;
  absl::Status out(status.code(), absl::StrCat(std::string(prefix), status.message()));
  status.ForEachPayload(
      [&out](absl::string_view url, const absl::Cord& payload) { out.SetPayload(url, payload); });
  return out;
}

}  // namespace tessera::api
