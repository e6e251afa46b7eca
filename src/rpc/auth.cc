#include "rpc/auth.h"

#include <chrono>
#include <map>
#include <utility>
#include <vector>

#include "google/protobuf/message_lite.h"
#include "grpcpp/impl/rpc_service_method.h"
#include "grpcpp/security/auth_context.h"
#include "grpcpp/support/method_handler.h"
#include "rpc/cluster_identity.h"

namespace tessera::rpc {

namespace {

using MethodList = std::vector<std::unique_ptr<grpc::internal::RpcServiceMethod>>;

// grpc::Service keeps its method table private and offers no way to put a check in front of a
// synchronous handler. An explicit template instantiation may name a private member (the access
// rules do not apply to the template arguments of explicit instantiations), which gives this file,
// and only this file, a reference to the table while the server is being set up.
template <MethodList grpc::Service::*Member>
struct ServiceMethodsAccess {
  friend MethodList& ServiceMethods(grpc::Service& service) { return service.*Member; }
};
MethodList& ServiceMethods(grpc::Service& service);
template struct ServiceMethodsAccess<&grpc::Service::methods_>;

// Runs the wrapped handler only for calls from a cluster peer; answers the others
// UNAUTHENTICATED itself. Owns the original method entry (and with it the original handler).
class AuthenticatingHandler : public grpc::internal::MethodHandler {
 public:
  explicit AuthenticatingHandler(std::unique_ptr<grpc::internal::RpcServiceMethod> original)
      : original_(std::move(original)) {}

  void RunHandler(const HandlerParameter& param) override {
    if (IsClusterPeer(*param.server_context)) {
      original_->handler()->RunHandler(param);
      return;
    }
    Reject(param);
  }

  void* Deserialize(grpc_call* call, grpc_byte_buffer* req, grpc::Status* status,
                    void** handler_data) override {
    return original_->handler()->Deserialize(call, req, status, handler_data);
  }

 private:
  void Reject(const HandlerParameter& param) {
    // The handler owns the deserialized request (it lives in the call's arena); the wrapped
    // handler never sees this call, so destroy it here. Generated protobuf messages derive from
    // MessageLite alone, so the void* the handler returned is the MessageLite subobject.
    if (param.request != nullptr) {
      static_cast<google::protobuf::MessageLite*>(param.request)->~MessageLite();
    }
    // gRPC's own error handler (the one that answers unknown methods) finishes the call with
    // UNAUTHENTICATED; it works the same for unary and streaming calls.
    rejecter_.RunHandler(param);
  }

  std::unique_ptr<grpc::internal::RpcServiceMethod> original_;
  grpc::internal::ErrorMethodHandler<grpc::StatusCode::UNAUTHENTICATED> rejecter_{
      "the caller did not prove it holds the cluster token (no cluster certificate)"};
};

}  // namespace

bool IsClusterPeer(const grpc::ServerContextBase& context) {
  const std::shared_ptr<const grpc::AuthContext> auth = context.auth_context();
  if (auth == nullptr || !auth->IsPeerAuthenticated()) return false;
  // The authority signs only process certificates, all of this one name.
  for (const grpc::string_ref& name : auth->GetPeerIdentity()) {
    if (std::string_view(name.data(), name.size()) == kClusterServerName) return true;
  }
  return false;
}

absl::Status AuthenticateService(grpc::Service* service) {
  MethodList& methods = ServiceMethods(*service);
  for (const auto& method : methods) {
    if (method == nullptr || method->handler() == nullptr ||
        method->api_type() != grpc::internal::RpcServiceMethod::ApiType::SYNC) {
      return absl::InvalidArgumentError(
          "only synchronous gRPC services can be served with peer authentication");
    }
  }
  for (auto& method : methods) {
    const char* name = method->name();
    grpc::internal::RpcMethod::RpcType type = method->method_type();
    auto* handler = new AuthenticatingHandler(std::move(method));
    method = std::make_unique<grpc::internal::RpcServiceMethod>(name, type, handler);
  }
  return absl::OkStatus();
}

void ConfigureClientContext(grpc::ClientContext* context, absl::Duration timeout) {
  if (timeout > absl::ZeroDuration() && timeout != absl::InfiniteDuration()) {
    context->set_deadline(std::chrono::system_clock::now() + absl::ToChronoNanoseconds(timeout));
  }
}

std::unique_ptr<grpc::ClientContext> MakeClientContext(absl::Duration timeout) {
  auto context = std::make_unique<grpc::ClientContext>();
  ConfigureClientContext(context.get(), timeout);
  return context;
}

}  // namespace tessera::rpc
