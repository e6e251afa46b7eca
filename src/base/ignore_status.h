// IgnoreStatus: the one way production code drops an absl::Status or absl::StatusOr it does not
// act on, with the reason it is safe to drop written at the call:
//
//   IgnoreStatus(view_.Release(id), "the node is gone already: nothing is left to release");
//
// A (void) cast drops a status too, but says nothing about why, and reads the same as a drop that
// is a bug. tests/style/test_dropped_statuses.py keeps (void) casts of statuses out of the
// project's code and requires `why` to be a non-empty string literal at every call, so each
// reason can be read (and grepped for) where its drop is.
//
// Nothing happens at run time: no logging, no side effect. The caller evaluates the expression,
// as it would for a (void) cast.
#pragma once

#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tessera {

// `why`: a short phrase saying why dropping this status is safe here; never empty.
inline void IgnoreStatus(const absl::Status& /*status*/, std::string_view /*why*/) {}

template <typename T>
void IgnoreStatus(const absl::StatusOr<T>& /*status_or*/, std::string_view /*why*/) {}

// Anything else is not a status, and is not dropped through here: a bool or a syscall's result
// needs no helper, and a grpc::Status (src/base does not know gRPC) goes through
// rpc::FromGrpcStatus first.
template <typename T>
void IgnoreStatus(const T&, std::string_view) = delete;

}  // namespace tessera
