#include "metrics/http_request.h"

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "base/string_util.h"

namespace tessera::metrics {
namespace {

// RFC 9110 tchar: what a method or a header name is made of.
bool IsTokenChar(char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  switch (c) {
    case '!':
    case '#':
    case '$':
    case '%':
    case '&':
    case '\'':
    case '*':
    case '+':
    case '-':
    case '.':
    case '^':
    case '_':
    case '`':
    case '|':
    case '~': return true;
    default: return false;
  }
}

bool IsToken(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!IsTokenChar(c)) return false;
  }
  return true;
}

// Visible ASCII for a request target (no spaces or controls; bytes >= 0x80 are refused too:
// a client sends them percent-encoded).
bool IsTargetChar(char c) { return c > 0x20 && c < 0x7F; }

// A header value may hold visible characters, spaces, tabs and obs-text (bytes >= 0x80).
bool IsFieldValueChar(char c) {
  const auto u = static_cast<unsigned char>(c);
  return u == '\t' || (u >= 0x20 && u != 0x7F);
}

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Splits off the next line (without its "\r\n" or "\n"); false at the end of `rest`.
bool NextLine(std::string_view& rest, std::string_view& line) {
  if (rest.empty()) return false;
  const size_t newline = rest.find('\n');
  if (newline == std::string_view::npos) {
    line = rest;
    rest = {};
  } else {
    line = rest.substr(0, newline);
    rest.remove_prefix(newline + 1);
  }
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  return true;
}

absl::Status ParseRequestLine(std::string_view line, HttpRequest& request) {
  const size_t first_space = line.find(' ');
  const size_t last_space = line.rfind(' ');
  if (first_space == std::string_view::npos || first_space == last_space) {
    return absl::InvalidArgumentError("the request line is not \"METHOD TARGET HTTP/1.x\"");
  }
  const std::string_view method = line.substr(0, first_space);
  const std::string_view target = line.substr(first_space + 1, last_space - first_space - 1);
  const std::string_view version = line.substr(last_space + 1);
  if (!IsToken(method)) return absl::InvalidArgumentError("the method is not a token");
  if (version.size() != 8 || version.substr(0, 7) != "HTTP/1." ||
      (version[7] != '0' && version[7] != '1')) {
    return absl::InvalidArgumentError(
        absl::StrCat("unsupported protocol version ", Quote(version), " (HTTP/1.0 or 1.1)"));
  }
  if (target.empty() || target[0] != '/') {
    return absl::InvalidArgumentError("the request target does not start with '/'");
  }
  for (char c : target) {
    if (!IsTargetChar(c)) {
      return absl::InvalidArgumentError(
          "the request target has a space, control or non-ASCII byte");
    }
  }
  request.method = std::string(method);
  request.target = std::string(target);
  request.minor_version = version[7] - '0';
  // Clients never send a fragment; one that does has it ignored.
  const std::string_view without_fragment = target.substr(0, target.find('#'));
  const size_t question = without_fragment.find('?');
  const std::string_view raw_path = without_fragment.substr(0, question);
  if (question != std::string_view::npos) {
    request.raw_query = std::string(without_fragment.substr(question + 1));
  }
  TESSERA_ASSIGN_OR_RETURN(request.path, PercentDecode(raw_path, /*plus_is_space=*/false));
  TESSERA_ASSIGN_OR_RETURN(request.query, ParseQueryString(request.raw_query));
  return absl::OkStatus();
}

absl::Status ParseHeaderLine(std::string_view line, HttpRequest& request) {
  if (line[0] == ' ' || line[0] == '\t') {
    return absl::InvalidArgumentError("obsolete header line folding is not accepted");
  }
  const size_t colon = line.find(':');
  if (colon == std::string_view::npos) {
    return absl::InvalidArgumentError("a header line has no ':'");
  }
  const std::string_view name = line.substr(0, colon);
  if (!IsToken(name)) {
    return absl::InvalidArgumentError(
        "a header name is not a token (no spaces, before the colon included)");
  }
  std::string_view value = line.substr(colon + 1);
  for (char c : value) {
    if (!IsFieldValueChar(c)) {
      return absl::InvalidArgumentError("a header value has a control character");
    }
  }
  while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
  while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.remove_suffix(1);
  request.headers.emplace_back(absl::AsciiStrToLower(ToAbsl(name)), std::string(value));
  return absl::OkStatus();
}

}  // namespace

std::optional<std::string_view> HttpRequest::Header(std::string_view name) const {
  for (const auto& [header, value] : headers) {
    if (absl::EqualsIgnoreCase(ToAbsl(header), ToAbsl(name))) return std::string_view(value);
  }
  return std::nullopt;
}

std::optional<std::string_view> HttpRequest::QueryValue(std::string_view name) const {
  for (const auto& [key, value] : query) {
    if (key == name) return std::string_view(value);
  }
  return std::nullopt;
}

absl::StatusOr<std::string> PercentDecode(std::string_view text, bool plus_is_space) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '+' && plus_is_space) {
      out += ' ';
    } else if (c == '%') {
      const int high = i + 1 < text.size() ? HexDigit(text[i + 1]) : -1;
      const int low = i + 2 < text.size() ? HexDigit(text[i + 2]) : -1;
      if (high < 0 || low < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("'%' at offset ", i, " is not followed by two hex digits"));
      }
      const char decoded = static_cast<char>(high * 16 + low);
      if (decoded == '\0') return absl::InvalidArgumentError("a percent escape decodes to NUL");
      out += decoded;
      i += 2;
    } else if (c == '\0') {
      return absl::InvalidArgumentError("the text has a NUL byte");
    } else {
      out += c;
    }
  }
  return out;
}

absl::StatusOr<std::vector<std::pair<std::string, std::string>>> ParseQueryString(
    std::string_view query) {
  std::vector<std::pair<std::string, std::string>> parameters;
  while (!query.empty()) {
    const size_t amp = query.find('&');
    const std::string_view part = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    if (part.empty()) continue;
    const size_t equals = part.find('=');
    TESSERA_ASSIGN_OR_RETURN(std::string key,
                             PercentDecode(part.substr(0, equals), /*plus_is_space=*/true));
    std::string value;
    if (equals != std::string_view::npos) {
      TESSERA_ASSIGN_OR_RETURN(value, PercentDecode(part.substr(equals + 1), true));
    }
    parameters.emplace_back(std::move(key), std::move(value));
  }
  return parameters;
}

absl::StatusOr<HostAndPort> ParseHostHeader(std::string_view value) {
  HostAndPort out;
  std::string_view host = value;
  std::string_view port;
  const bool bracketed = !value.empty() && value.front() == '[';
  if (bracketed) {
    const size_t close = value.find(']');
    if (close == std::string_view::npos) {
      return absl::InvalidArgumentError("the Host header opens '[' without closing it");
    }
    host = value.substr(1, close - 1);
    const std::string_view after = value.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') {
        return absl::InvalidArgumentError("the Host header has text after its ']'");
      }
      port = after.substr(1);
      if (port.empty()) return absl::InvalidArgumentError("the Host header's port is empty");
    }
  } else if (const size_t colon = value.rfind(':'); colon != std::string_view::npos) {
    host = value.substr(0, colon);
    port = value.substr(colon + 1);
    if (port.empty()) return absl::InvalidArgumentError("the Host header's port is empty");
  }
  if (host.empty()) return absl::InvalidArgumentError("the Host header names no host");
  for (char c : host) {
    const bool allowed = absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '-' ||
                         c == '.' || c == '_' || (bracketed && c == ':');
    if (!allowed) {
      return absl::InvalidArgumentError("the Host header has a character no host name has");
    }
  }
  if (!port.empty()) {
    int number = 0;
    for (char c : port) {
      if (c < '0' || c > '9' || number > 65535) {
        return absl::InvalidArgumentError("the Host header's port is not a number 1..65535");
      }
      number = number * 10 + (c - '0');
    }
    if (number < 1 || number > 65535) {
      return absl::InvalidArgumentError("the Host header's port is not a number 1..65535");
    }
    out.port = number;
  }
  out.host = absl::AsciiStrToLower(ToAbsl(host));
  return out;
}

absl::StatusOr<HttpRequest> ParseHttpRequestHead(std::string_view head) {
  HttpRequest request;
  std::string_view rest = head;
  std::string_view line;
  // RFC 9112 2.2: a server should ignore empty lines before the request line.
  do {
    if (!NextLine(rest, line)) return absl::InvalidArgumentError("the request is empty");
  } while (line.empty());
  TESSERA_RETURN_IF_ERROR(ParseRequestLine(line, request));
  while (NextLine(rest, line) && !line.empty()) {
    TESSERA_RETURN_IF_ERROR(ParseHeaderLine(line, request));
  }
  return request;
}

}  // namespace tessera::metrics
