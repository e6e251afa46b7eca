#include "serve_runtime/head_actor_records.h"

#include "head/head_service.h"
#include "serve_runtime/replica_runtime.h"
#include "wire/proto_convert.h"

namespace tessera::serve {
namespace {

absl::Status FromGrpc(const grpc::Status& status) {
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
}

}  // namespace

std::function<absl::StatusOr<v1::ActorInfo>(const std::string& name)> HeadActorRecords(
    HeadService* head) {
  return [head](const std::string& name) -> absl::StatusOr<v1::ActorInfo> {
    v1::GetActorRequest request;
    request.set_name(name);
    request.set_namespace_(kServeNamespace);
    v1::ActorInfo info;
    grpc::Status got = head->actors().GetActor(nullptr, &request, &info);
    if (!got.ok()) return FromGrpc(got);
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

std::function<absl::StatusOr<std::vector<ServeNode>>()> HeadAliveNodes(HeadService* head) {
  return [head]() -> absl::StatusOr<std::vector<ServeNode>> {
    std::vector<ServeNode> nodes;
    v1::ListRequest request;
    while (true) {
      v1::ListNodesResponse page;
      grpc::Status got = head->nodes().ListNodes(nullptr, &request, &page);
      if (!got.ok()) return FromGrpc(got);
      for (const v1::NodeInfo& node : page.nodes()) {
        if (node.state() != v1::NODE_STATE_ALIVE) continue;
        nodes.push_back(ServeNode{.node_id = node.node().node_id(),
                                  .host = HostOfAddress(node.node().address())});
      }
      if (page.next_page_token().empty()) return nodes;
      request.set_page_token(page.next_page_token());
    }
  };
}

}  // namespace tessera::serve
