#include "node/object_transfer.h"

#include <algorithm>
#include <memory>
#include <span>
#include <string>

#include "absl/strings/str_cat.h"
#include "base/ignore_status.h"
#include "base/status_macros.h"
#include "grpcpp/client_context.h"
#include "node/object_data_cipher.h"
#include "node/object_data_protocol.h"
#include "node/object_data_socket.h"
#include "objects/object_store_server.h"
#include "rpc/auth.h"
#include "rpc/channel.h"
#include "rpc/status_conversion.h"

namespace tessera {
namespace {

absl::Status Prefixed(const ObjectId& id, const absl::Status& status) {
  return absl::Status(status.code(), absl::StrCat("fetching ", id.Hex(), ": ", status.message()));
}

// Tells the holder an offer will not be used, so its pin ends now rather than at expiry. Best
// effort: the offer expires anyway.
void DropTicket(const std::string& host, int port, const std::string& ticket, absl::Time deadline) {
  deadline = std::min(deadline, absl::Now() + absl::Seconds(5));
  auto fd = ConnectTcp(host, port, deadline);
  if (!fd.ok()) return;
  const std::string request = EncodeDataRequest({DataAction::kDrop, ticket});
  IgnoreStatus(WriteAll(fd->get(), request.data(), request.size(), deadline),
               "best effort: an offer not dropped expires on its own");
}

// Receives the offered object's sealed chunks, each read straight into its place in `target`
// (`size` bytes; its tag beside) and opened there under `key`. Errors unprefixed.
absl::Status ReceiveBytes(const std::string& host, int port, const std::string& ticket,
                          const std::string& key, uint8_t* target, uint64_t size,
                          absl::Time deadline) {
  TESSERA_ASSIGN_OR_RETURN(ChunkOpener opener, ChunkOpener::Create(key, size));
  TESSERA_ASSIGN_OR_RETURN(UniqueFd fd, ConnectTcp(host, port, deadline));
  const std::string request = EncodeDataRequest({DataAction::kSend, ticket});
  TESSERA_RETURN_IF_ERROR(WriteAll(fd.get(), request.data(), request.size(), deadline));
  std::string header(kDataReplyHeaderBytes, '\0');
  TESSERA_ASSIGN_OR_RETURN(size_t got, ReadUpTo(fd.get(), header.data(), header.size(), deadline));
  if (got < header.size()) {
    return absl::DataLossError(
        absl::StrCat("the data connection closed after ", got, " bytes of the reply header"));
  }
  auto parsed = ParseDataReplyHeader(header);
  if (!parsed.ok()) return absl::DataLossError(parsed.status().message());
  std::string message(parsed->message_bytes, '\0');
  TESSERA_ASSIGN_OR_RETURN(got, ReadUpTo(fd.get(), message.data(), message.size(), deadline));
  if (parsed->code != absl::StatusCode::kOk) return absl::Status(parsed->code, message);
  if (parsed->size != size) {
    return absl::DataLossError(
        absl::StrCat("the holder sends ", parsed->size, " bytes for an object of ", size));
  }
  const uint64_t sealed_size = SealedSize(size);
  uint64_t at = 0;        // object bytes received
  uint64_t received = 0;  // stream bytes received
  uint8_t tag[kSealTagBytes];
  for (uint64_t i = 0; i < ChunkCount(size); ++i) {
    const size_t n = ChunkPlaintextBytes(size, i);
    TESSERA_ASSIGN_OR_RETURN(got, ReadUpTo(fd.get(), target + at, n, deadline));
    received += got;
    if (got == n) {
      TESSERA_ASSIGN_OR_RETURN(got, ReadUpTo(fd.get(), tag, sizeof(tag), deadline));
      received += got;
    }
    if (received != at + n + (i + 1) * kSealTagBytes) {
      return absl::DataLossError(absl::StrCat("the stream ended after ", received, " of ",
                                              sealed_size, " bytes (", size, " sealed in chunks)"));
    }
    if (absl::Status opened = opener.Open(i, std::span(target + at, n), tag); !opened.ok()) {
      return absl::DataLossError(absl::StrCat(
          "the bytes did not come from the holder (", opened.message(),
          " under the offer's transfer key): a changed stream or another listener on its data "
          "port"));
    }
    at += n;
  }
  char extra;
  TESSERA_ASSIGN_OR_RETURN(got, ReadUpTo(fd.get(), &extra, 1, deadline));
  if (got != 0) {
    return absl::DataLossError(
        absl::StrCat("the stream carries more than ", sealed_size, " bytes"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<PullResult> PullObject(const PullSource& from, absl::Duration timeout,
                                      const ObjectId& id, const LocalObjectStore& local) {
  if (local.store->Contains(id)) {
    auto location = local.store->Get(kLocalStoreClient, id);
    if (location.ok()) {
      IgnoreStatus(local.store->Release(kLocalStoreClient, id),
                   "cannot fail: the Get above pinned it for this client");
      return PullResult{location->data_size, true};
    }
  }
  const absl::Time deadline = absl::Now() + timeout;
  v1::OfferObjectResponse offer;
  {
    grpc::ClientContext context;
    rpc::ConfigureClientContext(&context, timeout);
    v1::OfferObjectRequest request;
    request.set_object_id(id.Binary());
    grpc::Status offered = from.stub->OfferObject(&context, request, &offer);
    if (!offered.ok()) return Prefixed(id, rpc::FromGrpcStatus(offered));
  }
  const uint64_t size = offer.size();
  if (offer.transfer_key().size() != kTransferKeyBytes) {
    DropTicket(from.host, offer.data_port(), offer.ticket(), deadline);
    return Prefixed(id, absl::FailedPreconditionError(absl::StrCat(
                            "the holder's offer carries ", offer.transfer_key().size(),
                            " bytes of transfer key, not ", kTransferKeyBytes,
                            " (an agent of an older version?), so its bytes could not be "
                            "authenticated; not copied")));
  }
  auto location = local.store->Create(kLocalStoreClient, id, size, offer.metadata(),
                                      CreateObjectOptions{.evictable = true});
  if (!location.ok()) {
    DropTicket(from.host, offer.data_port(), offer.ticket(), deadline);
    if (absl::IsAlreadyExists(location.status())) {
      if (local.store->Contains(id)) return PullResult{size, true};
      return Prefixed(id, absl::UnavailableError("it is being copied here by another pull"));
    }
    return Prefixed(id, location.status());
  }
  uint8_t* target = local.arena->base() + location->offset;
  local.arena->PopulateForWrite(location->offset, size);
  absl::Status received = ReceiveBytes(from.host, offer.data_port(), offer.ticket(),
                                       offer.transfer_key(), target, size, deadline);
  if (!received.ok()) {
    // Nothing unsealed is left behind.
    IgnoreStatus(local.store->Abort(kLocalStoreClient, id),
                 "cannot fail: this pull created it unsealed, and only it seals or aborts it");
    return Prefixed(id, received);
  }
  TESSERA_RETURN_IF_ERROR(local.store->Seal(kLocalStoreClient, id));
  return PullResult{size, false};
}

v1::NodeAgent::Stub& ObjectPuller::StubFor(const std::string& address) {
  absl::MutexLock lock(&mu_);
  std::unique_ptr<v1::NodeAgent::Stub>& stub = stubs_[address];
  if (stub == nullptr) stub = v1::NodeAgent::NewStub(rpc::MakeChannel(address, token_));
  return *stub;
}

absl::StatusOr<PullResult> ObjectPuller::Pull(const ObjectId& id, const std::string& from_address) {
  if (from_address.empty()) return absl::InvalidArgumentError("from_address is empty");
  TESSERA_ASSIGN_OR_RETURN(HostPort holder, SplitHostPort(from_address));
  return PullObject({&StubFor(from_address), holder.host}, timeout_, id, local_);
}

}  // namespace tessera
