// libFuzzer target: the object data connection's parsers never crash on any bytes, and whatever
// they accept encodes back to the same bytes.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "node/object_data_protocol.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  if (auto request = tessera::ParseDataRequest(input); request.ok()) {
    if (tessera::EncodeDataRequest(*request) != input) std::abort();
  } else if (request.status().code() != absl::StatusCode::kInvalidArgument) {
    std::abort();
  }
  const std::string_view head = input.substr(0, tessera::kDataReplyHeaderBytes);
  if (auto header = tessera::ParseDataReplyHeader(head); header.ok()) {
    const std::string message(header->message_bytes, 'm');
    const std::string again = tessera::EncodeDataReply(header->code, header->size, message);
    if (again.substr(0, tessera::kDataReplyHeaderBytes) != head) std::abort();
  } else if (header.status().code() != absl::StatusCode::kInvalidArgument) {
    std::abort();
  }
  return 0;
}
