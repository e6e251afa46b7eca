// HttpRequestParser fed as a connection would feed it (whole, in pieces, byte by byte,
// pipelined): Content-Length and chunked bodies (extensions ignored, trailers dropped), limits
// checked as bytes arrive (431, 413), refused framings (400, 501), versions (505), the Host
// rule, 100-continue; and the response helpers (status line, framing headers, keep-alive,
// chunks).
#include "serve/http_stream.h"

#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera::serve {
namespace {

using ::testing::HasSubstr;

struct Parsed {
  std::vector<HttpRequestMessage> requests;
  std::optional<HttpStreamError> error;
  bool idle_at_end = false;
};

// Feeds `input` in pieces of `piece` bytes (all at once when 0), taking each whole request as
// a server would, and feeding what follows it afterwards.
Parsed ParseAll(std::string_view input, size_t piece = 0, HttpStreamLimits limits = {}) {
  HttpRequestParser parser(limits);
  Parsed out;
  const size_t step = piece == 0 ? input.size() : piece;
  for (size_t at = 0; at < input.size(); at += step) {
    std::string_view rest = input.substr(at, step);
    while (!rest.empty()) {
      const size_t used = parser.Feed(rest);
      rest.remove_prefix(used);
      if (parser.failed()) {
        out.error = parser.error();
        return out;
      }
      if (parser.done()) {
        out.requests.push_back(parser.TakeRequest());
      } else if (used == 0) {
        ADD_FAILURE() << "Feed took nothing while neither done nor failed";
        return out;
      }
    }
  }
  out.idle_at_end = parser.idle();
  return out;
}

HttpStreamError ErrorOf(std::string_view input, HttpStreamLimits limits = {}) {
  Parsed parsed = ParseAll(input, 0, limits);
  EXPECT_TRUE(parsed.error.has_value()) << "accepted: " << input;
  return parsed.error.value_or(HttpStreamError{0, ""});
}

constexpr char kChunked[] =
    "POST /upload HTTP/1.1\r\n"
    "Host: a\r\n"
    "Transfer-Encoding: chunked\r\n"
    "\r\n"
    "4;name=value\r\nWiki\r\n"
    "5\r\npedia\r\n"
    "E \r\n in\r\n\r\nchunks.\r\n"
    "0\r\n"
    "Expires: never\r\n"
    "\r\n"
    "GET /next HTTP/1.1\r\nHost: a\r\n\r\n";

TEST(HttpRequestParserTest, ReadsAContentLengthBody) {
  const Parsed parsed =
      ParseAll("POST /echo?x=1 HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello");
  ASSERT_FALSE(parsed.error.has_value()) << parsed.error->reason;
  ASSERT_EQ(parsed.requests.size(), 1u);
  EXPECT_EQ(parsed.requests[0].head.method, "POST");
  EXPECT_EQ(parsed.requests[0].head.path, "/echo");
  EXPECT_EQ(parsed.requests[0].head.raw_query, "x=1");
  EXPECT_EQ(parsed.requests[0].body, "hello");
  EXPECT_TRUE(parsed.idle_at_end);
}

TEST(HttpRequestParserTest, DecodesChunkedBodiesIgnoringExtensionsAndDroppingTrailers) {
  const Parsed parsed = ParseAll(kChunked);
  ASSERT_FALSE(parsed.error.has_value()) << parsed.error->reason;
  ASSERT_EQ(parsed.requests.size(), 2u);
  EXPECT_EQ(parsed.requests[0].body, "Wikipedia in\r\n\r\nchunks.");
  for (const auto& [name, value] : parsed.requests[0].head.headers) EXPECT_NE(name, "expires");
  EXPECT_EQ(parsed.requests[1].head.path, "/next");
}

TEST(HttpRequestParserTest, ParsesTheSameHoweverTheBytesAreSplit) {
  const std::string input =
      absl::StrCat(kChunked, "PUT /p HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabc\r\n\r\n",
                   "GET /last HTTP/1.0\n\n");
  for (size_t piece = 1; piece <= input.size(); ++piece) {
    const Parsed parsed = ParseAll(input, piece);
    ASSERT_FALSE(parsed.error.has_value()) << "pieces of " << piece << ": " << parsed.error->reason;
    ASSERT_EQ(parsed.requests.size(), 4u) << "pieces of " << piece;
    EXPECT_EQ(parsed.requests[0].body, "Wikipedia in\r\n\r\nchunks.");
    EXPECT_EQ(parsed.requests[2].body, "abc");
    EXPECT_EQ(parsed.requests[3].head.path, "/last");
    EXPECT_EQ(parsed.requests[3].head.minor_version, 0);
    EXPECT_TRUE(parsed.idle_at_end);
  }
}

TEST(HttpRequestParserTest, StopsAtTheEndOfEachPipelinedRequest) {
  const std::string first = "GET /a HTTP/1.1\r\nHost: a\r\n\r\n";
  const std::string second = "GET /b HTTP/1.1\r\nHost: a\r\n\r\n";
  HttpRequestParser parser;
  const std::string both = first + second;
  EXPECT_EQ(parser.Feed(both), first.size());
  ASSERT_TRUE(parser.done());
  EXPECT_EQ(parser.Feed(second), 0u) << "nothing more is taken until the request is";
  EXPECT_EQ(parser.TakeRequest().head.path, "/a");
  EXPECT_TRUE(parser.idle());
  EXPECT_EQ(parser.Feed(second), second.size());
  EXPECT_EQ(parser.TakeRequest().head.path, "/b");
}

TEST(HttpRequestParserTest, ABodyWithoutALengthIsEmpty) {
  const Parsed parsed = ParseAll(
      "POST /a HTTP/1.1\r\nHost: a\r\n\r\n"
      "GET /b HTTP/1.1\r\nHost: a\r\n\r\n");
  ASSERT_EQ(parsed.requests.size(), 2u);
  EXPECT_EQ(parsed.requests[0].body, "");
  EXPECT_EQ(parsed.requests[1].head.path, "/b");
}

TEST(HttpRequestParserTest, ReportsWhereItIs) {
  HttpRequestParser parser;
  EXPECT_EQ(parser.Feed("\r\n"), 2u);
  EXPECT_TRUE(parser.idle()) << "empty lines between requests are not a request";
  parser.Feed("POST / HTTP/1.1\r\nHost: a\r\n");
  EXPECT_TRUE(parser.reading_head());
  parser.Feed("Content-Length: 4\r\n\r\nab");
  EXPECT_TRUE(parser.head_complete());
  EXPECT_FALSE(parser.done());
  EXPECT_EQ(parser.head().method, "POST");
  EXPECT_EQ(parser.buffered_bytes(), 2u);
  parser.Feed("cd");
  EXPECT_TRUE(parser.done());
}

TEST(HttpRequestParserTest, RefusesAHeadPastItsByteLimitBeforeItEnds) {
  HttpStreamLimits limits;
  limits.max_head_bytes = 1024;
  HttpRequestParser parser(limits);
  parser.Feed("GET / HTTP/1.1\r\nHost: a\r\nX-Long: ");
  parser.Feed(std::string(2000, 'a'));  // no blank line yet
  ASSERT_TRUE(parser.failed());
  EXPECT_EQ(parser.error().status, 431);
  EXPECT_THAT(parser.error().reason, HasSubstr("exceed 1024 bytes"));
  EXPECT_LE(parser.buffered_bytes(), 1024u);
  EXPECT_EQ(parser.Feed("\r\n\r\n"), 0u) << "nothing after a refusal";
}

TEST(HttpRequestParserTest, RefusesMoreHeadersThanItsLimit) {
  HttpStreamLimits limits;
  limits.max_header_count = 3;
  const std::string three = "GET / HTTP/1.1\r\nHost: a\r\nB: 1\r\nC: 1\r\n";
  EXPECT_EQ(ParseAll(three + "\r\n", 0, limits).requests.size(), 1u);
  const HttpStreamError error = ErrorOf(three + "D: 1\r\n", limits);  // refused before the end
  EXPECT_EQ(error.status, 431);
  EXPECT_EQ(error.reason, "the request has more than 3 headers");
}

TEST(HttpRequestParserTest, RefusesAContentLengthPastTheBodyLimitBeforeTheBody) {
  HttpStreamLimits limits;
  limits.max_body_bytes = 1000;
  const HttpStreamError error =
      ErrorOf("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1001\r\n\r\n", limits);
  EXPECT_EQ(error.status, 413);
  EXPECT_EQ(error.reason, "the request body of 1001 bytes exceeds the limit of 1000 bytes");
  EXPECT_EQ(ParseAll("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1000\r\n\r\n" +
                         std::string(1000, 'x'),
                     0, limits)
                .requests.size(),
            1u);
}

TEST(HttpRequestParserTest, RefusesAChunkedBodyPastTheBodyLimit) {
  HttpStreamLimits limits;
  limits.max_body_bytes = 10;
  const std::string head = "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n";
  EXPECT_EQ(ParseAll(head + "5\r\n12345\r\n5\r\n67890\r\n0\r\n\r\n", 0, limits).requests.size(),
            1u);
  const HttpStreamError error = ErrorOf(head + "5\r\n12345\r\n6\r\n", limits);
  EXPECT_EQ(error.status, 413);
  EXPECT_EQ(ErrorOf(head + "fffffffffffffffffffff\r\n", limits).status, 413);
}

TEST(HttpRequestParserTest, RefusesTrailersPastTheLimits) {
  HttpStreamLimits limits;
  limits.max_header_count = 2;
  const std::string body =
      "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nx\r\n0\r\n";
  EXPECT_EQ(ParseAll(body + "A: 1\r\nB: 2\r\n\r\n", 0, limits).requests.size(), 1u);
  EXPECT_EQ(ErrorOf(body + "A: 1\r\nB: 2\r\nC: 3\r\n", limits).status, 431);
}

TEST(HttpRequestParserTest, RefusesTransferCodingsOtherThanChunked) {
  const HttpStreamError error =
      ErrorOf("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n");
  EXPECT_EQ(error.status, 501);
  EXPECT_EQ(error.reason, "transfer-coding \"gzip\" is not implemented (chunked only)");
  EXPECT_EQ(
      ErrorOf("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, chunked\r\n\r\n").status,
      400);
  EXPECT_EQ(ErrorOf("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: ,\r\n\r\n").status, 400);
  EXPECT_EQ(ParseAll("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: CHUNKED\r\n\r\n0\r\n\r\n")
                .requests.size(),
            1u);
}

TEST(HttpRequestParserTest, RefusesFramingThatCouldSmuggleARequest) {
  EXPECT_EQ(ErrorOf("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n"
                    "Transfer-Encoding: chunked\r\n\r\n")
                .status,
            400);
  EXPECT_EQ(ErrorOf("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n")
                .reason,
            "the Content-Length header is not one decimal number");
  for (const char* length : {"-1", "1e3", "0x10", "", "+5", "12345678901234567890"}) {
    EXPECT_EQ(
        ErrorOf(absl::StrCat("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: ", length, "\r\n\r\n"))
            .status,
        400)
        << length;
  }
  const Parsed repeated = ParseAll("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3, 3\r\n\r\nabc");
  ASSERT_EQ(repeated.requests.size(), 1u);
  EXPECT_EQ(repeated.requests[0].body, "abc");
}

TEST(HttpRequestParserTest, AnswersOtherHttpVersionsWith505) {
  for (const char* version : {"HTTP/2.0", "HTTP/2", "HTTP/1.2", "HTTP/0.9"}) {
    const HttpStreamError error = ErrorOf(absl::StrCat("GET / ", version, "\r\nHost: a\r\n\r\n"));
    EXPECT_EQ(error.status, 505) << version;
    EXPECT_THAT(error.reason, HasSubstr(version));
  }
  EXPECT_EQ(ErrorOf("GET / HTTQ/1.1\r\nHost: a\r\n\r\n").status, 400);
  EXPECT_EQ(ErrorOf("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n").status, 505);
}

TEST(HttpRequestParserTest, AnswersMalformedHeadsWith400) {
  const HttpStreamError error = ErrorOf("GARBAGE\r\n\r\n");
  EXPECT_EQ(error.status, 400);
  EXPECT_THAT(error.reason, HasSubstr("request line"));
  EXPECT_EQ(ErrorOf("GET / HTTP/1.1\r\nHost: a\r\nNo colon here\r\n\r\n").status, 400);
  EXPECT_EQ(ErrorOf("GET / HTTP/1.1\r\nHost: a\r\n folded\r\n\r\n").status, 400);
  EXPECT_EQ(ErrorOf("GET /a b HTTP/1.1\r\nHost: a\r\n\r\n").status, 400);
}

TEST(HttpRequestParserTest, RequiresOneHostOnHttp11) {
  EXPECT_EQ(ErrorOf("GET / HTTP/1.1\r\n\r\n").reason,
            "an HTTP/1.1 request must have a Host header");
  EXPECT_EQ(ErrorOf("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n").status, 400);
  EXPECT_EQ(ParseAll("GET / HTTP/1.0\r\n\r\n").requests.size(), 1u);
}

TEST(HttpRequestParserTest, RefusesMalformedChunks) {
  const std::string head = "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n";
  EXPECT_EQ(ErrorOf(head + "zz\r\n").reason, "a chunk size is not a hexadecimal number");
  EXPECT_EQ(ErrorOf(head + "3\r\nabcd\r\n").reason, "a chunk's data is not followed by CRLF");
  EXPECT_EQ(ErrorOf(head + "3 x\r\n").status, 400);
  EXPECT_EQ(ErrorOf(head + "3;" + std::string(kMaxChunkLineBytes, 'e')).status, 400);
  EXPECT_EQ(ErrorOf(head + "3;a\x01\r\n").status, 400);
  // A bare LF is accepted where CRLF is expected, as in the head.
  EXPECT_EQ(ParseAll(head + "3\nabc\n0\n\n").requests.size(), 1u);
}

TEST(HttpRequestParserTest, AsksFor100ContinueOnceWhileTheBodyIsToCome) {
  HttpRequestParser parser;
  parser.Feed("POST / HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n");
  EXPECT_TRUE(parser.TakeContinue());
  EXPECT_FALSE(parser.TakeContinue());
  parser.Feed("hello");
  EXPECT_EQ(parser.TakeRequest().body, "hello");

  parser.Feed(
      "POST / HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\nhello");
  EXPECT_FALSE(parser.TakeContinue()) << "the body came with the head";
  parser.TakeRequest();
  parser.Feed("POST / HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n");
  EXPECT_FALSE(parser.TakeContinue()) << "HTTP/1.0 has no 100 Continue";
}

// --- The response side ---------------------------------------------------------------------

TEST(HttpResponseTest, SerializesTheHeadWithItsOwnFraming) {
  const HttpHeaders headers = {{"content-type", "text/plain"},
                               {"Content-Length", "999"},
                               {"transfer-encoding", "gzip"},
                               {"Connection", "upgrade"},
                               {"x-a", "b"}};
  EXPECT_EQ(SerializeResponseHead(200, headers, BodyFraming::kContentLength, 5, true),
            "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\nx-a: b\r\nContent-Length: 5\r\n"
            "Connection: keep-alive\r\n\r\n");
  EXPECT_EQ(SerializeResponseHead(404, {}, BodyFraming::kChunked, 0, false),
            "HTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(SerializeResponseHead(200, {}, BodyFraming::kUntilClose, 0, true),
            "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(SerializeResponseHead(204, {}, BodyFraming::kNone, 0, true),
            "HTTP/1.1 204 No Content\r\nConnection: keep-alive\r\n\r\n");
}

TEST(HttpResponseTest, NamesReasonPhrases) {
  EXPECT_EQ(HttpReasonPhrase(408), "Request Timeout");
  EXPECT_EQ(HttpReasonPhrase(431), "Request Header Fields Too Large");
  EXPECT_EQ(HttpReasonPhrase(505), "HTTP Version Not Supported");
  EXPECT_EQ(HttpReasonPhrase(299), "Success");
  EXPECT_EQ(HttpReasonPhrase(599), "Server Error");
}

TEST(HttpResponseTest, ValidatesAHandlersHead) {
  EXPECT_TRUE(ValidateResponseHead(200, {{"x-a", "b\tc"}}).ok());
  EXPECT_EQ(ValidateResponseHead(99, {}).message(), "response status 99 is not 200..599");
  EXPECT_EQ(ValidateResponseHead(600, {}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ValidateResponseHead(200, {{"bad name", "v"}}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ValidateResponseHead(200, {{"x-a", "b\r\nSet-Cookie: c"}}).code(),
            absl::StatusCode::kInvalidArgument);
}

metrics::HttpRequest Head(std::string_view text) { return ParseAll(text).requests.at(0).head; }

TEST(HttpResponseTest, KeepsAliveAsTheVersionAndConnectionHeaderSay) {
  EXPECT_TRUE(WantsKeepAlive(Head("GET / HTTP/1.1\r\nHost: a\r\n\r\n")));
  EXPECT_FALSE(WantsKeepAlive(Head("GET / HTTP/1.1\r\nHost: a\r\nConnection: Close\r\n\r\n")));
  EXPECT_FALSE(WantsKeepAlive(Head("GET / HTTP/1.1\r\nHost: a\r\nConnection: te, close\r\n\r\n")));
  EXPECT_FALSE(WantsKeepAlive(Head("GET / HTTP/1.0\r\n\r\n")));
  EXPECT_TRUE(WantsKeepAlive(Head("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")));
}

TEST(HttpResponseTest, EncodesChunks) {
  EXPECT_EQ(EncodeChunk("data: x\n\n"), "9\r\ndata: x\n\n\r\n");
  EXPECT_EQ(EncodeChunk(std::string(26, 'a')), "1a\r\n" + std::string(26, 'a') + "\r\n");
  EXPECT_EQ(EncodeChunk(""), "") << "an empty chunk would end the body";
  EXPECT_EQ(ChunkSizeLine(255), "ff\r\n");
  EXPECT_EQ(kLastChunk, "0\r\n\r\n");
}

TEST(HttpResponseTest, FramingHeadersAreTheServers) {
  EXPECT_TRUE(IsFramingHeader("Content-Length"));
  EXPECT_TRUE(IsFramingHeader("keep-alive"));
  EXPECT_FALSE(IsFramingHeader("content-type"));
}

}  // namespace
}  // namespace tessera::serve
