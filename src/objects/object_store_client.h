// ObjectStoreClient: how a worker or driver uses its node's object store (ObjectStoreServer).
// It connects to the store's socket, receives the arena's memfd and maps it once; after that a
// Create hands out a pointer into that mapping to write into, and a Get hands out a read-only
// view of the object where it lies: no copy, whatever its size.
//
//   auto client = ObjectStoreClient::Connect({.socket_path = path});
//   (*client)->Put(id, bytes, /*metadata=*/"", {});            // create + copy + seal
//   absl::StatusOr<ObjectBuffer> buf = (*client)->Get(id);     // pinned while `buf` lives
//   Deserialize<T>(buf->view());
//
// Threading: thread-safe (one request at a time on the socket, under a mutex). ObjectBuffer and
// MutableObjectBuffer are values for one thread at a time; they keep the mapping and the
// connection alive even after the client object is destroyed.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "objects/object_store.h"
#include "tessera/object_id.h"

namespace tessera {

namespace objects_internal {
class StoreConnection;
}

struct ObjectStoreClientOptions {
  std::string socket_path;
  // Objects at least this large have their pages mapped in one madvise call on Create and Get
  // instead of one page fault per 4 KiB on first touch (docs/objects.md, "Memory layout").
  uint64_t populate_threshold_bytes = 1 << 20;
  // Each request's reply must come within this time, else DeadlineExceeded and the connection
  // is dropped.
  int64_t call_timeout_ms = 60'000;
};

struct GetObjectOptions {
  // How long to wait for an object that is not sealed yet (or not created yet); 0 answers at
  // once. The client's mutex is held meanwhile: other threads' calls on this client wait too.
  uint32_t wait_ms = 0;
};

// A sealed object, pinned in the store while this lives (or until Release).
class ObjectBuffer {
 public:
  ObjectBuffer(ObjectBuffer&& other) noexcept;
  ObjectBuffer& operator=(ObjectBuffer&& other) noexcept;
  ~ObjectBuffer();

  const ObjectId& id() const { return id_; }
  const uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }
  std::string_view view() const { return {reinterpret_cast<const char*>(data_), size_}; }
  const std::string& metadata() const { return metadata_; }
  // Unpins now and reports the store's answer; the view must not be used afterwards.
  absl::Status Release();

 private:
  friend class ObjectStoreClient;
  ObjectBuffer(std::shared_ptr<objects_internal::StoreConnection> conn, ObjectId id,
               const uint8_t* data, uint64_t size, std::string metadata);
  std::shared_ptr<objects_internal::StoreConnection> conn_;
  ObjectId id_;
  const uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
  std::string metadata_;
};

// The writable bytes of an object being created. The creator must Seal or Abort it; if its
// process goes away first, the store aborts it.
class MutableObjectBuffer {
 public:
  const ObjectId& id() const { return id_; }
  uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }

 private:
  friend class ObjectStoreClient;
  MutableObjectBuffer(std::shared_ptr<objects_internal::StoreConnection> conn, ObjectId id,
                      uint8_t* data, uint64_t size)
      : conn_(std::move(conn)), id_(id), data_(data), size_(size) {}
  std::shared_ptr<objects_internal::StoreConnection> conn_;  // keeps the mapping alive
  ObjectId id_;
  uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
};

class ObjectStoreClient {
 public:
  // Unavailable when nothing listens at the socket path.
  static absl::StatusOr<std::unique_ptr<ObjectStoreClient>> Connect(
      ObjectStoreClientOptions options);
  ~ObjectStoreClient();

  absl::StatusOr<MutableObjectBuffer> Create(const ObjectId& id, uint64_t data_size,
                                             std::string_view metadata,
                                             CreateObjectOptions options);
  absl::Status Seal(const ObjectId& id);
  absl::Status Abort(const ObjectId& id);
  // Create, one copy of `data` into the store, Seal (Abort if the seal fails).
  absl::Status Put(const ObjectId& id, std::string_view data, std::string_view metadata,
                   CreateObjectOptions options);
  // A sealed object, pinned until the buffer is destroyed. NotFound if absent or not sealed;
  // with wait_ms, DeadlineExceeded if it was not sealed within that time.
  absl::StatusOr<ObjectBuffer> Get(const ObjectId& id, GetObjectOptions options = {});
  absl::Status Delete(const ObjectId& id);
  absl::StatusOr<bool> Contains(const ObjectId& id);
  absl::StatusOr<ObjectStoreStats> Stats();
  // This connection is the life of `owner` in the store: when it closes (the process exits or
  // dies) and no other connection declares it, every object `owner` owns there is deleted.
  absl::Status DeclareOwner(const std::string& owner);

  uint64_t arena_size() const;

 private:
  explicit ObjectStoreClient(std::shared_ptr<objects_internal::StoreConnection> conn)
      : conn_(std::move(conn)) {}
  std::shared_ptr<objects_internal::StoreConnection> conn_;
};

}  // namespace tessera
