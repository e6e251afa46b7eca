#include "serve_runtime/head_actor_records.h"

#include "head/head_service.h"
#include "serve_runtime/replica_runtime.h"

namespace tessera::serve {

std::function<absl::StatusOr<v1::ActorInfo>(const std::string& name)> HeadActorRecords(
    HeadService* head) {
  return [head](const std::string& name) -> absl::StatusOr<v1::ActorInfo> {
    v1::GetActorRequest request;
    request.set_name(name);
    request.set_namespace_(kServeNamespace);
    v1::ActorInfo info;
    grpc::Status got = head->actors().GetActor(nullptr, &request, &info);
    if (!got.ok()) {
      return absl::Status(static_cast<absl::StatusCode>(got.error_code()), got.error_message());
    }
    return info;
  };
}

}  // namespace tessera::serve
