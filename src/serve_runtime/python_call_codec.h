// The Python value format (python/tessera/_private/serialization.py's docstring is its spec), as
// far as the C++ side of serving needs it to call a replica's Python actor:
//
//   value   fixarray(4) [HEADER ext32 type 80: version 1, 0 buffers, zero padding that puts the
//           REGION's data on a 64-byte boundary] [REFS array32: none] [PICKLE bin32]
//           [REGION bin32: empty]
//   pickle  protocol 5, as CPython's pickler writes it (frames of at least 4 bytes, a string or
//           bytes of 64 KiB or more written outside any frame)
//
// What is written: a call's arguments, the value of `((arg,), {})` or `((), {})` (how
// python/tessera/_private/arguments.py passes a call's positional arguments; one bytes or str
// argument is all a replica's methods take from here), and a class named by reference (the
// ReplicaActor class as an actor's code: the pickle CPython writes for a class it can import).
// Both are byte for byte what Python's serialization.serialize gives for the same values, so a
// call made here and one made from Python are the same message.
//
// What is read: a method's result that is None, a bool, an int, a str or bytes, by a small
// strict pickle reader of one scalar (PROTO, FRAME, the opcodes of those types, MEMOIZE, STOP);
// anything else (a container, an object, out-of-band buffers, refs) is InvalidArgument naming
// what it met, since no replica method the C++ side calls returns one.
//
// Also here: the frames of the replica's handle_http (python/tessera/serve/_http.py),
// `[u32 big-endian length of HEAD][HEAD: UTF-8 JSON][BODY]`, a request and the first item of its
// response alike; what HEAD holds is the caller's (the proxy's).
//
// Threading: pure functions, thread-safe. Cost: linear in the bytes, one copy of the argument
// (or of the result's payload).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace tessera::serve {

// The value of the call arguments `((arg,), {})`, `arg` a str when `as_str` (its bytes must be
// UTF-8, or the worker cannot read the call), else bytes; `((), {})` when `arg` is nullopt.
std::string EncodeCallArguments(const std::optional<std::string>& arg, bool as_str);

// The value whose pickle is the global `module`.`qualname` by reference (PROTO 5, then in one
// frame SHORT_BINUNICODE module, MEMOIZE, SHORT_BINUNICODE qualname, MEMOIZE, STACK_GLOBAL,
// MEMOIZE, STOP): what a Python worker loads as an actor's class by importing it. Both names are
// ASCII identifiers shorter than 256 bytes (checked by the caller; these are constants).
std::string EncodeGlobalReference(std::string_view module, std::string_view qualname);

// A result value as text: None as "", a bool as "True" or "False", an int as its decimal text
// (at most 64 bits), a str as its UTF-8 bytes, bytes as they are. InvalidArgument, one line,
// for a malformed value or one of any other type (naming the pickle opcode met).
absl::StatusOr<std::string> DecodeResult(std::string_view value);

// A frame of `head` (its JSON text) and `body`.
std::string EncodeFrame(std::string_view head, std::string_view body);

struct FrameParts {
  std::string_view head;  // the JSON text
  std::string_view body;
};
// Views into `frame`; InvalidArgument, one line, when it is shorter than its length says.
absl::StatusOr<FrameParts> SplitFrame(std::string_view frame);

}  // namespace tessera::serve
