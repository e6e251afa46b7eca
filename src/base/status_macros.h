// Early-return helpers for absl::Status and absl::StatusOr. Debian 12's Abseil (20220623) does
// not ship its own, so Tessera defines the two it uses everywhere.
#pragma once

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define TESSERA_STATUS_CONCAT_INNER_(a, b) a##b
#define TESSERA_STATUS_CONCAT_(a, b) TESSERA_STATUS_CONCAT_INNER_(a, b)

// Evaluates `expr` (an absl::Status) and returns it from the enclosing function when not OK.
#define TESSERA_RETURN_IF_ERROR(expr)                  \
  do {                                                 \
    ::absl::Status tessera_status_ = (expr);           \
    if (!tessera_status_.ok()) return tessera_status_; \
  } while (0)

// TESSERA_ASSIGN_OR_RETURN(lhs, rexpr): evaluates `rexpr` (an absl::StatusOr<T>); on error returns
// its status, else moves the value into `lhs`, which may be a declaration (`auto x`).
#define TESSERA_ASSIGN_OR_RETURN(lhs, rexpr) \
  TESSERA_ASSIGN_OR_RETURN_IMPL_(TESSERA_STATUS_CONCAT_(tessera_statusor_, __LINE__), lhs, rexpr)

#define TESSERA_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, rexpr) \
  auto statusor = (rexpr);                                   \
  if (!statusor.ok()) return std::move(statusor).status();   \
  lhs = std::move(statusor).value()
