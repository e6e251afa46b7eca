#include "client/cluster_client.h"

#include <algorithm>
#include <cstdlib>
#include <random>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "base/string_util.h"
#include "client/list_pages.h"
#include "rpc/auth.h"
#include "rpc/channel.h"
#include "rpc/retry.h"
#include "rpc/status_conversion.h"
#include "rpc/token.h"

namespace tessera::client {
namespace {

std::mt19937_64& Rng() {
  thread_local std::mt19937_64 rng(std::random_device{}());
  return rng;
}

}  // namespace

absl::Status FromGrpc(const grpc::Status& status, std::string_view peer) {
  absl::Status converted = rpc::FromGrpcStatus(status);
  if (!converted.ok() && (rpc::IsRetryable(status) || rpc::IsPeerAuthenticationFailure(status))) {
    return absl::Status(converted.code(),
                        absl::StrCat("cannot reach ", ToAbsl(peer), ": ", converted.message()));
  }
  return converted;
}

std::string NewRequestId(std::string_view prefix) {
  return absl::StrFormat("%s-%016x", ToAbsl(prefix), Rng()());
}

absl::StatusOr<absl::Duration> ParseDurationFlag(std::string_view flag, std::string_view text) {
  const std::string_view trimmed = Trim(text);
  double seconds = 0;
  if (absl::SimpleAtod(ToAbsl(trimmed), &seconds)) {
    if (seconds < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(ToAbsl(flag), ": ", Quote(trimmed), " is negative"));
    }
    return absl::Seconds(seconds);
  }
  absl::Duration d;
  if (!absl::ParseDuration(ToAbsl(trimmed), &d)) {
    return absl::InvalidArgumentError(absl::StrCat(ToAbsl(flag), ": ", Quote(trimmed),
                                                   " is not a duration (e.g. 500ms, 10s, 2m)"));
  }
  if (d < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat(ToAbsl(flag), ": ", Quote(trimmed), " is negative"));
  }
  return d;
}

absl::StatusOr<absl::Duration> ParsePositiveDurationFlag(std::string_view flag,
                                                         std::string_view text) {
  auto duration = ParseDurationFlag(flag, text);
  if (duration.ok() && *duration <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(ToAbsl(flag), ": must be positive"));
  }
  return duration;
}

absl::StatusOr<std::string> FindToken(const StateFolder& state, const std::string& token_file) {
  if (const char* env = std::getenv("TESSERA_TOKEN"); env != nullptr && env[0] != '\0') {
    return std::string(Trim(env));
  }
  const std::string path = token_file.empty() ? state.TokenFile() : token_file;
  auto token = rpc::ReadTokenFile(path);
  if (token.status().code() == absl::StatusCode::kNotFound) {
    return absl::NotFoundError(absl::StrCat("no cluster token: ", path,
                                            " does not exist (give --token-file or set "
                                            "TESSERA_TOKEN)"));
  }
  return token;
}

absl::StatusOr<std::unique_ptr<ClusterClient>> ClusterClient::Connect(
    ClusterClientOptions options) {
  TESSERA_ASSIGN_OR_RETURN(StateFolder state, TrustedStateFolder(options.state_dir));
  std::string address = options.head_address;
  if (address.empty()) {
    auto from_file = ReadFirstLine(state.HeadAddressFile());
    if (from_file.ok()) {
      address = *from_file;
    } else if (options.head == HeadRequirement::kRequired) {
      return absl::FailedPreconditionError(absl::StrCat(
          "no cluster is running with state folder ", state.root, " (no ", state.HeadAddressFile(),
          "); start one with `tessera start --head` or `tessera up`, or give --state-dir"));
    }
  }
  std::string token;
  auto found = FindToken(state, options.token_file);
  if (found.ok()) {
    token = *std::move(found);
  } else if (options.head == HeadRequirement::kRequired) {
    return found.status();
  }
  return std::unique_ptr<ClusterClient>(new ClusterClient(std::move(options), std::move(state),
                                                          std::move(address), std::move(token)));
}

ClusterClient::ClusterClient(ClusterClientOptions options, StateFolder state,
                             std::string head_address, std::string token)
    : options_(std::move(options)),
      state_(std::move(state)),
      head_address_(std::move(head_address)),
      token_(std::move(token)) {
  // One channel for every service of the head (a stub is cheap; the channel is the connection).
  // A client without a head still gets its stubs; their calls fail as UNAVAILABLE.
  auto channel =
      rpc::MakeChannel(head_address_.empty() ? std::string("127.0.0.1:1") : head_address_, token_);
  head_nodes_ = tessera::v1::HeadNodes::NewStub(channel);
  head_reservations_ = tessera::v1::HeadReservations::NewStub(channel);
  head_actors_ = tessera::v1::HeadActors::NewStub(channel);
  head_jobs_ = tessera::v1::HeadJobs::NewStub(channel);
  head_kv_ = tessera::v1::HeadKv::NewStub(channel);
  head_admin_ = tessera::v1::HeadAdmin::NewStub(channel);
  jobs_ = tessera::v1::Jobs::NewStub(channel);
  head_serve_ = tessera::v1::HeadServe::NewStub(channel);
}

tessera::v1::NodeAgent::Stub& ClusterClient::agent(const std::string& address) {
  auto& stub = agents_[address];
  if (stub == nullptr) stub = tessera::v1::NodeAgent::NewStub(rpc::MakeChannel(address, token_));
  return *stub;
}

std::string ClusterClient::HeadPeer() const { return absl::StrCat("the head at ", head_address_); }

std::unique_ptr<grpc::ClientContext> ClusterClient::StreamContext() const {
  // No deadline: a stream lasts as long as what it follows.
  return rpc::MakeClientContext(absl::InfiniteDuration());
}

absl::Status ClusterClient::Call(
    std::string_view peer, Retry retry,
    const std::function<grpc::Status(grpc::ClientContext*)>& rpc) const {
  if (retry == Retry::kNever) {
    grpc::ClientContext context;
    rpc::ConfigureClientContext(&context, options_.call_deadline);
    return FromGrpc(rpc(&context), peer);
  }
  rpc::RetryOptions options;
  options.attempt_timeout = options_.call_deadline;
  options.total_budget = options_.retry_budget;
  grpc::Status last;
  const absl::Status status = rpc::CallWithRetry(options, [&](grpc::ClientContext* context) {
    last = rpc(context);
    return last;
  });
  return status.ok() ? status : FromGrpc(last, peer);
}

template <typename Response, typename PageCall>
absl::StatusOr<Response> ClusterClient::ListEveryPageOfHead(PageCall&& call) {
  const std::string peer = HeadPeer();
  return ListEveryPage<Response>(
      peer, [&](const tessera::v1::ListRequest& request, Response* page) {
        return Call(peer, Retry::kSafe, [&](grpc::ClientContext* c) {
          page->Clear();  // nothing of a failed attempt stays in the page
          return call(c, request, page);
        });
      });
}

absl::StatusOr<tessera::v1::ListNodesResponse> ClusterClient::ListNodes() {
  return ListEveryPageOfHead<tessera::v1::ListNodesResponse>(
      [&](grpc::ClientContext* c, const tessera::v1::ListRequest& request,
          tessera::v1::ListNodesResponse* page) {
        return head_nodes_->ListNodes(c, request, page);
      });
}

absl::StatusOr<tessera::v1::ListPlacementGroupsResponse> ClusterClient::ListPlacementGroups() {
  return ListEveryPageOfHead<tessera::v1::ListPlacementGroupsResponse>(
      [&](grpc::ClientContext* c, const tessera::v1::ListRequest& request,
          tessera::v1::ListPlacementGroupsResponse* page) {
        return head_reservations_->ListPlacementGroups(c, request, page);
      });
}

absl::StatusOr<tessera::v1::ListSlicesResponse> ClusterClient::ListSlices() {
  return ListEveryPageOfHead<tessera::v1::ListSlicesResponse>(
      [&](grpc::ClientContext* c, const tessera::v1::ListRequest& request,
          tessera::v1::ListSlicesResponse* page) {
        return head_reservations_->ListSlices(c, request, page);
      });
}

absl::StatusOr<tessera::v1::ListJobsResponse> ClusterClient::ListJobs() {
  return ListEveryPageOfHead<tessera::v1::ListJobsResponse>(
      [&](grpc::ClientContext* c, const tessera::v1::ListRequest& request,
          tessera::v1::ListJobsResponse* page) { return head_jobs_->ListJobs(c, request, page); });
}

absl::StatusOr<tessera::v1::ClusterStatus> ClusterClient::GetClusterStatus() {
  tessera::v1::ClusterStatus response;
  TESSERA_RETURN_IF_ERROR(Call(HeadPeer(), Retry::kSafe, [&](grpc::ClientContext* c) {
    return head_admin_->GetClusterStatus(c, tessera::v1::ListRequest(), &response);
  }));
  return response;
}

absl::StatusOr<tessera::v1::CreateDashboardLoginResponse> ClusterClient::CreateDashboardLogin() {
  tessera::v1::CreateDashboardLoginResponse response;
  TESSERA_RETURN_IF_ERROR(Call(HeadPeer(), Retry::kNever, [&](grpc::ClientContext* c) {
    return head_admin_->CreateDashboardLogin(c, tessera::v1::CreateDashboardLoginRequest(),
                                             &response);
  }));
  return response;
}

absl::StatusOr<tessera::v1::ListEventsResponse> ClusterClient::ListEvents(int64_t after) {
  tessera::v1::ListEventsRequest request;
  request.set_after(after);
  tessera::v1::ListEventsResponse response;
  TESSERA_RETURN_IF_ERROR(Call(HeadPeer(), Retry::kSafe, [&](grpc::ClientContext* c) {
    return head_jobs_->ListEvents(c, request, &response);
  }));
  return response;
}

absl::StatusOr<std::vector<tessera::v1::ListWorkersResponse>> ClusterClient::ListWorkersEverywhere(
    std::vector<std::string>& unreachable) {
  TESSERA_ASSIGN_OR_RETURN(tessera::v1::ListNodesResponse nodes, ListNodes());
  std::vector<tessera::v1::ListWorkersResponse> out;
  for (const tessera::v1::NodeInfo& info : nodes.nodes()) {
    if (info.state() == tessera::v1::NODE_STATE_DEAD) continue;
    const std::string& address = info.node().address();
    tessera::v1::ListWorkersResponse response;
    // A node that is down must not hold the whole listing up: no retries, a short deadline.
    const absl::Status status =
        Call(absl::StrCat("node ", info.node().node_id(), " at ", address), Retry::kNever,
             [&](grpc::ClientContext* c) {
               return agent(address).ListWorkers(c, tessera::v1::ListWorkersRequest(), &response);
             });
    if (!status.ok()) {
      unreachable.push_back(absl::StrCat(info.node().node_id(), " (", status.message(), ")"));
      continue;
    }
    if (response.node_id().empty()) response.set_node_id(info.node().node_id());
    out.push_back(std::move(response));
  }
  return out;
}

}  // namespace tessera::client
