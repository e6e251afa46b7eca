// ArenaAllocator: hands out byte ranges of one fixed-size arena (the object store's shared
// memory), best fit with coalescing of neighbours on free. It only does bookkeeping on offsets;
// it never touches the memory.
//
// Threading: not thread-safe; its owner (ObjectStore) serializes calls under its mutex.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include "absl/container/flat_hash_map.h"

namespace tessera {

class ArenaAllocator {
 public:
  // Every block starts on a 64-byte boundary (a cache line; plenty for any element type) and
  // takes at least 64 bytes, so even an empty object has an offset of its own.
  static constexpr uint64_t kAlignment = 64;

  explicit ArenaAllocator(uint64_t capacity);

  // The offset of a free block of at least `size` bytes, or nullopt when no free block is big
  // enough (fragmentation included).
  std::optional<uint64_t> Allocate(uint64_t size);
  // Frees the block at `offset`, which must come from Allocate and not be freed yet (aborts
  // otherwise: a double free is our own bug).
  void Free(uint64_t offset);

  // The bytes a request of `size` really takes.
  static uint64_t RoundUp(uint64_t size);

  uint64_t capacity() const { return capacity_; }
  uint64_t allocated_bytes() const { return allocated_bytes_; }
  uint64_t free_bytes() const { return capacity_ - allocated_bytes_; }
  uint64_t largest_free_block() const;
  size_t free_block_count() const { return free_by_offset_.size(); }

 private:
  void AddFree(uint64_t offset, uint64_t size);
  void RemoveFree(std::map<uint64_t, uint64_t>::iterator it);

  uint64_t capacity_;
  uint64_t allocated_bytes_ = 0;
  std::map<uint64_t, uint64_t> free_by_offset_;           // offset -> size
  std::set<std::pair<uint64_t, uint64_t>> free_by_size_;  // (size, offset), for best fit
  absl::flat_hash_map<uint64_t, uint64_t> allocated_;     // offset -> size
};

}  // namespace tessera
