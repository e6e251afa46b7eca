#include "serve_runtime/head_actor_records.h"

#include "head/head_service.h"
#include "serve_runtime/replica_runtime.h"
#include "wire/proto_convert.h"

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

std::function<std::string(const ActorOptions& options)> HeadPendingExplanation(HeadService* head) {
  return [head](const ActorOptions& options) -> std::string {
    v1::PickNodeRequest request;
    if (!wire::DemandToProto(options.resources, options.label_selectors, options.strategy,
                             request.mutable_request())
             .ok()) {
      return "";  // the actor's creation says what is wrong with its options
    }
    v1::PickNodeResponse response;
    const grpc::Status picked = head->nodes().PickNode(nullptr, &request, &response);
    if (!picked.ok() || response.status() == v1::PICK_STATUS_PLACED) return "";
    return response.explanation();
  };
}

}  // namespace tessera::serve
