// ObjectRef<T>: a typed reference to a value that a task returns or Put stores, possibly not
// computed yet. Get(ref) reads it (tessera.h). Copies share one local reference: while any copy
// lives in the owner process the value is kept; when the last copy goes, the owner drops it.
// A ref can be passed as a task argument (the task receives the value) or inside a value (the
// receiver gets a ref it can Get from the owner).
//
// Threading: a value type; copies may be used and destroyed on any thread.
#pragma once

#include <memory>
#include <utility>

#include "absl/status/status.h"
#include "tessera/object_ref_data.h"
#include "tessera/serialization.h"

namespace tessera {

namespace internal {
// One per object per process while any ObjectRef copy to it lives here; its destruction tells
// the runtime (the owner drops the value). `error` is set on refs that failed before reaching a
// runtime (an unregistered function, bad options, no Init): Get reports it at once.
class LocalReference {
 public:
  LocalReference() = default;
  explicit LocalReference(absl::Status error) : error_(std::move(error)) {}
  virtual ~LocalReference() = default;
  LocalReference(const LocalReference&) = delete;
  LocalReference& operator=(const LocalReference&) = delete;
  const absl::Status& error() const { return error_; }

 private:
  absl::Status error_;
};
}  // namespace internal

// The untyped part of every ObjectRef<T>: what the runtime works with.
class ObjectRefBase {
 public:
  ObjectRefBase() = default;
  ObjectRefBase(ObjectRefData data, std::shared_ptr<internal::LocalReference> local)
      : data_(std::move(data)), local_(std::move(local)) {}

  const ObjectId& id() const { return data_.id; }
  const ObjectRefData& data() const { return data_; }
  // The error this ref was born with (OK for a normal ref).
  absl::Status early_error() const { return local_ ? local_->error() : absl::OkStatus(); }
  const std::shared_ptr<internal::LocalReference>& local() const { return local_; }

 private:
  ObjectRefData data_;
  std::shared_ptr<internal::LocalReference> local_;
};

template <typename T>
class ObjectRef : public ObjectRefBase {
 public:
  using ValueType = T;
  ObjectRef() = default;
  explicit ObjectRef(ObjectRefBase base) : ObjectRefBase(std::move(base)) {}
};

template <typename T>
struct IsObjectRef : std::false_type {};
template <typename T>
struct IsObjectRef<ObjectRef<T>> : std::true_type {};

template <typename T>
struct TypeName<ObjectRef<T>> {
  static std::string Get() { return "ObjectRef<" + TypeName<T>::Get() + ">"; }
};

}  // namespace tessera

namespace tessera::internal {
// A ref read from a value, held by this process (its own object's local reference, or its
// borrowed reference to another's: docs/objects.md, borrowing). Defined by the runtime.
ObjectRefBase HoldRef(ObjectRefData ref);
}  // namespace tessera::internal

// An ObjectRef<T> inside a value travels as its ObjectRefData (msgpack ext 84); the receiver
// holds it as a borrower (internal::HoldRef).
namespace msgpack {
MSGPACK_API_VERSION_NAMESPACE(MSGPACK_DEFAULT_API_NS) {
  namespace adaptor {
  template <typename T>
  struct pack<tessera::ObjectRef<T>> {
    template <typename Stream>
    packer<Stream>& operator()(packer<Stream>& o, const tessera::ObjectRef<T>& ref) const {
      return o.pack(ref.data());
    }
  };
  template <typename T>
  struct convert<tessera::ObjectRef<T>> {
    const msgpack::object& operator()(const msgpack::object& o, tessera::ObjectRef<T>& ref) const {
      tessera::ObjectRefData data;
      o.convert(data);
      ref = tessera::ObjectRef<T>(tessera::internal::HoldRef(std::move(data)));
      return o;
    }
  };
  }  // namespace adaptor
}  // MSGPACK_API_VERSION_NAMESPACE
}  // namespace msgpack
