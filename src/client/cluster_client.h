// ClusterClient: how every cluster command talks to the head and the node agents. It finds the
// head's address and the token in the state folder, puts the token on every call, gives every
// unary call a deadline, and retries UNAVAILABLE / DEADLINE_EXCEEDED with backoff for calls that
// may be repeated (reads, and mutations that carry a request_id).
// Thread-compatible: one command uses one client from one thread (a stream may be read on a
// second thread while the first makes unary calls; gRPC stubs are thread-safe).
#pragma once

#include <grpcpp/grpcpp.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/state_folder.h"
#include "tessera/v1/head.grpc.pb.h"
#include "tessera/v1/jobs.grpc.pb.h"
#include "tessera/v1/node_agent.grpc.pb.h"
#include "tessera/v1/serve.grpc.pb.h"

namespace tessera::client {

// Whether a call may be sent again after UNAVAILABLE or DEADLINE_EXCEEDED.
enum class Retry {
  kSafe,   // a read, or a mutation with a request_id the receiver deduplicates
  kNever,  // sending it twice could apply it twice
};

// Whether Connect must find a head (most commands) or may work without one (`tessera stop`).
enum class HeadRequirement { kRequired, kOptional };

struct ClusterClientOptions {
  std::string state_dir;     // "" resolves as ResolveStateDir
  std::string head_address;  // "" reads <state>/head.address
  std::string token_file;    // "" : $TESSERA_TOKEN, else <state>/token
  HeadRequirement head = HeadRequirement::kRequired;
  absl::Duration call_deadline = absl::Seconds(10);
  // How long one call keeps retrying a retryable failure in all.
  absl::Duration retry_budget = absl::Seconds(15);
};

// The token for a cluster: $TESSERA_TOKEN, else the first line of `token_file` when given, else
// <state>/token. NotFound naming where it looked.
absl::StatusOr<std::string> FindToken(const StateFolder& state, const std::string& token_file);

class ClusterClient {
 public:
  static absl::StatusOr<std::unique_ptr<ClusterClient>> Connect(ClusterClientOptions options);

  const StateFolder& state() const { return state_; }
  const std::string& head_address() const { return head_address_; }
  const std::string& token() const { return token_; }

  // The head's services, all on one connection to the head (tessera/v1/head.proto).
  tessera::v1::HeadNodes::Stub& head_nodes() { return *head_nodes_; }
  tessera::v1::HeadReservations::Stub& head_reservations() { return *head_reservations_; }
  tessera::v1::HeadActors::Stub& head_actors() { return *head_actors_; }
  tessera::v1::HeadJobs::Stub& head_jobs() { return *head_jobs_; }
  tessera::v1::HeadKv::Stub& head_kv() { return *head_kv_; }
  tessera::v1::HeadAdmin::Stub& head_admin() { return *head_admin_; }
  // The head's train job service (train and job commands), on the same connection.
  tessera::v1::Jobs::Stub& jobs() { return *jobs_; }
  // The serve controller the head's process hosts (tessera/v1/serve.proto), on the same
  // connection.
  tessera::v1::HeadServe::Stub& head_serve() { return *head_serve_; }
  // A stub for the node agent at `address` (channels are cached per address).
  tessera::v1::NodeAgent::Stub& agent(const std::string& address);

  // Runs one unary call: `rpc` gets a fresh context (token, deadline) per attempt. `peer` names
  // the other side in errors ("the head at 127.0.0.1:6380", "node n1 at ...").
  absl::Status Call(std::string_view peer, Retry retry,
                    const std::function<grpc::Status(grpc::ClientContext*)>& rpc) const;

  // A context for a stream: the token, no deadline (the stream lasts as long as what it watches).
  std::unique_ptr<grpc::ClientContext> StreamContext() const;

  std::string HeadPeer() const;

  // Common reads of the head, retried. The listings return every item: they walk every page
  // (client/list_pages.h), each page its own retried call with its own deadline.
  absl::StatusOr<tessera::v1::ListNodesResponse> ListNodes();
  absl::StatusOr<tessera::v1::ListPlacementGroupsResponse> ListPlacementGroups();
  absl::StatusOr<tessera::v1::ListSlicesResponse> ListSlices();
  absl::StatusOr<tessera::v1::ListJobsResponse> ListJobs();
  absl::StatusOr<tessera::v1::ClusterStatus> GetClusterStatus();
  // A one-time dashboard login ticket and the head's HTTP address (never retried: each call
  // issues a ticket).
  absl::StatusOr<tessera::v1::CreateDashboardLoginResponse> CreateDashboardLogin();
  // The head's events after sequence number `after`, oldest first (at most 1000).
  absl::StatusOr<tessera::v1::ListEventsResponse> ListEvents(int64_t after);

  // Every alive node's workers (ListWorkers fanned out to each node agent, in node order).
  // Nodes that do not answer are named in `unreachable` ("n2 (cannot reach ...)").
  absl::StatusOr<std::vector<tessera::v1::ListWorkersResponse>> ListWorkersEverywhere(
      std::vector<std::string>& unreachable);

 private:
  ClusterClient(ClusterClientOptions options, StateFolder state, std::string head_address,
                std::string token);

  // Every page of one head listing: `call(context, request, page)` asks for one page.
  template <typename Response, typename PageCall>
  absl::StatusOr<Response> ListEveryPageOfHead(PageCall&& call);

  ClusterClientOptions options_;
  StateFolder state_;
  std::string head_address_;
  std::string token_;
  std::unique_ptr<tessera::v1::HeadNodes::Stub> head_nodes_;
  std::unique_ptr<tessera::v1::HeadReservations::Stub> head_reservations_;
  std::unique_ptr<tessera::v1::HeadActors::Stub> head_actors_;
  std::unique_ptr<tessera::v1::HeadJobs::Stub> head_jobs_;
  std::unique_ptr<tessera::v1::HeadKv::Stub> head_kv_;
  std::unique_ptr<tessera::v1::HeadAdmin::Stub> head_admin_;
  std::unique_ptr<tessera::v1::Jobs::Stub> jobs_;
  std::unique_ptr<tessera::v1::HeadServe::Stub> head_serve_;
  std::map<std::string, std::unique_ptr<tessera::v1::NodeAgent::Stub>> agents_;
};

// grpc::Status -> absl::Status with the same code and message; UNAVAILABLE and DEADLINE_EXCEEDED
// say which peer could not be reached.
absl::Status FromGrpc(const grpc::Status& status, std::string_view peer);

// A fresh id for a request that may be retried ("<prefix>-<16 hex digits>").
std::string NewRequestId(std::string_view prefix);

// "10s", "500ms", "2m" (absl durations) or a plain number of seconds ("30", "0.5").
absl::StatusOr<absl::Duration> ParseDurationFlag(std::string_view flag, std::string_view text);
// ParseDurationFlag, and zero is refused too: "<flag>: must be positive".
absl::StatusOr<absl::Duration> ParsePositiveDurationFlag(std::string_view flag,
                                                         std::string_view text);

}  // namespace tessera::client
