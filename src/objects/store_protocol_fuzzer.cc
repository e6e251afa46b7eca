// libFuzzer target: the object store's message parsers never crash on any bytes, and whatever
// they accept encodes back to bytes that parse to the same message.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "objects/store_protocol.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  if (auto request = tessera::ParseStoreRequest(input); request.ok()) {
    auto again = tessera::ParseStoreRequest(tessera::EncodeStoreRequest(*request));
    if (!again.ok() || !(*again == *request)) std::abort();
  } else if (request.status().code() != absl::StatusCode::kInvalidArgument) {
    std::abort();
  }
  if (auto reply = tessera::ParseStoreReply(input); reply.ok()) {
    auto again = tessera::ParseStoreReply(tessera::EncodeStoreReply(*reply));
    if (!again.ok() || again->status != reply->status) std::abort();
  }
  if (size >= 4) (void)tessera::ParseFrameHeader(input.substr(0, 4));
  return 0;
}
