// LaunchSpec: what the node agent sends a prestarted tessera-launcher (launch_wire.h has the
// bytes): the argv, the complete environment, the directory and the two log paths of one
// ChildSpec. Encoding happens in the agent; decoding here is for tests and the fuzzer (the
// launcher itself parses with launch_wire's libc-only parser, which this one wraps).
// Thread-compatible value type; the functions are stateless.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "process/child_process.h"

namespace tessera {

struct LaunchSpec {
  std::vector<std::string> argv;
  std::vector<std::string> env;  // "KEY=VALUE", in the order execve gets them
  std::string cwd;               // "": the launcher's directory
  std::string stdout_path;       // "": /dev/null
  std::string stderr_path;
  std::string stdin_path;  // "": /dev/null

  bool operator==(const LaunchSpec&) const = default;
};

// The launch spec of a (validated) child spec; the environment in key order.
LaunchSpec LaunchSpecFromChild(const ChildSpec& spec);

// The wire bytes, header included. The caller keeps within the format's rules (no NUL in a
// string, argv not empty): ChildProcess::Spawn validates the ChildSpec first.
std::string EncodeLaunchSpec(const LaunchSpec& spec);

// InvalidArgument with launch_wire's one-line reason when `bytes` is not exactly one spec.
absl::StatusOr<LaunchSpec> DecodeLaunchSpec(std::string_view bytes);

}  // namespace tessera
