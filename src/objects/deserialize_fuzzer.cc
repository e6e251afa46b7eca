// libFuzzer target: Deserialize of a few types, FindObjectRefs and DecodeTaskReturns never
// crash, throw or allocate beyond the input's size on any bytes, and whatever Deserialize (or
// DecodeTaskReturns) accepts serializes back to bytes that deserialize to the same value.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "objects/task_returns.h"
#include "tessera/serialization.h"

namespace {

struct Record {
  int64_t id = 0;
  std::string name;
  std::vector<double> values;
  std::optional<tessera::ObjectRefData> ref;
  TESSERA_SERIALIZE(id, name, values, ref);
};

template <typename T>
void Check(std::string_view input) {
  absl::StatusOr<T> value = tessera::Deserialize<T>(input);
  if (!value.ok()) {
    if (value.status().code() != absl::StatusCode::kInvalidArgument) std::abort();
    return;
  }
  const std::string again = tessera::SerializeValue(*value);
  absl::StatusOr<T> back = tessera::Deserialize<T>(again);
  if (!back.ok()) {
    std::fprintf(stderr, "re-serialized value does not parse: %s\n",
                 std::string(back.status().message()).c_str());
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  Check<int>(input);
  Check<std::string>(input);
  Check<std::vector<int64_t>>(input);
  Check<std::map<std::string, std::vector<std::string>>>(input);
  Check<std::tuple<int, std::string, double, bool>>(input);
  Check<Record>(input);
  Check<std::vector<Record>>(input);
  Check<tessera::ObjectRefData>(input);
  (void)tessera::FindObjectRefs(input);
  for (size_t count : {size_t{1}, size_t{3}}) {
    auto returns = tessera::DecodeTaskReturns(input, count);
    if (returns.ok() && tessera::EncodeTaskReturns(*returns) != input) {
      std::fprintf(stderr, "DecodeTaskReturns accepted bytes it does not encode back to\n");
      std::abort();
    }
  }
  return 0;
}
