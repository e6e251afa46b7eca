// TaskId / ObjectId: random generation, binary and hex forms.
#include "tessera/object_id.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "absl/random/random.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "base/string_util.h"

namespace tessera {
namespace {

template <size_t N>
absl::Status FromBinaryInto(std::string_view what, std::string_view bytes,
                            std::array<uint8_t, N>& out) {
  if (bytes.size() != N) {
    return absl::InvalidArgumentError(
        absl::StrCat(ToAbsl(what), " must be ", N, " bytes, got ", bytes.size()));
  }
  std::memcpy(out.data(), bytes.data(), N);
  return absl::OkStatus();
}

template <size_t N>
absl::Status FromHexInto(std::string_view what, std::string_view hex, std::array<uint8_t, N>& out) {
  if (hex.size() != 2 * N) {
    return absl::InvalidArgumentError(absl::StrCat(ToAbsl(what), " must be ", 2 * N,
                                                   " hex characters, got ", hex.size(), ": ",
                                                   Quote(hex.substr(0, 64))));
  }
  for (size_t i = 0; i < hex.size(); ++i) {
    const char c = hex[i];
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) {
      return absl::InvalidArgumentError(absl::StrCat(ToAbsl(what),
                                                     " has a character that is not "
                                                     "lowercase hex at position ",
                                                     i, ": ", Quote(hex)));
    }
  }
  const std::string bytes = absl::HexStringToBytes(ToAbsl(hex));
  std::memcpy(out.data(), bytes.data(), N);
  return absl::OkStatus();
}

template <size_t N>
std::string ToHex(const std::array<uint8_t, N>& bytes) {
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
}

}  // namespace

TaskId TaskId::FromRandom() {
  // absl::BitGen seeds itself from the operating system; one per thread avoids a lock.
  thread_local absl::BitGen gen;
  TaskId id;
  for (size_t i = 0; i < kSize; i += 8) {
    const uint64_t r = absl::Uniform<uint64_t>(gen);
    std::memcpy(id.bytes_.data() + i, &r, std::min<size_t>(8, kSize - i));
  }
  return id;
}

absl::StatusOr<TaskId> TaskId::FromBinary(std::string_view bytes) {
  TaskId id;
  if (absl::Status s = FromBinaryInto("task id", bytes, id.bytes_); !s.ok()) return s;
  return id;
}

absl::StatusOr<TaskId> TaskId::FromHex(std::string_view hex) {
  TaskId id;
  if (absl::Status s = FromHexInto("task id", hex, id.bytes_); !s.ok()) return s;
  return id;
}

std::string TaskId::Binary() const {
  return std::string(reinterpret_cast<const char*>(bytes_.data()), bytes_.size());
}
std::string TaskId::Hex() const { return ToHex(bytes_); }
bool TaskId::IsNil() const { return *this == TaskId(); }

ObjectId::ObjectId(const TaskId& task, uint32_t raw_index) {
  std::memcpy(bytes_.data(), task.bytes().data(), TaskId::kSize);
  bytes_[20] = static_cast<uint8_t>(raw_index >> 24);
  bytes_[21] = static_cast<uint8_t>(raw_index >> 16);
  bytes_[22] = static_cast<uint8_t>(raw_index >> 8);
  bytes_[23] = static_cast<uint8_t>(raw_index);
}

ObjectId ObjectId::ForTaskReturn(const TaskId& task, uint32_t return_index) {
  if (return_index == 0 || return_index > kMaxIndex) std::abort();  // caller's bug
  return ObjectId(task, return_index);
}

ObjectId ObjectId::ForPut(const TaskId& task, uint32_t put_index) {
  if (put_index > kMaxIndex) std::abort();  // caller's bug
  return ObjectId(task, kPutBit | put_index);
}

ObjectId ObjectId::FromRandom() { return ForPut(TaskId::FromRandom(), 0); }

absl::StatusOr<ObjectId> ObjectId::FromBinary(std::string_view bytes) {
  ObjectId id;
  if (absl::Status s = FromBinaryInto("object id", bytes, id.bytes_); !s.ok()) return s;
  return id;
}

absl::StatusOr<ObjectId> ObjectId::FromHex(std::string_view hex) {
  ObjectId id;
  if (absl::Status s = FromHexInto("object id", hex, id.bytes_); !s.ok()) return s;
  return id;
}

TaskId ObjectId::task_id() const {
  return *TaskId::FromBinary(
      std::string_view(reinterpret_cast<const char*>(bytes_.data()), TaskId::kSize));
}

uint32_t ObjectId::index() const {
  const uint32_t raw = (uint32_t{bytes_[20]} << 24) | (uint32_t{bytes_[21]} << 16) |
                       (uint32_t{bytes_[22]} << 8) | uint32_t{bytes_[23]};
  return raw & kMaxIndex;
}

bool ObjectId::is_put() const { return (bytes_[20] & 0x80) != 0; }
bool ObjectId::IsNil() const { return *this == ObjectId(); }

std::string ObjectId::Binary() const {
  return std::string(reinterpret_cast<const char*>(bytes_.data()), bytes_.size());
}
std::string ObjectId::Hex() const { return ToHex(bytes_); }

}  // namespace tessera
