#include "metrics/http_client.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/string_util.h"

namespace tessera::metrics {
namespace {

constexpr size_t kMaxReplyBytes = 1 << 20;

// Waits for `events` on `fd` until `deadline`; false when it passed (or poll failed).
bool WaitUntil(int fd, short events, absl::Time deadline) {
  while (true) {
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) return false;
    pollfd entry = {fd, events, 0};
    const int n = poll(&entry, 1, static_cast<int>(std::min<int64_t>(
                                      absl::ToInt64Milliseconds(absl::Ceil(left, absl::Milliseconds(1))),
                                      3600 * 1000)));
    if (n < 0 && errno == EINTR) continue;
    return n > 0;
  }
}

}  // namespace

absl::StatusOr<HttpCallReply> HttpCall(
    const std::string& host_port, std::string_view method, std::string_view target,
    const std::vector<std::pair<std::string, std::string>>& headers, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  const size_t colon = host_port.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == host_port.size()) {
    return absl::InvalidArgumentError(absl::StrCat("not a HOST:PORT: ", host_port));
  }
  std::string host = host_port.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  const std::string port = host_port.substr(colon + 1);
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (const int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &found); rc != 0) {
    return absl::UnavailableError(absl::StrCat("cannot resolve ", host_port, ": ", gai_strerror(rc)));
  }
  int fd = -1;
  for (addrinfo* it = found; it != nullptr && fd < 0; it = it->ai_next) {
    fd = socket(it->ai_family, it->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, it->ai_protocol);
    if (fd < 0) continue;
    if (connect(fd, it->ai_addr, it->ai_addrlen) == 0) break;
    int error = errno;
    if (error == EINPROGRESS && WaitUntil(fd, POLLOUT, deadline)) {
      socklen_t size = sizeof(error);
      getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &size);
      if (error == 0) break;
    }
    close(fd);
    fd = -1;
  }
  freeaddrinfo(found);
  if (fd < 0) return absl::UnavailableError(absl::StrCat("cannot connect to ", host_port));

  std::string request = absl::StrCat(ToAbsl(method), " ", ToAbsl(target), " HTTP/1.1\r\nHost: ", host_port,
                                     "\r\nConnection: close\r\n");
  for (const auto& [name, value] : headers) absl::StrAppend(&request, name, ": ", value, "\r\n");
  request += "\r\n";
  std::string_view rest = request;
  while (!rest.empty()) {
    const ssize_t n = send(fd, rest.data(), rest.size(), MSG_NOSIGNAL);
    if (n > 0) {
      rest.remove_prefix(static_cast<size_t>(n));
    } else if (n < 0 && errno == EINTR) {
    } else if (n < 0 && errno == EAGAIN && WaitUntil(fd, POLLOUT, deadline)) {
    } else {
      close(fd);
      return absl::UnavailableError(absl::StrCat("cannot send the request to ", host_port));
    }
  }
  std::string raw;
  char buffer[16384];
  while (raw.size() <= kMaxReplyBytes) {
    const ssize_t n = recv(fd, buffer, sizeof(buffer), 0);
    if (n > 0) {
      raw.append(buffer, static_cast<size_t>(n));
    } else if (n == 0) {
      break;
    } else if (errno == EINTR) {
    } else if (errno == EAGAIN && WaitUntil(fd, POLLIN, deadline)) {
    } else {
      close(fd);
      return absl::UnavailableError(
          absl::StrCat(host_port, " did not answer within ", absl::FormatDuration(timeout)));
    }
  }
  close(fd);
  const size_t head_end = raw.find("\r\n\r\n");
  int status = 0;
  if (head_end == std::string::npos || raw.compare(0, 9, "HTTP/1.1 ") != 0 ||
      !absl::SimpleAtoi(raw.substr(9, 3), &status)) {
    return absl::InternalError(absl::StrCat(host_port, " did not answer in HTTP"));
  }
  return HttpCallReply{status, raw.substr(head_end + 4)};
}

}  // namespace tessera::metrics
