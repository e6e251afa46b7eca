// A task's several return values (num_returns = N > 1) carried as one TaskResult.value: the
// worker encodes the N values (each a serialized value, or the stored-value envelope of a large
// one it put into its node's store under that return's id), and the owner splits them into the
// task's N objects.
//
// Format: msgpack array32 (0xdd, u32 big-endian count) of bin32 entries (0xc6, u32 big-endian
// length, bytes). Decoding checks every length against the input before anything is copied.
//
// Threading: pure functions.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace tessera {

std::string EncodeTaskReturns(const std::vector<std::string>& values);
// The `count` values; InvalidArgument (one line) when `bytes` is not exactly `count` entries.
absl::StatusOr<std::vector<std::string>> DecodeTaskReturns(std::string_view bytes, size_t count);

}  // namespace tessera
