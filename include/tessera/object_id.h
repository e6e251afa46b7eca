// TaskId and ObjectId: the binary identities of tasks and of the objects they return or put.
//
// An ObjectId is 24 bytes: the 20-byte TaskId of the task that created it, then a 4-byte
// big-endian index. Index bit 31 tells a Put (0x80000000 | n, the n-th Put made while that task
// ran) from a task return (the return's index, starting at 1). A TaskId is 20 random bytes, so two
// processes never mint the same id without talking to each other. The text form of both is
// lowercase hex (40 and 48 characters); FromHex is its exact inverse.
//
// Threading: values; every function is safe to call from any thread.
#pragma once

#include <array>
#include <compare>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <ostream>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace tessera {

class TaskId {
 public:
  static constexpr size_t kSize = 20;

  // The all-zero id; used for work done outside any task (a driver's main thread).
  TaskId() = default;
  // 20 bytes from a per-thread generator seeded by the operating system.
  static TaskId FromRandom();
  static absl::StatusOr<TaskId> FromBinary(std::string_view bytes);
  static absl::StatusOr<TaskId> FromHex(std::string_view hex);

  std::string Binary() const;
  std::string Hex() const;
  bool IsNil() const;
  const std::array<uint8_t, kSize>& bytes() const { return bytes_; }

  friend auto operator<=>(const TaskId&, const TaskId&) = default;
  friend bool operator==(const TaskId&, const TaskId&) = default;
  template <typename H>
  friend H AbslHashValue(H h, const TaskId& id) {
    return H::combine_contiguous(std::move(h), id.bytes_.data(), id.bytes_.size());
  }
  friend std::ostream& operator<<(std::ostream& os, const TaskId& id) { return os << id.Hex(); }

 private:
  std::array<uint8_t, kSize> bytes_{};
};

class ObjectId {
 public:
  static constexpr size_t kSize = 24;
  static constexpr uint32_t kPutBit = 0x80000000u;
  static constexpr uint32_t kMaxIndex = 0x7fffffffu;

  ObjectId() = default;
  // The object a task returns at `return_index` (1-based). An index of 0 or above kMaxIndex is
  // a programming error and aborts.
  static ObjectId ForTaskReturn(const TaskId& task, uint32_t return_index);
  // The `put_index`-th object put while `task` ran (0-based; above kMaxIndex aborts).
  static ObjectId ForPut(const TaskId& task, uint32_t put_index);
  // A put outside any known task: a fresh random task part, index 0.
  static ObjectId FromRandom();
  static absl::StatusOr<ObjectId> FromBinary(std::string_view bytes);
  static absl::StatusOr<ObjectId> FromHex(std::string_view hex);

  TaskId task_id() const;
  // The return index or the put index (without the put bit).
  uint32_t index() const;
  bool is_put() const;
  bool IsNil() const;

  std::string Binary() const;
  std::string Hex() const;
  const std::array<uint8_t, kSize>& bytes() const { return bytes_; }

  friend auto operator<=>(const ObjectId&, const ObjectId&) = default;
  friend bool operator==(const ObjectId&, const ObjectId&) = default;
  template <typename H>
  friend H AbslHashValue(H h, const ObjectId& id) {
    return H::combine_contiguous(std::move(h), id.bytes_.data(), id.bytes_.size());
  }
  friend std::ostream& operator<<(std::ostream& os, const ObjectId& id) { return os << id.Hex(); }

 private:
  ObjectId(const TaskId& task, uint32_t raw_index);
  std::array<uint8_t, kSize> bytes_{};
};

}  // namespace tessera

template <>
struct std::hash<tessera::ObjectId> {
  size_t operator()(const tessera::ObjectId& id) const {
    // The task part is random, so its first 8 bytes are already a good hash; mix in the index.
    uint64_t h = 0;
    for (size_t i = 0; i < 8; ++i) h = (h << 8) | id.bytes()[i];
    return static_cast<size_t>(h ^ (static_cast<uint64_t>(id.index()) * 0x9e3779b97f4a7c15ull) ^
                               (id.is_put() ? 0x5bd1e995ull : 0));
  }
};

template <>
struct std::hash<tessera::TaskId> {
  size_t operator()(const tessera::TaskId& id) const {
    uint64_t h = 0;
    for (size_t i = 0; i < 8; ++i) h = (h << 8) | id.bytes()[i];
    return static_cast<size_t>(h);
  }
};
