#include "node/object_transfer.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "grpcpp/client_context.h"
#include "objects/object_store_server.h"
#include "rpc/auth.h"
#include "rpc/channel.h"
#include "rpc/status_conversion.h"

namespace tessera {
namespace {

// Releases the pin taken by a Get when the stream ends, however it ends.
class PinGuard {
 public:
  PinGuard(ObjectStore* store, ObjectId id) : store_(store), id_(std::move(id)) {}
  ~PinGuard() { (void)store_->Release(kLocalStoreClient, id_); }
  PinGuard(const PinGuard&) = delete;
  PinGuard& operator=(const PinGuard&) = delete;

 private:
  ObjectStore* store_;
  ObjectId id_;
};

absl::Status Prefixed(const ObjectId& id, const absl::Status& status) {
  return absl::Status(status.code(), absl::StrCat("fetching ", id.Hex(), ": ", status.message()));
}

}  // namespace

absl::Status StreamObject(const LocalObjectStore& local, const ObjectId& id,
                          const std::function<bool(const v1::ObjectChunk&)>& write) {
  auto location = local.store->Get(kLocalStoreClient, id);
  if (!location.ok()) return location.status();
  PinGuard pin(local.store, id);
  const uint8_t* data = local.arena->base() + location->offset;
  local.arena->PopulateForRead(location->offset, location->data_size);
  v1::ObjectChunk chunk;
  uint64_t offset = 0;
  do {
    const uint64_t size = std::min<uint64_t>(kObjectChunkBytes, location->data_size - offset);
    chunk.set_total_size(location->data_size);
    if (offset == 0) {
      chunk.set_metadata(location->metadata);
    } else {
      chunk.clear_metadata();
    }
    chunk.set_offset(offset);
    chunk.set_data(data + offset, size);
    if (!write(chunk)) return absl::CancelledError("the reader went away");
    offset += size;
  } while (offset < location->data_size);
  return absl::OkStatus();
}

absl::StatusOr<PullResult> PullObject(v1::NodeAgent::StubInterface& from, std::string_view token,
                                      absl::Duration timeout, const ObjectId& id,
                                      const LocalObjectStore& local) {
  if (local.store->Contains(id)) {
    auto location = local.store->Get(kLocalStoreClient, id);
    if (location.ok()) {
      (void)local.store->Release(kLocalStoreClient, id);
      return PullResult{location->data_size, true};
    }
  }
  grpc::ClientContext context;
  rpc::ConfigureClientContext(&context, token, timeout);
  v1::FetchObjectRequest request;
  request.set_object_id(id.Binary());
  std::unique_ptr<grpc::ClientReaderInterface<v1::ObjectChunk>> reader =
      from.FetchObject(&context, request);

  bool created = false;
  uint64_t total = 0, received = 0;
  uint8_t* target = nullptr;
  // Undoes a copy that cannot be finished: nothing unsealed is left behind.
  auto fail = [&](absl::Status status) -> absl::Status {
    if (created) (void)local.store->Abort(kLocalStoreClient, id);
    context.TryCancel();
    (void)reader->Finish();
    return status;
  };
  v1::ObjectChunk chunk;
  while (reader->Read(&chunk)) {
    if (!created) {
      if (chunk.offset() != 0) {
        return fail(absl::DataLossError(
            absl::StrCat("fetching ", id.Hex(), ": the first chunk starts at ", chunk.offset())));
      }
      total = chunk.total_size();
      auto location = local.store->Create(kLocalStoreClient, id, total, chunk.metadata(),
                                          CreateObjectOptions{.evictable = true});
      if (absl::IsAlreadyExists(location.status())) {
        if (local.store->Contains(id)) {
          context.TryCancel();
          (void)reader->Finish();
          return PullResult{total, true};
        }
        return fail(absl::UnavailableError(
            absl::StrCat("object ", id.Hex(), " is being copied here by another pull")));
      }
      if (!location.ok()) return fail(location.status());
      created = true;
      target = local.arena->base() + location->offset;
      local.arena->PopulateForWrite(location->offset, total);
    }
    if (chunk.total_size() != total || chunk.offset() != received ||
        chunk.data().size() > total - received) {
      return fail(absl::DataLossError(absl::StrCat(
          "fetching ", id.Hex(), ": chunk at ", chunk.offset(), " of ", chunk.data().size(),
          " bytes does not follow ", received, " of ", total, " bytes")));
    }
    std::memcpy(target + received, chunk.data().data(), chunk.data().size());
    received += chunk.data().size();
  }
  grpc::Status finished = reader->Finish();
  if (!finished.ok()) {
    if (created) (void)local.store->Abort(kLocalStoreClient, id);
    return Prefixed(id, rpc::FromGrpcStatus(finished));
  }
  if (!created || received != total) {
    if (created) (void)local.store->Abort(kLocalStoreClient, id);
    return absl::DataLossError(absl::StrCat("fetching ", id.Hex(), ": the stream ended after ",
                                            received, " of ", total, " bytes"));
  }
  absl::Status sealed = local.store->Seal(kLocalStoreClient, id);
  if (!sealed.ok()) return sealed;
  return PullResult{total, false};
}

v1::NodeAgent::Stub& ObjectPuller::StubFor(const std::string& address) {
  absl::MutexLock lock(&mu_);
  std::unique_ptr<v1::NodeAgent::Stub>& stub = stubs_[address];
  if (stub == nullptr) stub = v1::NodeAgent::NewStub(rpc::MakeChannel(address));
  return *stub;
}

absl::StatusOr<PullResult> ObjectPuller::Pull(const ObjectId& id, const std::string& from_address) {
  if (from_address.empty()) return absl::InvalidArgumentError("from_address is empty");
  return PullObject(StubFor(from_address), token_, timeout_, id, local_);
}

}  // namespace tessera
