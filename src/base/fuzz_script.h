// How the RPC fuzzers read an input: a script of up to `max_calls` calls, each
// [op byte][2-byte little-endian length][that many bytes of request]; a length past the end
// takes the rest. `call(op, bytes, length)` runs each in order. Header only; thread-compatible.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace tessera {

template <typename Call>
void ForEachScriptedCall(const uint8_t* data, size_t size, int max_calls, Call&& call) {
  size_t at = 0;
  for (int calls = 0; calls < max_calls && at < size; ++calls) {
    const uint8_t op = data[at++];
    size_t length = 0;
    if (at < size) length = data[at++];
    if (at < size) length |= static_cast<size_t>(data[at++]) << 8;
    length = std::min(length, size - at);
    call(op, data + at, length);
    at += length;
  }
}

}  // namespace tessera
