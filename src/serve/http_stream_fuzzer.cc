// libFuzzer target: HttpRequestParser fed any bytes, whole and split in two at a point the first
// two input bytes choose, never crashes and keeps its promises: Feed consumes no more than it
// is given, and all of it unless a request ended or was refused; the parser never holds more
// than its limits allow; every request it returns is within them; every refusal is one of its
// statuses with a one-line reason; and the requests and the refusal (its status) are the same
// however the bytes are split, as a server reading a socket depends on.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "serve/http_stream.h"

namespace {

void Require(bool condition, const char* what) {
  if (condition) return;
  std::fprintf(stderr, "broken promise: %s\n", what);
  std::abort();
}

// Small limits, so that inputs of a few hundred bytes reach them.
constexpr tessera::serve::HttpStreamLimits kLimits{512, 8, 1024};

struct Outcome {
  std::vector<std::string> requests;  // method, target, headers and body, joined
  int refusal = 0;                    // the refusal's status; 0 when none
  bool operator==(const Outcome&) const = default;
};

void CheckRequest(const tessera::serve::HttpRequestMessage& request, Outcome& outcome) {
  Require(request.body.size() <= kLimits.max_body_bytes, "a body within the limit");
  Require(request.head.headers.size() <= kLimits.max_header_count, "headers within the limit");
  Require(request.head.minor_version == 0 || request.head.minor_version == 1, "HTTP/1.0 or 1.1");
  std::string summary = request.head.method + " " + request.head.target;
  for (const auto& [name, value] : request.head.headers) summary += "\n" + name + ":" + value;
  outcome.requests.push_back(summary + "\n\n" + request.body);
}

void CheckRefusal(const tessera::serve::HttpStreamError& error, Outcome& outcome) {
  const int status = error.status;
  Require(status == 400 || status == 413 || status == 431 || status == 501 || status == 505,
          "a refusal's status is 400, 413, 431, 501 or 505");
  Require(!error.reason.empty() && error.reason.find('\n') == std::string::npos,
          "a one-line reason");
  outcome.refusal = status;
}

Outcome Parse(const std::vector<std::string_view>& pieces) {
  tessera::serve::HttpRequestParser parser(kLimits);
  Outcome outcome;
  for (std::string_view rest : pieces) {
    while (!rest.empty()) {
      const size_t used = parser.Feed(rest);
      Require(used <= rest.size(), "Feed consumes no more than it is given");
      Require(parser.buffered_bytes() <= kLimits.max_head_bytes + kLimits.max_body_bytes +
                                             tessera::serve::kMaxChunkLineBytes,
              "the parser holds no more than its limits");
      rest.remove_prefix(used);
      if (parser.failed()) {
        CheckRefusal(parser.error(), outcome);
        Require(parser.Feed("x") == 0, "nothing is taken after a refusal");
        return outcome;
      }
      if (!parser.done()) {
        Require(rest.empty(), "all of it is taken while the request goes on");
        continue;
      }
      CheckRequest(parser.TakeRequest(), outcome);
      Require(parser.idle(), "idle after a request is taken");
    }
  }
  return outcome;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const std::string_view input(reinterpret_cast<const char*>(data) + 2, size - 2);
  const size_t split = ((static_cast<size_t>(data[0]) << 8) | data[1]) % (input.size() + 1);
  const Outcome whole = Parse({input});
  const Outcome split_in_two = Parse({input.substr(0, split), input.substr(split)});
  Require(whole == split_in_two, "the same requests and refusal however the bytes are split");
  return 0;
}
