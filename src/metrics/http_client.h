// HttpCall: one HTTP/1.1 request without a body to HOST:PORT over TCP, for the CLI's calls on
// the head's HTTP endpoint (`tessera dashboard` asks it for a login ticket).
//
//   auto reply = metrics::HttpCall("127.0.0.1:8265", "POST", "/api/v1/login-tickets",
//                                  {{"Authorization", "Bearer " + token}}, absl::Seconds(10));
//
// The Host header is HOST:PORT. The reply is read to the end of the stream (HttpServer closes
// after each answer), at most 1 MiB of it, everything within `timeout`. Unavailable (one line
// naming the address) when it cannot be resolved, reached or read in time; Internal when the
// reply is not HTTP. The header values are never part of an error.
//
// Threading: thread-safe (no shared state); blocking.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace tessera::metrics {

struct HttpCallReply {
  int status = 0;
  std::string body;
};

absl::StatusOr<HttpCallReply> HttpCall(
    const std::string& host_port, std::string_view method, std::string_view target,
    const std::vector<std::pair<std::string, std::string>>& headers, absl::Duration timeout);

}  // namespace tessera::metrics
