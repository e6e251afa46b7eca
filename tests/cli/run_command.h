// Runs a program and captures its exit code, stdout and stderr: CLI tests drive the real
// `tessera` binary the way a person or a script would. Not thread-safe (uses temporary files
// named after the process id).
#pragma once

#include <map>
#include <string>
#include <vector>

namespace tessera::testing {

struct CommandResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// `env` entries are added to (or override) the test's own environment.
CommandResult RunCommand(const std::vector<std::string>& argv,
                         const std::map<std::string, std::string>& env = {});

// The built `tessera` binary.
std::string TesseraBinary();

}  // namespace tessera::testing
