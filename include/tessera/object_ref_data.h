// ObjectRefData: the untyped content of an object reference, as it travels inside serialized
// arguments and results: the object's id and the address of the process that owns it (the owner
// keeps its reference count and knows where its value is). The typed ObjectRef<T> of the C++ API
// wraps one of these.
//
// Threading: a value type.
#pragma once

#include <compare>
#include <string>

#include "tessera/object_id.h"

namespace tessera {

// Where the owner of an object can be reached.
struct OwnerAddress {
  std::string node_id;    // the owner's node (NodeId's value)
  std::string address;    // host:port of the owner's RPC endpoint
  std::string worker_id;  // the owning worker or driver (WorkerId's value)

  friend auto operator<=>(const OwnerAddress&, const OwnerAddress&) = default;
  friend bool operator==(const OwnerAddress&, const OwnerAddress&) = default;
};

struct ObjectRefData {
  ObjectId id;
  OwnerAddress owner;

  friend auto operator<=>(const ObjectRefData&, const ObjectRefData&) = default;
  friend bool operator==(const ObjectRefData&, const ObjectRefData&) = default;
};

}  // namespace tessera
