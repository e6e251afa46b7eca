#include "objects/task_returns.h"

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace tessera {
namespace {

constexpr unsigned char kArray32 = 0xdd;
constexpr unsigned char kBin32 = 0xc6;

void AppendU32(std::string& out, uint32_t value) {
  for (int shift = 24; shift >= 0; shift -= 8)
    out.push_back(static_cast<char>((value >> shift) & 0xff));
}

// Reads a tag byte and a u32 at `at`; false when the input ends first.
bool ReadHeader(std::string_view bytes, size_t& at, unsigned char& tag, uint32_t& value) {
  if (bytes.size() - at < 5) return false;
  tag = static_cast<unsigned char>(bytes[at]);
  value = 0;
  for (int i = 1; i <= 4; ++i) value = (value << 8) | static_cast<unsigned char>(bytes[at + i]);
  at += 5;
  return true;
}

}  // namespace

std::string EncodeTaskReturns(const std::vector<std::string>& values) {
  size_t size = 5;
  for (const std::string& value : values) size += 5 + value.size();
  std::string out;
  out.reserve(size);
  out.push_back(static_cast<char>(kArray32));
  AppendU32(out, static_cast<uint32_t>(values.size()));
  for (const std::string& value : values) {
    out.push_back(static_cast<char>(kBin32));
    AppendU32(out, static_cast<uint32_t>(value.size()));
    out.append(value);
  }
  return out;
}

absl::StatusOr<std::vector<std::string>> DecodeTaskReturns(std::string_view bytes, size_t count) {
  auto bad = [&](const std::string& why) {
    return absl::InvalidArgumentError(
        absl::StrCat("a task's ", count, " return values are malformed: ", why));
  };
  size_t at = 0;
  unsigned char tag = 0;
  uint32_t n = 0;
  if (!ReadHeader(bytes, at, tag, n) || tag != kArray32) return bad("no array header");
  if (n != count) return bad(absl::StrCat("it holds ", n, " values"));
  std::vector<std::string> values;
  values.reserve(count);
  for (size_t i = 0; i < count; ++i) {
    uint32_t length = 0;
    if (!ReadHeader(bytes, at, tag, length) || tag != kBin32) {
      return bad(absl::StrCat("value ", i + 1, " has no header"));
    }
    if (bytes.size() - at < length) return bad(absl::StrCat("value ", i + 1, " is truncated"));
    values.emplace_back(bytes.substr(at, length));
    at += length;
  }
  if (at != bytes.size()) return bad(absl::StrCat(bytes.size() - at, " bytes after the values"));
  return values;
}

}  // namespace tessera
