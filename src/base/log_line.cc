#include "base/log_line.h"

#include <unistd.h>

#include <cerrno>
#include <string>

#include "absl/time/clock.h"

namespace tessera {

std::string FormatLogLine(std::string_view text, absl::Time when) {
  std::string line = absl::FormatTime("%Y-%m-%dT%H:%M:%E6SZ ", when, absl::UTCTimeZone());
  line.append(text.data(), text.size());
  if (line.empty() || line.back() != '\n') line.push_back('\n');
  return line;
}

void LogLine(std::string_view text) {
  const std::string line = FormatLogLine(text, absl::Now());
  size_t written = 0;
  while (written < line.size()) {
    const ssize_t n = ::write(STDERR_FILENO, line.data() + written, line.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // nowhere to write it: a log line is never worth failing for
    written += static_cast<size_t>(n);
  }
}

}  // namespace tessera
