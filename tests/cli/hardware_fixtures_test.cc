// `tessera hardware --sysroot tests/fixtures/hardware/<machine>` on every fake machine: the
// right families, counts, types, links, NUMA affinity and labels.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "run_command.h"

namespace tessera::testing {
namespace {}  // namespace
}  // namespace tessera::testing
