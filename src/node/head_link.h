// HeadLink: the node agent's side of its conversation with the head. Registers the node (its
// description with a fresh incarnation, plus the leases and bundles it holds), then heartbeats at
// the interval the head asks for with the full lease and bundle sets and the latest device samples.
// When the head answers known=false (it restarted) or calls fail and later succeed, the node
// registers again; bundles the head says it does not hold (in a registration or heartbeat answer)
// are released here, when not prepared again since, and the workers inside them killed. A
// registration the head refuses with ALREADY_EXISTS (another live agent holds this node id) is
// final: the link stops and says so (refusal(), on_refused). A head that cannot be reached is
// looked for again: at the address it publishes (find_head: a restarted head on another port), else
// at the next of the addresses given. Also asks the head which node could take a lease this node
// cannot (PickNode, for spillback).
//
// Thread-safe: one background thread runs the loop; PickNode may be called from any thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "node/agent_state.h"
#include "rpc/retry.h"
#include "tessera/v1/head.grpc.pb.h"

namespace tessera {

struct HeadLinkOptions {
  std::string head_address;
  // Other addresses of the head, tried in turn when the current one cannot be reached.
  std::vector<std::string> head_fallbacks;
  // Where the head publishes its address (it may come back on another port): read again when
  // the head cannot be reached, and followed when it names another address. Null: none.
  std::function<std::string()> find_head;
  std::string token;
  std::string incarnation;
  absl::Duration call_timeout = absl::Seconds(2);
  absl::Duration retry_budget = absl::Seconds(5);
  // Until the head names its interval; also the wait between failed registrations.
  absl::Duration initial_heartbeat = absl::Seconds(1);
  // host:port of the agent's HTTP endpoint (NodeDescription.http_address); "" when it has none.
  std::string http_address;
  // The latest reading of each device that measures anything, sent with every heartbeat
  // (HeartbeatRequest.device_samples). Called from the link's thread; must not block on the
  // link. Null: none sent.
  std::function<std::vector<v1::DeviceSample>()> device_samples;
  // What the node's workers use (HeartbeatRequest.usage), the same way; nullopt: not measured
  // yet. Null: never sent.
  std::function<std::optional<v1::NodeUsage>()> usage;
  // Called once, from the link's thread, when the head refuses a re-registration for good
  // (ALREADY_EXISTS); the agent shuts down. Must not block on the link. Null: nothing.
  std::function<void(const absl::Status&)> on_refused;
  // Called from the link's thread with every heartbeat response's gone drivers (exited or
  // silent past the driver timeout; repeated for a minute): the agent frees what they owned in
  // its object store. Must be idempotent and not block on the link. Null: nothing.
  std::function<void(const std::vector<std::string>&)> on_gone_drivers;
};

class HeadLink {
 public:
  // Kills the running workers of released bundles (the agent's process side).
  using KillWorkers = std::function<void(const std::vector<WorkerId>&)>;

  HeadLink(HeadLinkOptions options, AgentState* state, KillWorkers kill_workers);
  ~HeadLink();
  HeadLink(const HeadLink&) = delete;
  HeadLink& operator=(const HeadLink&) = delete;

  // Registers `agent_address` (host:port of this agent's NodeAgent service) once, retried within
  // the budget, then starts the heartbeat loop whatever the outcome (a head that is not up yet
  // is registered with later) unless the head refused it (ALREADY_EXISTS: the caller should
  // give up). Returns the first attempt's status. Call once.
  absl::Status Start(std::string agent_address);
  // Stops the loop and waits for it. Deregisters nothing: the head notices by timeout or by a
  // new incarnation.
  void Stop();

  // Which node could take `request` now, excluding `exclude` (retried within the budget).
  absl::StatusOr<v1::PickNodeResponse> PickNode(const v1::ResourceRequest& request,
                                                const std::vector<std::string>& exclude);

  // The worker of a detached actor exited (its record at the head ends once no driver owns it):
  // told to the head from the loop's thread, soon and again until the head answers. Never blocks.
  void ReportActorWorkerExit(std::string actor_id, std::string worker_id, std::string cause);

  bool registered() const;
  int64_t registrations() const;  // successful RegisterNode calls so far
  // The head's refusal of this agent (ALREADY_EXISTS, one line naming the node id and the live
  // agent's address); OK while there is none.
  absl::Status refusal() const;

 private:
  // Retries with the cluster token and the call timeout, within `budget` in all.
  rpc::RetryOptions Retry(absl::Duration budget) const;
  // Retries within `budget`: the whole retry budget on the first registration, one call's worth
  // from the loop (which retries on its own and so notices Stop between attempts).
  absl::Status Register(absl::Duration budget);
  absl::Status Heartbeat();
  // Releases the bundles the head does not hold (when not prepared again since) and kills the
  // workers inside them; `why` goes into the agent's log line.
  void ReleaseUnheld(const google::protobuf::RepeatedPtrField<v1::HeldBundle>& bundles,
                     const char* why);
  void Loop();
  // Tells the head the exits reported so far; keeps those it could not reach it with.
  void SendActorWorkerExits();
  // The head's services this link calls, their stubs on one channel (a stub is cheap; the
  // channel is the connection): replaced together when the head moves.
  struct HeadStubs {
    std::unique_ptr<v1::HeadNodes::Stub> nodes;    // RegisterNode, Heartbeat, PickNode
    std::unique_ptr<v1::HeadActors::Stub> actors;  // ActorWorkerExited
  };
  // Stubs on a fresh channel to the head at `address`.
  std::shared_ptr<const HeadStubs> StubsAt(const std::string& address) const;
  // The head's stubs and address now (they change when the head moves).
  std::shared_ptr<const HeadStubs> CurrentStubs(std::string* address = nullptr) const;
  // After a failed call: moves to the address the head publishes when it differs from the
  // current one, else to the next address given. True when it moved.
  bool LookForTheHead();

  const HeadLinkOptions options_;
  AgentState* const state_;
  const KillWorkers kill_workers_;
  std::string agent_address_;  // set by Start, before the loop runs

  mutable absl::Mutex mu_;
  std::shared_ptr<const HeadStubs> stubs_ ABSL_GUARDED_BY(mu_);
  std::string address_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool registered_ ABSL_GUARDED_BY(mu_) = false;
  int64_t registrations_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status refusal_ ABSL_GUARDED_BY(mu_);
  // The head's bundles epoch in the latest answer received, echoed in heartbeats.
  int64_t bundles_epoch_seen_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Duration interval_ ABSL_GUARDED_BY(mu_);
  std::vector<v1::ActorWorkerExitedRequest> actor_exits_ ABSL_GUARDED_BY(mu_);
  bool new_actor_exits_ ABSL_GUARDED_BY(mu_) = false;  // reported since the last send: wake
  std::thread thread_;
};

}  // namespace tessera
