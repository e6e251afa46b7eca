// Every `tessera` subcommand registers itself on the root app through one of these functions;
// main.cc lists them once. A command's callback stores its exit code in `exit_code`.
#pragma once

#include <CLI/CLI.hpp>

namespace tessera::cli {

void AddHardwareCommand(CLI::App& app, int& exit_code);
void AddDescribeSliceCommand(CLI::App& app, int& exit_code);
void AddScheduleCommand(CLI::App& app, int& exit_code);

// Prints "tessera: error: <message>" on one line to stderr and returns the exit code for
// bad input (1).
int ReportError(std::string_view message);

}  // namespace tessera::cli
