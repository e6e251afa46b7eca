// libFuzzer target: the HTTP request-head parser and the query decoder never crash on any input,
// and what they accept keeps their promises (an origin-form path, lower-case header names, no
// NUL in anything decoded), and the Host header splitter returns a lower-case host and a
// port in range.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "metrics/http_request.h"

namespace {

void Require(bool condition, const char* what) {
  if (condition) return;
  std::fprintf(stderr, "broken promise: %s\n", what);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  if (auto request = tessera::metrics::ParseHttpRequestHead(text); request.ok()) {
    Require(!request->method.empty(), "a method");
    Require(!request->target.empty() && request->target[0] == '/', "an origin-form target");
    Require(request->path.find('\0') == std::string_view::npos, "no NUL in the path");
    Require(request->minor_version == 0 || request->minor_version == 1, "HTTP/1.0 or 1.1");
    for (const auto& [name, value] : request->headers) {
      Require(!name.empty(), "a header name");
      for (char c : name) Require(!(c >= 'A' && c <= 'Z'), "a lower-case header name");
      Require(value.find('\n') == std::string_view::npos, "no newline in a header value");
    }
  }
  if (auto query = tessera::metrics::ParseQueryString(text); query.ok()) {
    for (const auto& [key, value] : *query) {
      Require(
          key.find('\0') == std::string_view::npos && value.find('\0') == std::string_view::npos,
          "no NUL in a decoded parameter");
    }
  }
  if (auto host = tessera::metrics::ParseHostHeader(text); host.ok()) {
    Require(!host->host.empty(), "a host");
    Require(host->port == -1 || (host->port >= 1 && host->port <= 65535), "a port 1..65535");
    for (char c : host->host) Require(!(c >= 'A' && c <= 'Z'), "a lower-case host");
  }
  return 0;
}
