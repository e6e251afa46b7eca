#include "objects/arena_allocator.h"

#include <cstdlib>

namespace tessera {

ArenaAllocator::ArenaAllocator(uint64_t capacity) : capacity_(capacity / kAlignment * kAlignment) {
  if (capacity_ > 0) AddFree(0, capacity_);
}

uint64_t ArenaAllocator::RoundUp(uint64_t size) {
  if (size == 0) return kAlignment;
  if (size > UINT64_MAX - kAlignment) return UINT64_MAX / kAlignment * kAlignment;
  return (size + kAlignment - 1) / kAlignment * kAlignment;
}

std::optional<uint64_t> ArenaAllocator::Allocate(uint64_t size) {
  const uint64_t need = RoundUp(size);
  auto fit = free_by_size_.lower_bound({need, 0});
  if (fit == free_by_size_.end()) return std::nullopt;
  const uint64_t offset = fit->second;
  const uint64_t block = fit->first;
  RemoveFree(free_by_offset_.find(offset));
  if (block > need) AddFree(offset + need, block - need);
  allocated_.emplace(offset, need);
  allocated_bytes_ += need;
  return offset;
}

void ArenaAllocator::Free(uint64_t offset) {
  auto it = allocated_.find(offset);
  if (it == allocated_.end()) std::abort();  // double free or foreign offset: our bug
  uint64_t start = offset;
  uint64_t size = it->second;
  allocated_bytes_ -= size;
  allocated_.erase(it);
  // Merge with the free neighbour after, then the one before.
  auto next = free_by_offset_.lower_bound(start);
  if (next != free_by_offset_.end() && next->first == start + size) {
    size += next->second;
    next = std::next(next);
    RemoveFree(std::prev(next));
  }
  auto after = free_by_offset_.lower_bound(start);
  if (after != free_by_offset_.begin()) {
    auto prev = std::prev(after);
    if (prev->first + prev->second == start) {
      start = prev->first;
      size += prev->second;
      RemoveFree(prev);
    }
  }
  AddFree(start, size);
}

uint64_t ArenaAllocator::largest_free_block() const {
  return free_by_size_.empty() ? 0 : free_by_size_.rbegin()->first;
}

void ArenaAllocator::AddFree(uint64_t offset, uint64_t size) {
  free_by_offset_.emplace(offset, size);
  free_by_size_.emplace(size, offset);
}

void ArenaAllocator::RemoveFree(std::map<uint64_t, uint64_t>::iterator it) {
  free_by_size_.erase({it->second, it->first});
  free_by_offset_.erase(it);
}

}  // namespace tessera
