// HttpGet (and HttpExchange, any method without a body): one HTTP/1.1 request over a real TCP
// connection, for tests of the head's and the agents' HTTP endpoints (metrics::HttpServer
// answers one request per connection and closes it, so the reply is read to the end of the
// stream). The Host header is host:port.
//
//   auto reply = metrics_testing::HttpGet("127.0.0.1", port, "/metrics",
//                                         "Authorization: Bearer t\r\n");
//
// Thread-compatible test code; blocking, with a receive timeout of kHttpTestPatience.
#pragma once

#include <netdb.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"

namespace tessera::metrics_testing {

inline constexpr absl::Duration kHttpTestPatience = absl::Seconds(30);

struct HttpReply {
  int status = 0;
  std::map<std::string, std::string> headers;  // names in lower case
  std::string body;
};

// `extra_headers`: whole header lines, each ending "\r\n". Unavailable when the host cannot be
// reached; Internal when the reply is not HTTP.
inline absl::StatusOr<HttpReply> HttpExchange(const std::string& host, int port,
                                              std::string_view method, std::string_view path,
                                              std::string_view extra_headers = "") {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0) {
    return absl::UnavailableError(absl::StrCat("cannot resolve ", host));
  }
  int fd = -1;
  for (addrinfo* it = found; it != nullptr && fd < 0; it = it->ai_next) {
    fd = ::socket(it->ai_family, it->ai_socktype | SOCK_CLOEXEC, it->ai_protocol);
    if (fd >= 0 && ::connect(fd, it->ai_addr, it->ai_addrlen) != 0) {
      ::close(fd);
      fd = -1;
    }
  }
  ::freeaddrinfo(found);
  if (fd < 0) return absl::UnavailableError(absl::StrCat("cannot connect to ", host, ":", port));
  const timeval patience{static_cast<time_t>(absl::ToInt64Seconds(kHttpTestPatience)), 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &patience, sizeof(patience));
  const std::string request =
      absl::StrCat(std::string(method), " ", std::string(path), " HTTP/1.1\r\nHost: ",
                   host.find(':') != std::string::npos ? absl::StrCat("[", host, "]") : host, ":",
                   port, "\r\n", std::string(extra_headers), "\r\n");
  for (size_t sent = 0; sent < request.size();) {
    const ssize_t n = ::send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) {
      ::close(fd);
      return absl::UnavailableError("cannot send the request");
    }
    sent += static_cast<size_t>(n);
  }
  std::string raw;
  char buffer[16384];
  while (true) {
    const ssize_t n = ::recv(fd, buffer, sizeof(buffer), 0);
    if (n <= 0) break;
    raw.append(buffer, static_cast<size_t>(n));
  }
  ::close(fd);

  const size_t head_end = raw.find("\r\n\r\n");
  if (head_end == std::string::npos) return absl::InternalError("no complete reply head");
  HttpReply reply;
  reply.body = raw.substr(head_end + 4);
  std::vector<std::string> lines = absl::StrSplit(raw.substr(0, head_end), "\r\n");
  std::vector<std::string> status_line = absl::StrSplit(lines[0], ' ');
  if (status_line.size() < 2 || !absl::SimpleAtoi(status_line[1], &reply.status)) {
    return absl::InternalError(absl::StrCat("not an HTTP status line: ", lines[0]));
  }
  for (size_t i = 1; i < lines.size(); ++i) {
    const size_t colon = lines[i].find(':');
    if (colon == std::string::npos) continue;
    std::string name = lines[i].substr(0, colon);
    std::transform(name.begin(), name.end(), name.begin(),
                   [](unsigned char c) { return std::tolower(c); });
    std::string value = lines[i].substr(colon + 1);
    value.erase(0, value.find_first_not_of(' '));
    reply.headers[name] = value;
  }
  return reply;
}

inline absl::StatusOr<HttpReply> HttpGet(const std::string& host, int port, std::string_view path,
                                         std::string_view extra_headers = "") {
  return HttpExchange(host, port, "GET", path, extra_headers);
}

}  // namespace tessera::metrics_testing
