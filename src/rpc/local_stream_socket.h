// The same-host path of a worker's task stream: an abstract Unix socket (Linux; no file to make,
// trust or clean up, the name picked by the kernel) whose two ends check each other through the
// kernel (SO_PEERCRED) instead of a token, carrying length-prefixed protobuf messages. A frame is
// a 4-byte little-endian length, then that many bytes of one serialized message.
//
// Who may connect: a listener accepts only a process of its own effective user; a connecting
// process checks that the listener is the process it expected (its pid and user), so nothing is
// sent to a process that took the name first. Nothing secret travels on it either way.
//
// Threading: the functions are thread-safe; a FrameReader is used by one thread.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "google/protobuf/message_lite.h"

namespace tessera::rpc {

// The largest frame either end accepts (a larger length breaks the stream).
inline constexpr uint32_t kMaxFrameBytes = 256u << 20;

struct LocalListener {
  int fd = -1;       // listening, close-on-exec
  std::string name;  // the abstract name, without its leading NUL
};
// Listens on an abstract Unix socket named by the kernel (autobind), backlog `backlog`.
absl::StatusOr<LocalListener> ListenLocal(int backlog);

struct PeerCredentials {
  pid_t pid = 0;
  uid_t uid = 0;
};
// The process at the other end of the connected Unix socket `fd`, as the kernel saw it connect.
absl::StatusOr<PeerCredentials> PeerOf(int fd);

// Accepts the next connection on `listener_fd` from a process of this process's effective user,
// closing any other (`*refused` counts them, when given). Blocks; an error once the listener is
// shut down (shutdown(2)) or closed.
absl::StatusOr<int> AcceptSameUser(int listener_fd, int* refused = nullptr);

// Connects to abstract socket `name` and checks that the process listening there is `pid`, of
// this process's effective user: the connected fd (close-on-exec), or why not (the fd closed).
absl::StatusOr<int> ConnectLocal(const std::string& name, pid_t pid);

// Appends `message` to `out` as one frame.
void AppendFrame(const google::protobuf::MessageLite& message, std::string* out);

// Writes all of `bytes` to `fd`, blocking (never SIGPIPE): false on an error (the peer is gone).
bool WriteAll(int fd, std::string_view bytes);

// Reads frames from a stream socket or pipe it does not own, buffering what arrives.
class FrameReader {
 public:
  explicit FrameReader(int fd) : fd_(fd) {}
  // Blocks for the next frame and parses it into `message`: false at the end of the stream, on
  // a read error, a frame over kMaxFrameBytes or one that does not parse (the stream is then
  // unusable; `error()` says which).
  bool Next(google::protobuf::MessageLite* message);
  const std::string& error() const { return error_; }
  // Whether bytes already read from the socket wait here to be parsed: the socket may then have
  // nothing to read while a frame (or its start) is already in hand, so Next must be called
  // before waiting for the socket to become readable.
  bool buffered() const { return end_ > start_; }

 private:
  // Reads until at least `want` bytes are buffered past `start_`: false at the end or an error.
  bool Fill(size_t want);

  const int fd_;
  std::string buffer_;  // [start_, end_) is read and not yet parsed; past end_ is room
  size_t start_ = 0;
  size_t end_ = 0;
  std::string error_;
};

}  // namespace tessera::rpc
