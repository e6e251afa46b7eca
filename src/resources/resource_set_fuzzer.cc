// libFuzzer target: Quantity, byte sizes and resource sets never crash on any input, and every
// value they accept prints to text that parses back to the same value.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "resources/byte_size.h"
#include "resources/quantity.h"
#include "resources/resource_set.h"

namespace {

void Fail(const char* what, std::string_view input, const std::string& printed) {
  std::fprintf(stderr, "%s round trip failed: input [%.*s] printed [%s]\n", what,
               static_cast<int>(input.size()), input.data(), printed.c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  using tessera::Quantity;

  if (auto q = Quantity::Parse(text); q.ok()) {
    auto again = Quantity::Parse(q->ToString());
    if (!again.ok() || *again != *q) Fail("Quantity", text, q->ToString());
    // Arithmetic on accepted values must be exact or a clean error.
    if (auto sum = Quantity::CheckedAdd(*q, *q); sum.ok()) {
      if (auto back = Quantity::CheckedSub(*sum, *q); !back.ok() || *back != *q) {
        Fail("Quantity add/sub", text, sum->ToString());
      }
    }
  }

  if (auto bytes = tessera::ParseByteQuantity(text); bytes.ok()) {
    const std::string printed = tessera::FormatByteQuantity(*bytes);
    auto again = tessera::ParseByteQuantity(printed);
    if (!again.ok() || *again != *bytes) Fail("ByteQuantity", text, printed);
  }
  if (auto bytes = tessera::ParseByteSize(text); bytes.ok()) {
    (void)tessera::FormatBytes(*bytes);
  }

  if (auto set = tessera::ParseResourceSet(text); set.ok()) {
    const std::string printed = set->ToString();
    auto again = tessera::ParseResourceSet(printed);
    if (!again.ok() || !(*again == *set)) Fail("ResourceSet", text, printed);
    auto doubled = set->Plus(*set);
    if (doubled.ok()) {
      auto back = doubled->Minus(*set);
      if (!back.ok() || !(*back == *set) || !doubled->Contains(*set)) {
        Fail("ResourceSet plus/minus", text, printed);
      }
    }
  }
  return 0;
}
