#include "node/object_data_socket.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace tessera {
namespace {

// Bounds each blocking call to the time left before `deadline`.
absl::Status SetTimeouts(int fd, absl::Time deadline) {
  const absl::Duration left = deadline - absl::Now();
  if (left <= absl::ZeroDuration())
    return absl::DeadlineExceededError("the data transfer timed out");
  timeval tv = absl::ToTimeval(std::min(left, absl::Hours(24)));
  if (tv.tv_sec == 0 && tv.tv_usec == 0) tv.tv_usec = 1;  // 0 would mean "no timeout"
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  return absl::OkStatus();
}

absl::Status IoError(const char* what, int error) {
  if (error == EAGAIN || error == EWOULDBLOCK) {
    return absl::DeadlineExceededError("the data transfer timed out");
  }
  return absl::UnavailableError(absl::StrCat(what, ": ", std::strerror(error)));
}

struct AddrInfoDeleter {
  void operator()(addrinfo* info) const { ::freeaddrinfo(info); }
};

absl::StatusOr<std::unique_ptr<addrinfo, AddrInfoDeleter>> Resolve(const std::string& host,
                                                                   int port, int flags) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = flags;
  addrinfo* result = nullptr;
  const std::string service = std::to_string(port);
  int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &result);
  if (rc != 0) {
    return absl::UnavailableError(absl::StrCat("cannot resolve ", host, ": ", gai_strerror(rc)));
  }
  return std::unique_ptr<addrinfo, AddrInfoDeleter>(result);
}

}  // namespace

absl::StatusOr<HostPort> SplitHostPort(const std::string& address) {
  const size_t colon = address.rfind(':');
  HostPort out;
  if (colon == std::string::npos || colon == 0 ||
      !absl::SimpleAtoi(address.substr(colon + 1), &out.port) || out.port <= 0 ||
      out.port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("address: '", address, "' is not host:port"));
  }
  out.host = address.substr(0, colon);
  if (out.host.size() >= 2 && out.host.front() == '[' && out.host.back() == ']') {
    out.host = out.host.substr(1, out.host.size() - 2);
  }
  return out;
}

absl::StatusOr<UniqueFd> ListenTcp(const std::string& bind_address) {
  std::string host = bind_address;
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  auto resolved = Resolve(host, 0, AI_PASSIVE);
  if (!resolved.ok()) return resolved.status();
  int last_error = 0;
  for (addrinfo* ai = resolved->get(); ai != nullptr; ai = ai->ai_next) {
    UniqueFd fd(::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol));
    if (fd.get() < 0) {
      last_error = errno;
      continue;
    }
    int one = 1;
    ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(fd.get(), ai->ai_addr, ai->ai_addrlen) == 0 && ::listen(fd.get(), 64) == 0) {
      return fd;
    }
    last_error = errno;
  }
  return absl::UnavailableError(
      absl::StrCat("cannot listen on ", bind_address, ": ", std::strerror(last_error)));
}

absl::StatusOr<int> LocalPort(int fd) {
  sockaddr_storage address{};
  socklen_t length = sizeof(address);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    return absl::InternalError(absl::StrCat("getsockname: ", std::strerror(errno)));
  }
  if (address.ss_family == AF_INET6) {
    return ntohs(reinterpret_cast<sockaddr_in6*>(&address)->sin6_port);
  }
  return ntohs(reinterpret_cast<sockaddr_in*>(&address)->sin_port);
}

absl::StatusOr<UniqueFd> ConnectTcp(const std::string& host, int port, absl::Time deadline) {
  auto resolved = Resolve(host, port, 0);
  if (!resolved.ok()) return resolved.status();
  int last_error = 0;
  for (addrinfo* ai = resolved->get(); ai != nullptr; ai = ai->ai_next) {
    UniqueFd fd(::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol));
    if (fd.get() < 0) {
      last_error = errno;
      continue;
    }
    // connect() honours SO_SNDTIMEO.
    if (absl::Status timeouts = SetTimeouts(fd.get(), deadline); !timeouts.ok()) return timeouts;
    if (::connect(fd.get(), ai->ai_addr, ai->ai_addrlen) == 0) {
      int one = 1;
      ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      return fd;
    }
    last_error = errno;
  }
  return absl::UnavailableError(
      absl::StrCat("cannot connect to ", host, ":", port, ": ", std::strerror(last_error)));
}

absl::Status WriteAll(int fd, const void* data, size_t size, absl::Time deadline) {
  const char* at = static_cast<const char*>(data);
  while (size > 0) {
    if (absl::Status timeouts = SetTimeouts(fd, deadline); !timeouts.ok()) return timeouts;
    ssize_t n = ::send(fd, at, size, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      return IoError("send", errno);
    }
    at += n;
    size -= static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

absl::StatusOr<size_t> ReadUpTo(int fd, void* data, size_t size, absl::Time deadline) {
  char* at = static_cast<char*>(data);
  size_t got = 0;
  while (got < size) {
    if (absl::Status timeouts = SetTimeouts(fd, deadline); !timeouts.ok()) return timeouts;
    ssize_t n = ::recv(fd, at + got, size - got, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return IoError("recv", errno);
    }
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  return got;
}

}  // namespace tessera
