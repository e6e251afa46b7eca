// tessera describe-slice --accelerator TPU-V6E --topology 4x4 [--chips-per-host N] [--json]
#include "cli/commands.h"

namespace tessera::cli {

void AddDescribeSliceCommand(CLI::App& app, int& exit_code) {
  (void)app;
  (void)exit_code;
}

}  // namespace tessera::cli
