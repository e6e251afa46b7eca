// HttpRequest and the parser of an HTTP/1.x request head (request line and headers, up to the
// blank line), as HttpServer receives it:
//
//   GET /metrics?name=tessera_tasks%5Ftotal HTTP/1.1\r\n
//   Host: head:8080\r\n
//   \r\n
//
// The request target must be origin-form (starting "/"); its path and query are
// percent-decoded (the query's "+" is a space too). Lines may end "\r\n" or a bare "\n" (as
// RFC 9112 lets a recipient accept). Header names are lower-cased; obsolete line folding, a
// header without a colon, a space before the colon, control characters, a malformed
// percent escape and a decoded NUL are refused. Only the head is parsed: a body is never read.
// Errors are InvalidArgument with one line saying what is wrong (the server answers 400).
//
// Pure functions; thread-safe; linear in the input.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace tessera::metrics {

struct HttpRequest {
  std::string method;                                        // as sent, case-sensitive: "GET"
  std::string target;                                        // as sent: "/metrics?x=1"
  std::string path;                                          // percent-decoded: "/metrics"
  std::string raw_query;                                     // after '?', not decoded: "x=1"
  std::vector<std::pair<std::string, std::string>> query;    // decoded, in order
  std::vector<std::pair<std::string, std::string>> headers;  // names lower-case, in order
  int minor_version = 1;                                     // HTTP/1.<minor_version>

  // The first header named `name` (any case), or nullopt.
  std::optional<std::string_view> Header(std::string_view name) const;
  // The first query parameter named `name` (exactly), or nullopt.
  std::optional<std::string_view> QueryValue(std::string_view name) const;
};

// Parses `head`: the bytes up to and including the blank line that ends the headers (a head
// without that line is parsed as if it had it).
absl::StatusOr<HttpRequest> ParseHttpRequestHead(std::string_view head);

// A Host header's value split (RFC 9110 7.2): "name", "name:port", "[v6addr]" or "[v6addr]:port".
struct HostAndPort {
  std::string host;  // lower-cased; an IPv6 address without its brackets
  int port = -1;     // -1 when the value names none
};
// InvalidArgument, one line, for an empty host, a port that is not 1..65535, an unclosed bracket,
// or a character no host name or address has (only letters, digits, '-', '.', '_' and, inside
// brackets, ':').
absl::StatusOr<HostAndPort> ParseHostHeader(std::string_view value);

// Decodes %XX escapes (and "+" as a space when `plus_is_space`). InvalidArgument for a "%" not
// followed by two hex digits, and for a NUL, decoded or not: the result never holds one.
absl::StatusOr<std::string> PercentDecode(std::string_view text, bool plus_is_space);

// "a=1&b=&c" -> (a, 1), (b, ""), (c, ""), each part percent-decoded with "+" as a space; empty
// parts are skipped.
absl::StatusOr<std::vector<std::pair<std::string, std::string>>> ParseQueryString(
    std::string_view query);

}  // namespace tessera::metrics
