#include "base/log_line.h"

#include <gtest/gtest.h>

namespace tessera {
namespace {

TEST(LogLineTest, StartsWithAnIsoTimestampInUtcAndEndsWithOneNewline) {
  const absl::Time when = absl::FromUnixMicros(1764638400123456);  // 2025-12-02T01:20:00.123456Z
  EXPECT_EQ(FormatLogLine("head: started", when), "2025-12-02T01:20:00.123456Z head: started\n");
  EXPECT_EQ(FormatLogLine("already ended\n", when), "2025-12-02T01:20:00.123456Z already ended\n");
}

}  // namespace
}  // namespace tessera
