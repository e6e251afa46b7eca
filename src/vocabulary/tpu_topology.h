// TPU topology strings ("4x4", "2x2x2"): parsing, and whether a shape is a valid slice of a
// generation (reference/accelerators.md §7.4). Pure functions; TpuTopology is a copyable value.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "vocabulary/tpu_generation.h"

namespace tessera {

// Larger than any real slice axis (the biggest is 24), small enough that products never overflow.
inline constexpr int kMaxTopologyDim = 1024;

struct TpuTopology {
  std::vector<int> dims;  // 2 or 3 positive values, in the order written

  int chips() const;
  // "4x4", "2x2x1": lower-case x, no padding.
  std::string ToString() const;
  friend bool operator==(const TpuTopology&, const TpuTopology&) = default;
};

// Parses "4x4", "2X2x2" (either case of x, surrounding spaces ignored). Errors, one line each:
// empty text, an empty or non-numeric dimension ("4x", "4xx4", "4xa"), a zero dimension, a
// dimension above kMaxTopologyDim, or fewer than 2 / more than 3 dimensions.
absl::StatusOr<TpuTopology> ParseTpuTopology(std::string_view text);

// As ParseTpuTopology, then checks the dimensionality of `generation` (2D for v2, v3, v5e, v6e;
// 3D for v4, v5p, v7x) and that the shape is one of its valid slices; the error lists them.
absl::StatusOr<TpuTopology> ParseTpuTopologyFor(TpuGeneration generation, std::string_view text);

// OK when `topology` is a valid slice of `generation`, else InvalidArgument naming the valid
// shapes, e.g. `topology "3x3" is not a valid v6e slice; valid: 1x1, 2x2, ...`.
absl::Status ValidateTopology(TpuGeneration generation, const TpuTopology& topology);

// The valid shapes of a generation as text for messages and `tessera describe-slice`: explicit
// shapes, plus the AxBxC rule on v4 and v5p.
std::string ValidTopologiesText(TpuGeneration generation);

}  // namespace tessera
