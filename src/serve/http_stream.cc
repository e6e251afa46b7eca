#include "serve/http_stream.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/string_util.h"

namespace tessera::serve {
namespace {

// A Content-Length body is given room up front only up to this much: a client that announces
// 100 MiB and sends nothing must not cost 100 MiB.
constexpr size_t kMaxBodyReserve = 1024 * 1024;
// A Content-Length of more digits than this overflows 64 bits (and any limit).
constexpr size_t kMaxLengthDigits = 19;

bool IsTokenChar(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) ||
         std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

// A control character other than tab (CR and LF included): what no header value may hold.
bool IsControl(char c) {
  const auto u = static_cast<unsigned char>(c);
  return u != '\t' && (u < 0x20 || u == 0x7F);
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Calls `item` with each trimmed, non-empty element of a comma-separated header list until it
// returns false.
template <typename Item>
void ForEachListItem(std::string_view list, Item&& item) {
  while (true) {
    const size_t comma = list.find(',');
    const std::string_view element = Trim(list.substr(0, comma));
    if (!element.empty() && !item(element)) return;
    if (comma == std::string_view::npos) return;
    list.remove_prefix(comma + 1);
  }
}

// The last word of the request line ("HTTP/1.1" when well formed).
std::string_view RequestLineVersion(std::string_view head) {
  std::string_view line = head.substr(0, head.find('\n'));
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  const size_t space = line.rfind(' ');
  return space == std::string_view::npos ? std::string_view() : line.substr(space + 1);
}

// "HTTP/2", "HTTP/2.0", "HTTP/0.9", "HTTP/1.2": a version this server does not speak (505).
// Anything that is not a version at all is left to the head parser (400).
bool IsOtherHttpVersion(std::string_view version) {
  if (!absl::StartsWith(ToAbsl(version), "HTTP/")) return false;
  const std::string_view number = version.substr(5);
  if (number == "1.0" || number == "1.1") return false;
  const auto digit = [](char c) { return c >= '0' && c <= '9'; };
  return (number.size() == 1 && digit(number[0])) ||
         (number.size() == 3 && digit(number[0]) && number[1] == '.' && digit(number[2]));
}

}  // namespace

size_t HttpRequestParser::BlockScanner::Scan(std::string_view bytes) {
  size_t at = 0;
  while (at < bytes.size()) {
    const void* found = std::memchr(bytes.data() + at, '\n', bytes.size() - at);
    if (found == nullptr) {
      line_length_ += bytes.size() - at;
      last_ = bytes.back();
      return bytes.size();
    }
    const size_t newline = static_cast<size_t>(static_cast<const char*>(found) - bytes.data());
    if (newline > at) {
      line_length_ += newline - at;
      last_ = bytes[newline - 1];
    }
    // An empty line, or one holding only its CR: the block's end.
    if (line_length_ == 0 || (line_length_ == 1 && last_ == '\r')) {
      ended_ = true;
      return newline + 1;
    }
    ++lines_;
    line_length_ = 0;
    at = newline + 1;
  }
  return bytes.size();
}

HttpRequestParser::HttpRequestParser(HttpStreamLimits limits) : limits_(limits) {}

size_t HttpRequestParser::Feed(std::string_view bytes) {
  size_t used = 0;
  while (used < bytes.size() && state_ != State::kDone && state_ != State::kFailed) {
    used += Step(bytes.substr(used));
  }
  return used;
}

size_t HttpRequestParser::Step(std::string_view bytes) {
  switch (state_) {
    case State::kIdle: {
      // RFC 9112 2.2: empty lines before a request line are ignored (some clients send a CRLF
      // after a body).
      size_t skipped = 0;
      while (skipped < bytes.size() && (bytes[skipped] == '\r' || bytes[skipped] == '\n')) {
        ++skipped;
      }
      if (skipped == bytes.size()) return skipped;
      state_ = State::kHead;
      scanner_ = BlockScanner();
      return skipped + ReadHead(bytes.substr(skipped));
    }
    case State::kHead: return ReadHead(bytes);
    case State::kFixedBody:
    case State::kChunkData: return ReadBodyBytes(bytes);
    case State::kChunkSize: return ReadChunkSizeLine(bytes);
    case State::kChunkDataEnd: return ReadChunkDataEnd(bytes);
    case State::kTrailers: return ReadTrailers(bytes);
    case State::kDone:
    case State::kFailed: return 0;
  }
  return 0;
}

size_t HttpRequestParser::ReadHead(std::string_view bytes) {
  const size_t take = scanner_.Scan(bytes);
  if (head_.size() + take > limits_.max_head_bytes) {
    Fail(431,
         absl::StrCat("the request line and headers exceed ", limits_.max_head_bytes, " bytes"));
    return 0;
  }
  head_.append(bytes.data(), take);
  // The request line is the first line; the rest are headers.
  if (scanner_.lines() > limits_.max_header_count + 1) {
    Fail(431, absl::StrCat("the request has more than ", limits_.max_header_count, " headers"));
    return 0;
  }
  if (scanner_.ended()) FinishHead();
  return take;
}

void HttpRequestParser::FinishHead() {
  const std::string_view version = RequestLineVersion(head_);
  if (IsOtherHttpVersion(version)) {
    Fail(505, absl::StrCat("HTTP version ", Quote(version), " is not supported (1.0 or 1.1)"));
    return;
  }
  absl::StatusOr<metrics::HttpRequest> parsed = metrics::ParseHttpRequestHead(head_);
  std::string().swap(head_);
  if (!parsed.ok()) {
    Fail(400, std::string(parsed.status().message()));
    return;
  }
  request_.head = *std::move(parsed);
  const auto hosts = std::count_if(request_.head.headers.begin(), request_.head.headers.end(),
                                   [](const auto& header) { return header.first == "host"; });
  // RFC 9112 3.2: a server must answer 400 to an HTTP/1.1 request without exactly one Host.
  if (hosts > 1 || (hosts == 0 && request_.head.minor_version == 1)) {
    Fail(400, hosts > 1 ? "the request has more than one Host header"
                        : "an HTTP/1.1 request must have a Host header");
    return;
  }
  FrameBody();
  if (state_ == State::kDone || state_ == State::kFailed) return;
  const std::optional<std::string_view> expect = request_.head.Header("expect");
  continue_pending_ = request_.head.minor_version == 1 && expect.has_value() &&
                      absl::EqualsIgnoreCase(ToAbsl(Trim(*expect)), "100-continue");
}

void HttpRequestParser::FrameBody() {
  std::string transfer_encoding;
  std::string content_length;
  bool has_transfer_encoding = false;
  bool has_content_length = false;
  // Repeated headers are one comma-separated list (RFC 9110 5.3).
  for (const auto& [name, value] : request_.head.headers) {
    if (name == "transfer-encoding") {
      absl::StrAppend(&transfer_encoding, has_transfer_encoding ? "," : "", value);
      has_transfer_encoding = true;
    } else if (name == "content-length") {
      absl::StrAppend(&content_length, has_content_length ? "," : "", value);
      has_content_length = true;
    }
  }
  if (has_transfer_encoding && has_content_length) {
    Fail(400, "the request has both Transfer-Encoding and Content-Length");
  } else if (has_transfer_encoding) {
    FrameChunkedBody(transfer_encoding);
  } else if (has_content_length) {
    FrameFixedBody(content_length);
  } else {
    state_ = State::kDone;  // no length: no body
  }
}

void HttpRequestParser::FrameChunkedBody(std::string_view transfer_encoding) {
  int codings = 0;
  int chunked = 0;
  std::string unknown;
  ForEachListItem(transfer_encoding, [&](std::string_view coding) {
    ++codings;
    if (absl::EqualsIgnoreCase(ToAbsl(coding), "chunked")) {
      ++chunked;
      return true;
    }
    unknown = std::string(coding);
    return false;
  });
  if (!unknown.empty()) {
    Fail(501,
         absl::StrCat("transfer-coding ", Quote(unknown), " is not implemented (chunked only)"));
  } else if (codings == 0) {
    Fail(400, "the Transfer-Encoding header is empty");
  } else if (chunked > 1) {
    Fail(400, "the request body is chunked more than once");
  } else {
    line_.clear();
    state_ = State::kChunkSize;
  }
}

void HttpRequestParser::FrameFixedBody(std::string_view content_length) {
  bool valid = true;
  bool seen = false;
  uint64_t length = 0;
  ForEachListItem(content_length, [&](std::string_view text) {
    uint64_t value = 0;
    valid = text.size() <= kMaxLengthDigits;
    for (size_t i = 0; valid && i < text.size(); ++i) {
      valid = text[i] >= '0' && text[i] <= '9';
      value = value * 10 + static_cast<uint64_t>(text[i] - '0');
    }
    // Repeated values must agree (RFC 9112 6.3): "5, 5" is 5, "5, 6" is refused.
    valid = valid && (!seen || value == length);
    length = value;
    seen = true;
    return valid;
  });
  if (!valid || !seen) {
    Fail(400, "the Content-Length header is not one decimal number");
    return;
  }
  if (length > limits_.max_body_bytes) {
    Fail(413, absl::StrCat("the request body of ", length, " bytes exceeds the limit of ",
                           limits_.max_body_bytes, " bytes"));
    return;
  }
  if (length == 0) {
    state_ = State::kDone;
    return;
  }
  request_.body.reserve(static_cast<size_t>(std::min<uint64_t>(length, kMaxBodyReserve)));
  remaining_ = length;
  state_ = State::kFixedBody;
}

size_t HttpRequestParser::ReadBodyBytes(std::string_view bytes) {
  const size_t take = static_cast<size_t>(std::min<uint64_t>(bytes.size(), remaining_));
  request_.body.append(bytes.data(), take);
  remaining_ -= take;
  if (remaining_ == 0) {
    if (state_ == State::kFixedBody) {
      state_ = State::kDone;
      continue_pending_ = false;
    } else {
      state_ = State::kChunkDataEnd;
      after_cr_ = false;
    }
  }
  return take;
}

size_t HttpRequestParser::ReadChunkSizeLine(std::string_view bytes) {
  const size_t newline = bytes.find('\n');
  const size_t take = newline == std::string_view::npos ? bytes.size() : newline + 1;
  if (line_.size() + take > kMaxChunkLineBytes) {
    Fail(400, absl::StrCat("a chunk-size line is longer than ", kMaxChunkLineBytes, " bytes"));
    return 0;
  }
  line_.append(bytes.data(), newline == std::string_view::npos ? take : newline);
  if (newline != std::string_view::npos) ParseChunkSize();
  return take;
}

void HttpRequestParser::ParseChunkSize() {
  std::string_view line = line_;
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  if (std::any_of(line.begin(), line.end(), IsControl)) {
    Fail(400, "a chunk-size line has a control character");
    return;
  }
  uint64_t size = 0;
  size_t digits = 0;
  for (; digits < line.size() && HexValue(line[digits]) >= 0; ++digits) {
    if (size > (~uint64_t{0} >> 4)) {
      size = ~uint64_t{0};  // past 64 bits: past every limit, refused below
      break;
    }
    size = size * 16 + static_cast<uint64_t>(HexValue(line[digits]));
  }
  if (digits == 0) {
    Fail(400, "a chunk size is not a hexadecimal number");
    return;
  }
  // What may follow the size: whitespace, then extensions (";name=value"), which are ignored.
  std::string_view rest = line.substr(std::min(digits, line.size()));
  while (!rest.empty() && (rest.front() == ' ' || rest.front() == '\t')) rest.remove_prefix(1);
  if (size != ~uint64_t{0} && !rest.empty() && rest.front() != ';') {
    Fail(400, "a chunk size is followed by something that is not an extension");
    return;
  }
  if (size > limits_.max_body_bytes - request_.body.size()) {
    Fail(413, absl::StrCat("the chunked request body exceeds the limit of ", limits_.max_body_bytes,
                           " bytes"));
    return;
  }
  line_.clear();
  if (size == 0) {
    scanner_ = BlockScanner();
    trailer_bytes_ = 0;
    state_ = State::kTrailers;
    return;
  }
  remaining_ = size;
  state_ = State::kChunkData;
}

size_t HttpRequestParser::ReadChunkDataEnd(std::string_view bytes) {
  const char c = bytes.front();
  if (c == '\r' && !after_cr_) {
    after_cr_ = true;
    return 1;
  }
  if (c == '\n') {
    state_ = State::kChunkSize;
    return 1;
  }
  Fail(400, "a chunk's data is not followed by CRLF");
  return 0;
}

size_t HttpRequestParser::ReadTrailers(std::string_view bytes) {
  const size_t take = scanner_.Scan(bytes);
  trailer_bytes_ += take;
  if (trailer_bytes_ > limits_.max_head_bytes) {
    Fail(431,
         absl::StrCat("the chunked body's trailers exceed ", limits_.max_head_bytes, " bytes"));
    return 0;
  }
  if (scanner_.lines() > limits_.max_header_count) {
    Fail(431,
         absl::StrCat("the chunked body has more than ", limits_.max_header_count, " trailers"));
    return 0;
  }
  if (scanner_.ended()) {
    state_ = State::kDone;  // trailers are dropped: nothing downstream reads them
    continue_pending_ = false;
  }
  return take;
}

void HttpRequestParser::Fail(int status, std::string reason) {
  state_ = State::kFailed;
  error_ = HttpStreamError{status, std::move(reason)};
  continue_pending_ = false;
  std::string().swap(head_);
  std::string().swap(line_);
  std::string().swap(request_.body);
}

bool HttpRequestParser::head_complete() const {
  switch (state_) {
    case State::kFixedBody:
    case State::kChunkSize:
    case State::kChunkData:
    case State::kChunkDataEnd:
    case State::kTrailers:
    case State::kDone: return true;
    default: return false;
  }
}

bool HttpRequestParser::TakeContinue() {
  const bool send = continue_pending_ && head_complete() && state_ != State::kDone;
  continue_pending_ = false;
  return send;
}

HttpRequestMessage HttpRequestParser::TakeRequest() {
  HttpRequestMessage out = std::move(request_);
  request_ = HttpRequestMessage();
  state_ = State::kIdle;
  head_.clear();
  line_.clear();
  scanner_ = BlockScanner();
  trailer_bytes_ = 0;
  remaining_ = 0;
  after_cr_ = false;
  continue_pending_ = false;
  return out;
}

size_t HttpRequestParser::buffered_bytes() const {
  return head_.size() + line_.size() + request_.body.size();
}

// --- The response side ---------------------------------------------------------------------

std::string_view HttpReasonPhrase(int status) {
  switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 201: return "Created";
    case 202: return "Accepted";
    case 203: return "Non-Authoritative Information";
    case 204: return "No Content";
    case 205: return "Reset Content";
    case 206: return "Partial Content";
    case 300: return "Multiple Choices";
    case 301: return "Moved Permanently";
    case 302: return "Found";
    case 303: return "See Other";
    case 304: return "Not Modified";
    case 307: return "Temporary Redirect";
    case 308: return "Permanent Redirect";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 402: return "Payment Required";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 406: return "Not Acceptable";
    case 407: return "Proxy Authentication Required";
    case 408: return "Request Timeout";
    case 409: return "Conflict";
    case 410: return "Gone";
    case 411: return "Length Required";
    case 412: return "Precondition Failed";
    case 413: return "Content Too Large";
    case 414: return "URI Too Long";
    case 415: return "Unsupported Media Type";
    case 416: return "Range Not Satisfiable";
    case 417: return "Expectation Failed";
    case 421: return "Misdirected Request";
    case 422: return "Unprocessable Content";
    case 425: return "Too Early";
    case 426: return "Upgrade Required";
    case 428: return "Precondition Required";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 451: return "Unavailable For Legal Reasons";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    case 505: return "HTTP Version Not Supported";
    default: break;
  }
  if (status < 300) return "Success";
  if (status < 400) return "Redirection";
  return status < 500 ? "Client Error" : "Server Error";
}

bool WantsKeepAlive(const metrics::HttpRequest& request) {
  bool close = false;
  bool keep_alive = false;
  for (const auto& [name, value] : request.headers) {
    if (name != "connection") continue;
    ForEachListItem(value, [&](std::string_view option) {
      close = close || absl::EqualsIgnoreCase(ToAbsl(option), "close");
      keep_alive = keep_alive || absl::EqualsIgnoreCase(ToAbsl(option), "keep-alive");
      return true;
    });
  }
  if (close) return false;
  return request.minor_version >= 1 || keep_alive;
}

bool IsFramingHeader(std::string_view name) {
  for (const char* framing : {"content-length", "transfer-encoding", "connection", "keep-alive"}) {
    if (absl::EqualsIgnoreCase(ToAbsl(name), framing)) return true;
  }
  return false;
}

absl::Status ValidateResponseHead(int status, const HttpHeaders& headers) {
  if (status < 200 || status > 599) {
    return absl::InvalidArgumentError(absl::StrCat("response status ", status, " is not 200..599"));
  }
  for (const auto& [name, value] : headers) {
    if (name.empty() || !std::all_of(name.begin(), name.end(), IsTokenChar)) {
      return absl::InvalidArgumentError(
          absl::StrCat("response header name ", Quote(name), " is not a token"));
    }
    if (std::any_of(value.begin(), value.end(), IsControl)) {
      return absl::InvalidArgumentError(
          absl::StrCat("the value of response header ", Quote(name), " has a control character"));
    }
  }
  return absl::OkStatus();
}

std::string SerializeResponseHead(int status, const HttpHeaders& headers, BodyFraming framing,
                                  uint64_t content_length, bool keep_alive) {
  std::string out =
      absl::StrCat("HTTP/1.1 ", status, " ", ToAbsl(HttpReasonPhrase(status)), "\r\n");
  for (const auto& [name, value] : headers) {
    if (!IsFramingHeader(name)) absl::StrAppend(&out, name, ": ", value, "\r\n");
  }
  if (framing == BodyFraming::kContentLength) {
    absl::StrAppend(&out, "Content-Length: ", content_length, "\r\n");
  } else if (framing == BodyFraming::kChunked) {
    out += "Transfer-Encoding: chunked\r\n";
  }
  out += keep_alive && framing != BodyFraming::kUntilClose ? "Connection: keep-alive\r\n\r\n"
                                                           : "Connection: close\r\n\r\n";
  return out;
}

std::string ChunkSizeLine(size_t size) { return absl::StrCat(absl::Hex(size), "\r\n"); }

std::string EncodeChunk(std::string_view data) {
  if (data.empty()) return std::string();
  return absl::StrCat(ChunkSizeLine(data.size()), ToAbsl(data), "\r\n");
}

}  // namespace tessera::serve
