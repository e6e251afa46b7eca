// LogLine: one line of a daemon's log (the head's, a node agent's), as
// "2026-12-02T01:20:00.123456Z <text>" on stderr, which the daemon's spawner points at its log
// file. The line goes out in one write(2), so lines of several threads never interleave.
// Thread-safe. Cost: one small format and one syscall.
#pragma once

#include <string>
#include <string_view>

#include "absl/time/time.h"

namespace tessera {

void LogLine(std::string_view text);
// The line LogLine writes for `text` at `when` (with its newline); for tests.
std::string FormatLogLine(std::string_view text, absl::Time when);

}  // namespace tessera
