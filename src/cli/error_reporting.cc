#include <iostream>
#include <string>

#include "cli/commands.h"

namespace tessera::cli {

int ReportError(std::string_view message) {
  std::string line(message);
  // One line, always: a multi-line message (e.g. from a library) is folded.
  for (char& c : line) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  std::cerr << "tessera: error: " << line << "\n";
  return 1;
}

}  // namespace tessera::cli
