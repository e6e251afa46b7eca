// The HTTP/1.1 wire format of the serve proxy, both directions, with no I/O:
//
// - HttpRequestParser reads what a client sends on one connection, incrementally, one request
//   at a time: the head (request line and headers, parsed by metrics::ParseHttpRequestHead),
//   then the body, by Content-Length or by `Transfer-Encoding: chunked` (chunk extensions
//   ignored, trailers read and dropped). Bytes may arrive split anywhere; Feed consumes them up
//   to the end of the request in progress and leaves the rest (a pipelined next request) to the
//   caller, who feeds it once the request is taken. Limits are checked as bytes arrive, so a
//   parser never holds more than max_head_bytes of head, max_body_bytes of body and one chunk
//   size line (kMaxChunkLineBytes). A request that breaks a rule gets an HttpStreamError: the
//   status to answer and a one-line reason (400 malformed request line or headers, 413 body too
//   large, 431 head too large or too many headers, 501 a transfer-coding other than chunked,
//   505 an HTTP version other than 1.0 and 1.1); after one the parser takes nothing more (the
//   connection must close: where the next request starts is unknown).
//   A request with neither Content-Length nor Transfer-Encoding has an empty body; one with
//   both is refused (400: the two disagreeing is how requests are smuggled past proxies).
// - The response side: the status line and headers (SerializeResponseHead), one chunk
//   (EncodeChunk), the last chunk (kLastChunk), and whether a request lets its connection stay
//   open (WantsKeepAlive).
//
// Threading: a parser is thread-compatible (one connection's loop uses it); the free functions
// are pure and thread-safe. Cost: linear in the bytes fed; a head is scanned once for its end
// and parsed once; a body is copied once, into the request.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "metrics/http_request.h"

namespace tessera::serve {

// Header (name, value) pairs, in order. Request headers have lower-case names (the parser's).
using HttpHeaders = std::vector<std::pair<std::string, std::string>>;

struct HttpStreamLimits {
  // The request line and headers, blank line included; also the most a chunked body's
  // trailers may take.
  size_t max_head_bytes = 16 * 1024;
  // Header lines of one head (and trailer lines of one body).
  size_t max_header_count = 100;
  // The body, after chunked decoding.
  size_t max_body_bytes = 100 * 1024 * 1024;
};

// The longest chunk-size line (size, extensions, CRLF) a chunked body may have.
inline constexpr size_t kMaxChunkLineBytes = 4096;

// Why a request was refused: the status to answer and one line saying why.
struct HttpStreamError {
  int status = 400;
  std::string reason;
};

// One whole request.
struct HttpRequestMessage {
  metrics::HttpRequest head;
  std::string body;  // chunked bodies decoded
};

class HttpRequestParser {
 public:
  explicit HttpRequestParser(HttpStreamLimits limits = {});

  // Reads `bytes` as the next bytes of the connection and returns how many belong to the
  // request in progress: all of them, or fewer once the request is whole (done()) or refused
  // (failed()). Then, until TakeRequest, it consumes nothing (returns 0).
  size_t Feed(std::string_view bytes);

  // No byte of a request since the last one was taken (empty lines between requests aside).
  bool idle() const { return state_ == State::kIdle; }
  // The head is arriving (some bytes of it, not yet its blank line).
  bool reading_head() const { return state_ == State::kHead; }
  // The head is parsed (the body may still be arriving); head() is valid.
  bool head_complete() const;
  const metrics::HttpRequest& head() const { return request_.head; }
  // The whole request is here: TakeRequest.
  bool done() const { return state_ == State::kDone; }
  bool failed() const { return state_ == State::kFailed; }
  // Why; meaningful when failed().
  const HttpStreamError& error() const { return error_; }
  // True once per request whose head asked "Expect: 100-continue" (HTTP/1.1) while its body
  // is still to come: the caller sends "100 Continue" (kContinueResponse) then.
  bool TakeContinue();
  // The whole request; the parser then reads the next one. Call only when done().
  HttpRequestMessage TakeRequest();
  // What the parser holds: the head so far, a partial chunk-size line, the body so far.
  size_t buffered_bytes() const;

 private:
  enum class State {
    kIdle,
    kHead,
    kFixedBody,     // Content-Length: `remaining_` bytes to go
    kChunkSize,     // the chunk-size line (in `line_`)
    kChunkData,     // `remaining_` bytes of the chunk to go
    kChunkDataEnd,  // the CRLF after a chunk's data
    kTrailers,      // trailer lines up to the blank line
    kDone,
    kFailed,
  };

  // Scans a block of header lines for the blank line that ends it, counting lines.
  class BlockScanner {
   public:
    // How many bytes of `bytes` belong to the block: up to and including its blank line, or
    // all of them when it has not ended yet.
    size_t Scan(std::string_view bytes);
    bool ended() const { return ended_; }
    size_t lines() const { return lines_; }  // non-empty lines so far

   private:
    size_t line_length_ = 0;  // bytes of the current line so far
    char last_ = '\0';        // the current line's last byte so far
    size_t lines_ = 0;
    bool ended_ = false;
  };

  // Each consumes at least one byte of a non-empty `bytes` unless it fails.
  size_t Step(std::string_view bytes);
  size_t ReadHead(std::string_view bytes);
  size_t ReadChunkSizeLine(std::string_view bytes);
  size_t ReadChunkDataEnd(std::string_view bytes);
  size_t ReadTrailers(std::string_view bytes);
  size_t ReadBodyBytes(std::string_view bytes);
  void FinishHead();
  // Sets the body's framing from the parsed head's Content-Length and Transfer-Encoding.
  void FrameBody();
  void FrameChunkedBody(std::string_view transfer_encoding);
  void FrameFixedBody(std::string_view content_length);
  void ParseChunkSize();
  void Fail(int status, std::string reason);

  HttpStreamLimits limits_;
  State state_ = State::kIdle;
  HttpStreamError error_;
  std::string head_;  // the head so far (kHead)
  std::string line_;  // the chunk-size line so far (kChunkSize)
  BlockScanner scanner_;
  size_t trailer_bytes_ = 0;
  uint64_t remaining_ = 0;
  bool after_cr_ = false;  // kChunkDataEnd: the CR came
  bool continue_pending_ = false;
  HttpRequestMessage request_;
};

// --- The response side ---------------------------------------------------------------------

// How a response's body is delimited on the wire.
enum class BodyFraming {
  kNone,           // no body and no length (204, 304; framing of its own)
  kContentLength,  // "Content-Length: n"
  kChunked,        // "Transfer-Encoding: chunked", then EncodeChunk pieces and kLastChunk
  kUntilClose,     // raw bytes ended by closing the connection (streaming to HTTP/1.0)
};

inline constexpr std::string_view kLastChunk = "0\r\n\r\n";
inline constexpr std::string_view kContinueResponse = "HTTP/1.1 100 Continue\r\n\r\n";

// "OK", "Not Found", ...; for a status without a registered phrase, one for its class.
std::string_view HttpReasonPhrase(int status);

// Whether the response to `request` may leave the connection open: HTTP/1.1 unless its
// Connection header names "close", HTTP/1.0 only when it names "keep-alive".
bool WantsKeepAlive(const metrics::HttpRequest& request);

// The headers the server writes itself (Content-Length, Transfer-Encoding, Connection,
// Keep-Alive); a handler's are dropped. `name` in any case.
bool IsFramingHeader(std::string_view name);

// InvalidArgument, one line, unless `status` is 200..599 and every header name is a token and
// every value is free of control characters (CR and LF included) but tab.
absl::Status ValidateResponseHead(int status, const HttpHeaders& headers);

// "HTTP/1.1 <status> <reason>\r\n", `headers` but framing ones, the framing header
// (Content-Length: `content_length` or Transfer-Encoding: chunked), "Connection: keep-alive" or
// "Connection: close", and the blank line. kUntilClose needs keep_alive false. Call with a head
// ValidateResponseHead accepts.
std::string SerializeResponseHead(int status, const HttpHeaders& headers, BodyFraming framing,
                                  uint64_t content_length, bool keep_alive);

// One chunk of a chunked body: "<hex size>\r\n<data>\r\n"; "" for empty data (an empty chunk
// would end the body).
std::string EncodeChunk(std::string_view data);
// The line before a chunk's data: "<hex size>\r\n".
std::string ChunkSizeLine(size_t size);

}  // namespace tessera::serve
