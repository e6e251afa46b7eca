// The object data connection's wire format: requests and reply headers round-trip, and every
// malformed one is InvalidArgument naming the problem.
#include "node/object_data_protocol.h"

#include <string>

#include "gtest/gtest.h"

namespace tessera {
namespace {

const std::string kTicket(kDataTicketBytes, 't');

TEST(ObjectDataProtocolTest, RequestsRoundTrip) {
  for (DataAction action : {DataAction::kSend, DataAction::kDrop}) {
    const DataRequest request{action, kTicket};
    const std::string bytes = EncodeDataRequest(request);
    EXPECT_EQ(bytes.size(), kDataRequestBytes);
    auto parsed = ParseDataRequest(bytes);
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, request);
  }
}

TEST(ObjectDataProtocolTest, MalformedRequestsAreRefused) {
  std::string bytes = EncodeDataRequest({DataAction::kSend, kTicket});
  EXPECT_EQ(ParseDataRequest(bytes.substr(1)).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseDataRequest(bytes + "x").status().code(), absl::StatusCode::kInvalidArgument);
  std::string bad_magic = bytes;
  bad_magic[0] = 'G';  // e.g. an HTTP client
  EXPECT_EQ(ParseDataRequest(bad_magic).status().message(),
            "data request: not a Tessera data request");
  std::string bad_action = bytes;
  bad_action[4] = 9;
  EXPECT_EQ(ParseDataRequest(bad_action).status().message(), "data request: unknown action 9");
}

TEST(ObjectDataProtocolTest, ReplyHeadersRoundTripWithTheirMessage) {
  const std::string ok = EncodeDataReply(absl::StatusCode::kOk, uint64_t{5} << 32, "");
  auto parsed = ParseDataReplyHeader(ok);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->code, absl::StatusCode::kOk);
  EXPECT_EQ(parsed->size, uint64_t{5} << 32);
  EXPECT_EQ(parsed->message_bytes, 0);

  const std::string refused =
      EncodeDataReply(absl::StatusCode::kUnauthenticated, 0, "unknown or used data ticket");
  parsed = ParseDataReplyHeader(refused.substr(0, kDataReplyHeaderBytes));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->code, absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(refused.substr(kDataReplyHeaderBytes, parsed->message_bytes),
            "unknown or used data ticket");

  // A long message is cut rather than refused by the reader.
  const std::string long_message =
      EncodeDataReply(absl::StatusCode::kInternal, 0, std::string(5000, 'x'));
  EXPECT_EQ(long_message.size(), kDataReplyHeaderBytes + kMaxDataMessageBytes);
}

TEST(ObjectDataProtocolTest, MalformedReplyHeadersAreRefused) {
  std::string ok = EncodeDataReply(absl::StatusCode::kOk, 10, "");
  EXPECT_EQ(ParseDataReplyHeader(ok.substr(2)).status().code(), absl::StatusCode::kInvalidArgument);
  std::string bad_magic = ok;
  bad_magic[3] = 'X';
  EXPECT_EQ(ParseDataReplyHeader(bad_magic).status().message(),
            "data reply: not a Tessera data reply");
  std::string bad_code = ok;
  bad_code[4] = 17;
  EXPECT_EQ(ParseDataReplyHeader(bad_code).status().message(),
            "data reply: unknown status code 17");
  std::string error_with_bytes = ok;
  error_with_bytes[4] = static_cast<char>(absl::StatusCode::kInternal);
  EXPECT_EQ(ParseDataReplyHeader(error_with_bytes).status().message(),
            "data reply: an error that promises bytes");
  std::string long_message = ok;
  long_message[13] = '\xff';
  long_message[14] = '\xff';
  EXPECT_EQ(ParseDataReplyHeader(long_message).status().message(),
            "data reply: a message of 65535 bytes");
}

}  // namespace
}  // namespace tessera
