#include "node/object_data_protocol.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace tessera {
namespace {

constexpr std::string_view kRequestMagic = "TSDQ";
constexpr std::string_view kReplyMagic = "TSDR";

void PutLittleEndian(uint64_t value, size_t bytes, std::string* out) {
  for (size_t i = 0; i < bytes; ++i) out->push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

uint64_t GetLittleEndian(std::string_view bytes) {
  uint64_t value = 0;
  for (size_t i = 0; i < bytes.size(); ++i) {
    value |= static_cast<uint64_t>(static_cast<uint8_t>(bytes[i])) << (8 * i);
  }
  return value;
}

}  // namespace

std::string EncodeDataRequest(const DataRequest& request) {
  std::string out(kRequestMagic);
  out.push_back(static_cast<char>(request.action));
  out.append(request.ticket);
  return out;
}

std::string EncodeDataReply(absl::StatusCode code, uint64_t size, std::string_view message) {
  message = message.substr(0, kMaxDataMessageBytes);
  std::string out(kReplyMagic);
  out.push_back(static_cast<char>(code));
  PutLittleEndian(size, 8, &out);
  PutLittleEndian(message.size(), 2, &out);
  out.append(message);
  return out;
}

absl::StatusOr<DataRequest> ParseDataRequest(std::string_view bytes) {
  if (bytes.size() != kDataRequestBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("data request: ", bytes.size(), " bytes, expected ", kDataRequestBytes));
  }
  if (bytes.substr(0, 4) != kRequestMagic) {
    return absl::InvalidArgumentError("data request: not a Tessera data request");
  }
  const auto action = static_cast<uint8_t>(bytes[4]);
  if (action != static_cast<uint8_t>(DataAction::kSend) &&
      action != static_cast<uint8_t>(DataAction::kDrop)) {
    return absl::InvalidArgumentError(absl::StrCat("data request: unknown action ", action));
  }
  return DataRequest{static_cast<DataAction>(action), std::string(bytes.substr(5))};
}

absl::StatusOr<DataReplyHeader> ParseDataReplyHeader(std::string_view bytes) {
  if (bytes.size() != kDataReplyHeaderBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "data reply: ", bytes.size(), " header bytes, expected ", kDataReplyHeaderBytes));
  }
  if (bytes.substr(0, 4) != kReplyMagic) {
    return absl::InvalidArgumentError("data reply: not a Tessera data reply");
  }
  const auto code = static_cast<uint8_t>(bytes[4]);
  if (code > static_cast<uint8_t>(absl::StatusCode::kUnauthenticated)) {
    return absl::InvalidArgumentError(absl::StrCat("data reply: unknown status code ", code));
  }
  DataReplyHeader header;
  header.code = static_cast<absl::StatusCode>(code);
  header.size = GetLittleEndian(bytes.substr(5, 8));
  header.message_bytes = static_cast<uint16_t>(GetLittleEndian(bytes.substr(13, 2)));
  if (header.code != absl::StatusCode::kOk && header.size != 0) {
    return absl::InvalidArgumentError("data reply: an error that promises bytes");
  }
  if (header.message_bytes > kMaxDataMessageBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("data reply: a message of ", header.message_bytes, " bytes"));
  }
  return header;
}

}  // namespace tessera
