// libFuzzer target: the launch spec parser (what tessera-launcher runs on the bytes it reads)
// never crashes on any input, and whatever it accepts encodes back to exactly the same bytes (the
// format is canonical). The report parser never crashes either.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "process/launch_spec.h"
#include "process/launch_wire.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  if (auto spec = tessera::DecodeLaunchSpec(bytes); spec.ok()) {
    if (spec->argv.empty() || spec->argv[0].empty()) {
      std::fprintf(stderr, "accepted a spec without a program\n");
      std::abort();
    }
    if (tessera::EncodeLaunchSpec(*spec) != bytes) {
      std::fprintf(stderr, "accepted spec of %zu bytes does not encode back to itself\n", size);
      std::abort();
    }
  }
  tessera::launch_wire::Report report;
  char error[128];
  (void)tessera::launch_wire::ParseReport(data, size, &report, error, sizeof(error));
  return 0;
}
