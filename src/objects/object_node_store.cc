#include "objects/object_node_store.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/ignore_status.h"
#include "base/status_macros.h"
#include "base/string_util.h"
#include "client/list_pages.h"
#include "client/state_folder.h"
#include "rpc/auth.h"
#include "rpc/channel.h"
#include "rpc/state_names.h"
#include "rpc/status_conversion.h"

namespace tessera {
namespace {

absl::Mutex counters_mu(absl::kConstInit);
internal::ObjectPathStats* counters ABSL_GUARDED_BY(counters_mu) = nullptr;

// How long one look at the head, or one wait between looks, may take.
constexpr absl::Duration kHeadCallTimeout = absl::Seconds(5);
constexpr absl::Duration kVerdictPoll = absl::Milliseconds(100);
// A pull has this long when the reader waits forever.
constexpr absl::Duration kPullTimeout = absl::Seconds(120);

// Whether a pull failed the way it does when the holding node is gone (as opposed to an answer
// from it: not found, no room, refused).
bool LooksUnreachable(const absl::Status& why) {
  switch (why.code()) {
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kDeadlineExceeded:
    case absl::StatusCode::kInternal:
    case absl::StatusCode::kUnknown:
    case absl::StatusCode::kAborted:
    case absl::StatusCode::kCancelled: return true;
    default: return false;
  }
}

}  // namespace

internal::ObjectPathStats ObjectPathSnapshot() {
  absl::MutexLock lock(&counters_mu);
  return counters == nullptr ? internal::ObjectPathStats() : *counters;
}

void CountObjectPath(int64_t internal::ObjectPathStats::*field) {
  absl::MutexLock lock(&counters_mu);
  if (counters == nullptr) counters = new internal::ObjectPathStats();
  ++(counters->*field);
}

NodeObjectStore::NodeObjectStore(NodeObjectStoreOptions options) : options_(std::move(options)) {}

absl::StatusOr<ObjectStoreClient*> NodeObjectStore::Local() {
  if (local_ != nullptr) return local_.get();
  if (options_.socket_path.empty()) {
    return absl::UnavailableError("this node has no object store");
  }
  // Looked up on each use until it connects: an agent that has just started may not have made
  // its store's socket yet when this runtime starts.
  std::error_code ec;
  if (!std::filesystem::exists(options_.socket_path, ec)) {
    return absl::UnavailableError(
        absl::StrCat("this node has no object store (no socket at ", options_.socket_path, ")"));
  }
  auto client = ObjectStoreClient::Connect({.socket_path = options_.socket_path});
  if (!client.ok()) return client.status();
  if (options_.declare_owner && !options_.owner_id.empty()) {
    TESSERA_RETURN_IF_ERROR((*client)->DeclareOwner(options_.owner_id));
  }
  local_ = *std::move(client);
  return local_.get();
}

bool NodeObjectStore::Available() {
  absl::MutexLock lock(&mu_);
  return Local().ok();
}

absl::StatusOr<v1::StoredObject> NodeObjectStore::Put(const ObjectId& id, std::string_view bytes) {
  return PutParts(id, {bytes});
}

absl::StatusOr<v1::StoredObject> NodeObjectStore::PutParts(
    const ObjectId& id, const std::vector<std::string_view>& parts) {
  uint64_t size = 0;
  for (std::string_view part : parts) size += part.size();
  absl::MutexLock lock(&mu_);
  auto client = Local();
  if (!client.ok()) return client.status();
  const CreateObjectOptions create{.owner = options_.owner_id};
  absl::StatusOr<MutableObjectBuffer> buffer = (*client)->Create(id, size, "", create);
  if (buffer.status().code() == absl::StatusCode::kAlreadyExists) {
    // An earlier attempt of the same task got this far before its result was lost.
    IgnoreStatus((*client)->Delete(id),
                 "a delete that did not happen shows as the Create below failing again");
    buffer = (*client)->Create(id, size, "", create);
  }
  if (!buffer.ok()) return buffer.status();
  uint8_t* to = buffer->data();
  for (std::string_view part : parts) {
    if (!part.empty()) std::memcpy(to, part.data(), part.size());
    to += part.size();
  }
  if (absl::Status sealed = (*client)->Seal(id); !sealed.ok()) {
    IgnoreStatus((*client)->Abort(id),
                 "the seal's error is returned; the store aborts it at the disconnect");
    return sealed;
  }
  CountObjectPath(&internal::ObjectPathStats::store_puts);
  v1::StoredObject where;
  where.set_node_id(options_.node_id);
  where.set_agent_address(options_.agent_address);
  where.set_size(size);
  return where;
}

absl::StatusOr<ObjectStoreStats> NodeObjectStore::Stats() {
  absl::MutexLock lock(&mu_);
  auto client = Local();
  if (!client.ok()) return client.status();
  return (*client)->Stats();
}

absl::StatusOr<internal::SerializedValue> NodeObjectStore::ReadLocal(const ObjectId& id) {
  absl::StatusOr<ObjectBuffer> buffer;
  {
    absl::MutexLock lock(&mu_);
    auto client = Local();
    if (!client.ok()) return client.status();
    buffer = (*client)->Get(id);
  }
  if (!buffer.ok()) return buffer.status();
  // The buffer pins the object until the last holder of the value lets it go.
  auto pinned = std::make_shared<ObjectBuffer>(*std::move(buffer));
  const std::string_view view = pinned->view();
  CountObjectPath(&internal::ObjectPathStats::zero_copy_reads);
  return internal::SerializedValue(std::shared_ptr<const void>(pinned), view);
}

absl::StatusOr<internal::SerializedValue> NodeObjectStore::Read(const ObjectId& id,
                                                                const v1::StoredObject& where,
                                                                absl::Time deadline) {
  auto local = ReadLocal(id);
  if (local.ok() || local.status().code() != absl::StatusCode::kNotFound) {
    if (!local.ok()) {
      return absl::Status(local.status().code(),
                          absl::StrCat("object ", id.Hex(), ": ", local.status().message()));
    }
    return local;
  }
  if (where.node_id() == options_.node_id) {
    return absl::NotFoundError(absl::StrCat("object ", id.Hex(), " is no longer in node ",
                                            where.node_id(), "'s object store"));
  }
  absl::Status pulled = Pull(id, where, deadline);
  if (!pulled.ok()) {
    TESSERA_RETURN_IF_ERROR(CheckLost(id, where, pulled, deadline));
    return absl::Status(pulled.code(), absl::StrCat("object ", id.Hex(), " from node ",
                                                    where.node_id(), ": ", pulled.message()));
  }
  local = ReadLocal(id);
  if (!local.ok()) {
    return absl::Status(
        local.status().code(),
        absl::StrCat("object ", id.Hex(), " after its pull: ", local.status().message()));
  }
  return local;
}

absl::Status NodeObjectStore::Pull(const ObjectId& id, const v1::StoredObject& where,
                                   absl::Time deadline) {
  v1::NodeAgent::Stub* agent = nullptr;
  {
    absl::MutexLock lock(&mu_);
    if (options_.agent_address.empty()) {
      return absl::UnavailableError("this process knows no local agent to pull through");
    }
    if (agent_ == nullptr) {
      agent_ = v1::NodeAgent::NewStub(rpc::MakeChannel(options_.agent_address, options_.token));
    }
    agent = agent_.get();
  }
  v1::PullObjectRequest request;
  request.set_object_id(id.Binary());
  request.set_from_address(where.agent_address());
  v1::PullObjectResponse response;
  grpc::ClientContext context;
  const absl::Duration left = std::min(kPullTimeout, deadline - absl::Now());
  rpc::ConfigureClientContext(&context, std::max(left, absl::Milliseconds(1)));
  TESSERA_RETURN_IF_ERROR(rpc::FromGrpcStatus(agent->PullObject(&context, request, &response)));
  if (!response.already_here()) CountObjectPath(&internal::ObjectPathStats::pulls);
  return absl::OkStatus();
}

void NodeObjectStore::Delete(const ObjectId& id, const v1::StoredObject& where) {
  absl::MutexLock lock(&mu_);
  if (auto client = Local(); client.ok() && (*client)->Delete(id).ok()) {
    CountObjectPath(&internal::ObjectPathStats::store_deletes);
  }
  if (where.node_id() == options_.node_id || options_.state_dir.empty()) return;
  // Another node of this host: its socket is in the state folder. A node elsewhere keeps its
  // copy until its store needs the room (docs/objects.md: no agent-side delete yet).
  std::unique_ptr<ObjectStoreClient>& other = others_[where.node_id()];
  if (other == nullptr) {
    const std::string socket =
        client::StateFolder{options_.state_dir}.ObjectStoreSocket(where.node_id());
    std::error_code ec;
    if (!std::filesystem::exists(socket, ec)) return;
    auto client = ObjectStoreClient::Connect({.socket_path = socket});
    if (!client.ok()) return;
    other = *std::move(client);
  }
  absl::Status deleted = other->Delete(id);
  if (deleted.ok()) {
    CountObjectPath(&internal::ObjectPathStats::store_deletes);
  } else if (deleted.code() != absl::StatusCode::kNotFound) {
    others_.erase(where.node_id());  // that store went away: connect again next time
  }
}

absl::StatusOr<std::optional<v1::NodeState>> NodeObjectStore::HeadNodeState(
    const std::string& node_id) {
  v1::HeadNodes::Stub* head_nodes = nullptr;
  {
    absl::MutexLock lock(&mu_);
    if (head_nodes_ == nullptr) {
      head_nodes_ = v1::HeadNodes::NewStub(rpc::MakeChannel(options_.head_address, options_.token));
    }
    head_nodes = head_nodes_.get();
  }
  TESSERA_ASSIGN_OR_RETURN(
      v1::ListNodesResponse response,
      client::ListEveryPageOf(*head_nodes, &v1::HeadNodes::Stub::ListNodes, kHeadCallTimeout,
                              absl::StrCat("the head at ", options_.head_address)));
  for (const v1::NodeInfo& node : response.nodes()) {
    if (node.node().node_id() == node_id) return node.state();
  }
  return std::nullopt;
}

absl::Status NodeObjectStore::CheckLost(const ObjectId& id, const v1::StoredObject& where,
                                        const absl::Status& why, absl::Time deadline) {
  if (options_.head_address.empty()) return absl::OkStatus();
  const absl::Time until = std::min(deadline, absl::Now() + options_.lost_verdict_wait);
  while (true) {
    auto state = HeadNodeState(where.node_id());
    if (state.ok() && (*state == v1::NODE_STATE_DEAD || !state->has_value())) {
      return absl::NotFoundError(absl::StrCat(
          "object ", id.Hex(), " is lost: node ", where.node_id(), " died (",
          !state->has_value()
              ? "the head no longer knows it"
              : absl::StrCat("the head marked it ", ToAbsl(rpc::NodeStateName(**state))),
          why.ok() ? "" : absl::StrCat("; reaching it: ", why.message()), ")"));
    }
    // Only a holder that could not be reached is worth waiting on; one that answered is alive.
    if (!LooksUnreachable(why) || absl::Now() >= until) {
      return absl::OkStatus();
    }
    absl::SleepFor(kVerdictPoll);
  }
}

}  // namespace tessera
