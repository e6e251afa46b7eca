#include "objects/object_store_client.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "base/ignore_status.h"
#include "base/status_macros.h"
#include "objects/shared_memory.h"
#include "objects/store_protocol.h"

namespace tessera {
namespace objects_internal {

// One socket to the store plus the mapped arena. Shared by the client and every buffer it handed
// out, so the mapping outlives whichever goes last.
// Threading: thread-safe; Call holds mu_ for a whole request/reply exchange.
class StoreConnection {
 public:
  StoreConnection(int fd, ObjectStoreClientOptions options)
      : fd_(fd), options_(std::move(options)) {}
  ~StoreConnection() { close(fd_); }

  absl::Status Hello() {
    absl::MutexLock lock(&mu_);
    TESSERA_RETURN_IF_ERROR(
        WriteAll(Frame(EncodeStoreRequest({.type = StoreMessageType::kHello}))));
    int received_fd = -1;
    absl::StatusOr<StoreReply> reply = ReadReply(&received_fd);
    if (!reply.ok()) {
      if (received_fd >= 0) close(received_fd);
      return reply.status();
    }
    if (!reply->status.ok()) {
      if (received_fd >= 0) close(received_fd);
      return reply->status;
    }
    if (received_fd < 0) {
      return absl::InternalError("the object store's Hello reply carried no memory fd");
    }
    absl::StatusOr<std::unique_ptr<SharedMemoryArena>> arena =
        SharedMemoryArena::Map(received_fd, reply->arena_size);
    if (!arena.ok()) return arena.status();
    arena_ = *std::move(arena);
    return absl::OkStatus();
  }

  absl::StatusOr<StoreReply> Call(const StoreRequest& request) {
    absl::MutexLock lock(&mu_);
    extra_wait_ms_ = request.wait_ms;
    if (!broken_.ok()) return broken_;
    if (absl::Status s = WriteAll(Frame(EncodeStoreRequest(request))); !s.ok()) return Break(s);
    absl::StatusOr<StoreReply> reply = ReadReply(nullptr);
    if (!reply.ok()) return Break(reply.status());
    if (!reply->status.ok()) return reply->status;
    return reply;
  }

  const SharedMemoryArena& arena() const { return *arena_; }
  const ObjectStoreClientOptions& options() const { return options_; }

 private:
  // A connection that failed mid-exchange cannot be trusted to be in step with the store.
  absl::Status Break(absl::Status s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    broken_ = s;
    shutdown(fd_, SHUT_RDWR);
    return s;
  }

  absl::Status WaitFor(short events) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    pollfd p{fd_, events, 0};
    while (true) {
      const int rc = poll(&p, 1, static_cast<int>(options_.call_timeout_ms + extra_wait_ms_));
      if (rc > 0) return absl::OkStatus();
      if (rc == 0) {
        return absl::DeadlineExceededError(absl::StrCat("object store at ", options_.socket_path,
                                                        " did not answer within ",
                                                        options_.call_timeout_ms, " ms"));
      }
      if (errno != EINTR) return Lost(std::strerror(errno));
    }
  }

  absl::Status Lost(std::string_view why) const {
    return absl::UnavailableError(absl::StrCat("lost the object store connection at ",
                                               options_.socket_path, ": ",
                                               absl::string_view(why.data(), why.size())));
  }

  absl::Status WriteAll(std::string_view data) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    while (!data.empty()) {
      const ssize_t n = send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
      if (n > 0) {
        data.remove_prefix(static_cast<size_t>(n));
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      return Lost(n < 0 ? std::strerror(errno) : "closed");
    }
    return absl::OkStatus();
  }

  // Reads exactly `size` bytes; the first recvmsg may carry a passed fd.
  absl::Status ReadExactly(char* out, size_t size, int* received_fd)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    size_t got = 0;
    while (got < size) {
      TESSERA_RETURN_IF_ERROR(WaitFor(POLLIN));
      iovec iov{out + got, size - got};
      alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
      msghdr msg{};
      msg.msg_iov = &iov;
      msg.msg_iovlen = 1;
      if (received_fd != nullptr) {
        msg.msg_control = control;
        msg.msg_controllen = sizeof(control);
      }
      const ssize_t n = recvmsg(fd_, &msg, MSG_CMSG_CLOEXEC);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return Lost(n < 0 ? std::strerror(errno) : "closed by the store");
      if (received_fd != nullptr) {
        for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
          if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS &&
              c->cmsg_len == CMSG_LEN(sizeof(int))) {
            std::memcpy(received_fd, CMSG_DATA(c), sizeof(int));
          }
        }
        received_fd = nullptr;  // only the first piece carries it
      }
      got += static_cast<size_t>(n);
    }
    return absl::OkStatus();
  }

  absl::StatusOr<StoreReply> ReadReply(int* received_fd) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    char header[kStoreFrameHeaderBytes];
    TESSERA_RETURN_IF_ERROR(ReadExactly(header, sizeof(header), received_fd));
    absl::StatusOr<uint32_t> length = ParseFrameHeader(std::string_view(header, sizeof(header)));
    if (!length.ok()) return length.status();
    std::string body(*length, '\0');
    TESSERA_RETURN_IF_ERROR(ReadExactly(body.data(), body.size(), nullptr));
    return ParseStoreReply(body);
  }

  const int fd_;
  const ObjectStoreClientOptions options_;
  absl::Mutex mu_;
  absl::Status broken_ ABSL_GUARDED_BY(mu_);
  int64_t extra_wait_ms_ ABSL_GUARDED_BY(mu_) = 0;  // the current request's own waiting time
  std::unique_ptr<SharedMemoryArena> arena_;        // set once by Hello, before sharing
};

}  // namespace objects_internal

using objects_internal::StoreConnection;

ObjectBuffer::ObjectBuffer(std::shared_ptr<StoreConnection> conn, ObjectId id, const uint8_t* data,
                           uint64_t size, std::string metadata)
    : conn_(std::move(conn)), id_(id), data_(data), size_(size), metadata_(std::move(metadata)) {}

ObjectBuffer::ObjectBuffer(ObjectBuffer&& other) noexcept
    : conn_(std::move(other.conn_)),
      id_(other.id_),
      data_(other.data_),
      size_(other.size_),
      metadata_(std::move(other.metadata_)) {
  other.conn_ = nullptr;
}

ObjectBuffer& ObjectBuffer::operator=(ObjectBuffer&& other) noexcept {
  if (this != &other) {
    IgnoreStatus(
        Release(),
        "not pinned any more: nothing to release; a store out of reach drops its pins itself");
    conn_ = std::move(other.conn_);
    other.conn_ = nullptr;
    id_ = other.id_;
    data_ = other.data_;
    size_ = other.size_;
    metadata_ = std::move(other.metadata_);
  }
  return *this;
}

ObjectBuffer::~ObjectBuffer() {
  IgnoreStatus(
      Release(),
      "not pinned any more: nothing to release; a store out of reach drops its pins itself");
}

absl::Status ObjectBuffer::Release() {
  if (conn_ == nullptr) return absl::OkStatus();
  std::shared_ptr<StoreConnection> conn = std::move(conn_);
  conn_ = nullptr;
  data_ = nullptr;
  absl::StatusOr<StoreReply> reply = conn->Call({.type = StoreMessageType::kRelease, .id = id_});
  return reply.status();
}

absl::StatusOr<std::unique_ptr<ObjectStoreClient>> ObjectStoreClient::Connect(
    ObjectStoreClientOptions options) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (options.socket_path.empty() || options.socket_path.size() >= sizeof(addr.sun_path)) {
    return absl::InvalidArgumentError(absl::StrCat("object store socket path must be 1..",
                                                   sizeof(addr.sun_path) - 1, " bytes, got ",
                                                   options.socket_path.size()));
  }
  std::memcpy(addr.sun_path, options.socket_path.data(), options.socket_path.size());
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError(absl::StrCat("socket: ", std::strerror(errno)));
  if (connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
    const int err = errno;
    close(fd);
    return absl::UnavailableError(absl::StrCat("cannot connect to the object store at ",
                                               options.socket_path, ": ", std::strerror(err)));
  }
  auto conn = std::make_shared<StoreConnection>(fd, std::move(options));
  if (absl::Status s = conn->Hello(); !s.ok()) return s;
  return std::unique_ptr<ObjectStoreClient>(new ObjectStoreClient(std::move(conn)));
}

ObjectStoreClient::~ObjectStoreClient() = default;

uint64_t ObjectStoreClient::arena_size() const { return conn_->arena().size(); }

absl::StatusOr<MutableObjectBuffer> ObjectStoreClient::Create(const ObjectId& id,
                                                              uint64_t data_size,
                                                              std::string_view metadata,
                                                              CreateObjectOptions options) {
  absl::StatusOr<StoreReply> reply = conn_->Call({.type = StoreMessageType::kCreate,
                                                  .id = id,
                                                  .data_size = data_size,
                                                  .metadata = std::string(metadata),
                                                  .evictable = options.evictable,
                                                  .owner = std::move(options.owner)});
  if (!reply.ok()) return reply.status();
  const ObjectLocation& loc = reply->location;
  const SharedMemoryArena& arena = conn_->arena();
  if (loc.offset > arena.size() || loc.data_size != data_size ||
      data_size > arena.size() - loc.offset) {
    return absl::InternalError(absl::StrCat("object store placed object ", id.Hex(),
                                            " outside its arena (offset ", loc.offset, ")"));
  }
  if (data_size >= conn_->options().populate_threshold_bytes) {
    arena.PopulateForWrite(loc.offset, data_size);
  }
  return MutableObjectBuffer(conn_, id, arena.base() + loc.offset, data_size);
}

absl::Status ObjectStoreClient::Seal(const ObjectId& id) {
  return conn_->Call({.type = StoreMessageType::kSeal, .id = id}).status();
}

absl::Status ObjectStoreClient::Abort(const ObjectId& id) {
  return conn_->Call({.type = StoreMessageType::kAbort, .id = id}).status();
}

absl::Status ObjectStoreClient::Put(const ObjectId& id, std::string_view data,
                                    std::string_view metadata, CreateObjectOptions options) {
  absl::StatusOr<MutableObjectBuffer> buffer = Create(id, data.size(), metadata, options);
  if (!buffer.ok()) return buffer.status();
  if (!data.empty()) std::memcpy(buffer->data(), data.data(), data.size());
  absl::Status sealed = Seal(id);
  if (!sealed.ok()) {
    IgnoreStatus(Abort(id), "the seal's error is returned; the store aborts it at the disconnect");
  }
  return sealed;
}

absl::StatusOr<ObjectBuffer> ObjectStoreClient::Get(const ObjectId& id, GetObjectOptions options) {
  absl::StatusOr<StoreReply> reply =
      conn_->Call({.type = StoreMessageType::kGet, .id = id, .wait_ms = options.wait_ms});
  if (!reply.ok()) return reply.status();
  ObjectLocation& loc = reply->location;
  const SharedMemoryArena& arena = conn_->arena();
  // Constructed first so that a bad location still releases the pin.
  ObjectBuffer buffer(conn_, id, nullptr, 0, std::move(loc.metadata));
  if (loc.offset > arena.size() || loc.data_size > arena.size() - loc.offset) {
    return absl::InternalError(absl::StrCat("object store placed object ", id.Hex(),
                                            " outside its arena (offset ", loc.offset, ")"));
  }
  if (loc.data_size >= conn_->options().populate_threshold_bytes) {
    arena.PopulateForRead(loc.offset, loc.data_size);
  }
  buffer.data_ = arena.base() + loc.offset;
  buffer.size_ = loc.data_size;
  return buffer;
}

absl::Status ObjectStoreClient::Delete(const ObjectId& id) {
  return conn_->Call({.type = StoreMessageType::kDelete, .id = id}).status();
}

absl::StatusOr<bool> ObjectStoreClient::Contains(const ObjectId& id) {
  absl::StatusOr<StoreReply> reply = conn_->Call({.type = StoreMessageType::kContains, .id = id});
  if (!reply.ok()) return reply.status();
  return reply->contains;
}

absl::Status ObjectStoreClient::DeclareOwner(const std::string& owner) {
  return conn_->Call({.type = StoreMessageType::kOwner, .owner = owner}).status();
}

absl::StatusOr<ObjectStoreStats> ObjectStoreClient::Stats() {
  absl::StatusOr<StoreReply> reply = conn_->Call({.type = StoreMessageType::kStats});
  if (!reply.ok()) return reply.status();
  return reply->stats;
}

}  // namespace tessera
