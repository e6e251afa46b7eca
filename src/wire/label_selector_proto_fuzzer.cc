// libFuzzer target: a LabelSelector message of any bytes reads (wire::LabelSelectorFromProto) to
// a selector or to a one-line error, never a crash; a selector read writes back
// (LabelSelectorToProto) to a message that reads to the same selector and writes the same bytes
// again, so the typed wire form round-trips exactly and is canonical.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "wire/proto_convert.h"

namespace {

[[noreturn]] void Fail(const char* what, const std::string& detail) {
  std::fprintf(stderr, "label_selector_proto_fuzzer: %s: %s\n", what, detail.c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 64 * 1024) return 0;  // past the head's limits; nothing new is found there
  tessera::v1::LabelSelector proto;
  if (!proto.ParseFromArray(data, static_cast<int>(size))) return 0;
  auto selector = tessera::wire::LabelSelectorFromProto(proto);
  if (!selector.ok()) {
    const std::string message(selector.status().message());
    if (message.empty() || message.find('\n') != std::string::npos) {
      Fail("an error that is not one line", message);
    }
    return 0;
  }
  tessera::v1::LabelSelector written;
  tessera::wire::LabelSelectorToProto(*selector, &written);
  auto again = tessera::wire::LabelSelectorFromProto(written);
  if (!again.ok() || !(*again == *selector)) Fail("round trip", selector->ToString());
  tessera::v1::LabelSelector rewritten;
  tessera::wire::LabelSelectorToProto(*again, &rewritten);
  if (rewritten.SerializeAsString() != written.SerializeAsString()) {
    Fail("written twice differently", selector->ToString());
  }
  return 0;
}
