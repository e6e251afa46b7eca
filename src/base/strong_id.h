// StrongId<Tag, T>: a value of T that only compares with ids of the same Tag, so a NodeId can
// never be passed where a DeviceIndex is expected.
#pragma once

#include <compare>
#include <cstdint>
#include <functional>
#include <ostream>
#include <string>
#include <utility>

namespace tessera {

template <typename Tag, typename T>
class StrongId {
 public:
  using ValueType = T;

  StrongId() = default;
  explicit StrongId(T value) : value_(std::move(value)) {}

  const T& value() const { return value_; }

  friend auto operator<=>(const StrongId&, const StrongId&) = default;
  friend bool operator==(const StrongId&, const StrongId&) = default;

  template <typename H>
  friend H AbslHashValue(H h, const StrongId& id) {
    return H::combine(std::move(h), id.value_);
  }
  friend std::ostream& operator<<(std::ostream& os, const StrongId& id) { return os << id.value_; }

 private:
  T value_{};
};

// Ids used across modules. Add new ones here so every module shares one spelling.
using NodeId = StrongId<struct NodeIdTag, std::string>;
// Index of a device within its family on one node (0..N-1 as advertised by the node).
using DeviceIndex = StrongId<struct DeviceIndexTag, int>;

}  // namespace tessera

template <typename Tag, typename T>
struct std::hash<tessera::StrongId<Tag, T>> {
  size_t operator()(const tessera::StrongId<Tag, T>& id) const {
    return std::hash<T>()(id.value());
  }
};
