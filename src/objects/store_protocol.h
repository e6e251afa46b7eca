// The object store's wire protocol on its Unix-domain socket (docs/objects.md has the table).
//
// Every message is a frame: a 4-byte little-endian body length, then the body. A body starts
// with the protocol version (1 byte) and the message type (1 byte); the fields of that type
// follow, integers little-endian, byte strings as a 4-byte length and the bytes, object ids as
// their 24 raw bytes. A client sends one request and reads its reply before the next (replies
// come in order). The reply to Hello carries the arena's memfd as SCM_RIGHTS ancillary data.
//
// Parsing is total: any byte string gives a message or a one-line InvalidArgument, never a crash
// (store_protocol_fuzzer).
//
// Threading: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "objects/object_store.h"
#include "tessera/object_id.h"

namespace tessera {

inline constexpr uint8_t kStoreProtocolVersion = 2;
// A body larger than this is a framing error: the connection cannot be trusted after it.
inline constexpr uint32_t kMaxStoreMessageBytes = 1 << 20;
inline constexpr size_t kStoreFrameHeaderBytes = 4;

enum class StoreMessageType : uint8_t {
  kHello = 1,     // -> arena_size (+ the memfd)
  kCreate = 2,    // id, data_size, metadata, evictable, owner -> offset
  kSeal = 3,      // id
  kAbort = 4,     // id
  kGet = 5,       // id, wait_ms -> offset, data_size, metadata (pinned)
  kRelease = 6,   // id
  kDelete = 7,    // id
  kContains = 8,  // id -> contains
  kStats = 9,     // -> stats
  kOwner = 10,    // owner: this connection is that owner's life (ObjectStore::DeclareOwner)
  kReply = 100,
};

struct StoreRequest {
  StoreMessageType type = StoreMessageType::kHello;
  ObjectId id;
  uint64_t data_size = 0;
  std::string metadata;
  bool evictable = false;
  // Create: the object's owner; Owner: the owner this connection declares ("" none).
  std::string owner;
  // Get: how long to wait for the object to be sealed (0: answer at once).
  uint32_t wait_ms = 0;

  friend bool operator==(const StoreRequest&, const StoreRequest&) = default;
};

struct StoreReply {
  absl::Status status;
  ObjectLocation location;  // Create, Get
  uint64_t arena_size = 0;  // Hello
  bool contains = false;    // Contains
  ObjectStoreStats stats;   // Stats
};

// The body (without the length prefix).
std::string EncodeStoreRequest(const StoreRequest& request);
std::string EncodeStoreReply(const StoreReply& reply);
absl::StatusOr<StoreRequest> ParseStoreRequest(std::string_view body);
absl::StatusOr<StoreReply> ParseStoreReply(std::string_view body);

// Prefixes a body with its length.
std::string Frame(std::string_view body);
// The body length announced by a frame header (4 bytes); InvalidArgument when over the limit or
// too short to hold a version and a type.
absl::StatusOr<uint32_t> ParseFrameHeader(std::string_view header);

std::string_view StoreMessageTypeName(StoreMessageType type);

}  // namespace tessera
