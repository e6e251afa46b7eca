#include "rpc/local_stream_socket.h"

#include <errno.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace tessera::rpc {
namespace {

absl::Status Errno(absl::string_view what) {
  return absl::UnavailableError(absl::StrCat(what, ": ", std::strerror(errno)));
}

// The sockaddr of abstract name `name` (a NUL, then the name) and its length.
socklen_t AbstractAddress(const std::string& name, sockaddr_un* address) {
  std::memset(address, 0, sizeof(*address));
  address->sun_family = AF_UNIX;
  std::memcpy(address->sun_path + 1, name.data(), name.size());
  return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
}

// Unread bytes this far into the buffer are moved to its front before it grows.
constexpr size_t kCompactAfter = 64 << 10;
constexpr size_t kReadChunk = 64 << 10;
// Room kept between frames; more (left by a large frame) is freed once it has been read.
constexpr size_t kKeptRoom = 4 << 20;

}  // namespace

absl::StatusOr<LocalListener> ListenLocal(int backlog) {
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Errno("cannot make a Unix socket");
  // Only the family: the kernel binds a unique abstract name (autobind).
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(sa_family_t)) != 0 ||
      listen(fd, backlog) != 0) {
    absl::Status error = Errno("cannot listen on an abstract Unix socket");
    close(fd);
    return error;
  }
  socklen_t length = sizeof(address);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    absl::Status error = Errno("cannot read the socket's name");
    close(fd);
    return error;
  }
  const size_t name_length = length - offsetof(sockaddr_un, sun_path);
  if (name_length < 2 || address.sun_path[0] != '\0') {
    close(fd);
    return absl::InternalError("the kernel gave the socket no abstract name");
  }
  return LocalListener{fd, std::string(address.sun_path + 1, name_length - 1)};
}

absl::StatusOr<PeerCredentials> PeerOf(int fd) {
  ucred credentials{};
  socklen_t length = sizeof(credentials);
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &length) != 0) {
    return Errno("cannot read the peer's credentials");
  }
  return PeerCredentials{credentials.pid, credentials.uid};
}

absl::StatusOr<int> AcceptSameUser(int listener_fd, int* refused) {
  while (true) {
    const int fd = accept4(listener_fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      return Errno("the listener stopped accepting");
    }
    absl::StatusOr<PeerCredentials> peer = PeerOf(fd);
    if (peer.ok() && peer->uid == geteuid()) return fd;
    close(fd);
    if (refused != nullptr) ++*refused;
  }
}

absl::StatusOr<int> ConnectLocal(const std::string& name, pid_t pid) {
  if (name.empty() || name.size() + 1 > sizeof(sockaddr_un::sun_path)) {
    return absl::InvalidArgumentError(absl::StrCat("abstract socket name of ", name.size(),
                                                   " bytes: not 1 to ",
                                                   sizeof(sockaddr_un::sun_path) - 1));
  }
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Errno("cannot make a Unix socket");
  sockaddr_un address;
  const socklen_t length = AbstractAddress(name, &address);
  while (connect(fd, reinterpret_cast<sockaddr*>(&address), length) != 0) {
    if (errno == EINTR) continue;
    absl::Status error = Errno(absl::StrCat("cannot connect to @", name));
    close(fd);
    return error;
  }
  absl::StatusOr<PeerCredentials> peer = PeerOf(fd);
  if (!peer.ok()) {
    close(fd);
    return peer.status();
  }
  if (peer->pid != pid || peer->uid != geteuid()) {
    close(fd);
    return absl::PermissionDeniedError(absl::StrCat("@", name, " is served by pid ", peer->pid,
                                                    " of uid ", peer->uid, ", not by pid ", pid,
                                                    " of uid ", geteuid()));
  }
  return fd;
}

void AppendFrame(const google::protobuf::MessageLite& message, std::string* out) {
  const size_t size = message.ByteSizeLong();
  const size_t at = out->size();
  out->resize(at + 4 + size);
  auto* p = reinterpret_cast<uint8_t*>(out->data() + at);
  const auto length = static_cast<uint32_t>(size);
  p[0] = length & 0xff;
  p[1] = (length >> 8) & 0xff;
  p[2] = (length >> 16) & 0xff;
  p[3] = (length >> 24) & 0xff;
  message.SerializeWithCachedSizesToArray(p + 4);
}

bool WriteAll(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        pollfd wait{fd, POLLOUT, 0};
        poll(&wait, 1, -1);
        continue;
      }
      return false;
    }
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

bool FrameReader::Fill(size_t want) {
  while (end_ - start_ < want) {
    if (start_ == end_ && buffer_.size() > kKeptRoom) {
      std::string().swap(buffer_);  // a large frame's room goes with it
    }
    if (start_ >= kCompactAfter || start_ == end_) {
      buffer_.erase(0, start_);
      end_ -= start_;
      start_ = 0;
    }
    // Bytes past end_ are room, not data (not zeroed again per read). A large
    // frame's room at most doubles what has arrived, so a length that promises more than is sent
    // costs no more memory than what was sent.
    const size_t unread = end_ - start_;
    const size_t room = std::max(kReadChunk, std::min(want - unread, unread));
    if (buffer_.size() < end_ + room) buffer_.resize(end_ + room);
    ssize_t n;
    do {
      n = read(fd_, buffer_.data() + end_, buffer_.size() - end_);
    } while (n < 0 && errno == EINTR);
    if (n == 0) {
      error_ = end_ == start_ ? "" : "the stream ended inside a frame";
      return false;
    }
    if (n < 0) {
      error_ = absl::StrCat("reading the stream: ", std::strerror(errno));
      return false;
    }
    end_ += static_cast<size_t>(n);
  }
  return true;
}

bool FrameReader::Next(google::protobuf::MessageLite* message) {
  if (!error_.empty()) return false;
  if (!Fill(4)) return false;
  const auto* p = reinterpret_cast<const uint8_t*>(buffer_.data() + start_);
  // Little-endian, whatever this machine's order.
  const uint32_t length = p[0] | (p[1] << 8) | (p[2] << 16) | (static_cast<uint32_t>(p[3]) << 24);
  if (length > kMaxFrameBytes) {
    error_ = absl::StrCat("a frame of ", length, " bytes, over the limit of ", kMaxFrameBytes);
    return false;
  }
  if (!Fill(4 + size_t{length})) {
    if (error_.empty()) error_ = "the stream ended inside a frame";
    return false;
  }
  const bool parsed =
      message->ParseFromArray(buffer_.data() + start_ + 4, static_cast<int>(length));
  start_ += 4 + size_t{length};
  if (!parsed) {
    error_ = absl::StrCat("a frame of ", length, " bytes that is not a ", message->GetTypeName());
    return false;
  }
  return true;
}

}  // namespace tessera::rpc
