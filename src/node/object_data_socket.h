// TCP plumbing of the agents' object data connections (object_data_server.h, object_transfer.h):
// a listening socket, a connection with a deadline, and whole reads and writes that give up at a
// deadline. Blocking sockets whose SO_RCVTIMEO/SO_SNDTIMEO are the time left, so a dead peer
// costs at most the deadline and the bulk path stays one syscall per buffer.
//
// Threading: functions only; an fd is used by one thread at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "process/unique_fd.h"

namespace tessera {

struct HostPort {
  std::string host;
  int port = 0;
};
// "host:port" or "[v6]:port". InvalidArgument naming the address otherwise.
absl::StatusOr<HostPort> SplitHostPort(const std::string& address);

// Listens on `bind_address` (an IP or a name), port 0: an ephemeral port. Unavailable when it
// cannot.
absl::StatusOr<UniqueFd> ListenTcp(const std::string& bind_address);
// The port a listening socket got.
absl::StatusOr<int> LocalPort(int fd);
// Connects to host:port before `deadline`; TCP_NODELAY set. Unavailable when it cannot.
absl::StatusOr<UniqueFd> ConnectTcp(const std::string& host, int port, absl::Time deadline);

// Writes all `size` bytes. DeadlineExceeded past `deadline`, Unavailable when the peer is gone.
absl::Status WriteAll(int fd, const void* data, size_t size, absl::Time deadline);
// Reads up to `size` bytes, stopping early only at end of stream; the count read. Errors as
// WriteAll's (a reset connection is Unavailable).
absl::StatusOr<size_t> ReadUpTo(int fd, void* data, size_t size, absl::Time deadline);

}  // namespace tessera
