// The request-head parser: the parts of a request it yields, percent-decoding, and the heads it
// refuses (each a 400 from the server).
#include "metrics/http_request.h"

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera::metrics {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;

TEST(HttpRequestTest, ARequestHeadYieldsMethodPathQueryAndHeaders) {
  auto request = ParseHttpRequestHead(
      "GET /api/nodes%2Fall?name=tessera%5Ftasks&x=a+b&flag&&empty= HTTP/1.1\r\n"
      "Host: head:8080\r\n"
      "X-Mixed-Case:   spaced value \t\r\n"
      "\r\n");
  ASSERT_TRUE(request.ok()) << request.status();
  EXPECT_EQ(request->method, "GET");
  EXPECT_EQ(request->target, "/api/nodes%2Fall?name=tessera%5Ftasks&x=a+b&flag&&empty=");
  EXPECT_EQ(request->path, "/api/nodes/all");
  EXPECT_EQ(request->raw_query, "name=tessera%5Ftasks&x=a+b&flag&&empty=");
  EXPECT_THAT(request->query, ElementsAre(Pair("name", "tessera_tasks"), Pair("x", "a b"),
                                          Pair("flag", ""), Pair("empty", "")));
  EXPECT_EQ(request->QueryValue("x"), "a b");
  EXPECT_EQ(request->QueryValue("missing"), std::nullopt);
  EXPECT_EQ(request->Header("HOST"), "head:8080");
  EXPECT_EQ(request->Header("x-mixed-case"), "spaced value");
  EXPECT_EQ(request->minor_version, 1);
}

TEST(HttpRequestTest, BareNewlinesAndHttp10AreAccepted) {
  auto request = ParseHttpRequestHead("\r\nHEAD / HTTP/1.0\nAccept: */*\n\n");
  ASSERT_TRUE(request.ok()) << request.status();
  EXPECT_EQ(request->method, "HEAD");
  EXPECT_EQ(request->path, "/");
  EXPECT_EQ(request->minor_version, 0);
  EXPECT_EQ(request->Header("accept"), "*/*");
}

TEST(HttpRequestTest, TheFragmentIsIgnored) {
  auto request = ParseHttpRequestHead("GET /a?b=1#frag HTTP/1.1\r\n\r\n");
  ASSERT_TRUE(request.ok());
  EXPECT_EQ(request->path, "/a");
  EXPECT_EQ(request->raw_query, "b=1");
}

struct BadHead {
  const char* head;
  const char* error;
};

class HttpRequestBadHeadTest : public ::testing::TestWithParam<BadHead> {};

TEST_P(HttpRequestBadHeadTest, IsRefused) {
  auto request = ParseHttpRequestHead(GetParam().head);
  ASSERT_FALSE(request.ok()) << GetParam().head;
  EXPECT_EQ(request.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(request.status().message(), HasSubstr(GetParam().error));
}

INSTANTIATE_TEST_SUITE_P(
    Cases, HttpRequestBadHeadTest,
    ::testing::Values(BadHead{"", "empty"}, BadHead{"\r\n\r\n", "empty"},
                      BadHead{"GET\r\n\r\n", "not \"METHOD TARGET HTTP/1.x\""},
                      BadHead{"GET /\r\n\r\n", "not \"METHOD TARGET HTTP/1.x\""},
                      BadHead{"GET / HTTP/2.0\r\n\r\n", "unsupported protocol version"},
                      BadHead{"GET / HTTP/1.1x\r\n\r\n", "unsupported protocol version"},
                      BadHead{"G(T / HTTP/1.1\r\n\r\n", "method is not a token"},
                      BadHead{"GET http://x/ HTTP/1.1\r\n\r\n", "does not start with '/'"},
                      BadHead{"GET /a b HTTP/1.1\r\n\r\n", "has a space"},
                      BadHead{"GET /\xc3\xa9 HTTP/1.1\r\n\r\n", "non-ASCII"},
                      BadHead{"GET /%zz HTTP/1.1\r\n\r\n", "not followed by two hex digits"},
                      BadHead{"GET /%4 HTTP/1.1\r\n\r\n", "not followed by two hex digits"},
                      BadHead{"GET /a%00b HTTP/1.1\r\n\r\n", "decodes to NUL"},
                      BadHead{"GET /?a=%00 HTTP/1.1\r\n\r\n", "decodes to NUL"},
                      BadHead{"GET / HTTP/1.1\r\nHost\r\n\r\n", "has no ':'"},
                      BadHead{"GET / HTTP/1.1\r\nHost : x\r\n\r\n", "not a token"},
                      BadHead{"GET / HTTP/1.1\r\nA: b\r\n folded\r\n\r\n", "folding"},
                      BadHead{"GET / HTTP/1.1\r\nA: b\rc\r\n\r\n", "control character"},
                      BadHead{"GET / HTTP/1.1\r\nA: b\x01\r\n\r\n", "control character"}));

TEST(HttpRequestTest, PercentDecodingTreatsPlusAsSpaceOnlyWhenAsked) {
  EXPECT_EQ(*PercentDecode("a+b%20c%2B", /*plus_is_space=*/true), "a b c+");
  EXPECT_EQ(*PercentDecode("a+b%20c", /*plus_is_space=*/false), "a+b c");
  EXPECT_EQ(*PercentDecode("%e2%82%AC", false), "\xe2\x82\xac");
  EXPECT_FALSE(PercentDecode("%", false).ok());
  EXPECT_FALSE(PercentDecode(std::string_view("a\0b", 3), false).ok());
  EXPECT_FALSE(ParseQueryString(std::string_view("a=\0", 3)).ok());
}

TEST(HttpRequestTest, HostHeadersSplitIntoALowerCaseHostAndAPort) {
  const auto host = [](std::string_view value) {
    absl::StatusOr<HostAndPort> parsed = ParseHostHeader(value);
    return parsed.ok() ? absl::StrCat(parsed->host, "|", parsed->port) : std::string("error");
  };
  EXPECT_EQ(host("LocalHost:8265"), "localhost|8265");
  EXPECT_EQ(host("127.0.0.1"), "127.0.0.1|-1");
  EXPECT_EQ(host("[::1]:80"), "::1|80");
  EXPECT_EQ(host("[::1]"), "::1|-1");
  for (std::string_view bad : {"", ":80", "a:", "a:0", "a:65536", "a:8x", "[::1", "[::1]x", "a b",
                               "a/b:1", "::1:80", "a:99999999999"}) {
    EXPECT_EQ(host(bad), "error") << bad;
  }
}

}  // namespace
}  // namespace tessera::metrics
