// Remote functions: TESSERA_REMOTE(fn) registers a free function under its name in a
// process-wide registry during static initialization. The driver names the function by that name
// in a task; the worker (the same binary, see tessera.h) finds it by the name and calls it.
//
//   int Add(int a, int b) { return a + b; }
//   TESSERA_REMOTE(Add);
//
// Parameters and results are serialized with msgpack (serialization.h); parameters are taken by
// value (a `const T&` parameter receives a T). Overloaded functions must be cast to one type
// before registration. A void function returns ObjectRef<void>.
//
// Threading: registration and lookups are thread-safe.
#pragma once

#include <cstddef>
#include <exception>
#include <functional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tessera/serialization.h"

namespace tessera {
namespace internal {

// Any free function pointer, as a key (a function pointer converts to another function pointer
// type and back exactly; to void* it would not be portable).
using AnyFunction = void (*)();

// Runs the function on msgpack-serialized arguments (one array) and returns the serialized
// result. A mismatch of the arguments is InvalidArgument; an exception thrown by user code
// propagates (the worker catches it and reports its type and message).
using Invoker = std::function<absl::StatusOr<std::string>(std::string_view args)>;

// Counts the caller of the task this thread runs as a borrower of the objects whose refs are
// written in `result` (its serialized result), at their owners, while the function's own refs
// still hold them: the caller reads them after this process lets go (docs/objects.md).
void LendRefsInResult(const std::string& result);

// A task's result serialized while the value still lives (the refs inside it included).
template <typename T>
std::string SerializeResult(const T& value) {
  std::string bytes = SerializeValue(value);
  LendRefsInResult(bytes);
  return bytes;
}

// Registers `name`. Registering one name twice with different functions is a fatal error at start
// (two functions would answer to one name).
bool RegisterFunction(const char* name, AnyFunction key, Invoker invoker);
// Registers an invoker under `name` with no function pointer (actor methods: a member function
// pointer is not a free function key). Same fatal error as above for a name taken twice.
bool RegisterNamedInvoker(const char* name, Invoker invoker);
// The name `key` was registered under; nullptr when it was not.
const std::string* FindFunctionName(AnyFunction key);
// The invoker of `name`; nullptr when none.
const Invoker* FindInvoker(std::string_view name);
// Every registered name (sorted), for error messages.
std::string RegisteredFunctionNames();

template <typename R, typename... Params>
Invoker MakeInvoker(R (*fn)(Params...)) {
  return [fn](std::string_view bytes) -> absl::StatusOr<std::string> {
    auto args = DeserializeArgs<std::decay_t<Params>...>(bytes);
    if (!args.ok()) return args.status();
    if constexpr (std::is_void_v<R>) {
      std::apply(fn, *std::move(args));
      return SerializeValue(msgpack::type::nil_t());
    } else {
      return SerializeResult(std::apply(fn, *std::move(args)));
    }
  };
}

template <typename R, typename... Params>
bool RegisterRemote(const char* name, R (*fn)(Params...)) {
  return RegisterFunction(name, reinterpret_cast<AnyFunction>(fn), MakeInvoker(fn));
}

}  // namespace internal
}  // namespace tessera

#define TESSERA_REMOTE_CONCAT_INNER_(a, b) a##b
#define TESSERA_REMOTE_CONCAT_(a, b) TESSERA_REMOTE_CONCAT_INNER_(a, b)
// Registers the free function `fn` under the name spelled here (use it at namespace scope).
#define TESSERA_REMOTE(fn)                                                               \
  [[maybe_unused]] static const bool TESSERA_REMOTE_CONCAT_(tessera_remote_, __LINE__) = \
      ::tessera::internal::RegisterRemote(#fn, &fn)
